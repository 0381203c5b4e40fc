/*
 * Workspace snapshots (SPEC §10): one content-addressed object store for
 * every sandbox, a bare libgit2 repository at STATE/git/store.
 *
 * A snapshot is a commit whose tree is the workspace: regular files are
 * blobs (100644, or 100755 when the owner may execute), symlinks are links
 * (120000, the target as the blob), directories are trees, and an empty
 * directory is an entry pointing at git's empty tree (4b825dc…: git's
 * object model holds it, git's index and checkout just never make one).
 * `.git` entries are never recorded, at any depth (git itself never tracks
 * them, and a diff that touched .git/index could not be applied).  Special
 * files (fifos, sockets, devices) are skipped and counted.  Permission bits
 * a git mode cannot say (0600, 0775, set-gid …) go into a "modes" blob:
 * "OCTAL PATH\0" for every path whose bits differ from what its git mode
 * implies (0644/0755 files, 0755 directories); the commit message names
 * that blob and carries the counts, as trailers:
 *
 *	snapshot LABEL
 *
 *	Sandboxfs-Sandbox: KEY
 *	Sandboxfs-Files: 12
 *	Sandboxfs-Bytes: 34567
 *	Sandboxfs-Skipped: 0
 *	Sandboxfs-Modes: <blob id, or "none">
 *
 * The commit is kept alive by refs/sandboxfs/KEY/ID.  A per-sandbox stat
 * cache (path, size, mtime, ctime, inode, mode -> blob id, like git's index)
 * lets a snapshot or a diff skip reading files that did not change.
 *
 * No FUSE and no sandbox records here (linked into sfs_core, unit-tested in
 * tests/unit/test_snapshots.c); ctl/wsnap.c drives it for sandboxes.
 * Every function opens the store itself and may run on any thread, except
 * the browse functions, which share one handle under a lock.
 */
#ifndef SFS_SNAPSHOTS_H
#define SFS_SNAPSHOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../providers/err.h"
#include "../../providers/strbuf.h"

struct snap_stats {
	uint64_t files;	  /* regular files and symlinks recorded */
	uint64_t bytes;	  /* their sizes */
	uint64_t skipped; /* special files (and names a tree cannot hold) */
	uint64_t hashed;  /* files read this time (the rest came from the stat cache) */
};

struct snap_info {
	char label[256];
	char key[40];
	char commit[41];
	int64_t time;
	struct snap_stats st;
};

/* Where the store lives: STATE/git/store, made on first use.  Set once at
 * startup (or by a test) before any other call. */
int snap_store_init(const char *statedir, struct sfs_err *err);
void snap_store_shutdown(void);

/*
 * Records the tree under rootfd (an O_PATH or O_RDONLY directory fd) as a
 * commit and points refs/sandboxfs/KEY/ID at it.  cache is the stat cache
 * file (read if present, rewritten after).  commit gets the commit id.
 */
int snap_take(int rootfd, const char *cache, const char *key, const char *id, const char *label,
	      int64_t when, char commit[41], struct snap_stats *st, struct sfs_err *err);
/* Drops refs/sandboxfs/KEY/ID (no error when absent); id NULL drops all of
 * KEY's.  How many refs went (>= 0), or -errno. */
int snap_forget(const char *key, const char *id, struct sfs_err *err);
/* Deletes the store's objects that no ref reaches (after refs were
 * dropped), and the stat caches matching cache_glob (may be NULL) that
 * name one of them.  Waits for writers in progress; -EIO on a store that
 * cannot be read (nothing is deleted then). */
struct snap_gc_stats {
	uint64_t kept, removed, removed_bytes, caches_dropped;
};
int snap_gc(const char *cache_glob, struct snap_gc_stats *st, struct sfs_err *err);
/* Reads a snapshot commit's trailers. */
int snap_info_read(const char *commit, struct snap_info *info, struct sfs_err *err);

/* Appends to out a git-style unified diff of the live tree under rootfd
 * against the snapshot (a/ is the snapshot, b/ the workspace): what
 * `git apply` replays onto the snapshot's tree.  Binary files are noted
 * ("Binary files … differ"), not dumped. */
int snap_diff(const char *commit, int rootfd, const char *cache, struct sfs_buf *out,
	      struct sfs_err *err);
/* The same diff for a workspace whose changes are known without hashing
 * (a copy-on-write overlay knows its upper layer): only the listed paths
 * (relative, no leading '/'; a directory stands for everything below it)
 * are compared between oldfd (the unchanged base) and newfd (the live
 * workspace); nothing else is read. */
int snap_diff_paths(int oldfd, int newfd, const char *const *paths, size_t n, struct sfs_buf *out,
		    struct sfs_err *err);

struct snap_restore_stats {
	uint64_t written, removed, unchanged, modes;
};
/* Makes the tree under rootfd equal to the snapshot: files whose content
 * and mode already match are not touched (inode and mtime stay); others are
 * written (temp file + rename), modes fixed, extra entries removed.  `.git`
 * entries and special files (never recorded) are left alone. */
/* Told each change restore made, in order (a directory before what it
 * holds): 'w' written or made, 'r' removed (a whole tree), 'm' mode.
 * The tree is written as as_uid:as_gid (providers/untrusted/creds.h: the
 * kernel refuses what they could not do), or as the daemon when as_uid
 * is 0. */
typedef void (*snap_change_fn)(void *ctx, char what, const char *rel);
int snap_restore(const char *commit, int rootfd, const char *cache, struct snap_restore_stats *st,
		 snap_change_fn changed, void *ctx, uid_t as_uid, gid_t as_gid,
		 struct sfs_err *err);

/* Browsing a snapshot's tree (snapshots/ID/tree/). */
struct snap_node {
	char oid[41];
	mode_t mode; /* S_IFREG/S_IFDIR/S_IFLNK and the recorded permission bits */
	uint64_t size;
};
/* The node at path ("" is the root) of the commit's tree: 0 or -ENOENT. */
int snap_lookup(const char *commit, const char *path, struct snap_node *node);
struct snap_dirent {
	char *name;
	struct snap_node node;
};
/* The entries of the directory at path; *v malloc'd (free with
 * snap_dirents_free). */
int snap_list(const char *commit, const char *path, struct snap_dirent **v, size_t *n);
void snap_dirents_free(struct snap_dirent *v, size_t n);
/* A blob's bytes (malloc'd). */
int snap_blob(const char *oid, char **data, size_t *len);

#endif
