#include "config.h"
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
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT && !must_exist)
			return 0;
		return sfs_errf(err, -errno, "config %s: %s", path, strerror(errno));
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = sfs_errf(err, -EINVAL, "config %s:%d: expected key = value", path,
				      lineno);
			break;
		}
		*eq = '\0';
		char *k = trim(s), *v = trim(eq + 1);
		if (*k == '\0') {
			rc = sfs_errf(err, -EINVAL, "config %s:%d: empty key", path, lineno);
			break;
		}
		if (sfs_kv_get(&sfs_config, k))
			continue; /* command-line options were set first and win */
		if (sfs_config_set(k, v)) {
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
