/*
 * Private to ctl/: the registry, STATE/registry.json, which lists every
 * sandbox record that survives a restart (jansson, temp + rename).
 */
#ifndef SFS_CTL_REGISTRY_H
#define SFS_CTL_REGISTRY_H

#include <stddef.h>

#include "../providers/provider.h"

/* Writes statedir/registry.json from the n records in sbs (CREATING ones are
 * skipped) followed by the entries in `kept` (a JSON array, may be NULL):
 * entries an earlier load could not use, carried on so that nothing in the
 * file is lost.  Callers hold sfs_records_mu so the records cannot change
 * under the dump.  The text is redacted, never cut short. */
int registry_save(const char *statedir, struct sfs_sandbox *const *sbs, size_t n, json_t *kept,
		  struct sfs_err *err);

/* Reads statedir/registry.json into *out, an array of *n new records (free
 * with sandbox_free and free()), and *kept, a new JSON array of the entries
 * it could not turn into records (unknown provider, missing name), each
 * logged.  No file: 0 and nothing.  A file that is not a registry: -EINVAL
 * naming the file and the line, nothing loaded, the file left as it is. */
int registry_load(const char *statedir, struct sfs_sandbox ***out, size_t *n, json_t **kept,
		  struct sfs_err *err);

#endif
