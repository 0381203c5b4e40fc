/* Shared by ctl/wsnap.c and ctl/wsnap_remote.c; not for use outside. */
#ifndef SFS_CTL_WSNAP_INTERNAL_H
#define SFS_CTL_WSNAP_INTERNAL_H

#include "../fs/snapshots/snapshots.h"
#include "../providers/provider.h"

/* Whether sb's workspace is reached by remote file calls that can mirror
 * it (fs_stat, fs_list, fs_read and the calls a restore makes). */
bool wsnap_remote(const struct sfs_sandbox *sb);
/* Brings the host mirror of sb's remote workspace up to date; *fd is an
 * O_PATH fd of it.  The caller holds sb->op_mutex. */
int wsnap_remote_pull(struct sfs_sandbox *sb, int *fd, struct sfs_err *err);
/* Restores the snapshot onto the mirror and sends each change to the
 * remote workspace.  The caller holds sb->op_mutex. */
int wsnap_remote_restore(struct sfs_sandbox *sb, const char *commit, const char *cache,
			 struct snap_restore_stats *st, struct sfs_err *err);

#endif
