/* Handlers for open files: open, create, read, write, flush, release,
 * fsync, flock, fallocate, copy_file_range, lseek. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"
#include "fs/ino.h"
#include "fs/kernel_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int ws_open_flags(int flags)
{
	flags &= ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW | O_DIRECT);
	if (ws.opt.writeback) {
		/* The kernel reads pages even of write-only files, and does O_APPEND itself. */
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags | O_CLOEXEC;
}

static void ws_file_info(struct fuse_file_info *fi, struct ws_file *h)
{
	fi->fh = (uintptr_t)h;
	/* Without the watcher's invalidations (a watch failed), an open must
	 * drop the pages: nothing else would. */
	if (ws.opt.keep_cache &&
	    (!ws.explicit_inval || __atomic_load_n(&ws.coherent, __ATOMIC_RELAXED)))
		fi->keep_cache = 1;
	/* Nothing to flush for a read-only open (writeback still flushes). */
	if ((fi->flags & O_ACCMODE) == O_RDONLY)
		fi->noflush = 1;
}

void ws_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	struct ws_file *h;
	int flags, fd, err = 0;

	if (!n)
		return;
	h = malloc(sizeof(*h));
	if (!h) {
		err = ENOMEM;
		goto out;
	}
	if (S_ISLNK(n->type)) {
		err = ELOOP;
		goto out;
	}
	/* the file's fd counts against the workspace's fd budget */
	err = ws_fd_reserve(false);
	if (err)
		goto out;
	flags = ws_open_flags(fi->flags);
	ws_proc_path(path, n->fd);
	if (flags & O_TRUNC)
		ws_self_begin(n);
	fd = open(path, flags);
	if (fd == -1 && errno == EACCES && (fi->flags & O_ACCMODE) == O_WRONLY)
		fd = open(path, (flags & ~O_ACCMODE) | O_WRONLY); /* unprivileged daemon */
	if (fd != -1 && (flags & O_TRUNC) && kio_kill_suidgid()) {
		int killed = ws_kill_suidgid(req, fd, false);
		if (killed == -1) {
			err = errno;
			close(fd);
			fd = -1;
		} else if (killed == 1) {
			kio_inval_attr(ino);
		}
	}
	if (flags & O_TRUNC)
		ws_self_end(n, n->fd, NULL);
	if (fd == -1) {
		err = err ? err : errno;
		ws_fd_unreserve();
		goto out;
	}
	h->fd = fd;
	h->node = n;
	ws_node_opened(n); /* keeps its fd: see "Node fds" in internal.h */
	ws_file_info(fi, h);
	ws_io_begin(req, h, fd, fi);
out:
	if (err) {
		ws_put(n);
		free(h);
		ws_reply_err(req, err);
		return;
	}
	/* pinned past the reply: an interrupted open's node may be forgotten
	 * at once, and ws_io_end still counts on it */
	if (kio_reply_open(req, fi, h->backing_id) == -ENOENT) {
		ws_io_end(h); /* interrupted: no release will come */
		close(h->fd);
		ws_fd_unreserve();
		ws_node_closed(n);
		free(h);
	}
	ws_put(n);
}

void ws_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi)
{
	char path[WS_PROC_PATH_MAX];
	struct fuse_entry_param e;
	struct ws_node *p, *n;
	struct ws_file *h;
	struct ws_creds creds;
	uint64_t seq;
	int fd = -1, pfd, err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	h = malloc(sizeof(*h));
	if (!h) {
		err = ENOMEM;
		goto fail;
	}
	/* the file's fd and the node's O_PATH fd, counted before the file
	 * exists: the create does not fail for fds once it is made */
	err = ws_fd_reserve(false);
	if (err)
		goto fail;
	err = ws_fd_reserve(false);
	if (err) {
		ws_fd_unreserve();
		goto fail;
	}
	ws_thread_set_umask(req);
	seq = ws_expect(p, name, WS_EV_CREATE);
	err = ws_creds_begin(req, &creds);
	if (!err) {
		/* Always O_EXCL, so the file is certainly new and ours. */
		fd = openat(p->fd, name, ws_open_flags(fi->flags) | O_CREAT | O_EXCL | O_NOFOLLOW,
			    mode & 07777);
		err = fd == -1 ? errno : 0;
	}
	ws_creds_end(&creds);
	if (err)
		ws_expect_withdraw(seq, p, name);
	if (err == EEXIST && !(fi->flags & O_EXCL)) {
		/* The kernel had a stale negative entry (the sandbox created the
		 * file behind our back).  ESTALE makes it retry the open with a
		 * fresh lookup, which then takes the normal open path with its
		 * permission checks and symlink handling. */
		err = ESTALE;
	}
	if (err)
		goto fail_reserved;
	/* An O_PATH fd for the node from the exact inode, not the name, which may have changed. */
	ws_proc_path(path, fd);
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd == -1) {
		err = errno;
		goto fail_reserved;
	}
	ws_entry_init(&e);
	if (fstat(fd, &e.attr) == -1) {
		err = errno;
		close(pfd);
		goto fail_reserved;
	}
	err = ws_adopt(p->serial, p, pfd, &e.attr, &e.ino, &n); /* takes pfd and its count */
	if (err) {
		if (fd >= 0)
			close(fd);
		ws_fd_unreserve();
		goto fail;
	}
	h->fd = fd;
	h->node = n;
	/* n is not pinned, but cannot be forgotten before the kernel has the entry */
	ws_node_opened(n);
	ws_file_info(fi, h);
	ws_io_begin(req, h, fd, fi);
	ws_put(p);
	if (kio_reply_create(req, &e, fi, h->backing_id) == -ENOENT) {
		ws_io_end(h);
		close(fd);
		ws_fd_unreserve();
		ws_node_closed(n);
		free(h);
		ws_unref(e.ino, 1);
	}
	return;
fail_reserved:
	if (fd >= 0)
		close(fd);
	ws_fd_unreserve();
	ws_fd_unreserve();
fail:
	free(h);
	ws_put(p);
	ws_reply_err(req, err);
}

void ws_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = h->fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, 0); /* no SPLICE_F_MOVE: see ws_conn_init */
}

/*
 * What the host would do for a caller without CAP_FSETID, which the daemon's
 * own write and truncate do not (it has CAP_FSETID), and which the kernel
 * leaves to us under FUSE_HANDLE_KILLPRIV_V2 (fs/kernel_io.c).  Before the
 * write, as the VFS does.
 */
int ws_kill_suidgid(fuse_req_t req, int fd, bool opath)
{
	char path[WS_PROC_PATH_MAX];
	struct stat st;

	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		return -1;
	mode_t kill = kio_suidgid_to_clear_for(req, st.st_mode, st.st_gid);
	if (!kill)
		return 0;
	mode_t mode = st.st_mode & 07777 & ~kill;
	int r;
	if (!opath) {
		r = fchmod(fd, mode);
	} else {
		ws_proc_path(path, fd);
		r = chmod(path, mode);
	}
	/* EPERM: an unprivileged daemon, whose own write, truncate or
	 * fallocate the host clears the bits for */
	if (r == -1)
		return errno == EPERM ? 0 : -1;
	return 1;
}

void ws_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
		  struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	struct ws_creds creds;
	ssize_t res;
	int killed = 0;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = h->fd;
	out.buf[0].pos = off;
	ws_self_begin(h->node);
	if (kio_kill_suidgid())
		killed = ws_kill_suidgid(req, h->fd, false);
	if (killed == -1) {
		res = -errno;
	} else {
		res = ws_io_creds_begin(req, false, &creds);
		res = res ? -res : fuse_buf_copy(&out, in, 0);
		ws_creds_end(&creds);
	}
	ws_self_end(h->node, h->fd, NULL);
	if (killed == 1)
		kio_inval_attr(ino);
	if (res < 0) {
		ws_reply_err(req, (int)-res);
		return;
	}
	/* fi->flags are the file's open flags; writepage is the kernel's own
	 * write-back, whose pages are the data. */
	if ((fi->flags & O_DIRECT) && !fi->writepage && res > 0)
		ws_inval_range_later(h->node, off, (off_t)res);
	fuse_reply_write(req, (size_t)res);
}

void ws_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close() of a duplicate reports write-back errors (NFS-style) without
	 * giving up the handle, which stays open until release. */
	int fd = fcntl(ws_file(fi)->fd, F_DUPFD_CLOEXEC, 0);

	if (fd == -1) {
		ws_reply_err(req, errno);
		return;
	}
	ws_reply_err(req, close(fd) == -1 ? errno : 0);
}

void ws_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);

	ws_io_end(h);
	close(h->fd);
	ws_fd_unreserve();
	ws_node_closed(h->node); /* the node outlives its open files */
	free(h);
	fuse_reply_err(req, 0);
}

void ws_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	int res;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	res = datasync ? fdatasync(h->fd) : fsync(h->fd);
	ws_reply_err(req, res == -1 ? errno : 0);
}

void ws_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	struct ws_file *h = ws_file(fi);

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	ws_reply_err(req, flock(h->fd, op) == -1 ? errno : 0);
}

/*
 * fallocate and copy_file_range change a file as a write does, but the
 * kernel flags neither under FUSE_HANDLE_KILLPRIV_V2 (nor clears the bits
 * itself then): the caller's capabilities decide, looked up only when the
 * file has a bit to clear.  As ws_kill_suidgid; without v2 the kernel
 * does it.
 */
static int ws_kill_for_caller(fuse_req_t req, int fd)
{
	struct stat st;

	if (!kio_killpriv_v2())
		return 0;
	if (fstat(fd, &st) == -1)
		return -1;
	if (!(st.st_mode & (S_ISUID | S_ISGID)) || kio_caller_has_fsetid(req))
		return 0;
	return ws_kill_suidgid(req, fd, false);
}

void ws_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		  struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	struct ws_creds creds;
	int err, killed;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	ws_self_begin(h->node);
	killed = ws_kill_for_caller(req, h->fd);
	if (killed == -1) {
		err = errno;
	} else {
		err = ws_io_creds_begin(req, false, &creds);
		if (!err && fallocate(h->fd, mode, off, len) == -1)
			err = errno;
		ws_creds_end(&creds);
	}
	ws_self_end(h->node, h->fd, NULL);
	if (killed == 1)
		kio_inval_attr(ino);
	ws_reply_err(req, err);
}

void ws_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct ws_file *in, *out;
	struct ws_creds creds;
	ssize_t res;

	/* The other side may be a synthetic file whose fh is not ours. */
	if (SFS_INO_KIND(ino_in) != SFS_K_WS || SFS_INO_KIND(ino_out) != SFS_K_WS) {
		ws_reply_err(req, EXDEV);
		return;
	}
	in = ws_file(fi_in);
	out = ws_file(fi_out);
	if (ws_is_gone(in->node) || ws_is_gone(out->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	ws_self_begin(out->node);
	int killed = ws_kill_for_caller(req, out->fd);
	res = -1;
	if (killed != -1) {
		int err = ws_io_creds_begin(req, false, &creds);
		if (!err)
			res = copy_file_range(in->fd, &off_in, out->fd, &off_out, len,
					      (unsigned)flags);
		err = res == -1 ? (err ? err : errno) : 0;
		ws_creds_end(&creds);
		errno = err;
	}
	ws_self_end(out->node, out->fd, NULL);
	if (killed == 1)
		kio_inval_attr(ino_out);
	if (res == -1) {
		ws_reply_err(req, errno);
		return;
	}
	fuse_reply_write(req, (size_t)res);
}

void ws_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	off_t res;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	res = lseek(h->fd, off, whence);
	if (res == -1) {
		ws_reply_err(req, errno);
		return;
	}
	fuse_reply_lseek(req, res);
}
