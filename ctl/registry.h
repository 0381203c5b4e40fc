/*
 * Private to ctl/: the registry, STATE/registry.json, which lists every
 * sandbox record that survives a restart (jansson, temp + rename).
 */
#ifndef SFS_CTL_REGISTRY_H
#define SFS_CTL_REGISTRY_H

#include <stddef.h>

#include "../providers/provider.h"

/* The registry as a new JSON object (*out, owning copies of every string)
 * for the n records in sbs (CREATING ones are skipped) followed by copies of
 * the entries in `kept` (a JSON array, may be NULL): entries an earlier load
 * could not use, carried on so that nothing in the file is lost.  Callers
 * hold sfs_records_mu so the records cannot change under the dump (short:
 * no text is made, no file touched). */
int registry_dump(struct sfs_sandbox *const *sbs, size_t n, json_t *kept, json_t **out,
		  struct sfs_err *err);

/* Writes root as statedir/registry.json: the text, redacted and never cut
 * short, then temp, fsync (unless !durable), rename; each save is logged at
 * debug level.  Called without sfs_records_mu (ctl/tree.c orders the saves). */
int registry_write(const char *statedir, json_t *root, bool durable, struct sfs_err *err);

/* Both, for a caller that owns every record (startup, unit tests). */
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
