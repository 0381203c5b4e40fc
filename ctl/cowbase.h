/* Base workspaces' side of workspace snapshots (ctl/cowbase.c). */
#ifndef SFS_CTL_COWBASE_H
#define SFS_CTL_COWBASE_H

/* Installs the changed-paths hook of ctl/wsnap.h; once, before any sandbox
 * is created (tree_init). */
void cowbase_init(void);

#endif
