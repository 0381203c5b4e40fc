/*
 * The FUSE side of SANDBOX/audit (ctl/audit.h): fs/ops.c brackets each
 * mutating workspace operation with fs_audit_begin/fs_audit_end.  The
 * sandbox and the path are found in fs_audit_end, after the layer replied,
 * so the caller does not wait for them (the directory of a name, or a node
 * just changed, is still known to the layer then: the kernel forgets a node
 * only when it evicts the inode, never while a request on it is going).  The result is what the
 * layer replied: the layers report their error replies through fs_audit_note_reply, no error reply
 * means success; replies are made on the calling thread, so it is a
 * thread-local.
 */
#ifndef SFS_FS_AUDIT_H
#define SFS_FS_AUDIT_H

#include "workspace.h" /* FUSE_USE_VERSION, fuse_lowlevel.h */

#include <stdbool.h>

struct sfs_sandbox;

struct fs_audit {
	bool on;
	fuse_ino_t ino; /* the node, or the directory of name */
	const char *name;
	const char *op;
	fuse_ino_t to_ino; /* fs_audit_to: the destination's directory and name */
	const char *to_name;
	const char *detail;
	/* rename and rmdir may move or remove directories: their own
	 * directories' paths are found before the change (fs_audit_call; the
	 * change cannot alter them), and ws_where's cache of directory paths
	 * is not used while one is going (ws_where_moves_begin) */
	bool moves, resolved;
	struct sfs_sandbox *sb, *tsb;
	bool put, put_to;
	char dir[4096], to_dir[4096]; /* not cleared: written before read */
};

/* Reads the -o audit switch once and, when on, readies ws_where (before
 * the first request, after daemonizing); fs_audit_stop undoes it. */
void fs_audit_init(void);
void fs_audit_stop(void);
/* op on ino (or on NAME in the directory ino, when name is not NULL). */
void fs_audit_begin(struct fs_audit *a, fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *op);
/* The line's detail: "-> PATH" (rename, link) or free text (kept as a
 * pointer: it must live until fs_audit_end). */
void fs_audit_to(struct fs_audit *a, fuse_ino_t ino, const char *name);
void fs_audit_detail(struct fs_audit *a, const char *text);
/* Right before the layer is called. */
void fs_audit_call(struct fs_audit *a);
void fs_audit_end(struct fs_audit *a);
/* Called by the layers as they reply an error (0 is success). */
void fs_audit_note_reply(int err);

/* Which sandbox a workspace node is in and its path ("workspace/a/b"):
 * host files (fs/workspace/where.c) and remote ones (fs/remote). */
int ws_where(fuse_ino_t ino, unsigned *serial, char *path, size_t len);
void ws_where_start(void);
void ws_where_stop(void);
/* A rename or rmdir through the mount starts and ends (the cache of
 * directory paths is not used meanwhile, and is stale after); a directory
 * moved or removed outside it (the workspace watcher). */
void ws_where_moves_begin(void);
void ws_where_moves_end(void);
void ws_where_moved(void);
int rws_where(fuse_ino_t ino, struct sfs_sandbox **sb, char *path, size_t len);

#endif
