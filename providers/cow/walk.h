/* The cow kit's tree walker (shared by layer.c and diff.c; not public). */
#ifndef SFS_COW_WALK_H
#define SFS_COW_WALK_H

#include "../err.h"

#include <stdbool.h>
#include <sys/stat.h>

/* A visit's return: 0 goes on (into a directory), SFS_COW_WALK_SKIP does not
 * enter it, a negative errno stops the walk. */
#define SFS_COW_WALK_SKIP 1

/* rootfd is the walked root (for *at calls on rel, which has no leading
 * slash); st is a full lstat when the walk was asked for stats, else only
 * its file type is set.  Symlinks are never followed, nor mounts crossed. */
typedef int (*sfs_cow_visit)(void *arg, int rootfd, const char *rel, const struct stat *st);

/* Walks root (not visiting root itself), or only below sub ("" for all):
 * visit before a directory's entries, leave (may be NULL) after them. */
int sfs_cow_walk_under(const char *root, const char *sub, bool need_stat, sfs_cow_visit visit,
		       sfs_cow_visit leave, void *arg, struct sfs_err *err);
#define sfs_cow_walk(root, need_stat, visit, leave, arg, err)                                      \
	sfs_cow_walk_under(root, "", need_stat, visit, leave, arg, err)

/* Opens rel below rootfd without following any symlink on the way or
 * leaving rootfd (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): the upper
 * layer is the sandbox's to shape. */
int sfs_cow_open_beneath(int rootfd, const char *rel, int flags);

#endif
