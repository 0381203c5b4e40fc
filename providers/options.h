/*
 * Option tables: every key sandboxfs reads from the configuration is a row
 * of one table (key, type, default, help), like libfuse passthrough_ll's
 * lo_opts[].  The core has one (options_core.c), each provider one of its own
 * (struct sfs_provider.options).  The same rows parse `-o key=value`, check
 * `key = value` lines of the config file, print --help and fill in defaults,
 * so a key that is not in a table is an error, never silently ignored.
 *
 * Values are kept as text in the config list (config.h); a row only decides
 * whether a text is valid, and gives booleans one spelling ("true"/"false").
 */
#ifndef SFS_OPTIONS_H
#define SFS_OPTIONS_H

#include "err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum sfs_opt_type {
	SFS_OPT_STRING,	  /* any text */
	SFS_OPT_BOOL,	  /* true/false, yes/no, on/off, 1/0; a bare `-o key` is true */
	SFS_OPT_INT,	  /* decimal integer within [min, max] */
	SFS_OPT_DOUBLE,	  /* number (seconds, ...) within [min, max] */
	SFS_OPT_ENUM,	  /* one of the words in `choices` ("a|b|c") */
	SFS_OPT_MODE,	  /* octal permission bits, 0 .. 07777 */
	SFS_OPT_PROVIDER, /* the name of a built-in provider */
};

struct sfs_opt {
	const char *key;
	enum sfs_opt_type type;
	const char *def;     /* default as text; NULL: unset (help says what happens) */
	const char *arg;     /* the value's name in --help ("DIR"); NULL: from the type */
	const char *choices; /* SFS_OPT_ENUM: "a|b|c" */
	double min, max;     /* SFS_OPT_INT, SFS_OPT_DOUBLE: inclusive bounds;
			      * SFS_OPT_MODE: max, if set, is the mask of allowed bits */
	const char *help;    /* a sentence; --help wraps it */
};

/* A table ends with a row whose key is NULL. */
struct sfs_opt_table {
	const char *title; /* "core", "local", "docker", ... */
	const struct sfs_opt *opts;
};

extern const struct sfs_opt sfs_core_options[];

/* The built-in tables: the core's, then each provider's in sfs_providers
 * order.  *n gets their number. */
const struct sfs_opt_table *sfs_opt_tables(size_t *n);

const struct sfs_opt *sfs_opt_find(const struct sfs_opt_table *t, size_t n, const char *key);

/* Whether key is one of libfuse's own mount options (allow_other, ro,
 * fsname=, ...), which go to libfuse and not to the tables. */
bool sfs_opt_is_fuse(const char *key);

/*
 * Checks key=val against the tables (val NULL: the key was given bare, as
 * in `-o writeback`).  On success *canon is the value to store: val itself,
 * or "true"/"false" for a boolean.  Otherwise fills err naming the key and
 * what is wrong, with the nearest valid key or value when there is one, and
 * returns -EINVAL.  Values of secret keys never appear in messages.
 */
int sfs_opt_check(const struct sfs_opt_table *t, size_t n, const char *key, const char *val,
		  const char **canon, struct sfs_err *err);

/* The valid key (or libfuse option) nearest to key by edit distance, or
 * NULL when nothing is near enough to be a likely typo. */
const char *sfs_opt_nearest(const struct sfs_opt_table *t, size_t n, const char *key);

/*
 * The value of a key of the built-in tables: the configured text, else the
 * row's default, else NULL.  Code reads keys through these rather than
 * sfs_config_get(key, fallback) so that a default is written once, in its
 * row (tests/unit/option_keys.sh checks that every key read has a row).
 */
const char *sfs_opt_get(const char *key);
/* The same as a number (0 when unset or not a number). */
double sfs_opt_get_double(const char *key);
/* The same as a boolean: true only for the canonical "true". */
bool sfs_opt_get_bool(const char *key);

/* Stores each row's default in the config list unless the key is set. */
int sfs_opt_apply_defaults(const struct sfs_opt_table *t, size_t n);

/* The options section of --help: every table, one row per key. */
void sfs_opt_print_help(FILE *out, const struct sfs_opt_table *t, size_t n);

#endif
