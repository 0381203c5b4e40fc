/*
 * Private to ctl/: the registry, STATE/registry.json, which lists every
 * sandbox record that survives a restart (jansson, temp + rename).
 */
#ifndef SFS_CTL_REGISTRY_H
#define SFS_CTL_REGISTRY_H

#include <stddef.h>

#include "../providers/provider.h"

/* Writes statedir/registry.json from the n records in sbs (CREATING ones are
 * skipped).  Callers hold sfs_records_mu so the records cannot change under
 * the dump. */
int registry_save(const char *statedir, struct sfs_sandbox *const *sbs, size_t n,
		  struct sfs_err *err);

/* Reads statedir/registry.json into *out, an array of *n new records (free
 * with sandbox_free and free()); none at first start.  Entries that cannot
 * be read are logged and skipped. */
int registry_load(const char *statedir, struct sfs_sandbox ***out, size_t *n, struct sfs_err *err);

/* Finds runs/1, runs/2 ... in the sandbox's state dir and attaches their
 * journals. */
void registry_load_runs(struct sfs_sandbox *sb);

#endif
