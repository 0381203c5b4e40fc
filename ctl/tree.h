/*
 * The sandboxes the daemon knows: a list guarded by one lock, persisted as a
 * registry in the state directory (ctl/registry.c), and the lifecycle
 * operations the ctl verbs and the fs layer (mkdir, rmdir, mv) call.  The
 * record itself is built and freed in ctl/sandbox.c.  This header is the
 * interface fs/ uses.
 *
 * Lock order: sb->op_mutex (long: provider calls) before sfs_records_mu
 * (short: list, names, runs arrays, refs; providers/provider.h).  Never call
 * a provider with sfs_records_mu held.
 * Destroyed or forgotten sandboxes move to a graveyard and are freed at
 * shutdown, so a pointer taken with tree_get stays valid for the daemon's
 * life; callers still drop their reference with tree_put.
 */
#ifndef SFS_TREE_H
#define SFS_TREE_H

#include <pthread.h>
#include <stdint.h>

#include "../providers/provider.h"

struct sfs_tree {
	struct sfs_sandbox **sbs;
	size_t nsbs;
	struct sfs_sandbox **graveyard;
	size_t ngraveyard;
	char *statedir;
	const struct sfs_provider *default_provider;
	uint32_t next_serial;
	json_t *kept; /* registry entries that could not be loaded: saved back as they were */
};

extern struct sfs_tree tree;

/* The longest state directory path: what every path below it needs (at
 * most ~1000 bytes: STATE/sandboxes/KEY/runs/N/.status.tmp, the snapshot
 * store) fits under PATH_MAX after it. */
#define SFS_STATEDIR_MAX 3072

/* Loads the registry and brings every sandbox and run back. */
int tree_init(const char *statedir, const struct sfs_provider *default_provider,
	      struct sfs_err *err);
void tree_shutdown(void);

/* Lookups return a referenced sandbox or NULL. */
struct sfs_sandbox *tree_get(const char *name);
struct sfs_sandbox *tree_get_serial(uint32_t serial);
void tree_put(struct sfs_sandbox *sb);
/* Names in order, for readdir: fills up to max names (copied) and serials. */
size_t tree_list(char (*names)[64], uint32_t *serials, size_t max);

/* A run of sb, or NULL (n from 1); guarded internally. */
struct sfs_run *tree_run(struct sfs_sandbox *sb, int n);
int tree_nruns(struct sfs_sandbox *sb);

/* Makes the registry on disk show every change made before the call (a
 * save another thread wrote meanwhile may have done it already).  Called
 * without sfs_records_mu: the file is written outside it. */
int tree_save(struct sfs_err *err);

/* Makes *env sb's environment and saves the registry, as one step: on
 * success *env holds the old list (the caller frees it); on failure nothing
 * changed and *env is as it was.  The caller holds sb->op_mutex. */
int tree_swap_env(struct sfs_sandbox *sb, struct sfs_kvlist *env, struct sfs_err *err);

/* Lifecycle.  Each either completes or changes nothing. */
int tree_create(const char *name, const struct sfs_kvlist *opts, struct sfs_err *err);
int tree_resume(const char *name, const char *provider, const char *id, struct sfs_err *err);
int tree_destroy(const char *name, struct sfs_err *err);
/* rmdir: tree_destroy, except that a sandbox with runs still going leaves
 * the tree at once and is destroyed by a thread of its own (the runs get
 * their grace without the kernel's lock on the root held meanwhile); if
 * that fails the sandbox comes back with the error in its status. */
int tree_rmdir(const char *name, struct sfs_err *err);
/* Waits for the destroys tree_rmdir left running (at unmount). */
void tree_drain(void);
/* 0 while sb is in the tree; -ENOENT with a message naming why not
 * (forgotten, destroyed) for a file opened before it left. */
int tree_check_live(struct sfs_sandbox *sb, struct sfs_err *err);
int tree_forget(const char *name, struct sfs_err *err);
int tree_rename(const char *from, const char *to, struct sfs_err *err);
int tree_fork(struct sfs_sandbox *src, const char *newname, const char *from, struct sfs_err *err);

/* Deletes snapshot `id` of sb: the provider's, then the entry (the others
 * keep their serials, so their inode numbers).  -ENOENT when sb has none
 * by that name. */
int tree_snapshot_delete(struct sfs_sandbox *sb, const char *id, struct sfs_err *err);

/* Writes bytes to a run's stdin (writableStdin). */
int tree_stdin_write(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf, size_t len,
		     struct sfs_err *err);

/* sb's workspace root: 0 with *fd, an O_PATH fd on this host, and *root, its
 * path inside the sandbox (malloc'd copy, may be NULL); -EREMOTE when the
 * provider serves the files remotely (fs/remote); another negative errno
 * when there is no workspace to reach. */
int tree_workspace_root(struct sfs_sandbox *sb, int *fd, char **root, struct sfs_err *err);
/* Whether sb's workspace is served by remote file ops. */
bool tree_workspace_is_remote(const struct sfs_sandbox *sb);

/* Starts a run; *n gets its number. */
int tree_exec(struct sfs_sandbox *sb, const char *cmd, int *n, struct sfs_err *err);
/* The same for a setup= command of a sandbox still creating (ctl/source.c);
 * the caller does not hold sb->op_mutex. */
int tree_exec_setup(struct sfs_sandbox *sb, const char *cmd, int *n, struct sfs_err *err);

/* Records sb's last error (redacted) or clears it with NULL. */
void tree_set_error(struct sfs_sandbox *sb, const char *msg);
void tree_set_last_result(struct sfs_sandbox *sb, const char *text);

/* Hook called after a run starts (workspace cache invalidation); may be NULL. */
extern void (*tree_run_started_hook)(struct sfs_sandbox *sb, struct sfs_run *run);
/* Hook called when a sandbox goes away (workspace nodes); may be NULL. */
extern void (*tree_sandbox_gone_hook)(struct sfs_sandbox *sb);
/* Hook called when a sandbox's filesystem was replaced (restore, start): the
 * workspace must be looked up afresh; may be NULL. */
extern void (*tree_sandbox_reset_hook)(struct sfs_sandbox *sb);

#endif
