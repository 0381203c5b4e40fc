/*
 * restore: the workspace made equal to a snapshot, writing only what
 * differs.  A file whose bytes already match (the stat cache says so, or
 * its hash does) keeps its inode and mtime, at most its mode is fixed;
 * a different one is written to a temporary name and renamed over, so a
 * reader never sees half a file.  Nothing is followed through a symlink.
 * Special files (never recorded) and `.git` entries are left alone.
 *
 * The workspace is the sandbox's: any name may become a symlink, a FIFO or
 * another file between two calls.  So a mode is changed through the fd that
 * was opened and whose type was checked (providers/untrusted), never
 * through the name again, and no set-user-ID or set-group-ID bit is ever
 * written, whatever the snapshot recorded.
 */
#include "internal.h"

#include "../../providers/untrusted/creds.h"
#include "../../providers/untrusted/tree.h"
#include "../../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rst {
	git_repository *repo;
	git_odb *odb;
	struct scache *cache;
	struct pmap modes;
	struct snap_restore_stats st;
	snap_change_fn changed;
	void *ctx;
	struct sfs_err *err;
	uid_t uid; /* the workspace root's owner: what restore makes is theirs */
	gid_t gid;
};

/* What restore made (open as fd) given to the workspace's owner: a root
 * daemon's files would be root's in the sandbox's tree.  A daemon that is
 * not root cannot, and its files are its own already. */
static int give_owner(struct rst *s, int fd)
{
	int r = untrusted_fchown(fd, s->uid, s->gid);
	return r == -EPERM ? 0 : r;
}

static void note(struct rst *s, char what, const char *rel)
{
	if (s->changed)
		s->changed(s->ctx, what, rel);
}

static int fail(struct rst *s, int e, const char *what, const char *rel)
{
	return sfs_errf(s->err, -e, "restore: %s %s: %s", what, rel, strerror(e));
}

/* Removes name (a whole tree if a directory) without following symlinks. */
static int rm_at(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return errno == ENOENT ? 0 : -errno;
	int fd = untrusted_open_dir(dirfd, name);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int r = 0;
	struct dirent *e;
	while (!r && (e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			r = rm_at(fd, e->d_name);
	closedir(d);
	if (!r && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

static mode_t want_perm(struct rst *s, const char *rel, git_filemode_t fm)
{
	uint64_t m;
	/* never set-user-ID or set-group-ID: the snapshot's bits came from the
	 * sandbox, and restore runs as root */
	return untrusted_perm(pmap_get(&s->modes, rel, &m) ? (mode_t)m : st_implied_perm(fm));
}

/* Whether the regular file open as fd (its fstat st) holds blob want. */
static bool same_blob(struct rst *s, int fd, const char *rel, const struct stat *st,
		      const git_oid *want)
{
	git_oid have;
	if (!scache_hit(s->cache, rel, st, &have)) {
		unsigned char raw[20];
		if (untrusted_blob_sha1(fd, (uint64_t)st->st_size, raw) < 0)
			return false;
		git_oid_fromraw(&have, raw);
		scache_note(s->cache, rel, st, &have);
	}
	return git_oid_equal(&have, want);
}

static int write_file(struct rst *s, int dirfd, const char *name, const char *rel,
		      const git_oid *oid, mode_t perm)
{
	git_odb_object *o = NULL;
	int rc = git_odb_read(&o, s->odb, oid);
	if (rc < 0)
		return st_error(s->err, rc, "restore: reading a blob");
	/* a fresh name (O_EXCL): never one of the workspace's own files */
	char tmp[64], hex[17];
	int fd = -1;
	for (int tries = 0; fd < 0 && tries < 8; tries++) {
		if (sfs_random_hex(hex, 16) < 0)
			snprintf(hex, sizeof(hex), "%d-%d", (int)getpid(), tries);
		snprintf(tmp, sizeof(tmp), ".sandboxfs-restore-%s",
			 hex); /* may be cut: never, hex < 17 */
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	int r = fd < 0 ? fail(s, errno, "create", rel) : 0;
	int w = r ? 0 : st_write_all(fd, git_odb_object_data(o), git_odb_object_size(o));
	if (w)
		r = fail(s, -w, "write", rel);
	if (!r && (w = give_owner(s, fd)) < 0)
		r = fail(s, -w, "chown", rel);
	if (!r && (w = untrusted_fchmod(fd, perm)) < 0)
		r = fail(s, -w, "chmod", rel);
	if (fd >= 0 && close(fd) < 0 && !r)
		r = fail(s, errno, "write", rel);
	if (!r && renameat(dirfd, tmp, dirfd, name) < 0)
		r = fail(s, errno, "rename", rel);
	if (r && fd >= 0)
		unlinkat(dirfd, tmp, 0);
	git_odb_object_free(o);
	return r;
}

static int restore_link(struct rst *s, int dirfd, const char *name, const char *rel,
			const git_oid *oid, bool exists)
{
	git_blob *b = NULL;
	int rc = git_blob_lookup(&b, s->repo, oid);
	if (rc < 0)
		return st_error(s->err, rc, "restore: reading a link");
	char target[4096];
	int cut = git_blob_rawsize(b) >= sizeof(target);
	if (!cut)
		(void)!sfs_pathf(target, sizeof(target), "%.*s", (int)git_blob_rawsize(b),
				 (const char *)git_blob_rawcontent(b));
	git_blob_free(b);
	if (cut)
		return fail(s, ENAMETOOLONG, "symlink", rel); /* never a cut target */
	char have[4096];
	ssize_t n = exists ? readlinkat(dirfd, name, have, sizeof(have) - 1) : -1;
	if (n >= 0 && (have[n] = '\0', strcmp(have, target) == 0)) {
		s->st.unchanged++;
		return 0;
	}
	int r = exists ? rm_at(dirfd, name) : 0;
	if (r)
		return fail(s, -r, "remove", rel);
	if (symlinkat(target, dirfd, name) < 0)
		return fail(s, errno, "symlink", rel);
	/* the link itself (O_PATH, not followed), checked to be one */
	int fd = untrusted_open(dirfd, name, O_PATH);
	struct stat lst;
	r = fd < 0		   ? fd
	    : fstat(fd, &lst) < 0  ? -errno
	    : S_ISLNK(lst.st_mode) ? give_owner(s, fd)
				   : 0;
	if (fd >= 0)
		close(fd);
	if (r && r != -ENOENT)
		return fail(s, -r, "chown", rel);
	s->st.written++;
	note(s, 'w', rel);
	return 0;
}

static int restore_tree(struct rst *s, int dirfd, const git_tree *t, const char *rel);

static int restore_entry(struct rst *s, int dirfd, const git_tree_entry *e, const char *rel)
{
	const char *name = git_tree_entry_name(e);
	git_filemode_t fm = git_tree_entry_filemode(e);
	struct stat st;
	bool exists = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (fm == GIT_FILEMODE_LINK)
		return restore_link(s, dirfd, name, rel, git_tree_entry_id(e), exists);
	mode_t perm = want_perm(s, rel, fm);
	if (fm == GIT_FILEMODE_TREE) {
		if (exists && !S_ISDIR(st.st_mode)) {
			int r = rm_at(dirfd, name);
			if (r)
				return fail(s, -r, "remove", rel);
			exists = false;
		}
		if (!exists && mkdirat(dirfd, name, 0700) < 0)
			return fail(s, errno, "mkdir", rel);
		/* from here on, the directory opened (and checked to be one) */
		int fd = untrusted_open_dir(dirfd, name);
		if (fd < 0)
			return fail(s, -fd, "open", rel);
		struct stat dst;
		int r = fstat(fd, &dst) < 0 ? fail(s, errno, "stat", rel) : 0;
		if (!r && !exists) {
			int c = give_owner(s, fd);
			if (c < 0)
				r = fail(s, -c, "chown", rel);
		}
		if (!r && (!exists || (dst.st_mode & 07777) != perm)) {
			int c = untrusted_fchmod(fd, perm);
			if (c < 0)
				r = fail(s, -c, "chmod", rel);
		}
		if (!r && !exists) {
			s->st.written++;
			note(s, 'w', rel);
		} else if (!r && (dst.st_mode & 07777) != perm) {
			s->st.modes++;
			note(s, 'm', rel);
		}
		git_tree *sub = NULL;
		int rc = r ? 0 : git_tree_lookup(&sub, s->repo, git_tree_entry_id(e));
		if (rc < 0)
			r = st_error(s->err, rc, "restore: a tree");
		if (!r)
			r = restore_tree(s, fd, sub, rel);
		close(fd);
		git_tree_free(sub);
		return r;
	}
	if (exists && S_ISREG(st.st_mode)) {
		/* the file itself, opened (O_NONBLOCK, no symlink) and checked:
		 * what is hashed and chmod'ed is what was opened */
		struct stat fst;
		int fd = untrusted_open_file(dirfd, name, &fst);
		/* a file with other links is replaced, never changed in place: its
		 * other name may be outside the workspace */
		if (fd >= 0 && fst.st_nlink == 1 &&
		    same_blob(s, fd, rel, &fst, git_tree_entry_id(e))) {
			s->st.unchanged++;
			int r = 0;
			if ((fst.st_mode & 07777) != perm) {
				s->st.modes++;
				int c = untrusted_fchmod(fd, perm);
				r = c < 0 ? fail(s, -c, "chmod", rel) : 0;
				if (!r)
					note(s, 'm', rel);
			}
			close(fd);
			return r;
		}
		if (fd >= 0)
			close(fd);
	}
	if (exists && S_ISDIR(st.st_mode)) {
		int r = rm_at(dirfd, name);
		if (r)
			return fail(s, -r, "remove", rel);
	}
	s->st.written++;
	int r = write_file(s, dirfd, name, rel, git_tree_entry_id(e), perm);
	if (!r)
		note(s, 'w', rel);
	return r;
}

static char *join(const char *rel, const char *name)
{
	char *p;
	return asprintf(&p, "%s%s%s", rel, *rel ? "/" : "", name) < 0 ? NULL : p;
}

static int restore_tree(struct rst *s, int dirfd, const git_tree *t, const char *rel)
{
	/* first what the snapshot does not have goes */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return fail(s, errno, "open", *rel ? rel : ".");
	}
	int r = 0;
	struct dirent *de;
	while (!r && (de = readdir(d))) {
		const char *n = de->d_name;
		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || rec_ignored(n) ||
		    git_tree_entry_byname(t, n))
			continue;
		/* a fifo or socket was never recorded: it stays (a running
		 * server's socket), like .git */
		struct stat st;
		if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 && !rec_filemode(&st))
			continue;
		char *p = join(rel, n);
		r = p ? rm_at(dirfd, n) : -ENOMEM;
		if (r)
			r = fail(s, -r, "remove", p ? p : n);
		else
			s->st.removed++;
		if (!r)
			note(s, 'r', p);
		free(p);
	}
	closedir(d);
	for (size_t i = 0; !r && i < git_tree_entrycount(t); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(t, i);
		char *p = join(rel, git_tree_entry_name(e));
		r = p ? restore_entry(s, dirfd, e, p) : sfs_errf(s->err, -ENOMEM, "out of memory");
		free(p);
	}
	return r;
}

int snap_restore(const char *commit, int rootfd, const char *cache, struct snap_restore_stats *st,
		 snap_change_fn changed, void *ctx, uid_t as_uid, gid_t as_gid, struct sfs_err *err)
{
	struct rst s = {.changed = changed, .ctx = ctx, .err = err};
	struct stat rst;
	if (fstat(rootfd, &rst) < 0)
		return sfs_errf(err, -errno, "restore: the workspace: %s", strerror(errno));
	s.uid = rst.st_uid;
	s.gid = rst.st_gid;
	struct scache sc;
	st_writers_shared(); /* the cache it rewrites names blobs */
	scache_open(&sc, cache);
	s.cache = &sc;
	int ret = st_open(&s.repo, err);
	int rc = ret ? 0 : git_repository_odb(&s.odb, s.repo);
	if (rc < 0)
		ret = st_error(err, rc, "restore: the object store");
	git_oid cid;
	git_commit *c = NULL;
	git_tree *t = NULL;
	if (!ret && (git_oid_fromstr(&cid, commit) < 0 || git_commit_lookup(&c, s.repo, &cid) < 0))
		ret = sfs_errf(err, -ENOENT, "restore: commit %s is not in the store", commit);
	if (!ret && st_modes_load(s.repo, c, &s.modes))
		ret = sfs_errf(err, -EIO, "restore: the snapshot's modes cannot be read");
	if (!ret && (rc = git_commit_tree(&t, c)) < 0)
		ret = st_error(err, rc, "restore: the snapshot's tree");
	struct untrusted_creds as;
	if (!ret && (ret = untrusted_creds_begin(&as, as_uid, as_gid)))
		sfs_errf(err, ret, "restore: acting as %u:%u: %s", (unsigned)as_uid,
			 (unsigned)as_gid, strerror(-ret));
	else if (!ret) {
		ret = restore_tree(&s, rootfd, t, "");
		untrusted_creds_end(&as);
	}
	scache_close(&sc, cache, true);
	if (st)
		*st = s.st;
	git_tree_free(t);
	git_commit_free(c);
	pmap_free(&s.modes);
	git_odb_free(s.odb);
	git_repository_free(s.repo);
	st_writers_unlock();
	return ret;
}
