/*
 * The FUSE side of SANDBOX/audit (ctl/audit.h): fs/ops.c brackets each
 * mutating workspace operation with fs_audit_begin/fs_audit_end, which find
 * the sandbox and the path below it before the layer runs and write the line
 * with the result the layer replied (the layers report their error replies
 * through fs_audit_note_reply; no error reply means success).  Replies are
 * made on the calling thread, so the result is a thread-local.
 */
#ifndef SFS_FS_AUDIT_H
#define SFS_FS_AUDIT_H

#include "workspace.h" /* FUSE_USE_VERSION, fuse_lowlevel.h */

#include <stdbool.h>

struct sfs_sandbox;

struct fs_audit {
	struct sfs_sandbox *sb; /* NULL: nothing to write */
	bool put;		/* sb was taken with tree_get_serial */
	const char *op;
	char path[4200];
	char detail[4300];
};

/* Reads the -o audit switch once (before the first request). */
void fs_audit_init(void);
/* op on ino (or on NAME in the directory ino, when name is not NULL). */
void fs_audit_begin(struct fs_audit *a, fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *op);
/* The line's detail: "-> PATH" (rename, link) or free text. */
void fs_audit_to(struct fs_audit *a, fuse_ino_t ino, const char *name);
void fs_audit_detail(struct fs_audit *a, const char *text);
void fs_audit_end(struct fs_audit *a);
/* Called by the layers as they reply an error (0 is success). */
void fs_audit_note_reply(int err);

/* Which sandbox a workspace node is in and its path ("workspace/a/b"):
 * host files (fs/workspace/where.c) and remote ones (fs/remote). */
int ws_where(fuse_ino_t ino, unsigned *serial, char *path, size_t len);
int rws_where(fuse_ino_t ino, struct sfs_sandbox **sb, char *path, size_t len);

#endif
