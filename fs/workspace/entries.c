/* Handlers for names and attributes: lookup, forget, getattr, setattr,
 * readlink, mknod, mkdir, symlink, unlink, rmdir, rename, link. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"
#include "fs/ino.h"
#include "fs/kernel_io.h"
#include "fs/symlink_rewrite.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ws_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct ws_node *p;
	int err;

	/* "." and ".." are the kernel's business; looking them up here could
	 * walk out of the workspace root. */
	if (!ws_name_ok(name)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	err = ws_do_lookup(p, name, &e, NULL);
	ws_put(p);
	if (err == ENOENT) {
		ws_entry_init(&e); /* ino 0: a negative entry, cached for entry_timeout */
		fuse_reply_entry(req, &e);
	} else if (err) {
		ws_reply_err(req, err);
	} else {
		ws_reply_entry(req, &e);
	}
}

void ws_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	/* Synthetic nodes keep no counts, so ops.c may hand us any ino. */
	if (SFS_INO_KIND(ino) == SFS_K_WS)
		ws_unref(ino, nlookup);
	fuse_reply_none(req);
}

void ws_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		if (SFS_INO_KIND(forgets[i].ino) == SFS_K_WS)
			ws_unref(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

void ws_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_node *n = ws_get(req, ino);
	struct stat st;
	int res, err;

	if (!n)
		return;
	res = fstatat(n->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	err = errno;
	if (res == 0)
		ws_link_size(n->serial, n->parent_id, n->fd, &st);
	ws_put(n);
	if (res == -1) {
		ws_reply_err(req, err);
		return;
	}
	fuse_reply_attr(req, &st, ws_attr_ttl());
}

static int ws_setattr_times(struct ws_node *n, const struct stat *attr, int valid,
			    const struct ws_file *h)
{
	struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};

	if (valid & FUSE_SET_ATTR_ATIME_NOW)
		tv[0].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_ATIME)
		tv[0] = attr->st_atim;
	if (valid & FUSE_SET_ATTR_MTIME_NOW)
		tv[1].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_MTIME)
		tv[1] = attr->st_mtim;
	if (h)
		return futimens(h->fd, tv);
	/* AT_EMPTY_PATH on the O_PATH fd: works for symlinks too, follows nothing. */
	return utimensat(n->fd, "", tv, AT_EMPTY_PATH);
}

static int ws_setattr_size(struct ws_node *n, off_t size, const struct ws_file *h)
{
	char path[WS_PROC_PATH_MAX];

	if (h && ftruncate(h->fd, size) == 0)
		return 0;
	if (h && errno != EBADF && errno != EINVAL)
		return -1;
	if (n->type != S_IFREG) {
		errno = S_ISDIR(n->type) ? EISDIR : EINVAL;
		return -1;
	}
	ws_proc_path(path, n->fd);
	return truncate(path, size);
}

void ws_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		struct fuse_file_info *fi)
{
	struct ws_node *n = ws_get(req, ino);
	char path[WS_PROC_PATH_MAX];
	const struct ws_file *h;
	struct stat st;
	int err = 0;

	if (!n)
		return;
	/* The kernel passes a handle only for ftruncate-like calls on files. */
	h = fi && S_ISREG(n->type) ? ws_file(fi) : NULL;
	ws_self_begin(n);

	/* Owner before mode: chown clears S_ISUID, a chmod in the same request must win. */
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = valid & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t gid = valid & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;

		if (fchownat(n->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
			goto fail;
	}
	if (valid & FUSE_SET_ATTR_MODE) {
		int res;

		if (S_ISLNK(n->type)) {
			errno = EOPNOTSUPP; /* Linux has no symlink modes */
			goto fail;
		}
		if (h) {
			res = fchmod(h->fd, attr->st_mode & 07777);
		} else {
			ws_proc_path(path, n->fd);
			res = chmod(path, attr->st_mode & 07777);
		}
		if (res == -1)
			goto fail;
	}
	/* a truncate (or chown) by a caller without CAP_FSETID, unless the
	 * same request sets the mode */
	if (!(valid & FUSE_SET_ATTR_MODE) && kio_kill_suidgid() &&
	    ws_kill_suidgid(req, h ? h->fd : n->fd, !h) == -1)
		goto fail;
	if ((valid & FUSE_SET_ATTR_SIZE) && ws_setattr_size(n, attr->st_size, h) == -1)
		goto fail;
	/* Times last, so that a truncate in the same request does not overwrite them. */
	if ((valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) &&
	    ws_setattr_times(n, attr, valid, h) == -1)
		goto fail;
	if (fstatat(n->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		goto fail;
	ws_self_end(n, n->fd, &st);
	ws_link_size(n->serial, n->parent_id, n->fd, &st);
	ws_put(n);
	fuse_reply_attr(req, &st, ws_attr_ttl());
	return;
fail:
	err = errno;
	ws_self_end(n, n->fd, NULL);
	ws_put(n);
	ws_reply_err(req, err);
}

/* How many directories below its workspace root the pinned directory dir
 * is, walking ".." (O_PATH, no symlink followed); -1 if it is not below it
 * (moved out by the sandbox) or too deep. */
static int ws_dir_depth(const struct ws_node *dir, dev_t root_dev, ino_t root_ino)
{
	struct stat st, prev = {0};
	int fd = dir->fd;

	for (int depth = 0; depth <= 4096; depth++) {
		int up;

		if (fstatat(fd, "", &st, AT_EMPTY_PATH) == -1)
			break;
		if (st.st_dev == root_dev && st.st_ino == root_ino) {
			if (fd != dir->fd)
				close(fd);
			return depth;
		}
		/* ".." of the filesystem root is itself: no ancestor is the root. */
		if (depth > 0 && st.st_dev == prev.st_dev && st.st_ino == prev.st_ino)
			break;
		prev = st;
		up = openat(fd, "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd != dir->fd)
			close(fd);
		fd = up;
		if (fd == -1)
			return -1;
	}
	if (fd != dir->fd)
		close(fd);
	return -1;
}

/* SPEC §5: the target as the host should see it (rewritten for sandboxes
 * whose filesystem is not the host's).  Returns 0 or an errno. */
static int ws_symlink_show(uint32_t serial, uint64_t parent_id, char *buf, size_t size)
{
	const struct ws_sandbox_info *info;
	struct ws_node *dir = NULL;
	const char *root_path;
	dev_t root_dev;
	ino_t root_ino;
	bool rewrite, reopen = false;
	int depth = -1, len;
	char *raw;

	pthread_mutex_lock(&ws.lock);
	info = ws_sandbox_info_locked(serial);
	rewrite = info && info->rewrite_symlinks;
	root_path = info ? info->root_path : NULL;
	root_dev = info ? info->root_dev : 0;
	root_ino = info ? info->root_ino : 0;
	if (rewrite) {
		dir = ws_find_id_locked(parent_id);
		if (dir && !dir->gone)
			reopen = ws_hold_locked(dir);
		else
			dir = NULL;
	}
	pthread_mutex_unlock(&ws.lock);
	if (!rewrite)
		return 0;
	if (dir && reopen && ws_node_reopen(dir, false) != 0) {
		ws_put(dir); /* depth unknown: rewritten as for a directory moved away */
		dir = NULL;
	}
	if (dir) {
		depth = ws_dir_depth(dir, root_dev, root_ino);
		ws_put(dir);
	}
	raw = strdup(buf);
	if (!raw)
		return ENOMEM;
	len = sfs_symlink_rewrite(raw, root_path, depth, buf, size);
	free(raw);
	return len < 0 ? -len : 0;
}

void ws_link_size(uint32_t serial, uint64_t parent_id, int fd, struct stat *st)
{
	char buf[PATH_MAX + 1];
	ssize_t len;

	if (!S_ISLNK(st->st_mode))
		return;
	len = readlinkat(fd, "", buf, sizeof(buf));
	if (len < 0 || len == (ssize_t)sizeof(buf))
		return;
	buf[len] = '\0';
	if (ws_symlink_show(serial, parent_id, buf, sizeof(buf)) == 0)
		st->st_size = (off_t)strlen(buf);
}

void ws_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ws_node *n = ws_get(req, ino);
	char buf[PATH_MAX + 1];
	ssize_t len;
	int err;

	if (!n)
		return;
	len = readlinkat(n->fd, "", buf, sizeof(buf));
	if (len == -1)
		err = errno;
	else if (len == (ssize_t)sizeof(buf))
		err = ENAMETOOLONG;
	else {
		buf[len] = '\0';
		err = ws_symlink_show(n->serial, n->parent_id, buf, sizeof(buf));
	}
	ws_put(n);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	fuse_reply_readlink(req, buf);
}

/* mknod, mkdir and symlink: created as the caller, then looked up. */
static void ws_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		    const char *target)
{
	struct fuse_entry_param e;
	struct ws_node *p;
	struct ws_creds creds;
	uint64_t seq;
	int err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	ws_thread_set_umask(req);
	seq = ws_expect(p, name, WS_EV_CREATE);
	err = ws_creds_begin(req, &creds);
	if (!err) {
		int res;

		if (target)
			res = symlinkat(target, p->fd, name);
		else if (S_ISDIR(mode))
			res = mkdirat(p->fd, name, mode & 07777);
		else
			res = mknodat(p->fd, name, mode, rdev);
		err = res == -1 ? errno : 0;
	}
	ws_creds_end(&creds);
	if (err)
		ws_expect_withdraw(seq, p, name);
	else
		err = ws_do_lookup(p, name, &e, NULL);
	ws_put(p);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	ws_reply_entry(req, &e);
}

void ws_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	ws_make(req, parent, name, mode, rdev, NULL);
}

void ws_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	ws_make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

void ws_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	ws_make(req, parent, name, S_IFLNK | 0777, 0, target);
}

static void ws_remove(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	struct ws_node *p;
	uint64_t seq;
	int res, err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	seq = ws_expect(p, name, WS_EV_DELETE);
	res = unlinkat(p->fd, name, flags);
	err = errno;
	if (res == -1)
		ws_expect_withdraw(seq, p, name);
	ws_put(p);
	ws_reply_err(req, res == -1 ? err : 0);
}

void ws_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ws_remove(req, parent, name, 0);
}

void ws_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ws_remove(req, parent, name, AT_REMOVEDIR);
}

void ws_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	       const char *newname, unsigned int flags)
{
	struct ws_node *p, *np;
	int res, err;

	if (!ws_name_ok(name) || !ws_name_ok(newname)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	if (SFS_INO_KIND(newparent) != SFS_K_WS) {
		ws_reply_err(req, EXDEV);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	np = ws_get(req, newparent);
	if (!np) {
		ws_put(p);
		return;
	}
	if (p->serial != np->serial) {
		err = EXDEV; /* never move files between sandboxes */
	} else {
		uint64_t seq[4] = {ws_expect(p, name, WS_EV_MOVED_FROM),
				   ws_expect(np, newname, WS_EV_MOVED_TO), 0, 0};

		if (flags & RENAME_EXCHANGE) {
			seq[2] = ws_expect(np, newname, WS_EV_MOVED_FROM);
			seq[3] = ws_expect(p, name, WS_EV_MOVED_TO);
		}
		res = renameat2(p->fd, name, np->fd, newname, flags);
		err = res == -1 ? errno : 0;
		if (res == -1) {
			ws_expect_withdraw(seq[0], p, name);
			ws_expect_withdraw(seq[1], np, newname);
			ws_expect_withdraw(seq[2], np, newname);
			ws_expect_withdraw(seq[3], p, name);
		}
	}
	ws_put(np);
	ws_put(p);
	ws_reply_err(req, err);
}

void ws_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n, *np;
	uint64_t seq;
	int res, err = 0;

	if (!ws_name_ok(newname)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	if (SFS_INO_KIND(newparent) != SFS_K_WS) {
		ws_reply_err(req, EXDEV);
		return;
	}
	n = ws_get(req, ino);
	if (!n)
		return;
	np = ws_get(req, newparent);
	if (!np) {
		ws_put(n);
		return;
	}
	ws_entry_init(&e);
	if (n->serial != np->serial) {
		err = EXDEV;
		goto out;
	}
	seq = ws_expect(np, newname, WS_EV_CREATE);
	if (S_ISLNK(n->type)) {
		/* Links the symlink itself; needs CAP_DAC_READ_SEARCH. */
		res = linkat(n->fd, "", np->fd, newname, AT_EMPTY_PATH);
	} else {
		ws_proc_path(path, n->fd);
		res = linkat(AT_FDCWD, path, np->fd, newname, AT_SYMLINK_FOLLOW);
	}
	if (res == -1)
		ws_expect_withdraw(seq, np, newname);
	if (res == -1 || fstatat(n->fd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		err = errno;
		goto out;
	}
	ws_link_size(n->serial, np->id, n->fd, &e.attr);
	pthread_mutex_lock(&ws.lock);
	n->nlookup++; /* the new name is one more lookup of the same node */
	pthread_mutex_unlock(&ws.lock);
	e.ino = ino;
out:
	ws_put(np);
	ws_put(n);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	ws_reply_entry(req, &e);
}

/* Host open flags for a kernel open: never follow (the /proc path is a magic
 * link to the exact inode), close on exec (the daemon spawns sandbox
 * processes), and no O_DIRECT (its alignment rules would turn the kernel's
 * buffers into EINVAL). */
