/* Base workspaces' side of workspace snapshots (ctl/cowbase.c). */
#ifndef SFS_CTL_COWBASE_H
#define SFS_CTL_COWBASE_H

/* Installs the changed-paths hook of ctl/wsnap.h; once, before any sandbox
 * is created (tree_init). */
void cowbase_init(void);

#include "../providers/provider.h"

#include <stdbool.h>
#include <stddef.h>

/* For status: the base of a base= sandbox and "overlay" or "copy"; false
 * for any other sandbox. */
bool cowbase_describe(struct sfs_sandbox *sb, char *base, size_t baselen, char *mode,
		      size_t modelen);

#endif
