#include "redact.h"
#include "strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_mutex_t secrets_lock = PTHREAD_MUTEX_INITIALIZER;
static char **secrets;
static size_t nsecrets;
static unsigned long generation; /* bumped by each value added */

static const char *const secret_words[] = {"token",    "secret",     "key",
					   "password", "credential", "authorization"};

int sfs_redact_key_is_secret(const char *key)
{
	/* what strcasestr of each word finds, in one pass: every log line
	 * and audit detail asks.  A letter's bits say which words start with
	 * it; c | 0x20 is an ASCII letter's lower case, and no other byte's. */
	enum { NWORDS = sizeof(secret_words) / sizeof(secret_words[0]) };
	_Static_assert(NWORDS <= 8, "a letter's words are the bits of one byte");
	unsigned char starts[26] = {0};
	for (size_t w = 0; w < NWORDS; w++)
		starts[secret_words[w][0] - 'a'] |= (unsigned char)(1u << w);
	for (const char *p = key; *p; p++) {
		unsigned c = (unsigned char)(*p | 0x20) - 'a';
		if (c >= 26 || !starts[c])
			continue;
		for (size_t w = 0; w < NWORDS; w++) {
			if (!(starts[c] & (1u << w)))
				continue;
			const char *word = secret_words[w];
			size_t i = 1;
			while (word[i] && (p[i] | 0x20) == word[i])
				i++;
			if (!word[i])
				return 1;
		}
	}
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
	generation++;
	pthread_mutex_unlock(&secrets_lock);
	return 0;
}

unsigned long sfs_redact_generation(void)
{
	pthread_mutex_lock(&secrets_lock);
	unsigned long g = generation;
	pthread_mutex_unlock(&secrets_lock);
	return g;
}

size_t sfs_redact_longest(void)
{
	pthread_mutex_lock(&secrets_lock);
	size_t l = sfs_redact_stream_longest((const char *const *)secrets, nsecrets);
	pthread_mutex_unlock(&secrets_lock);
	return l;
}

size_t sfs_redact_holdback(const char *buf, size_t n)
{
	pthread_mutex_lock(&secrets_lock);
	size_t h = sfs_redact_stream_holdback((const char *const *)secrets, nsecrets, buf, n);
	pthread_mutex_unlock(&secrets_lock);
	return h;
}

void sfs_redact_mask(char *buf, size_t n)
{
	pthread_mutex_lock(&secrets_lock);
	int r = sfs_redact_stream_mask((const char *const *)secrets, nsecrets, buf, n);
	pthread_mutex_unlock(&secrets_lock);
	if (r) /* never show what could not be checked */
		memset(buf, '*', n);
}

static int is_key_char(int c)
{
	return isalnum(c) || c == '_' || c == '-' || c == '.';
}

static int ends_value(int c, int quoted)
{
	/* a quote left open ends at the line's end: a message's next lines
	 * (the caret under an unterminated quote) are not part of the value */
	if (quoted)
		return c == quoted || c == '\0' || c == '\n';
	return c == '\0' || isspace(c) || c == ',' || c == '&' || c == ';' || c == '}' ||
	       c == '"' || c == '\'';
}

/* Pass 1: values of secret-looking keys. */
static int redact_keys(const char *in, struct sfs_buf *out)
{
	const char *p = in;
	int r = sfs_buf_reserve(out, strlen(in));
	while (*p && !r) {
		if (!is_key_char((unsigned char)*p)) {
			r = sfs_buf_add(out, p, 1);
			p++;
			continue;
		}
		const char *k = p;
		while (is_key_char((unsigned char)*p))
			p++;
		size_t klen = (size_t)(p - k);
		r = sfs_buf_add(out, k, klen);
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
		r = sfs_buf_add(out, p, (size_t)(v - p));
		if (!r)
			r = sfs_buf_adds(out, SFS_REDACTED);
		p = s;
	}
	return r;
}

/* Pass 2: every registered credential value, wherever it appears.  Builds
 * the result in out from in. */
static int redact_values(const char *in, struct sfs_buf *out)
{
	int r = sfs_buf_reserve(out, strlen(in));
	pthread_mutex_lock(&secrets_lock);
	const char *p = in;
	while (*p && !r) {
		/* the earliest, then longest, registered secret at or after p */
		const char *best = NULL;
		size_t blen = 0;
		for (size_t i = 0; i < nsecrets; i++) {
			const char *hit = strstr(p, secrets[i]);
			size_t l = strlen(secrets[i]);
			if (hit && (!best || hit < best || (hit == best && l > blen))) {
				best = hit;
				blen = l;
			}
		}
		if (!best) {
			r = sfs_buf_adds(out, p);
			break;
		}
		r = sfs_buf_add(out, p, (size_t)(best - p));
		if (!r)
			r = sfs_buf_adds(out, SFS_REDACTED);
		p = best + blen;
	}
	pthread_mutex_unlock(&secrets_lock);
	return r;
}

char *sfs_redact_values_dup(const char *in)
{
	struct sfs_buf all = {0};
	int r = redact_values(in ? in : "", &all);
	char *text = r ? NULL : sfs_buf_take(&all);
	sfs_buf_free(&all);
	return text;
}

char *sfs_redact_dup(const char *in)
{
	/* a key is a piece of the text: with no secret-looking word anywhere
	 * in it, pass 1 would copy it unchanged */
	if (!sfs_redact_key_is_secret(in ? in : ""))
		return sfs_redact_values_dup(in);
	struct sfs_buf keys = {0}, all = {0};
	int r = redact_keys(in ? in : "", &keys);
	if (!r)
		r = redact_values(keys.buf ? keys.buf : "", &all);
	sfs_buf_free(&keys);
	char *text = r ? NULL : sfs_buf_take(&all);
	sfs_buf_free(&all);
	return text;
}

int sfs_redact(char *buf, size_t cap)
{
	if (!buf || cap == 0)
		return 0;
	char *red = sfs_redact_dup(buf);
	if (!red) {
		/* never leave a secret behind: hide the whole text */
		snprintf(buf, cap, "%s", SFS_REDACTED); /* message: may be cut */
		return -ENOMEM;
	}
	size_t len = strlen(red);
	/* a prefix of the redacted text: it may be cut, it never leaks */
	snprintf(buf, cap, "%s", red); /* message: may be cut */
	free(red);
	return len < cap ? 0 : -ENOSPC;
}
