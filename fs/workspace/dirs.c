/* Handlers for directories (opendir, readdir(plus), releasedir, fsyncdir)
 * and statfs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

void ws_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_node *n = ws_get(req, ino);
	struct ws_dir *d;
	int fd = -1, err = 0;

	if (!n)
		return;
	d = calloc(1, sizeof(*d));
	if (!d) {
		err = ENOMEM;
		goto out;
	}
	/* the directory's fd counts against the workspace's fd budget */
	err = ws_fd_reserve(false);
	if (err)
		goto out;
	fd = openat(n->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1) {
		err = errno;
		ws_fd_unreserve();
		goto out;
	}
	d->dp = fdopendir(fd);
	if (!d->dp) {
		err = errno;
		close(fd);
		ws_fd_unreserve();
		goto out;
	}
	d->node = n;
	ws_node_opened(n); /* keeps its fd: see "Node fds" in internal.h */
	fi->fh = (uintptr_t)d;
	if (ws.opt.keep_cache) {
		fi->cache_readdir = 1;
		fi->keep_cache = 1;
	}
out:
	if (err) {
		ws_put(n);
		free(d);
		ws_reply_err(req, err);
		return;
	}
	/* pinned past the reply: an interrupted opendir's node may be
	 * forgotten at once */
	if (fuse_reply_open(req, fi) == -ENOENT) {
		closedir(d->dp);
		ws_fd_unreserve();
		ws_node_closed(n);
		free(d);
	}
	ws_put(n);
}

/* A readdirplus entry: looked up (counted) unless it is "." or "..", or it
 * vanished; then the kernel gets the name without attributes (ino 0). */
static void ws_dirent_plus(struct ws_node *dir, const struct dirent *de, struct fuse_entry_param *e)
{
	if (ws_name_ok(de->d_name) && ws_do_lookup(dir, de->d_name, e, NULL) == 0)
		return;
	memset(e, 0, sizeof(*e));
	e->attr.st_ino = de->d_ino;
	e->attr.st_mode = (mode_t)de->d_type << 12;
}

static void ws_do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			  struct fuse_file_info *fi, bool plus)
{
	struct ws_dir *d = ws_dir(fi);
	struct ws_node *dir = NULL;
	size_t rem = size;
	char *buf, *p;
	int err = 0;

	if (plus) {
		dir = ws_get(req, ino); /* its fd is the base for the lookups */
		if (!dir)
			return;
	} else if (ws_is_gone(d->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	buf = calloc(1, size);
	if (!buf) {
		err = ENOMEM;
		goto out;
	}
	p = buf;
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		struct fuse_entry_param e;
		size_t entsize;
		off_t next;

		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				err = errno;
				break;
			}
		}
		next = d->entry->d_off;
		if (plus) {
			ws_dirent_plus(dir, d->entry, &e);
			entsize = fuse_add_direntry_plus(req, p, rem, d->entry->d_name, &e, next);
			if (entsize > rem) {
				if (e.ino)
					ws_unref(e.ino, 1);
				break;
			}
		} else {
			struct stat st = {.st_ino = d->entry->d_ino,
					  .st_mode = (mode_t)d->entry->d_type << 12};

			entsize = fuse_add_direntry(req, p, rem, d->entry->d_name, &st, next);
			if (entsize > rem)
				break;
		}
		p += entsize;
		rem -= entsize;
		d->entry = NULL;
		d->offset = next;
	}
out:
	if (dir)
		ws_put(dir);
	/* Once entries are in the buffer an error cannot be reported without
	 * losing their lookup counts: return what we have. */
	if (err && rem == size)
		ws_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

void ws_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	ws_do_readdir(req, ino, size, off, fi, false);
}

void ws_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	ws_do_readdir(req, ino, size, off, fi, true);
}

void ws_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_dir *d = ws_dir(fi);

	closedir(d->dp);
	ws_fd_unreserve();
	ws_node_closed(d->node); /* the node outlives its open directories */
	free(d);
	fuse_reply_err(req, 0);
}

void ws_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ws_dir *d = ws_dir(fi);
	int fd = dirfd(d->dp), res;

	if (ws_is_gone(d->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	res = datasync ? fdatasync(fd) : fsync(fd);
	ws_reply_err(req, res == -1 ? errno : 0);
}

void ws_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ws_node *n = ws_get(req, ino);
	struct statvfs sv;
	int res, err;

	if (!n)
		return;
	res = fstatvfs(n->fd, &sv);
	err = errno;
	ws_put(n);
	if (res == -1) {
		ws_reply_err(req, err);
		return;
	}
	fuse_reply_statfs(req, &sv);
}
