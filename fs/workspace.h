/*
 * workspace/: an fd-based passthrough over a host directory (the local
 * provider's workspace, or a container's merged overlay dir).
 *
 * Modelled on libfuse's passthrough_ll: every node holds an
 * O_PATH|O_NOFOLLOW fd and the kernel's lookup count; every path component is
 * resolved by openat() relative to its parent's fd, so no symlink planted in a
 * sandbox is ever followed by the daemon, and nothing outside the workspace
 * root is reachable.  Node ids are a monotonic 48-bit counter (fs/ino.h,
 * kind SFS_K_WS); hard links map to one node per (sandbox, st_dev, st_ino).
 *
 * The handlers have exactly the fuse_lowlevel_ops signatures: fs/ops.c calls
 * ws_ops.X whenever the inode (or parent) is a workspace node.
 */
#ifndef SFS_WORKSPACE_H
#define SFS_WORKSPACE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

struct ws_options {
	double attr_timeout; /* seconds; never exactly 0 */
	double entry_timeout;
	bool writeback; /* ask for FUSE_CAP_WRITEBACK_CACHE */
	bool keep_cache;
};

int ws_init(const struct ws_options *opt);
void ws_set_session(struct fuse_session *se); /* for notify_inval_* */
/* Starts (after daemonizing) and stops (before the session is destroyed) the
 * watcher thread that pushes changes made behind the kernel's back (sandbox
 * processes, host programs) into its caches, so long TTLs stay coherent.
 * Without inotify the mount still works, with TTLs capped at 1 s. */
int ws_start(void);
void ws_stop(void);
void ws_shutdown(void); /* stops the watcher if needed, closes every fd */

/* The handlers for workspace inodes (lookup, forget, getattr, setattr,
 * readlink, mknod, mkdir, unlink, rmdir, symlink, rename, link, open, read,
 * write_buf, flush, release, fsync, opendir, readdir, readdirplus,
 * releasedir, fsyncdir, statfs, setxattr, getxattr, listxattr, removexattr,
 * create, flock, fallocate, copy_file_range, lseek, forget_multi). */
extern const struct fuse_lowlevel_ops ws_ops;

/* Called in init: adds the capabilities the workspace wants. */
void ws_conn_init(struct fuse_conn_info *conn);

/*
 * Replies to LOOKUP of "workspace" inside sandbox `serial`: root_fd is an
 * O_PATH|O_DIRECTORY fd of the workspace root (ownership passes to this
 * module, closed on error too).  rewrite_symlinks: the sandbox's filesystem
 * is not the host's, so readlink shows targets rewritten per SPEC §5
 * (fs/symlink_rewrite.h; `-o symlinks=raw` overrides); root_in_sandbox is
 * the workspace root's path inside the sandbox (sb->workspace), which
 * absolute targets are resolved against.
 */
void ws_lookup_root(fuse_req_t req, uint32_t serial, int root_fd, bool rewrite_symlinks,
		    const char *root_in_sandbox);
/* getattr of the workspace root without a lookup (for readdirplus of the sandbox dir). */
int ws_root_stat(int root_fd, struct stat *st);

/* A sandbox was destroyed: its nodes' fds are closed, their watches removed,
 * and later ops get ENOENT (the caller invalidates the sandbox's entry). */
void ws_sandbox_gone(uint32_t serial);
/* A sandbox's filesystem was replaced (restore, start): its nodes are retired
 * like ws_sandbox_gone's, but the next lookup of workspace/ makes new ones. */
void ws_sandbox_reset(uint32_t serial);

/* A run started or ended: the kernel's caches for this sandbox's workspace are
 * dropped (fuse_lowlevel_notify_inval_inode on every known node), a safety
 * net under the watcher.  Safe to call from any non-FUSE-worker thread. */
void ws_invalidate_sandbox(uint32_t serial);

#endif
