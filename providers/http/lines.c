/* Incremental line splitting, and the NDJSON and SSE framings on top of it. */
#include "http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int lb_append(struct sfs_linebuf *lb, const char *data, size_t n)
{
	if (lb->len + n + 1 > lb->cap) {
		size_t cap = lb->cap ? lb->cap : 256;
		while (cap < lb->len + n + 1)
			cap *= 2;
		char *grown = realloc(lb->buf, cap);
		if (!grown)
			return -ENOMEM;
		lb->buf = grown;
		lb->cap = cap;
	}
	memcpy(lb->buf + lb->len, data, n);
	lb->len += n;
	lb->buf[lb->len] = '\0';
	return 0;
}

static int emit(char *line, size_t len, int (*on_line)(const char *, size_t, void *), void *arg)
{
	if (len && line[len - 1] == '\r')
		len--;
	char saved = line[len];
	line[len] = '\0';
	int r = on_line(line, len, arg);
	line[len] = saved;
	return r;
}

int sfs_lines_feed(struct sfs_linebuf *lb, const char *data, size_t n,
		   int (*on_line)(const char *line, size_t len, void *arg), void *arg)
{
	int r = lb_append(lb, data, n);
	if (r)
		return r;
	size_t start = 0;
	for (;;) {
		char *nl = memchr(lb->buf + start, '\n', lb->len - start);
		if (!nl)
			break;
		size_t end = (size_t)(nl - lb->buf);
		r = emit(lb->buf + start, end - start, on_line, arg);
		start = end + 1;
		if (r)
			break;
	}
	memmove(lb->buf, lb->buf + start, lb->len - start);
	lb->len -= start;
	lb->buf[lb->len] = '\0';
	return r;
}

int sfs_lines_finish(struct sfs_linebuf *lb,
		     int (*on_line)(const char *line, size_t len, void *arg), void *arg)
{
	if (!lb->len)
		return 0;
	int r = emit(lb->buf, lb->len, on_line, arg);
	lb->len = 0;
	return r;
}

void sfs_linebuf_free(struct sfs_linebuf *lb)
{
	free(lb->buf);
	lb->buf = NULL;
	lb->len = lb->cap = 0;
}

/* ---- NDJSON ------------------------------------------------------------ */

static int ndjson_line(const char *line, size_t len, void *arg)
{
	struct sfs_ndjson *p = arg;
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i == len)
		return 0;
	json_error_t jerr;
	json_t *v = json_loadb(line, len, JSON_DECODE_ANY, &jerr);
	if (!v)
		return -EPROTO;
	int r = p->on_value(v, p->arg);
	json_decref(v);
	return r;
}

int sfs_ndjson_feed(struct sfs_ndjson *p, const char *data, size_t n)
{
	return sfs_lines_feed(&p->lb, data, n, ndjson_line, p);
}

int sfs_ndjson_finish(struct sfs_ndjson *p)
{
	return sfs_lines_finish(&p->lb, ndjson_line, p);
}

void sfs_ndjson_free(struct sfs_ndjson *p)
{
	sfs_linebuf_free(&p->lb);
}

/* ---- SSE --------------------------------------------------------------- */

static int set_field(char **dst, const char *v, size_t n)
{
	char *s = strndup(v, n);
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

static int sse_line(const char *line, size_t len, void *arg)
{
	struct sfs_sse *p = arg;
	if (len == 0) {
		int r = 0;
		if (p->has_data)
			r = p->on_event(p->event ? p->event : "message", p->data ? p->data : "",
					p->data_len, p->id, p->arg);
		free(p->event);
		free(p->data);
		p->event = p->data = NULL;
		p->data_len = 0;
		p->has_data = false;
		return r;
	}
	if (line[0] == ':')
		return 0;
	const char *colon = memchr(line, ':', len);
	size_t flen = colon ? (size_t)(colon - line) : len;
	const char *v = colon ? colon + 1 : line + len;
	size_t vlen = colon ? len - flen - 1 : 0;
	if (vlen && *v == ' ') {
		v++;
		vlen--;
	}
	if (flen == 5 && !memcmp(line, "event", 5))
		return set_field(&p->event, v, vlen);
	if (flen == 2 && !memcmp(line, "id", 2))
		return set_field(&p->id, v, vlen);
	if (flen == 4 && !memcmp(line, "data", 4)) {
		size_t need = p->data_len + (p->has_data ? 1 : 0) + vlen + 1;
		char *grown = realloc(p->data, need);
		if (!grown)
			return -ENOMEM;
		p->data = grown;
		if (p->has_data)
			p->data[p->data_len++] = '\n';
		memcpy(p->data + p->data_len, v, vlen);
		p->data_len += vlen;
		p->data[p->data_len] = '\0';
		p->has_data = true;
	}
	return 0; /* unknown fields (retry:) are ignored */
}

int sfs_sse_feed(struct sfs_sse *p, const char *data, size_t n)
{
	return sfs_lines_feed(&p->lb, data, n, sse_line, p);
}

void sfs_sse_free(struct sfs_sse *p)
{
	sfs_linebuf_free(&p->lb);
	free(p->event);
	free(p->data);
	free(p->id);
	p->event = p->data = p->id = NULL;
}
