/* The workspace module's interface (fs/workspace.h): init, watcher start and
 * shutdown order, the capabilities it wants, the root lookup, the ws_ops table. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"
#include "providers/config.h"
#include "providers/options.h"
#include "providers/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define WS_MIN_TIMEOUT 0.001 /* a TTL of exactly 0 makes the kernel re-look-up every entry */

/* Node fds are bounded by a budget below the limit (handles.c): the
 * higher the limit, the fewer reopens by handle. */
static void ws_raise_nofile(void)
{
	struct rlimit rl;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (ws.root && (f = fopen("/proc/sys/fs/nr_open", "re"))) {
		unsigned long long nr_open;

		if (fscanf(f, "%llu", &nr_open) == 1 && nr_open > rl.rlim_max) {
			struct rlimit big = {.rlim_cur = nr_open, .rlim_max = nr_open};

			if (setrlimit(RLIMIT_NOFILE, &big) == 0) {
				fclose(f);
				return;
			}
		}
		fclose(f);
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		sfs_log(SFS_LOG_WARN, "workspace: raising RLIMIT_NOFILE: %s", strerror(errno));
}

int ws_init(const struct ws_options *opt)
{
	int err = 0;

	ws.opt = *opt;
	if (!(ws.opt.attr_timeout >= WS_MIN_TIMEOUT))
		ws.opt.attr_timeout = WS_MIN_TIMEOUT;
	if (!(ws.opt.entry_timeout >= WS_MIN_TIMEOUT))
		ws.opt.entry_timeout = WS_MIN_TIMEOUT;
	for (int w = 0; w < WS_NMAPS && !err; w++)
		err = ws_map_init(&ws.map[w]);
	if (err) {
		for (int w = 0; w < WS_NMAPS; w++) {
			free(ws.map[w].buckets);
			ws.map[w].buckets = NULL;
		}
		return err;
	}
	ws.next_id = 1;
	ws.fsuid = geteuid();
	ws.fsgid = getegid();
	ws.root = ws.fsuid == 0;
	ws.symlinks_raw = strcmp(sfs_opt_get("symlinks"), "raw") == 0;
	ws_raise_nofile();
	ws_fds_init();
	return 0;
}

void ws_set_session(struct fuse_session *se)
{
	ws.se = se;
}

void ws_shutdown(void)
{
	ws_stop();
	pthread_mutex_lock(&ws.lock);
	for (size_t i = 0; i < ws.map[WS_BY_ID].nbuckets; i++) {
		struct ws_node *n = ws.map[WS_BY_ID].buckets[i], *next;

		for (; n; n = next) {
			next = n->next[WS_BY_ID];
			if (n->fd >= 0)
				close(n->fd);
			free(n->fh);
			free(n);
		}
	}
	for (int w = 0; w < WS_NMAPS; w++) {
		free(ws.map[w].buckets);
		ws.map[w] = (struct ws_map){0};
	}
	ws_fds_shutdown_locked();
	free(ws.gone_serials);
	ws.gone_serials = NULL;
	ws.ngone = ws.gone_cap = 0;
	for (size_t i = 0; i < ws.nsandboxes; i++)
		free(ws.sandboxes[i].root_path);
	free(ws.sandboxes);
	ws.sandboxes = NULL;
	ws.nsandboxes = ws.sandboxes_cap = 0;
	pthread_mutex_unlock(&ws.lock);
}

void ws_conn_init(struct fuse_conn_info *conn)
{
	/* Splice, but never SPLICE_F_MOVE (FUSE_CAP_SPLICE_MOVE): a read's
	 * pages come from the host file's page cache, shared with every other
	 * user of that file, and the kernel cannot steal a page someone else
	 * may hold; it refuses, falls back to a copy, and logs "fuse: trying
	 * to steal weird page" with a page dump each time (thousands a second
	 * while a run does RWF_DONTCACHE I/O on the file). */
	unsigned want = FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE;

	if (ws.opt.writeback)
		want |= FUSE_CAP_WRITEBACK_CACHE;
	if (ws.watching) {
		/* The watcher invalidates pages of files changed behind our back.
		 * Left to itself the kernel would drop a file's pages whenever a
		 * fresh getattr shows a new mtime, that is after every write
		 * through the mount (it does not track mtime itself without
		 * writeback), and a read right after a write would go to the
		 * daemon again. */
		/* (Not FUSE_CAP_CACHE_SYMLINKS: a rewritten target depends on the
		 * link's depth below the root, which a move of a parent changes
		 * without any event on the link.) */
		want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
		ws.explicit_inval = (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA) != 0;
	}
	/* POSIX ACLs: the kernel reads them (getxattr system.posix_acl_*),
	 * caches them and enforces them; it drops its cached mode and ACLs
	 * when one is set through the mount, and the watcher's inval_inode
	 * drops both when one is set behind it.  This implies
	 * default_permissions on every mount: without allow_other only the
	 * owner can reach it, and the kernel's checks for the owner are the
	 * host's (root passes them as on the host).  DONT_MASK leaves the
	 * caller's umask to the host filesystem, which ignores it under a
	 * default ACL (creds.c). */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
		want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		ws.posix_acl = ws.dont_mask = true;
	}
	conn->want &= ~FUSE_CAP_SPLICE_MOVE;
	conn->want |= want & conn->capable;
}

void ws_lookup_root(fuse_req_t req, uint32_t serial, int root_fd, bool rewrite_symlinks,
		    const char *root_in_sandbox)
{
	struct fuse_entry_param e;
	int err;

	ws_entry_init(&e);
	if (fcntl(root_fd, F_SETFD, FD_CLOEXEC) == -1 ||
	    fstatat(root_fd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		err = errno;
		close(root_fd);
		ws_reply_err(req, err);
		return;
	}
	if (!S_ISDIR(e.attr.st_mode)) {
		close(root_fd);
		ws_reply_err(req, ENOTDIR);
		return;
	}
	err = ws_note_sandbox(serial, &e.attr, rewrite_symlinks, root_in_sandbox);
	if (err) {
		close(root_fd);
		ws_reply_err(req, err);
		return;
	}
	/* already open: counted, even past the budget (one per sandbox) */
	(void)ws_fd_reserve(true);
	err = ws_adopt(serial, NULL, root_fd, &e.attr, &e.ino, NULL);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	ws_reply_entry(req, &e);
}

int ws_root_stat(int root_fd, struct stat *st)
{
	return fstatat(root_fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1 ? -errno : 0;
}

const struct fuse_lowlevel_ops ws_ops = {
    .lookup = ws_lookup,
    .forget = ws_forget,
    .forget_multi = ws_forget_multi,
    .getattr = ws_getattr,
    .setattr = ws_setattr,
    .readlink = ws_readlink,
    .mknod = ws_mknod,
    .mkdir = ws_mkdir,
    .unlink = ws_unlink,
    .rmdir = ws_rmdir,
    .symlink = ws_symlink,
    .rename = ws_rename,
    .link = ws_link,
    .open = ws_open,
    .read = ws_read,
    .write_buf = ws_write_buf,
    .flush = ws_flush,
    .release = ws_release,
    .fsync = ws_fsync,
    .opendir = ws_opendir,
    .readdir = ws_readdir,
    .readdirplus = ws_readdirplus,
    .releasedir = ws_releasedir,
    .fsyncdir = ws_fsyncdir,
    .statfs = ws_statfs,
    .setxattr = ws_setxattr,
    .getxattr = ws_getxattr,
    .listxattr = ws_listxattr,
    .removexattr = ws_removexattr,
    .create = ws_create,
    .flock = ws_flock,
    .fallocate = ws_fallocate,
    .copy_file_range = ws_copy_file_range,
    .lseek = ws_lseek,
};
