#include "redact.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_mutex_t secrets_lock = PTHREAD_MUTEX_INITIALIZER;
static char **secrets;
static size_t nsecrets;

static const char *const secret_words[] = {"token",    "secret",     "key",
					   "password", "credential", "authorization"};

int sfs_redact_key_is_secret(const char *key)
{
	for (size_t i = 0; i < sizeof(secret_words) / sizeof(secret_words[0]); i++)
		if (strcasestr(key, secret_words[i]))
			return 1;
	return 0;
}

int sfs_redact_add_secret(const char *value)
{
	if (!value || strlen(value) < 4)
		return 0;
	pthread_mutex_lock(&secrets_lock);
	for (size_t i = 0; i < nsecrets; i++) {
		if (strcmp(secrets[i], value) == 0) {
			pthread_mutex_unlock(&secrets_lock);
			return 0;
		}
	}
	char *dup = strdup(value);
	char **grown = dup ? realloc(secrets, (nsecrets + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(dup);
		pthread_mutex_unlock(&secrets_lock);
		return -ENOMEM;
	}
	secrets = grown;
	secrets[nsecrets++] = dup;
	pthread_mutex_unlock(&secrets_lock);
	return 0;
}

static int is_key_char(int c)
{
	return isalnum(c) || c == '_' || c == '-' || c == '.';
}

static int ends_value(int c, int quoted)
{
	if (quoted)
		return c == quoted || c == '\0';
	return c == '\0' || isspace(c) || c == ',' || c == '&' || c == ';' || c == '}' ||
	       c == '"' || c == '\'';
}

/* Appends src[0..n) to out (capacity cap), keeping it NUL-terminated. */
static void put(char *out, size_t cap, size_t *len, const char *src, size_t n)
{
	if (*len + 1 >= cap)
		return;
	if (n > cap - 1 - *len)
		n = cap - 1 - *len;
	memcpy(out + *len, src, n);
	*len += n;
	out[*len] = '\0';
}

/* Pass 1: values of secret-looking keys. */
static void redact_keys(const char *in, char *out, size_t cap)
{
	size_t len = 0;
	const char *p = in;
	out[0] = '\0';
	while (*p) {
		if (!is_key_char((unsigned char)*p)) {
			put(out, cap, &len, p, 1);
			p++;
			continue;
		}
		const char *k = p;
		while (is_key_char((unsigned char)*p))
			p++;
		size_t klen = (size_t)(p - k);
		put(out, cap, &len, k, klen);
		char key[128];
		if (klen >= sizeof(key))
			continue;
		memcpy(key, k, klen);
		key[klen] = '\0';
		if (!sfs_redact_key_is_secret(key))
			continue;
		/* separator: optional closing quote, then '=' or ':' (or one
		 * blank when the key starts a line: flat-keyed status files) */
		const char *s = p;
		int key_quoted = (k > in && k[-1] == '"' && *s == '"');
		if (key_quoted)
			s++;
		while (*s == ' ' || *s == '\t')
			s++;
		int line_start = (k == in || k[-1] == '\n');
		/* `key=v` anywhere; `key: v` only as a header or JSON member, so
		 * prose like "bad key: x" is left alone; `key v` at a line start
		 * (flat-keyed status files) */
		if (*s == '=' || (*s == ':' && (key_quoted || line_start)))
			s++;
		else if (!(line_start && s > p && *p == ' '))
			continue;
		while (*s == ' ' || *s == '\t')
			s++;
		int quoted = 0;
		if (*s == '"' || *s == '\'') {
			quoted = *s;
			s++;
		}
		const char *v = s;
		while (!ends_value((unsigned char)*s, quoted))
			s++;
		if (s == v)
			continue;
		put(out, cap, &len, p, (size_t)(v - p));
		put(out, cap, &len, SFS_REDACTED, strlen(SFS_REDACTED));
		p = s;
	}
}

/* Pass 2: every registered credential value, wherever it appears. */
static void redact_values(char *buf, size_t cap)
{
	pthread_mutex_lock(&secrets_lock);
	for (size_t i = 0; i < nsecrets; i++) {
		size_t slen = strlen(secrets[i]);
		char *hit, *from = buf;
		/* scan on past each replacement: the marker may contain the secret */
		while ((hit = strstr(from, secrets[i])) != NULL) {
			size_t rlen = strlen(SFS_REDACTED);
			size_t tail = strlen(hit + slen);
			size_t pos = (size_t)(hit - buf);
			if (pos + rlen + tail + 1 > cap)
				tail = cap > pos + rlen + 1 ? cap - pos - rlen - 1 : 0;
			if (pos + rlen + 1 > cap) {
				hit[0] = '\0';
				break;
			}
			memmove(hit + rlen, hit + slen, tail);
			memcpy(hit, SFS_REDACTED, rlen);
			hit[rlen + tail] = '\0';
			from = hit + rlen;
		}
	}
	pthread_mutex_unlock(&secrets_lock);
}

void sfs_redact(char *buf, size_t cap)
{
	if (!buf || cap == 0)
		return;
	char *out = malloc(cap);
	if (out) {
		redact_keys(buf, out, cap);
		memcpy(buf, out, strlen(out) + 1);
		free(out);
	}
	redact_values(buf, cap);
}
