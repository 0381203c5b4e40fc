/* Incremental line splitting, and the NDJSON and SSE framings on top of it. */
#include "http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	struct sfs_buf *b = &lb->text;
	int r = sfs_buf_add(b, data, n);
	if (r)
		return r;
	size_t start = 0;
	for (;;) {
		char *nl = memchr(b->buf + start, '\n', b->len - start);
		if (!nl)
			break;
		size_t end = (size_t)(nl - b->buf);
		r = emit(b->buf + start, end - start, on_line, arg);
		start = end + 1;
		if (r)
			break;
	}
	memmove(b->buf, b->buf + start, b->len - start);
	b->len -= start;
	b->buf[b->len] = '\0';
	return r;
}

int sfs_lines_finish(struct sfs_linebuf *lb,
		     int (*on_line)(const char *line, size_t len, void *arg), void *arg)
{
	if (!lb->text.len)
		return 0;
	int r = emit(lb->text.buf, lb->text.len, on_line, arg);
	sfs_buf_reset(&lb->text);
	return r;
}

void sfs_linebuf_free(struct sfs_linebuf *lb)
{
	sfs_buf_free(&lb->text);
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
			r = p->on_event(p->event ? p->event : "message",
					p->data.buf ? p->data.buf : "", p->data.len, p->id, p->arg);
		free(p->event);
		p->event = NULL;
		sfs_buf_reset(&p->data);
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
		if ((p->has_data && sfs_buf_addc(&p->data, '\n')) || sfs_buf_add(&p->data, v, vlen))
			return -ENOMEM;
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
	free(p->id);
	p->event = p->id = NULL;
	sfs_buf_free(&p->data);
}
