/*
 * Shared inside fs/cache only: the node table and the state every part of
 * the remote workspace cache reads.
 *
 * Lock order: n->io (fetches and write-backs of one node) before R.mu (the
 * tables and every field marked R.mu).  No provider call is made with R.mu
 * held; R.mu is never held across anything that can block for long.
 */
#ifndef SFS_CACHE_INTERNAL_H
#define SFS_CACHE_INTERNAL_H

#include "remote_cache.h"

#include "../../providers/err.h"

#include <pthread.h>

#define RC_NBUCKETS 4096
#define RC_MLOG 64

struct rsb {
	struct rsb *next;
	uint32_t serial;
	unsigned long calls;  /* atomic */
	uint64_t gen;	      /* R.mu: bumped by rc_invalidate_sandbox */
	uint64_t wctr;	      /* R.mu: bumped by every mutation */
	bool gone;	      /* R.mu */
	char *cachedir;	      /* R.mu: set once */
	struct rc_pref *pref; /* R.mu: prefetched files (prefetch.c) */
	size_t pref_bytes;    /* R.mu */
	/* R.mu: the paths of the last RC_MLOG changes made through the mount,
	 * mlog[w % RC_MLOG] for wctr value w (mutations.c) */
	char *mlog[RC_MLOG];
	size_t unborn; /* R.mu: nodes with unborn set */
	/* R.mu: the current busy spell (attrs.c: rc_touch_locked) */
	double spell_start, last_op;
	/* R.mu: write-backs in flight, and directory renames that wait for
	 * them to land and hold new ones off (their paths are about to move:
	 * files.c rc_write_back, names.c rc_rename) */
	int wb_inflight, moving;
};

struct rent {
	char *name;
	struct sfs_rstat st;
};

struct rc_node {
	struct rc_node *id_next, *path_next; /* R.mu */
	uint64_t id;
	uint32_t serial;
	struct rsb *rs;
	char *path;	  /* R.mu; "" is the root */
	bool root;	  /* path is "" for good: readable without R.mu */
	bool unlinked;	  /* R.mu: no longer reachable by its path */
	uint64_t nlookup; /* R.mu */
	int pins;	  /* R.mu: open handles and operations in flight */

	bool attr_ok; /* R.mu */
	struct sfs_rstat st;
	double attr_until;
	double attr_at; /* when they were fetched (-1: not to be kept) */
	uint64_t attr_gen;
	/* R.mu: rs->wctr once a change made here set them (chmod, write-back):
	 * a listing or stat asked for before then does not replace them */
	uint64_t attr_wctr;

	struct rent *ents; /* R.mu: the listing, for directories */
	size_t nents;
	bool dir_ok, listed;
	unsigned stat_lookups; /* R.mu: lookups in it answered by a stat */
	bool listing;	       /* R.mu: a listing of it is being fetched */
	double dir_until;
	double dir_at; /* when it was fetched (-1: not to be kept) */
	uint64_t dir_gen;
	uint64_t dir_wctr; /* R.mu: rs->wctr when it was asked for */

	pthread_mutex_t io;
	int cfd;     /* io to change (R.mu too), either to read: cache file or -1 */
	bool cvalid; /* io: cfd holds the remote file as of (cmtime, csize) */
	int64_t cmtime;
	off_t csize;
	bool dirty; /* io and R.mu (either is enough to read) */
	/* io and R.mu: made by a create here and not yet on the remote (its
	 * first write-back makes it: names.c, rc_create) */
	bool unborn;
	uint64_t wseq;	 /* R.mu: bumped by every local write */
	int nopen;	 /* R.mu */
	double retry_at; /* R.mu */
	bool failed;	 /* R.mu: the last write-back failed */
};

struct rc_file {
	struct rc_node *n;
	bool writable; /* close writes back only through handles that could write */
};

struct rc_state {
	pthread_mutex_t mu;
	pthread_cond_t cv;	/* wakes the retry thread */
	pthread_cond_t list_cv; /* a listing in flight ended */
	pthread_cond_t wb_cv;	/* a write-back or a directory rename ended */
	struct rc_node *by_id[RC_NBUCKETS], *by_path[RC_NBUCKETS];
	struct rsb *sbs;
	uint64_t next_id;
	struct rc_options opt;
	struct rc_hooks hooks;
	pthread_t retry_thread;
	bool running, stop;
};
extern struct rc_state R;

/* nodes.c: helpers, sandboxes, the node table */
double rc_now(void);
char *rc_join_path(const char *dir, const char *name);
void rc_rstat_free(struct sfs_rstat *st);
int rc_rstat_copy(struct sfs_rstat *dst, const struct sfs_rstat *src);
void rc_ents_free(struct rent *v, size_t n);
bool rc_name_ok(const char *name);
struct rsb *rc_rsb_find_locked(uint32_t serial, bool create);
const char *rc_cachedir(struct rsb *rs, struct sfs_sandbox *sb);
struct rc_node *rc_find_id_locked(uint64_t id);
struct rc_node *rc_find_path_locked(uint32_t serial, const char *path);
void rc_unhash_path_locked(struct rc_node *n);
void rc_hash_path_locked(struct rc_node *n);
struct rc_node *rc_new_node_locked(struct rsb *rs, const char *path);
void rc_cache_file_name(struct rc_node *n, const char *suffix, char *buf, size_t len);
void rc_maybe_free_locked(struct rc_node *n);
void rc_free_node_locked(struct rc_node *n, bool keep_dirty_data);
void rc_node_put(struct rc_node *n);
char *rc_node_path(struct rc_node *n);
struct sfs_sandbox *rc_sandbox_of(struct rc_node *n);
void rc_sandbox_put(struct sfs_sandbox *sb);

/* Provider calls: counted, logged, -EOPNOTSUPP when the provider lacks one. */
int rc_log_err(struct sfs_sandbox *sb, const char *what, const char *path, int r,
	       const struct sfs_err *err);
#define RC_CALL(rs, sb, what, path, op, ...)                                                       \
	({                                                                                         \
		struct sfs_err err_ = {0};                                                         \
		int r_ = -EOPNOTSUPP;                                                              \
		if ((sb)->provider->ops->op) {                                                     \
			__atomic_add_fetch(&(rs)->calls, 1, __ATOMIC_RELAXED);                     \
			r_ = (sb)->provider->ops->op((sb), __VA_ARGS__, &err_);                    \
		}                                                                                  \
		rc_touch((rs));                                                                    \
		rc_log_err((sb), (what), (path), r_, &err_);                                       \
	})
int rc_p_stat(struct rsb *rs, struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st);

/* attrs.c: attributes, listings, TTLs.  rc_touch(_locked) counts an
 * operation on the sandbox's workspace (or the end of a provider call) for
 * its busy spell. */
void rc_touch_locked(struct rsb *rs, double now);
void rc_touch(struct rsb *rs);
bool rc_attr_fresh_locked(struct rc_node *n, double now);
bool rc_dir_fresh_locked(struct rc_node *n, double now);
double rc_ttl_of(const struct rc_node *n);
void rc_set_attr_locked(struct rc_node *n, const struct sfs_rstat *st, double now);
void rc_set_local_attr_locked(struct rc_node *n, const struct sfs_rstat *st);
bool rc_local_newer_locked(const struct rc_node *n, uint64_t asked);
void rc_drop_dir_locked(struct rc_node *n);
struct rent *rc_dir_find_locked(struct rc_node *d, const char *name);
void rc_dir_update_locked(struct rc_node *d, const char *name, const struct sfs_rstat *st);
int rc_node_attr(struct rc_node *n, struct sfs_sandbox *sb, struct sfs_rstat *st);
/* asked: rs->wctr when st was asked for (RC_ASKED_NOW: st is as of now);
 * gen: rs->gen it was fetched in (RC_GEN_NOW: as of now).  What an older
 * generation fetched (a run started or ended since) is shown once, with a
 * TTL of 0, and never made the node's attributes. */
#define RC_ASKED_NOW UINT64_MAX
#define RC_GEN_NOW UINT64_MAX
int rc_entry_for(struct rsb *rs, const char *path, const struct sfs_rstat *st, double fetched,
		 uint64_t asked, uint64_t gen, struct rc_entry *e);
void rc_present(struct rc_node *n, struct sfs_rstat *st);
bool rc_unborn_below_locked(struct rsb *rs, const char *dir);

/* mutations.c: which paths the changes made through the mount touched.
 * rc_mutated_locked counts a change of path (wctr), drops prefetched copies
 * of it and below it, and remembers it; the _since checks say whether a
 * listing of dir, or a copy of file, fetched when wctr was `since` can have
 * missed a change (true also when the log no longer reaches back). */
void rc_mutated_locked(struct rsb *rs, const char *path);
bool rc_dir_touched_since_locked(struct rsb *rs, uint64_t since, const char *dir);
bool rc_file_touched_since_locked(struct rsb *rs, uint64_t since, const char *path);
void rc_mlog_free_locked(struct rsb *rs);

/* prefetch.c: small files fetched in bulk beside the one being opened.
 * take: 1 when path's prefetched copy (matching st) was written to fd,
 * 0 when there is none; fill: 1 when a bulk call wrote path to fd (and
 * kept its siblings), 0 when the caller must read it alone; -errno. */
int rc_prefetch_take(struct rsb *rs, const char *path, const struct sfs_rstat *st, int fd);
int rc_prefetch_fill(struct rsb *rs, struct sfs_sandbox *sb, const char *path,
		     const struct sfs_rstat *st, int fd);
void rc_prefetch_drop_locked(struct rsb *rs);
/* drops the copies of path and of everything below it */
void rc_prefetch_drop_path_locked(struct rsb *rs, const char *path);

/* files.c: cache files, fetch, write-back */
int rc_open_cache_file(struct rc_node *n, struct sfs_sandbox *sb);
void rc_mark_pending(struct rc_node *n, bool pending, const char *path);
int rc_fetch(struct rc_node *n, struct sfs_sandbox *sb, const char *path,
	     const struct sfs_rstat *st);
void rc_set_dirty(struct rc_node *n, bool dirty);
void rc_set_unborn_locked(struct rc_node *n, bool unborn);
int rc_make_born(struct rc_node *n, struct sfs_sandbox *sb);
int rc_write_back(struct rc_node *n, struct sfs_sandbox *sb);
int rc_file_new(struct rc_node *n, int flags, struct rc_file **f);

#endif
