/*
 * The remote workspace cache: workspace/ for providers whose files are not on
 * this host, as a layer over the provider's fs_* ops (providers/provider.h)
 * with no FUSE in it, in the manner of sshfs's cache.c.  fs/remote/ adapts it
 * to FUSE; tests/unit/test_remote_cache.c drives it with a fake provider.
 *
 * Close-to-open consistency like NFS (SPEC §5): nodes are keyed by (sandbox
 * serial, path) and numbered from a 48-bit counter.  Attributes and listings
 * are cached for opt.ttl seconds, and only if the sandbox's generation
 * (bumped when one of its runs starts or ends) and write counter (bumped by
 * every mutation through us) did not move while they were fetched; the
 * attributes a chmod or write-back through us set are not replaced by a
 * listing or stat asked for before it (attrs.c: attr_wctr).  File
 * contents live in a cache file, SANDBOX_STATEDIR/rcache/ID, fetched on open
 * unless the remote size and mtime still match, and written back whole on
 * flush/fsync/close when dirty.  A failed write-back returns -EIO, keeps the
 * data (and an ID.pending file naming the remote path, so a later daemon
 * saves it: rc_recover_sandbox), and the retry thread tries again every
 * opt.retry_interval seconds until it goes through.
 *
 * Every function returns 0 or a negative errno; failed provider calls are
 * logged with the provider's message.
 */
#ifndef SFS_REMOTE_CACHE_H
#define SFS_REMOTE_CACHE_H

#include "../../providers/provider.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct rc_node;	   /* a cached remote file or directory */
struct rc_file;	   /* an open file (what a file handle points at) */
struct rc_listing; /* a directory's entries as of opendir */

struct rc_hooks {
	/* The sandbox with this serial, referenced, if its workspace is remote;
	 * NULL if it is gone or not remote. */
	struct sfs_sandbox *(*sandbox_get)(uint32_t serial);
	void (*sandbox_put)(struct sfs_sandbox *sb);
	/* Optional: whatever the caller cached of node `id` is stale. */
	void (*node_stale)(uint64_t id);
};

struct rc_options {
	double ttl; /* attributes and listings, seconds (> 0) */
	/* attributes and listings fetched during a busy spell (operations on
	 * the sandbox's workspace with no pause of ttl) stay good while the
	 * spell lasts, up to this many seconds after their fetch (0: off) */
	double busy_ttl;
	double retry_interval; /* between write-back attempts, seconds */
};

/* Lifetime: init (no threads), recover each remote sandbox, start the retry
 * thread only once the process will not fork again (after daemonizing),
 * stop it, shut down (dirty data stays on disk for the next daemon). */
int rc_init(const struct rc_options *opt, const struct rc_hooks *hooks);
void rc_recover_sandbox(struct sfs_sandbox *sb);
int rc_start(void);
void rc_stop(void);
void rc_shutdown(void);

/* A pinned node and its referenced sandbox: every operation on an existing
 * node goes through one (passthrough_ll's lo_inode(req, ino) for us). */
struct rc_ref {
	struct rc_node *n;
	struct sfs_sandbox *sb;
};
int rc_ref_get(uint64_t id, struct rc_ref *ref); /* -ENOENT if unknown or gone */
void rc_ref_put(struct rc_ref *ref);
uint64_t rc_ref_id(const struct rc_ref *ref);
char *rc_ref_path(const struct rc_ref *ref); /* malloc'd, "" for the root */
double rc_ref_ttl(const struct rc_ref *ref); /* how long its attributes may be kept */

/* A node handed out with one lookup counted (rc_forget gives it back); st as
 * the user should see it (an open or unsaved file's local size and mtime). */
struct rc_entry {
	uint64_t id;
	struct sfs_rstat st; /* st.link is malloc'd: rc_entry_free */
	char *path;	     /* symlinks only (to show the target): malloc'd */
	double ttl;
};
void rc_entry_free(struct rc_entry *e);

int rc_lookup_root(uint32_t serial, struct rc_entry *e);
int rc_lookup(struct rc_ref *dir, const char *name, struct rc_entry *e);
void rc_forget(uint64_t id, uint64_t nlookup);
/* Fresh attributes; a file gone remotely but open here answers from here. */
int rc_getattr(struct rc_ref *ref, struct sfs_rstat *st);
/* The raw symlink target (malloc'd), or -EINVAL if not a symlink. */
int rc_readlink(struct rc_ref *ref, char **target);

struct rc_setattr {
	bool set_mode, set_size, set_mtime;
	mode_t mode;
	off_t size;
	int64_t mtime;
};
int rc_setattr(struct rc_ref *ref, const struct rc_setattr *sa, struct sfs_rstat *st);

/* Contents.  open fetches unless the cache file still matches (then
 * *keep_cache says the caller's cached pages are good). */
int rc_open(struct rc_ref *ref, int flags, struct rc_file **f, bool *keep_cache);
int rc_file_fd(const struct rc_file *f); /* the cache file: read and write it */
void rc_file_written(struct rc_file *f); /* after a write to rc_file_fd */
/* Writes back if dirty (flush: only through a writable handle). -EIO keeps
 * the data dirty and schedules a retry. */
int rc_flush(struct rc_file *f);
int rc_fsync(struct rc_file *f);
void rc_release(struct rc_file *f);

/* Namespace changes, made remotely at once; but a file rc_create makes is
 * made remotely by its first write-back (names.c). */
int rc_create(struct rc_ref *dir, const char *name, mode_t mode, int flags, struct rc_entry *e,
	      struct rc_file **f);
int rc_mknod(struct rc_ref *dir, const char *name, mode_t mode, struct rc_entry *e);
int rc_mkdir(struct rc_ref *dir, const char *name, mode_t mode, struct rc_entry *e);
int rc_symlink(struct rc_ref *dir, const char *name, const char *target, struct rc_entry *e);
int rc_remove(struct rc_ref *dir, const char *name, bool is_dir);
int rc_rename(struct rc_ref *dir, const char *name, struct rc_ref *newdir, const char *newname,
	      bool noreplace);

/* Directory walks see the listing as it was at opendir. */
int rc_opendir(struct rc_ref *dir, struct rc_listing **l);
size_t rc_listing_count(const struct rc_listing *l);
const char *rc_listing_name(const struct rc_listing *l, size_t i);
mode_t rc_listing_mode(const struct rc_listing *l, size_t i);
/* Entry i as a lookup would give it (readdirplus). */
int rc_listing_entry(struct rc_ref *dir, const struct rc_listing *l, size_t i, struct rc_entry *e);
void rc_listing_free(struct rc_listing *l);

/* A run of the sandbox started or ended: drop attributes and listings (clean
 * contents are revalidated on the next open); node_stale for each node. */
void rc_invalidate_sandbox(uint32_t serial);
void rc_sandbox_gone(uint32_t serial);
/* Provider calls made for a sandbox (status shows it; tests count with it). */
unsigned long rc_calls(uint32_t serial);
/* Files of a sandbox with data the remote does not have yet. */
size_t rc_dirty_count(uint32_t serial);

#endif
