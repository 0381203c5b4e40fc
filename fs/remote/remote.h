/*
 * workspace/ for providers whose files are not on this host: the FUSE side
 * of the remote workspace cache (fs/cache/remote_cache.h), which holds the
 * node table, TTLs, cache files, write-back and retry.  This layer only
 * translates: inode numbers (fs/ino.h, kind SFS_K_RWS) to cache node ids,
 * cache results to replies, and symlink targets to what SPEC §5 shows.
 *
 * The handlers have the fuse_lowlevel_ops signatures; fs/ops.c calls
 * rws_ops.X whenever the inode (or parent) is a remote workspace node.
 */
#ifndef SFS_REMOTE_H
#define SFS_REMOTE_H

#include "../workspace.h"

extern const struct fuse_lowlevel_ops rws_ops;

/* Reads the options and recovers unsaved files of an earlier daemon: no
 * thread.  rws_start starts the write-back retry thread and must come after
 * fuse_daemonize() (a thread does not survive its fork); rws_stop ends it. */
int rws_init(void);
int rws_start(void);
void rws_stop(void);
void rws_shutdown(void);

/* Replies to LOOKUP of "workspace" inside sandbox `serial`. */
void rws_lookup_root(fuse_req_t req, uint32_t serial);
/* Drop every cached attribute, listing and clean content of a sandbox. */
void rws_invalidate_sandbox(uint32_t serial);
void rws_sandbox_gone(uint32_t serial);
/* One FORGET without a reply (for a forget_multi that mixes layers). */
void rws_forget_one(fuse_ino_t ino, uint64_t nlookup);
/* Debug counter: provider calls made on behalf of FUSE operations (tests
 * assert round trips with it; shown in the sandbox's status). */
unsigned long rws_calls(uint32_t serial);

#endif
