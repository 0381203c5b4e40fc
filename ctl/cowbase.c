/*
 * snapshots/base/diff of a base= sandbox (SPEC §9, §10): tree_create lists
 * the layer snapshot `base` when this hook is set, and the snapshots' diff
 * writer compares only the paths the cow kit (providers/cow) finds in the
 * upper layer, between the base and the live view: the base is never
 * hashed, so the diff costs what changed, not the size of the base.
 */
#include "cowbase.h"
#include "wsnap.h"

#include "../providers/cow/cow.h"

#include <errno.h>

static int base_changed_paths(struct sfs_sandbox *sb, const char *id, int *basefd, char ***paths,
			      size_t *n, struct sfs_err *err)
{
	/* statedir is fixed for the record's life: no lock needed */
	if (!sfs_cow_present(sb->statedir))
		return -ENOENT;
	return sfs_cow_changed_paths(sb->statedir, basefd, paths, n, err);
}

bool cowbase_describe(struct sfs_sandbox *sb, char *base, size_t baselen, char *mode,
		      size_t modelen)
{
	struct sfs_err err = {0};
	return sfs_cow_present(sb->statedir) &&
	       sfs_cow_describe(sb->statedir, base, baselen, mode, modelen, &err) == 0;
}

void cowbase_init(void)
{
	wsnap_changed_paths_hook = base_changed_paths;
}
