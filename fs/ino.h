/*
 * Inode numbers.  Synthetic nodes need no table: their number packs what
 * they are (Plan 9 acme's QID(w,q) idea):
 *
 *   bits 63..48  kind (enum sfs_kind)
 *   bits 47..24  sandbox serial (never reused while the daemon runs)
 *   bits 23..0   aux: run number, port, snapshot serial, provider index
 *
 * The root is FUSE_ROOT_ID (1).  Workspace nodes are kind SFS_K_WS with a
 * 48-bit id from the workspace node table (fs/workspace/nodes.c), which holds their
 * O_PATH fds and lookup counts.
 */
#ifndef SFS_INO_H
#define SFS_INO_H

#include <stdint.h>

enum sfs_kind {
	SFS_K_ROOT = 0,
	SFS_K_MOUNT_CTL = 1,
	SFS_K_PROVIDERS,
	SFS_K_PROVIDER, /* aux = provider index */
	SFS_K_PROVIDER_CAPS,
	SFS_K_PROVIDER_STATUS,
	SFS_K_SB, /* a sandbox directory */
	SFS_K_SB_CTL,
	SFS_K_SB_CAPS,
	SFS_K_SB_STATUS,
	SFS_K_SB_JOURNAL, /* symlink to runs/N/journal */
	SFS_K_SB_RUNS,
	SFS_K_SB_SNAPSHOTS,
	SFS_K_SB_PORTS,
	SFS_K_SB_AUDIT, /* SANDBOX/audit (ctl/audit.h) */
	SFS_K_RUN,	/* aux = run number */
	SFS_K_RUN_CMD,
	SFS_K_RUN_JOURNAL,
	SFS_K_RUN_STATUS,
	SFS_K_RUN_WAIT,
	SFS_K_RUN_STDIN,
	SFS_K_RUN_CTL,
	SFS_K_SNAPSHOT,	      /* aux = sfs_snapshot.serial (never reused) */
	SFS_K_SNAP_INFO,      /* snapshots/ID/info; aux = the snapshot's serial */
	SFS_K_SNAP_DIFF,      /* snapshots/ID/diff; aux = the snapshot's serial */
	SFS_K_PORT,	      /* aux = port */
	SFS_K_STREE = 0x7ffd, /* snapshots/ID/tree/ node (fs/snaptree.c): low 48 bits its id */
	SFS_K_RWS = 0x7ffe,   /* remote workspace node (fs/cache): low 48 bits are its id */
	SFS_K_WS = 0x7fff,    /* workspace node: low 48 bits are the node id */
};

#define SFS_INO_KIND(ino) ((unsigned)((uint64_t)(ino) >> 48))
#define SFS_INO_SERIAL(ino) ((uint32_t)(((uint64_t)(ino) >> 24) & 0xffffff))
#define SFS_INO_AUX(ino) ((uint32_t)((uint64_t)(ino)&0xffffff))
#define SFS_INO_MAKE(kind, serial, aux)                                                            \
	(((uint64_t)(kind) << 48) | ((uint64_t)((serial)&0xffffff) << 24) |                        \
	 ((uint64_t)(aux)&0xffffff))
#define SFS_INO_WS_ID(ino) ((uint64_t)(ino) & ((1ULL << 48) - 1))
#define SFS_INO_WS(id) (((uint64_t)SFS_K_WS << 48) | ((uint64_t)(id) & ((1ULL << 48) - 1)))
#define SFS_INO_STREE(id) (((uint64_t)SFS_K_STREE << 48) | ((uint64_t)(id) & ((1ULL << 48) - 1)))
#define SFS_INO_RWS(id) (((uint64_t)SFS_K_RWS << 48) | ((uint64_t)(id) & ((1ULL << 48) - 1)))

#endif
