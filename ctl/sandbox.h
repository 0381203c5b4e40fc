/*
 * Private to ctl/: the sandbox record's constructor, destructor and the
 * helpers that change its lists.  tree.c (lifecycle) and registry.c
 * (save/load) build on these; fs/ sees records only through ctl/tree.h.
 */
#ifndef SFS_CTL_SANDBOX_H
#define SFS_CTL_SANDBOX_H

#include "../providers/provider.h"

/* A new record named name with local key `key`; its state directory is
 * statedir/sandboxes/KEY.  NULL on ENOMEM. */
struct sfs_sandbox *sandbox_new(const char *statedir, const char *name, const char *key,
				const struct sfs_provider *p);
/* Frees sb and everything it owns, runs included. */
void sandbox_free(struct sfs_sandbox *sb);
void sandbox_run_free(struct sfs_run *run);

/* Replaces *dst with a copy of src (NULL clears); -ENOMEM leaves it as is. */
int sandbox_set_str(char **dst, const char *src);

/* Appends a snapshot (id and label are taken over; label may be NULL) with
 * the next serial.  Callers hold sfs_records_mu; -ENOMEM or -ENOSPC (serials
 * used up) change nothing and leave id and label to the caller. */
int sandbox_snapshot_add_locked(struct sfs_sandbox *sb, char *id, char *label, int64_t created);
/* The index of the snapshot named id, or -1.  Callers hold sfs_records_mu. */
int sandbox_snapshot_find_locked(struct sfs_sandbox *sb, const char *id);
/* Removes the snapshot named id; 0 or -ENOENT.  Callers hold sfs_records_mu. */
int sandbox_snapshot_remove_locked(struct sfs_sandbox *sb, const char *id);

/* Appends run to sb->runs; callers hold sfs_records_mu. */
int sandbox_add_run_locked(struct sfs_sandbox *sb, struct sfs_run *run);

#endif
