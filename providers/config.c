#include "config.h"
#include "options.h"
#include "redact.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sfs_kvlist sfs_config;

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int sfs_config_set(const char *key, const char *val)
{
	/* Credentials from the config file are hidden everywhere we write. */
	if (sfs_redact_key_is_secret(key))
		sfs_redact_add_secret(val);
	return sfs_kv_set(&sfs_config, key, val);
}

int sfs_config_load(const char *path, int must_exist, struct sfs_err *err)
{
	size_t n;
	const struct sfs_opt_table *t = sfs_opt_tables(&n);
	return sfs_config_load_with(path, must_exist, t, n, err);
}

int sfs_config_load_with(const char *path, int must_exist, const struct sfs_opt_table *tables,
			 size_t ntables, struct sfs_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT && !must_exist)
			return 0;
		return sfs_errf(err, -errno, "config %s: %s", path, strerror(errno));
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rc = sfs_errf(err, -EINVAL, "config %s:%d: line longer than %zu bytes",
				      path, lineno, sizeof(line) - 2);
			break;
		}
		char *s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = sfs_errf(err, -EINVAL, "config %s:%d: expected a `name = value` line",
				      path, lineno);
			break;
		}
		*eq = '\0';
		char *k = trim(s), *v = trim(eq + 1);
		if (*k == '\0') {
			rc = sfs_errf(err, -EINVAL, "config %s:%d: empty key", path, lineno);
			break;
		}
		const char *canon;
		struct sfs_err why = {0};
		if (sfs_opt_is_fuse(k)) {
			rc =
			    sfs_errf(err, -EINVAL,
				     "config %s:%d: %s is a libfuse mount option: give it as -o %s",
				     path, lineno, k, k);
			break;
		}
		if (sfs_opt_check(tables, ntables, k, v, &canon, &why)) {
			rc = sfs_errf(err, why.code, "config %s:%d: %s", path, lineno, why.msg);
			break;
		}
		if (sfs_kv_get(&sfs_config, k))
			continue; /* command-line options were set first and win */
		if (sfs_config_set(k, canon)) {
			rc = sfs_errf(err, -ENOMEM, "config: out of memory");
			break;
		}
	}
	fclose(f);
	return rc;
}

const char *sfs_config_get(const char *key, const char *fallback)
{
	const char *v = sfs_kv_get(&sfs_config, key);
	return v ? v : fallback;
}

double sfs_config_get_double(const char *key, double fallback)
{
	const char *v = sfs_kv_get(&sfs_config, key);
	if (!v)
		return fallback;
	char *end;
	double d = strtod(v, &end);
	return (end == v || *end) ? fallback : d;
}
