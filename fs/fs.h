/* The FUSE adapter: shared state of fs/ (session, options, the ops table). */
#ifndef SFS_FS_H
#define SFS_FS_H

#include "workspace.h"
#include "../providers/err.h"

#include <stdbool.h>

struct sfs_fs_options {
	double dir_attr_timeout; /* synthetic directories */
	double entry_timeout;	 /* synthetic entries: long, invalidated on change */
	mode_t runs_mode;	 /* read bits of a run's cmd, journal, status, wait */
	struct ws_options ws;
};

extern struct sfs_fs_options sfs_fs_opts;
extern struct fuse_session *sfs_session;
extern const struct fuse_lowlevel_ops sfs_ops;

/* Fills e for entry i of a directory listing (plus: with attributes and a
 * lookup, as readdirplus hands out) and returns its name. */
typedef const char *(*sfs_dirent_fn)(void *ctx, size_t i, bool plus, struct fuse_entry_param *e);
/* Replies to a readdir(plus) of a directory of n entries from offset off:
 * ".", "..", then the entries (fs/ops.c). */
void sfs_reply_dir(fuse_req_t req, size_t size, off_t off, size_t n, fuse_ino_t self,
		   fuse_ino_t parent, bool plus, sfs_dirent_fn entry, void *ctx);

/* Installs the journal and tree hooks that reach back into fs/. */
int sfs_fs_start(struct sfs_err *err);
void sfs_fs_stop(void);

/* Kernel cache invalidations, sent from a worker thread of their own so a
 * FUSE handler never waits on a lock the kernel holds for it. */
int notify_start(void);
void notify_stop(void);
void notify_inval_entry(fuse_ino_t parent, const char *name);
void notify_inval_inode(fuse_ino_t ino);
void notify_ws_sandbox(uint32_t serial);
/* Waits (at most timeout_ms) until the entry invalidations queued before
 * the call have been sent.  A ctl write that removed a name from the tree
 * (forget, destroy) returns only then, so the name is gone when it returns.
 * Call it holding no lock: the kernel takes the parent's lock to send. */
void notify_wait_entries(int timeout_ms);
/* The same for every invalidation queued before the call. */
void notify_wait_all(int timeout_ms);

#endif
