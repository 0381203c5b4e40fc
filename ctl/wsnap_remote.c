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
 * sb->op_mutex throughout (the mirror has one user at a time).  Modes
 * from the remote side never carry set-user-ID or set-group-ID into the
 * mirror, the store or back.
 */
#include "wsnap.h"
#include "wsnap_internal.h"

#include "../providers/untrusted/name.h"
#include "../providers/untrusted/tree.h"
#include "../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/*
 * The mirror is made of names a sandbox gave.  The listing parsers leave
 * out any that cannot be a file name (untrusted/name.h) and pull_dir checks
 * again; besides, every change to the mirror is made through a directory
 * opened beneath its root without following a symlink (untrusted_open),
 * by *at calls on one component.
 */

/* The mirror directory holding rel's last component (O_PATH), *base that
 * component. */
static int parent_of(int root, const char *rel, const char **base)
{
	const char *slash = strrchr(rel, '/');
	*base = slash ? slash + 1 : rel;
	if (!slash)
		return untrusted_open(root, "", O_PATH | O_DIRECTORY);
	char *dir = strndup(rel, (size_t)(slash - rel));
	if (!dir)
		return -ENOMEM;
	int fd = untrusted_open(root, dir, O_PATH | O_DIRECTORY);
	free(dir);
	return fd;
}

/* A file's mode on the mirror, never through a symlink. */
static int chmod_at(int dir, const char *base, mode_t mode)
{
	int fd = openat(dir, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = untrusted_fchmod(fd, mode);
	close(fd);
	return r;
}

/*
 * A file is fetched into STATE/sandboxes/KEY/wsnap-fetch/file (the daemon's
 * own directory, one fetch at a time: the caller holds the op lock), then
 * renamed into the mirror: no name beside it in the mirror is taken, and a
 * sandbox's "a.sfs-fetch" cannot stand in its way.
 */
#define FETCH_TMP "file"

/* Gives the fetched copy (open as fd, FETCH_TMP in tmpdir) the remote
 * file's mode and mtime and renames it over base in dir (a directory there
 * is removed first, beneath dir: untrusted_remove). */
static int settle(int fd, int tmpdir, int dir, const char *base, const char *local,
		  const struct sfs_rstat *rs, struct sfs_err *err)
{
	struct timespec t[2] = {{rs->mtime, 0}, {rs->mtime, 0}};
	if (fchmod(fd, untrusted_perm(rs->mode)) < 0 || futimens(fd, t) < 0)
		return sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
	struct stat st;
	if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		untrusted_remove(dir, base);
	if (renameat(tmpdir, FETCH_TMP, dir, base) < 0)
		return sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
	return 0;
}

/* The fetched copy of the mirror's rel: FETCH_TMP in tmpdir, and the
 * directory it goes to (dir, opened beneath root). */
struct fetched {
	int tmpdir, dir, fd;
	const char *base;
};

static int open_tmp(int root, int tmpdir, const char *rel, const char *local, struct fetched *f,
		    struct sfs_err *err)
{
	f->fd = -1;
	f->tmpdir = tmpdir;
	f->dir = parent_of(root, rel, &f->base);
	if (f->dir < 0)
		return sfs_errf(err, f->dir, "snapshot: %s: %s", local, strerror(-f->dir));
	f->fd =
	    openat(tmpdir, FETCH_TMP, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		int r = sfs_errf(err, -errno, "snapshot: %s: %s", local, strerror(errno));
		close(f->dir);
		return r;
	}
	return 0;
}

/* Closes f; removes its copy when r says it was not settled. */
static int close_tmp(struct fetched *f, int r)
{
	close(f->fd);
	if (r)
		unlinkat(f->tmpdir, FETCH_TMP, 0);
	close(f->dir);
	return r;
}

/* Fetches one remote file into the mirror's rel (temp + rename). */
static int fetch(struct sfs_sandbox *sb, int root, int tmpdir, const char *rel, const char *local,
		 const struct sfs_rstat *rs, struct sfs_err *err)
{
	struct fetched f;
	int r = open_tmp(root, tmpdir, rel, local, &f, err);
	if (r)
		return r;
	r = sb->provider->ops->fs_read(sb, rel, f.fd, err);
	if (!r)
		r = settle(f.fd, f.tmpdir, f.dir, f.base, local, rs, err);
	return close_tmp(&f, r);
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
	int root, tmpdir;    /* the mirror, the fetch directory */
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
	struct fetched f;
	int r = open_tmp(b->root, b->tmpdir, p->rel[i], p->local[i], &f, &b->lerr);
	if (r)
		return b->r = r;
	r = sfs_write_all(f.fd, data, len);
	r = r < 0 ? sfs_errf(&b->lerr, r, "snapshot: %s: %s", p->local[i], strerror(-r))
		  : settle(f.fd, f.tmpdir, f.dir, f.base, p->local[i], &p->st[i], &b->lerr);
	if (!close_tmp(&f, r))
		p->done[i] = true;
	return b->r = r;
}

static int fetch_pending(struct sfs_sandbox *sb, int root, struct pending *p, struct sfs_err *err)
{
	if (!p->n)
		return 0;
	char path[4200];
	if (sfs_pathf(path, sizeof(path), "%s/wsnap-fetch", sb->statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "snapshot: %s: path too long", sb->statedir);
	int tmpdir = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmpdir < 0)
		return sfs_errf(err, -errno, "snapshot: %s: %s", path, strerror(errno));
	int r = 0;
	if (sb->provider->ops->fs_read_many && p->n > 1) {
		const char **ask = calloc(p->n, sizeof(*ask));
		if (!ask) {
			close(tmpdir);
			return sfs_errf(err, -ENOMEM, "out of memory");
		}
		size_t k = 0;
		off_t bytes = 0;
		for (size_t i = 0; i < p->n; i++)
			if (p->st[i].size <= BULK_FILE_MAX &&
			    bytes + p->st[i].size <= BULK_BYTES_MAX) {
				ask[k++] = p->rel[i];
				bytes += p->st[i].size;
			}
		struct sfs_err berr = {0};
		struct bulk b = {.p = p, .root = root, .tmpdir = tmpdir};
		/* a failed bulk call is not an error: what it left undone goes
		 * one file at a time below, and that reports what fails */
		if (k > 1)
			sb->provider->ops->fs_read_many(sb, ask, k, on_bulk_file, &b, &berr);
		free(ask);
		if (b.r) {
			close(tmpdir);
			return sfs_errf(err, b.r, "%s", b.lerr.msg);
		}
	}
	for (size_t i = 0; !r && i < p->n; i++)
		if (!p->done[i])
			r = fetch(sb, root, tmpdir, p->rel[i], p->local[i], &p->st[i], err);
	close(tmpdir);
	return r;
}

static int pull_dir(struct sfs_sandbox *sb, int root, const char *rel, const char *local,
		    struct sfs_err *err);

static int pull_entry(struct sfs_sandbox *sb, int root, const char *rel, const char *local,
		      const struct sfs_rstat *rs, struct pending *todo, struct sfs_err *err)
{
	const char *base;
	int dir = parent_of(root, rel, &base);
	if (dir < 0)
		return sfs_errf(err, dir, "snapshot: %s: %s", local, strerror(-dir));
	int r = 0;
	struct stat st;
	bool have = fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (S_ISDIR(rs->mode)) {
		if (have && !S_ISDIR(st.st_mode)) {
			unlinkat(dir, base, 0);
			have = false;
		}
		if (!have && mkdirat(dir, base, 0700) < 0)
			r = -errno;
		if (!r)
			r = chmod_at(dir, base, untrusted_perm(rs->mode) | 0700);
		/* no fd held across the recursion: a sandbox's tree may be
		 * thousands of directories deep */
		close(dir);
		dir = -1;
		if (r)
			return sfs_errf(err, r, "snapshot: %s: %s", local, strerror(-r));
		if ((r = pull_dir(sb, root, rel, local, err)))
			return r;
		/* its own bits last: a read-only directory is still filled */
		if ((dir = parent_of(root, rel, &base)) < 0)
			r = dir;
		else
			r = chmod_at(dir, base, untrusted_perm(rs->mode));
		if (r)
			sfs_errf(err, r, "snapshot: %s: %s", local, strerror(-r));
	} else if (S_ISLNK(rs->mode)) {
		/* on the heap: this frame is on the stack once per level */
		char *have_t = have && S_ISLNK(st.st_mode) ? malloc(PATH_MAX) : NULL;
		ssize_t n = have_t ? readlinkat(dir, base, have_t, PATH_MAX - 1) : -1;
		bool same = n >= 0 && (have_t[n] = '\0', rs->link && strcmp(have_t, rs->link) == 0);
		free(have_t);
		if (!same) {
			if (have)
				untrusted_remove(dir, base);
			if (symlinkat(rs->link ? rs->link : "", dir, base) < 0)
				r = sfs_errf(err, -errno, "snapshot: %s: %s", local,
					     strerror(errno));
		}
	} else if (!S_ISREG(rs->mode)) {
		/* special files are not recorded */
	} else if (have && S_ISREG(st.st_mode) && st.st_size == rs->size &&
		   st.st_mtime == rs->mtime && st.st_ctime > rs->mtime + 1) {
		if (untrusted_perm(st.st_mode) != untrusted_perm(rs->mode) &&
		    (r = chmod_at(dir, base, untrusted_perm(rs->mode))))
			sfs_errf(err, r, "snapshot: %s: %s", local, strerror(-r));
	} else if (pending_add(todo, rel, local, rs)) {
		r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (dir >= 0)
		close(dir);
	return r;
}

static int pull_dir(struct sfs_sandbox *sb, int root, const char *rel, const char *local,
		    struct sfs_err *err)
{
	struct sfs_rdirent *ents = NULL;
	size_t n = 0;
	struct pending todo = {0};
	int r = sb->provider->ops->fs_list(sb, rel, &ents, &n, err);
	for (size_t i = 0; !r && i < n; i++) {
		/* the provider's parser left such names out; checked again
		 * here, where they become host paths */
		if (skipped(ents[i].name) || !sfs_name_ok_str(ents[i].name))
			continue;
		char *rp = join(rel, ents[i].name), *lp = join(local, ents[i].name);
		r = rp && lp ? pull_entry(sb, root, rp, lp, &ents[i].st, &todo, err)
			     : sfs_errf(err, -ENOMEM, "out of memory");
		free(rp);
		free(lp);
	}
	if (!r)
		r = fetch_pending(sb, root, &todo, err);
	pending_free(&todo);
	/* what the remote directory no longer has */
	int dfd = r ? -1 : untrusted_open(root, rel, O_RDONLY | O_DIRECTORY);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (dfd >= 0 && !d)
		close(dfd);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (skipped(e->d_name))
			continue;
		bool there = false;
		for (size_t i = 0; i < n && !there; i++)
			there = strcmp(ents[i].name, e->d_name) == 0;
		/* by the fd of the directory just read, not a path that a
		 * symlink in the mirror could lead elsewhere */
		if (!there)
			untrusted_remove(dirfd(d), e->d_name);
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
	char fetch_dir[4200];
	if (sfs_pathf(fetch_dir, sizeof(fetch_dir), "%s/wsnap-fetch", sb->statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "snapshot: %s: path too long", sb->statedir);
	int r = sfs_mkdir_p(mirror, 0700);
	if (r)
		return sfs_errf(err, r, "snapshot: %s: %s", mirror, strerror(-r));
	if ((r = sfs_mkdir_p(fetch_dir, 0700)))
		return sfs_errf(err, r, "snapshot: %s: %s", fetch_dir, strerror(-r));
	int root = open(mirror, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return sfs_errf(err, -errno, "snapshot: %s: %s", mirror, strerror(errno));
	sfs_sb_set_progress(sb, "snapshot: fetching the workspace");
	r = pull_dir(sb, root, "", mirror, err);
	sfs_sb_set_progress(sb, NULL);
	if (r) {
		close(root);
		return r;
	}
	*fd = root;
	return 0;
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
		if (!sfs_name_ok_str(ents[i].name))
			continue; /* never a path of ours (the parsers leave them out) */
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
	int root; /* the mirror, read beneath it */
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
	const char *base;
	int dir = what == 'r' ? -1 : parent_of(p->root, rel, &base);
	if (what == 'r') {
		p->r = remote_rm(p->sb, rel, p->err);
	} else if (dir < 0) {
		p->r = sfs_errf(p->err, dir, "restore: %s: %s", local, strerror(-dir));
	} else if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		p->r = sfs_errf(p->err, -errno, "restore: %s: %s", local, strerror(errno));
	} else if (what == 'm') {
		p->r = o->fs_chmod(p->sb, rel, untrusted_perm(st.st_mode), &e);
	} else if (!(p->r = remote_rm(p->sb, rel, p->err))) {
		/* written: whatever was there goes, then the snapshot's */
		if (S_ISDIR(st.st_mode)) {
			p->r = o->fs_mkdir(p->sb, rel, untrusted_perm(st.st_mode), &e);
		} else if (S_ISLNK(st.st_mode)) {
			char t[4096];
			ssize_t n = readlinkat(dir, base, t, sizeof(t) - 1);
			p->r = n < 0 ? -errno : (t[n] = '\0', o->fs_symlink(p->sb, t, rel, &e));
		} else {
			int fd = untrusted_open(p->root, rel, O_RDONLY | O_NONBLOCK);
			p->r = fd < 0 ? fd
				      : o->fs_write(p->sb, rel, fd, untrusted_perm(st.st_mode), &e);
			if (fd >= 0)
				close(fd);
		}
	}
	if (dir >= 0)
		close(dir);
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
	struct push p = {sb, mirror, fd, 0, err};
	sfs_sb_set_progress(sb, "restore: writing the workspace");
	/* the mirror is the daemon's own copy */
	r = snap_restore(commit, fd, cache, st, push_one, &p, 0, 0, err);
	sfs_sb_set_progress(sb, NULL);
	close(fd);
	return r ? r : p.r;
}
