/*
 * Names that come from a sandbox or a provider's listing (a shell listing,
 * a JSON or XML answer, an object store's keys) before they become one
 * component of a path: the one rule every listing parser applies.  A name
 * that fails it is left out of the listing and the listing's caller logs
 * one warning naming the sandbox and the first such name, escaped.
 */
#ifndef SFS_UNTRUSTED_NAME_H
#define SFS_UNTRUSTED_NAME_H

#include <stdbool.h>
#include <stddef.h>

/* Whether name[0..len) can be one path component here: not empty, not "."
 * or "..", no '/' and no NUL, at most NAME_MAX (255) bytes. */
bool sfs_name_ok(const char *name, size_t len);
/* The same for a NUL-terminated name. */
bool sfs_name_ok_str(const char *name);

/* Whether rel is a relative path of such names: not empty, no leading or
 * trailing '/', no empty component ("a//b"), each component sfs_name_ok
 * (so no "." or ".." anywhere), at most PATH_MAX bytes. */
bool sfs_rel_path_ok(const char *rel);

/* What a listing left out: how many names, and the first one escaped. */
struct sfs_name_drops {
	size_t n;
	char first[96];
};

/* Counts name[0..len) as left out (d may be NULL). */
void sfs_name_drop(struct sfs_name_drops *d, const char *name, size_t len);
/* One warning for a listing of dir that left names out (none when d->n is
 * 0): "PROVIDER: SANDBOX: the listing of DIR leaves out N name(s) that
 * cannot be file names, the first "NAME"". */
void sfs_name_drops_log(const struct sfs_name_drops *d, const char *provider, const char *sandbox,
			const char *dir);

#endif
