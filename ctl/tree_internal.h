/*
 * Private to ctl/tree.c and ctl/destroy.c: the pieces of the tree's list and
 * registry saves that destroying needs, and the destroy markers that
 * startup needs.  Lock order as in providers/provider.h.
 */
#ifndef SFS_TREE_INTERNAL_H
#define SFS_TREE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "../providers/provider.h"

/* One registry write at a time (provider.h's lock order, step 3). */
extern pthread_mutex_t tree_save_mu;
/* Writes the registry without `skip` (NULL: all of it); holds tree_save_mu. */
int tree_save_held(const struct sfs_sandbox *skip, struct sfs_err *err);
/* Takes sb out of the list; bury: keep it in the graveyard until shutdown
 * (pointers taken from the tree stay valid).  Holds sfs_records_mu. */
void tree_remove_locked(struct sfs_sandbox *sb, bool bury);
/* tree_get, or -ENOENT with a message in err. */
struct sfs_sandbox *tree_get_or_err(const char *name, struct sfs_err *err);

/* STATE/.reserve: space held back for registry writes on a full disk. */
void destroy_reserve_space(void);
/* STATE/sandboxes/KEY/destroyed (done, registry not yet written) and
 * .../destroying (an rmdir decided it, nobody finished it). */
void destroy_marker_path(const struct sfs_sandbox *sb, char *buf, size_t len);
void destroy_decided_path(const struct sfs_sandbox *sb, char *buf, size_t len);
/* Writes an empty marker, fsync'd with its directory. */
int destroy_write_marker(const struct sfs_sandbox *sb, const char *path);
/* Empties sb's state dir but for the `destroyed` marker. */
void destroy_empty_statedir(struct sfs_sandbox *sb);
/* Startup: finishes a destroy an rmdir decided; 0 when destroyed, else sb is
 * left in state error saying why. */
int destroy_finish_decided(struct sfs_sandbox *sb);
/* Removes sb's state dir, and the file system of its quota (ctl/quota.h)
 * with it: 0 or a negative errno. */
int tree_remove_statedir(struct sfs_sandbox *sb);

#endif
