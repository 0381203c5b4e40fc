/*
 * workspace/ for providers whose files are not on this host: a caching layer
 * over the provider's fs_* ops (providers/provider.h), with close-to-open
 * consistency like NFS (SPEC §5), modelled on sshfs's cache.c.
 *
 * Nodes are path-keyed (per sandbox) with ids from their own 48-bit space
 * (fs/ino.h, kind SFS_K_RWS).  Attributes and listings are cached for a
 * short configurable time (remote.attr_timeout); file contents are fetched
 * on open into a local cache file under the sandbox's state dir and written
 * back on flush/fsync/close; a failed write-back fails close/fsync with EIO,
 * keeps the dirty data and retries later, so nothing is lost.  Caches for a
 * sandbox are dropped when one of its runs starts or ends.
 *
 * The handlers have the fuse_lowlevel_ops signatures; fs/ops.c calls
 * rws_ops.X whenever the inode (or parent) is a remote workspace node.
 */
#ifndef SFS_REMOTE_H
#define SFS_REMOTE_H

#include "../workspace.h"

extern const struct fuse_lowlevel_ops rws_ops;

int rws_init(void);
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
