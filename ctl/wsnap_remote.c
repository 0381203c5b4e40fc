/*
 * Workspace snapshots of a workspace served by remote file calls (SPEC §8
 * `kind=workspace` on daytona and the other remote providers): the object
 * store needs a directory on this host, so the remote tree is mirrored into
 * STATE/sandboxes/KEY/wsnap-mirror through the provider's fs ops, and the
 * mirror is what is recorded, diffed and restored.  The mirror is kept
 * between uses: a file whose remote size and mtime match the mirror's copy
 * (fetched at least two seconds after that mtime, so a write within the
 * same second is not missed) is not fetched again.  A restore is made on
 * the mirror and every change it made is then sent back (fs_write,
 * fs_mkdir, fs_symlink, fs_chmod, fs_remove).  The caller holds
 * sb->op_mutex throughout (the mirror has one user at a time).
 */
#include "wsnap.h"
#include "wsnap_internal.h"

#include "../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool wsnap_remote(const struct sfs_sandbox *sb)
{
	const struct sfs_provider_ops *o = sb->provider->ops;
	return sb->provider->caps[SFS_CAP_FS] && !o->workspace_root_fd && o->fs_stat &&
	       o->fs_list && o->fs_read && o->fs_write && o->fs_mkdir && o->fs_remove &&
	       o->fs_symlink && o->fs_chmod;
}

static char *join(const char *a, const char *b)
{
	char *p;
	return asprintf(&p, "%s%s%s", a, *a ? "/" : "", b) < 0 ? NULL : p;
}

static bool skipped(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, ".git") == 0;
}

/* Gives the fetched copy in tmp (open as fd) the remote file's mode and
 * mtime and renames it over `local` (a directory there is removed first). */
static int settle(int fd, const char *tmp, const char *local, const struct sfs_rstat *rs,
		  struct sfs_err *err)
{
	int r = 0;
	struct timespec t[2] = {{rs->mtime, 0}, {rs->mtime, 0}};
	if (fchmod(fd, rs->mode & 07777) < 0 || futimens(fd, t) < 0)
		r = sfs_errf(err, -errno, "snapshot: %s: %s", tmp, strerror(errno));
	if (!r) {
		struct stat st;
		if (lstat(local, &st) == 0 && S_ISDIR(st.st_mode))
			sfs_rm_rf(local);
		if (rename(tmp, local) < 0)
			r = sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
	}
	return r;
}

static int open_tmp(const char *local, char *tmp, size_t cap, struct sfs_err *err)
{
	if (sfs_pathf(tmp, cap, "%s.sfs-fetch", local) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "snapshot: %s: path too long", local);
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	return fd < 0 ? sfs_errf(err, -errno, "snapshot: %s: %s", tmp, strerror(errno)) : fd;
}

/* Fetches one remote file into host path `local` (temp + rename). */
static int fetch(struct sfs_sandbox *sb, const char *rel, const char *local,
		 const struct sfs_rstat *rs, struct sfs_err *err)
{
	char tmp[4300];
	int fd = open_tmp(local, tmp, sizeof(tmp), err);
	if (fd < 0)
		return fd;
	int r = sb->provider->ops->fs_read(sb, rel, fd, err);
	if (!r)
		r = settle(fd, tmp, local, rs, err);
	close(fd);
	if (r)
		unlink(tmp);
	return r;
}

/*
 * The regular files of one directory that need fetching, fetched in one
 * bulk call where the provider has one (fs_read_many): a checkout of 40
 * files then costs a listing and a download per directory, not a call per
 * file.  Files the bulk call does not deliver, and big ones, go one by one.
 */
#define BULK_FILE_MAX (1 << 20)
#define BULK_BYTES_MAX (16 << 20)

struct pending {
	char **rel, **local;
	struct sfs_rstat *st;
	bool *done;
	size_t n, cap;
};

static void pending_free(struct pending *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->rel[i]);
		free(p->local[i]);
	}
	free(p->rel);
	free(p->local);
	free(p->st);
	free(p->done);
}

static int pending_add(struct pending *p, const char *rel, const char *local,
		       const struct sfs_rstat *rs)
{
	if (p->n == p->cap) {
		size_t c = p->cap ? p->cap * 2 : 16;
		char **r = realloc(p->rel, c * sizeof(*r));
		if (r)
			p->rel = r;
		char **l = realloc(p->local, c * sizeof(*l));
		if (l)
			p->local = l;
		struct sfs_rstat *st = realloc(p->st, c * sizeof(*st));
		if (st)
			p->st = st;
		bool *d = realloc(p->done, c * sizeof(*d));
		if (d)
			p->done = d;
		if (!r || !l || !st || !d)
			return -ENOMEM;
		p->cap = c;
	}
	p->rel[p->n] = strdup(rel);
	p->local[p->n] = strdup(local);
	p->st[p->n] = (struct sfs_rstat){.mode = rs->mode, .size = rs->size, .mtime = rs->mtime};
	p->done[p->n] = false;
	if (!p->rel[p->n] || !p->local[p->n]) {
		free(p->rel[p->n]);
		free(p->local[p->n]);
		return -ENOMEM;
	}
	p->n++;
	return 0;
}

struct bulk {
	struct pending *p;
	int r;		     /* a local write that failed ends the call with it */
	struct sfs_err lerr; /* and says why */
};

static int on_bulk_file(const char *path, const void *data, size_t len, void *arg)
{
	struct bulk *b = arg;
	struct pending *p = b->p;
	size_t i = 0;
	while (i < p->n && (p->done[i] || strcmp(p->rel[i], path) != 0))
		i++;
	if (i == p->n || (off_t)len != p->st[i].size)
		return 0; /* not asked for, or changed meanwhile: fetched alone */
	char tmp[4300];
	int fd = open_tmp(p->local[i], tmp, sizeof(tmp), &b->lerr);
	if (fd < 0)
		return b->r = fd;
	int r = sfs_write_all(fd, data, len);
	r = r < 0 ? sfs_errf(&b->lerr, r, "snapshot: %s: %s", tmp, strerror(-r))
		  : settle(fd, tmp, p->local[i], &p->st[i], &b->lerr);
	close(fd);
	if (r)
		unlink(tmp);
	else
		p->done[i] = true;
	return b->r = r;
}

static int fetch_pending(struct sfs_sandbox *sb, struct pending *p, struct sfs_err *err)
{
	int r = 0;
	if (sb->provider->ops->fs_read_many && p->n > 1) {
		const char **ask = calloc(p->n, sizeof(*ask));
		if (!ask)
			return sfs_errf(err, -ENOMEM, "out of memory");
		size_t k = 0;
		off_t bytes = 0;
		for (size_t i = 0; i < p->n; i++)
			if (p->st[i].size <= BULK_FILE_MAX &&
			    bytes + p->st[i].size <= BULK_BYTES_MAX) {
				ask[k++] = p->rel[i];
				bytes += p->st[i].size;
			}
		struct sfs_err berr = {0};
		struct bulk b = {.p = p};
		/* a failed bulk call is not an error: what it left undone goes
		 * one file at a time below, and that reports what fails */
		if (k > 1)
			sb->provider->ops->fs_read_many(sb, ask, k, on_bulk_file, &b, &berr);
		free(ask);
		if (b.r)
			return sfs_errf(err, b.r, "%s", b.lerr.msg);
	}
	for (size_t i = 0; !r && i < p->n; i++)
		if (!p->done[i])
			r = fetch(sb, p->rel[i], p->local[i], &p->st[i], err);
	return r;
}

static int pull_dir(struct sfs_sandbox *sb, const char *rel, const char *local,
		    struct sfs_err *err);

static int pull_entry(struct sfs_sandbox *sb, const char *rel, const char *local,
		      const struct sfs_rstat *rs, struct pending *todo, struct sfs_err *err)
{
	struct stat st;
	bool have = lstat(local, &st) == 0;
	if (S_ISDIR(rs->mode)) {
		if (have && !S_ISDIR(st.st_mode)) {
			unlink(local);
			have = false;
		}
		if (!have && mkdir(local, 0700) < 0)
			return sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
		if (chmod(local, (rs->mode & 07777) | 0700) < 0)
			return sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
		int r = pull_dir(sb, rel, local, err);
		/* its own bits last: a read-only directory is still filled */
		if (!r && chmod(local, rs->mode & 07777) < 0)
			r = sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
		return r;
	}
	if (S_ISLNK(rs->mode)) {
		char have_t[4096];
		ssize_t n =
		    have && S_ISLNK(st.st_mode) ? readlink(local, have_t, sizeof(have_t) - 1) : -1;
		if (n >= 0 && (have_t[n] = '\0', rs->link && strcmp(have_t, rs->link) == 0))
			return 0;
		if (have)
			sfs_rm_rf(local);
		if (symlink(rs->link ? rs->link : "", local) < 0)
			return sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
		return 0;
	}
	if (!S_ISREG(rs->mode))
		return 0; /* special files are not recorded */
	if (have && S_ISREG(st.st_mode) && st.st_size == rs->size && st.st_mtime == rs->mtime &&
	    st.st_ctime > rs->mtime + 1) {
		if ((st.st_mode & 07777) != (rs->mode & 07777) &&
		    chmod(local, rs->mode & 07777) < 0)
			return sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
		return 0;
	}
	return pending_add(todo, rel, local, rs) ? sfs_errf(err, -ENOMEM, "out of memory") : 0;
}

static int pull_dir(struct sfs_sandbox *sb, const char *rel, const char *local, struct sfs_err *err)
{
	struct sfs_rdirent *ents = NULL;
	size_t n = 0;
	struct pending todo = {0};
	int r = sb->provider->ops->fs_list(sb, rel, &ents, &n, err);
	for (size_t i = 0; !r && i < n; i++) {
		if (skipped(ents[i].name))
			continue;
		char *rp = join(rel, ents[i].name), *lp = join(local, ents[i].name);
		r = rp && lp ? pull_entry(sb, rp, lp, &ents[i].st, &todo, err)
			     : sfs_errf(err, -ENOMEM, "out of memory");
		free(rp);
		free(lp);
	}
	if (!r)
		r = fetch_pending(sb, &todo, err);
	pending_free(&todo);
	/* what the remote directory no longer has */
	DIR *d = r ? NULL : opendir(local);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (skipped(e->d_name))
			continue;
		bool there = false;
		for (size_t i = 0; i < n && !there; i++)
			there = strcmp(ents[i].name, e->d_name) == 0;
		char *lp = there ? NULL : join(local, e->d_name);
		if (lp)
			sfs_rm_rf(lp);
		free(lp);
	}
	if (d)
		closedir(d);
	sfs_rdirents_free(ents, n);
	return r;
}

int wsnap_remote_pull(struct sfs_sandbox *sb, int *fd, struct sfs_err *err)
{
	char mirror[4200];
	if (sfs_pathf(mirror, sizeof(mirror), "%s/wsnap-mirror", sb->statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "snapshot: %s: path too long", sb->statedir);
	int r = sfs_mkdir_p(mirror, 0700);
	if (r)
		return sfs_errf(err, r, "snapshot: %s: %s", mirror, strerror(-r));
	sfs_sb_set_progress(sb, "snapshot: fetching the workspace");
	r = pull_dir(sb, "", mirror, err);
	sfs_sb_set_progress(sb, NULL);
	if (r)
		return r;
	*fd = open(mirror, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return *fd < 0 ? sfs_errf(err, -errno, "snapshot: %s: %s", mirror, strerror(errno)) : 0;
}

/* ---- pushing a restore back ---- */

/* Removes rel (a whole tree) from the remote workspace; gone is fine. */
static int remote_rm(struct sfs_sandbox *sb, const char *rel, struct sfs_err *err)
{
	const struct sfs_provider_ops *o = sb->provider->ops;
	struct sfs_rstat rs = {0};
	struct sfs_err e = {0};
	int r = o->fs_stat(sb, rel, &rs, &e);
	free(rs.link);
	if (r == -ENOENT)
		return 0;
	if (r)
		return sfs_errf(err, r, "restore: %s: %s", rel, e.msg);
	bool dir = S_ISDIR(rs.mode);
	struct sfs_rdirent *ents = NULL;
	size_t n = 0;
	if (dir && (r = o->fs_list(sb, rel, &ents, &n, &e)))
		return sfs_errf(err, r, "restore: %s: %s", rel, e.msg);
	for (size_t i = 0; !r && i < n; i++) {
		if (strcmp(ents[i].name, ".") == 0 || strcmp(ents[i].name, "..") == 0)
			continue;
		char *p = join(rel, ents[i].name);
		r = p ? remote_rm(sb, p, err) : sfs_errf(err, -ENOMEM, "out of memory");
		free(p);
	}
	sfs_rdirents_free(ents, n);
	if (r)
		return r;
	r = o->fs_remove(sb, rel, dir, &e);
	if (r && r != -ENOENT)
		return sfs_errf(err, r, "restore: removing %s: %s", rel, e.msg);
	return 0;
}

struct push {
	struct sfs_sandbox *sb;
	const char *mirror;
	int r;
	struct sfs_err *err;
};

static void push_one(void *ctx, char what, const char *rel)
{
	struct push *p = ctx;
	if (p->r)
		return;
	const struct sfs_provider_ops *o = p->sb->provider->ops;
	char *local = join(p->mirror, rel);
	struct stat st;
	struct sfs_err e = {0};
	if (!local) {
		p->r = sfs_errf(p->err, -ENOMEM, "out of memory");
		return;
	}
	if (what == 'r') {
		p->r = remote_rm(p->sb, rel, p->err);
	} else if (lstat(local, &st) < 0) {
		p->r = sfs_errf(p->err, -errno, "restore: %s: %s", local, strerror(errno));
	} else if (what == 'm') {
		p->r = o->fs_chmod(p->sb, rel, st.st_mode & 07777, &e);
	} else if (!(p->r = remote_rm(p->sb, rel, p->err))) {
		/* written: whatever was there goes, then the snapshot's */
		if (S_ISDIR(st.st_mode)) {
			p->r = o->fs_mkdir(p->sb, rel, st.st_mode & 07777, &e);
		} else if (S_ISLNK(st.st_mode)) {
			char t[4096];
			ssize_t n = readlink(local, t, sizeof(t) - 1);
			p->r = n < 0 ? -errno : (t[n] = '\0', o->fs_symlink(p->sb, t, rel, &e));
		} else {
			int fd = open(local, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			p->r =
			    fd < 0 ? -errno : o->fs_write(p->sb, rel, fd, st.st_mode & 07777, &e);
			if (fd >= 0)
				close(fd);
		}
	}
	if (p->r && !p->err->msg[0])
		sfs_errf(p->err, p->r, "restore: %s: %s", rel, e.msg[0] ? e.msg : strerror(-p->r));
	free(local);
}

int wsnap_remote_restore(struct sfs_sandbox *sb, const char *commit, const char *cache,
			 struct snap_restore_stats *st, struct sfs_err *err)
{
	int fd = -1;
	int r = wsnap_remote_pull(sb, &fd, err);
	if (r)
		return r;
	char mirror[4200];
	if (sfs_pathf(mirror, sizeof(mirror), "%s/wsnap-mirror", sb->statedir) < 0) {
		close(fd);
		return sfs_errf(err, -ENAMETOOLONG, "snapshot: %s: path too long", sb->statedir);
	}
	struct push p = {sb, mirror, 0, err};
	sfs_sb_set_progress(sb, "restore: writing the workspace");
	r = snap_restore(commit, fd, cache, st, push_one, &p, err);
	sfs_sb_set_progress(sb, NULL);
	close(fd);
	return r ? r : p.r;
}
