/*
 * Configuration: `key = value` lines from the config file, overridden by
 * -o key=value and command-line options.  Which keys exist, their types
 * and defaults are the option tables' business (options.h).
 */
#ifndef SFS_CONFIG_H
#define SFS_CONFIG_H

#include "err.h"
#include "kv.h"

extern struct sfs_kvlist sfs_config;

/* Reads FILE; a missing file is fine when !must_exist.  Every key must be
 * a row of the option tables (options.h) and its value valid for it: the
 * first bad line fails the load with FILE:LINE in the message. */
int sfs_config_load(const char *path, int must_exist, struct sfs_err *err);
struct sfs_opt_table;
/* The same against the given tables (unit tests). */
int sfs_config_load_with(const char *path, int must_exist, const struct sfs_opt_table *tables,
			 size_t ntables, struct sfs_err *err);
const char *sfs_config_get(const char *key, const char *fallback);
double sfs_config_get_double(const char *key, double fallback);
int sfs_config_set(const char *key, const char *val);

#endif
