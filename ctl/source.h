/*
 * `new … source=URL [ref=REF] [depth=N] [setup=CMD]…` (SPEC §9): what
 * tree_create calls to check those options, put the source's tree in the new
 * workspace (through the git kit, providers/git) and run the setup commands.
 */
#ifndef SFS_CTL_SOURCE_H
#define SFS_CTL_SOURCE_H

#include <stdbool.h>

#include "../providers/provider.h"

/* Whether key is one of the options handled here (not the provider's). */
bool source_key(const char *key);

/* Checks the source and setup options before anything is made: a bad URL or
 * ref, a bad depth, ref= without source=, a provider that cannot take them.
 * 0, -EINVAL or -EOPNOTSUPP with a message. */
int source_check(const struct sfs_provider *p, const struct sfs_kvlist *opts, struct sfs_err *err);

/* Fetches the source (through the host's mirror) and checks it out into the
 * workspace of sb, just created; the caller holds sb->op_mutex and undoes
 * the sandbox on failure.  Progress goes to status.  0 when no source=. */
int source_populate(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err);

/* Runs each setup= command in order as an ordinary run and waits for it;
 * the first that does not exit 0 stops the rest: -EIO with a message naming
 * it and its run.  The caller does not hold sb->op_mutex. */
int source_setup(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err);

#endif
