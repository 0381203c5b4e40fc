/*
 * Configuration: `key = value` lines from the config file, overridden by
 * -o key=value and command-line options.  Providers read their own keys
 * (`local.scrub_env`, `docker.host`, ...); nothing here knows them.
 */
#ifndef SFS_CONFIG_H
#define SFS_CONFIG_H

#include "err.h"
#include "kv.h"

extern struct sfs_kvlist sfs_config;

/* Reads FILE; a missing file is fine when !must_exist. */
int sfs_config_load(const char *path, int must_exist, struct sfs_err *err);
const char *sfs_config_get(const char *key, const char *fallback);
double sfs_config_get_double(const char *key, double fallback);
int sfs_config_set(const char *key, const char *val);

#endif
