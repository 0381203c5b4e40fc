/*
 * Workspace snapshots of sandboxes (SPEC §8, §10): the lifecycle side of
 * fs/snapshots.  A sandbox whose provider has no native snapshots (or a
 * `snapshot kind=workspace` on any provider) records its workspace in the
 * shared object store; the snapshot's record carries the commit.  Only
 * workspaces on this host (the provider's workspace_root_fd) so far.
 */
#ifndef SFS_CTL_WSNAP_H
#define SFS_CTL_WSNAP_H

#include "../providers/provider.h"
#include "../providers/strbuf.h"

/* Whether sb's workspace can be snapshotted: on this host, or through
 * remote file calls into a mirror on this host (ctl/wsnap_remote.c). */
bool wsnap_possible(const struct sfs_sandbox *sb);
/* Whether it is on this host (the implicit base snapshot of a source= is
 * taken from the checkout otherwise: a remote one would be fetched whole). */
bool wsnap_on_host(const struct sfs_sandbox *sb);
/* What `status` says: "native", "workspace" or "none". */
const char *wsnap_status_kind(const struct sfs_sandbox *sb);

/* Takes a workspace snapshot and lists it: its id is the label when given
 * (a name like a sandbox's; -EEXIST when taken), else "snap-N".  The caller
 * holds sb->op_mutex.  *id is malloc'd. */
int wsnap_take(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err);
/* Lists snapshot id (normally "base") as a layer snapshot, taken now.  The
 * caller holds sb->op_mutex; -EEXIST when the id is taken. */
int wsnap_add_layer(struct sfs_sandbox *sb, const char *id, struct sfs_err *err);
/* Whether sb's snapshot id is a layer snapshot. */
bool wsnap_is_layer(struct sfs_sandbox *sb, const char *id);
/* The same of a host tree that is the workspace's contents (a remote
 * sandbox's source checkout before it went up): `base` without fetching
 * back what was just uploaded.  The caller holds sb->op_mutex. */
int wsnap_take_tree(struct sfs_sandbox *sb, const char *label, int treefd, struct sfs_err *err);
/* Makes the workspace equal to the snapshot with this commit; a one-line
 * summary goes to out.  The caller holds sb->op_mutex. */
int wsnap_restore_into(struct sfs_sandbox *sb, const char *id, const char *commit,
		       struct sfs_buf *out, struct sfs_err *err);
/* The commit of sb's snapshot id (malloc'd), or NULL (native, or none). */
char *wsnap_commit_of(struct sfs_sandbox *sb, const char *id);
/* Drops the store's refs of sb's snapshot id (NULL: all of sb's). */
void wsnap_forget(struct sfs_sandbox *sb, const char *id);

/* snapshots/ID/info and snapshots/ID/diff of the snapshot with this serial. */
int wsnap_info_text(struct sfs_sandbox *sb, uint32_t serial, struct sfs_buf *out);
int wsnap_diff_text(struct sfs_sandbox *sb, uint32_t serial, struct sfs_buf *out);

/*
 * The seam for workspaces that know what changed without hashing (a
 * copy-on-write base knows its upper layer).  Such a workspace lists a
 * "layer" snapshot (wsnap_add_layer: no commit, nothing hashed) and sets
 * this hook; snapshots/ID/diff of that snapshot then compares only *paths
 * (relative, a malloc'd array of malloc'd strings, freed here) between
 * *basefd (the unchanged tree, closed here) and the live workspace, with
 * the same diff writer as every workspace snapshot (so `git apply` takes
 * it).  Called for layer snapshots only, without any lock held.
 */
extern int (*wsnap_changed_paths_hook)(struct sfs_sandbox *sb, const char *id, int *basefd,
				       char ***paths, size_t *n, struct sfs_err *err);

#endif
