/*
 * libFuzzer harness: the HTTP kit's incremental line, NDJSON and SSE parsers
 * (providers/http/lines.c).  The first two bytes choose where the stream is
 * cut into pieces; the lines seen must be the same whatever the cuts, as a
 * network can cut a response anywhere.
 */
#include "providers/http/http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	unsigned long count;
	unsigned long hash;
};

static void mix(struct seen *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		s->hash = s->hash * 1099511628211ul ^ (unsigned char)p[i];
	s->hash = s->hash * 1099511628211ul ^ 0x100;
	s->count++;
}

static int on_line(const char *line, size_t len, void *arg)
{
	if (memchr(line, '\n', len))
		abort(); /* a delivered line never contains its terminator */
	mix(arg, line, len);
	return 0;
}

static int on_value(json_t *v, void *arg)
{
	char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	if (text) {
		mix(arg, text, strlen(text));
		free(text);
	}
	return 0;
}

static int on_event(const char *event, const char *data, size_t len, const char *id, void *arg)
{
	mix(arg, event ? event : "", event ? strlen(event) : 0);
	mix(arg, data ? data : "", data ? len : 0);
	mix(arg, id ? id : "", id ? strlen(id) : 0);
	return 0;
}

/* The length of the piece at offset o of n bytes: 1..step bytes, varying
 * with o (step 0: all that is left at once). */
static size_t piece(size_t o, size_t n, size_t step)
{
	size_t k = step ? 1 + (o * 7 + step) % step : n - o;
	return k < n - o ? k : n - o;
}

/* Feeds data in pieces of 1..step bytes (step 0: all at once). */
static void lines_run(const char *d, size_t n, size_t step, struct seen *s)
{
	struct sfs_linebuf lb = {0};
	for (size_t o = 0; o < n;) {
		size_t k = piece(o, n, step);
		if (sfs_lines_feed(&lb, d + o, k, on_line, s))
			break;
		o += k;
	}
	sfs_lines_finish(&lb, on_line, s);
	sfs_linebuf_free(&lb);
}

static int ndjson_run(const char *d, size_t n, size_t step, struct seen *s)
{
	struct sfs_ndjson p = {.on_value = on_value, .arg = s};
	int r = 0;
	for (size_t o = 0; o < n && !r;) {
		size_t k = piece(o, n, step);
		r = sfs_ndjson_feed(&p, d + o, k);
		o += k;
	}
	if (!r)
		r = sfs_ndjson_finish(&p);
	sfs_ndjson_free(&p);
	return r;
}

static int sse_run(const char *d, size_t n, size_t step, struct seen *s)
{
	struct sfs_sse p = {.on_event = on_event, .arg = s};
	int r = 0;
	for (size_t o = 0; o < n && !r;) {
		size_t k = piece(o, n, step);
		r = sfs_sse_feed(&p, d + o, k);
		o += k;
	}
	sfs_sse_free(&p);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t step = data[0] % 16;
	int which = data[1] % 3;
	const char *d = (const char *)data + 2;
	size_t n = size - 2;
	struct seen whole = {0}, cut = {0};
	switch (which) {
	case 0:
		lines_run(d, n, 0, &whole);
		lines_run(d, n, step, &cut);
		break;
	case 1: {
		int a = ndjson_run(d, n, 0, &whole), b = ndjson_run(d, n, step, &cut);
		if (a != b)
			abort(); /* the verdict on a stream may not depend on its cuts */
		break;
	}
	default: {
		int a = sse_run(d, n, 0, &whole), b = sse_run(d, n, step, &cut);
		if (a != b)
			abort();
		break;
	}
	}
	if (whole.count != cut.count || whole.hash != cut.hash)
		abort();
	return 0;
}
