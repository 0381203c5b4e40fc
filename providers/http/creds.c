/* Where a provider's credential and endpoint come from. */
#include "http.h"

#include "../config.h"
#include "../redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sfs_http_credential(const char *env, const char *config_key)
{
	const char *v = env ? getenv(env) : NULL;
	if (!v || !*v)
		v = config_key ? sfs_config_get(config_key, NULL) : NULL;
	if (!v || !*v)
		return NULL;
	sfs_redact_add_secret(v);
	return v;
}

char *sfs_http_base_url(const char *config_key, const char *env, const char *fallback)
{
	const char *v = config_key ? sfs_config_get(config_key, NULL) : NULL;
	if (!v || !*v)
		v = env ? getenv(env) : NULL;
	if (!v || !*v)
		v = fallback;
	if (!v)
		return NULL;
	char *s = strdup(v);
	if (!s)
		return NULL;
	size_t n = strlen(s);
	while (n && s[n - 1] == '/')
		s[--n] = '\0';
	return s;
}

/* Percent-encodes everything but RFC 3986's unreserved characters, and '/'
 * too when keep_slash (a path rather than one query value or segment). */
static char *escape(const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	char *o = out;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && keep_slash)) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

char *sfs_http_escape(const char *s)
{
	return escape(s, true);
}

char *sfs_http_escape_component(const char *s)
{
	return escape(s, false);
}
