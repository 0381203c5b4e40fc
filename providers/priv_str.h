/*
 * A provider's private state of a sandbox (sb->priv) when it is one string
 * (daytona's toolbox URL, vercel's session id): read by FUSE workers and the
 * journal engine while an op may replace it.  Guarded by one mutex for all
 * sandboxes, a leaf lock (provider.h's lock order): nothing else is taken
 * while it is held.  Only these functions touch such an sb->priv.
 */
#ifndef SFS_PRIV_STR_H
#define SFS_PRIV_STR_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

struct sfs_sandbox;

/* Replaces the string with a copy of s; 0 or -ENOMEM (nothing changed). */
int sfs_priv_str_set(struct sfs_sandbox *sb, const char *s);
/* A copy of the string (free it); NULL when there is none or on ENOMEM. */
char *sfs_priv_str_dup(struct sfs_sandbox *sb);
/* state_save / state_load (provider.h) of the string under key: {key: s},
 * or NULL when there is none; loading nothing is no error. */
json_t *sfs_priv_str_save(const struct sfs_sandbox *sb, const char *key);
int sfs_priv_str_load(struct sfs_sandbox *sb, json_t *saved, const char *key, struct sfs_err *err);
/* state_free: drops the string. */
void sfs_priv_str_free(struct sfs_sandbox *sb);
/* dst gets src's string; src's goes (dst's old one with it). */
void sfs_priv_str_take(struct sfs_sandbox *dst, struct sfs_sandbox *src);

#endif
