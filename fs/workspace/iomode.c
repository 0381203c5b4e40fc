/*
 * How the kernel does each open file's I/O: through the daemon (cached in
 * the kernel's page cache, the watcher keeping it coherent) or, under FUSE
 * passthrough, on the host file itself (fs/kernel_io.c).
 *
 * The kernel keeps one mode per inode: while a file of it is open cached,
 * a passthrough open fails with EIO, and the other way round; all its
 * passthrough files must share one backing file.  So a node counts its open
 * files of each mode, and its backing id lives from the first passthrough
 * open to the last release.  The kernel forgets a file's mode when it is
 * closed, before it sends the release, so these counts never fall short of
 * the kernel's and a choice made on them never conflicts.  A file that must
 * not be passthrough while others of its node are (a set-user-ID file) opens
 * passthrough with direct_io, which the kernel lets override it: its reads
 * and writes come to the daemon.
 *
 * An open that may write starts passthrough, and so does a read-only open
 * of a big file; a read-only open of a small one is served from the
 * kernel's page cache, kept across opens (keep_cache), which beats
 * passthrough's per-open cost (registering the backing file, the kernel's
 * open of it: some 10 us) for the small files most reads are of.  A
 * read-only open beside passthrough files is passthrough too.
 *
 * Pages the kernel cached before or during a passthrough era are stale
 * after it: passthrough writes go past them, and readahead() or
 * POSIX_FADV_WILLNEED on a passthrough file still fill the inode's page
 * cache through the daemon.  So once a node's last passthrough file is
 * released, its cached opens carry no keep_cache (the kernel drops the
 * inode's pages as it opens one) until one of them is released.
 *
 * A write through passthrough is done with the credentials the registering
 * thread had, so backing files are registered as the opener
 * (ws_io_creds_begin): its fsuid/fsgid, no CAP_SYS_RESOURCE unless it is
 * root (a user of an allow_other mount must not fill root's reserved
 * blocks), and never CAP_FSETID, which keeps set-user-ID and set-group-ID
 * where a caller without it loses them.  So a file with those bits never
 * starts passthrough, and a bit set while the file is open passthrough
 * goes at its next write, whoever writes.  The kernel takes one backing
 * file per inode: a later opener shares it when that gives it no more than
 * its own (the backing is not root's, or the opener is root); any other
 * open is direct I/O, through the daemon, which writes as that caller.
 */
#include "fs/workspace/internal.h"
#include "fs/kernel_io.h"
#include "providers/err.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

/* the size from which a read-only open goes passthrough */
#define WS_IO_PASS_READ_MIN ((off_t)1 << 20)

static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER;
static bool refused; /* the kernel refused a backing file for want of a capability */

/* Whether fd's file may be passthrough at all, and its size. */
static bool ws_io_may_pass(const struct ws_node *n, int fd, off_t *size)
{
	struct stat st;

	if (!kio_passthrough() || !S_ISREG(n->type) ||
	    __atomic_load_n(&refused, __ATOMIC_RELAXED) || fstat(fd, &st) == -1)
		return false;
	*size = st.st_size;
	/* any set-group-ID: whether a write clears it depends on the writer */
	return !(st.st_mode & (S_ISUID | S_ISGID));
}

void ws_io_begin(fuse_req_t req, struct ws_file *h, int fd, struct fuse_file_info *fi)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	struct ws_creds creds;
	struct ws_node *n = h->node;
	bool writes = (fi->flags & O_ACCMODE) != O_RDONLY;
	off_t size = 0;
	/* before the lock, which every open of the workspace takes */
	bool may = ws_io_may_pass(n, fd, &size);
	int id;

	h->backing_id = 0;
	pthread_mutex_lock(&io_lock);
	if (n->pt_files > 0) {
		h->backing_id = n->pt_id;
		fi->direct_io = !may || (n->pt_uid == 0 && uid != 0);
	} else if (n->cached_files == 0 && may && (writes || size >= WS_IO_PASS_READ_MIN)) {
		/* an ioctl that never waits on the daemon: safe under the lock */
		id = ws_io_creds_begin(req, true, &creds);
		/* a failed switch: no passthrough for this open, not refused */
		id = id ? 0 : kio_backing_open(fd);
		ws_creds_end(&creds);
		if (id > 0) {
			n->pt_id = id;
			n->pt_uid = uid;
			h->backing_id = id;
		} else if (id == -EPERM) {
			__atomic_store_n(&refused, true, __ATOMIC_RELAXED);
			sfs_log(SFS_LOG_INFO, "workspace: no passthrough: backing files need "
					      "CAP_SYS_ADMIN");
		}
	}
	if (h->backing_id)
		n->pt_files++;
	else
		n->cached_files++;
	/* the kernel refuses keep_cache beside passthrough (no pages to keep) */
	if (h->backing_id || n->pt_stale)
		fi->keep_cache = 0;
	pthread_mutex_unlock(&io_lock);
}

void ws_io_end(struct ws_file *h)
{
	struct ws_node *n = h->node;
	int close_id = 0;

	pthread_mutex_lock(&io_lock);
	if (h->backing_id) {
		if (--n->pt_files == 0) {
			close_id = n->pt_id;
			n->pt_id = 0;
			n->pt_stale = true;
		}
	} else {
		n->cached_files--;
		/* its open dropped the stale pages (every cached open since the
		 * last passthrough file went did) */
		n->pt_stale = false;
	}
	pthread_mutex_unlock(&io_lock);
	/* After the kernel's last passthrough file of the node is gone: a new
	 * open meanwhile registers a backing file of its own. */
	if (close_id)
		kio_backing_close(close_id);
}
