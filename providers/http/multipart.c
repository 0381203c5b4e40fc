/*
 * A multipart/form-data response body (RFC 7578), parsed whole: the
 * boundary from the Content-Type value, then each part's name and filename
 * from its Content-Disposition header, and its bytes.  Used for bulk
 * downloads, which answer with one part per file.  Pure; unit-tested
 * (tests/unit/test_multipart.c).
 */
#include "http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The boundary parameter of a Content-Type value into buf; false if none. */
static bool boundary_of(const char *ctype, char *buf, size_t cap)
{
	const char *p = ctype ? strcasestr(ctype, "boundary=") : NULL;
	if (!p)
		return false;
	p += 9;
	size_t n = 0;
	if (*p == '"') {
		p++;
		while (p[n] && p[n] != '"')
			n++;
	} else {
		while (p[n] && p[n] != ';' && p[n] != ' ' && p[n] != '\t' && p[n] != '\r')
			n++;
	}
	if (n == 0 || n > 70 || n + 1 > cap) /* RFC 2046: 1..70 characters */
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return true;
}

static const char *find(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
	return nlen <= hlen ? memmem(hay, hlen, needle, nlen) : NULL;
}

/* The value of parameter key ("name", "filename") in a Content-Disposition
 * line [p, end), unquoted (\" and \\ undone), malloc'd; NULL if absent. */
static char *disposition_param(const char *p, const char *end, const char *key)
{
	size_t klen = strlen(key);
	for (const char *q = p; q + klen + 1 < end; q++) {
		if ((q == p || q[-1] == ';' || q[-1] == ' ') && strncasecmp(q, key, klen) == 0 &&
		    q[klen] == '=') {
			const char *v = q + klen + 1;
			char *out = malloc((size_t)(end - v) + 1);
			if (!out)
				return NULL;
			size_t n = 0;
			if (*v == '"') {
				for (v++; v < end && *v != '"'; v++) {
					if (*v == '\\' && v + 1 < end)
						v++;
					out[n++] = *v;
				}
			} else {
				while (v < end && *v != ';')
					out[n++] = *v++;
			}
			out[n] = '\0';
			return out;
		}
	}
	return NULL;
}

int sfs_multipart_parse(const char *ctype, const char *body, size_t len,
			int (*on_part)(const char *name, const char *filename, const char *data,
				       size_t len, void *arg),
			void *arg)
{
	char b[80], delim[84];
	if (!boundary_of(ctype, b, sizeof(b)))
		return -EPROTO;
	int dlen = snprintf(delim, sizeof(delim), "--%s", b);
	const char *p = find(body, len, delim, (size_t)dlen), *end = body + len;
	if (!p)
		return -EPROTO;
	for (;;) {
		p += dlen;
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return 0; /* the closing delimiter */
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
			return -EPROTO;
		p += 2;
		const char *hend = find(p, (size_t)(end - p), "\r\n\r\n", 4);
		if (!hend)
			return -EPROTO;
		char *name = NULL, *filename = NULL;
		for (const char *line = p; line < hend;) {
			const char *eol = find(line, (size_t)(hend - line), "\r\n", 2);
			if (!eol)
				eol = hend;
			static const char cd[] = "Content-Disposition:";
			if ((size_t)(eol - line) > sizeof(cd) - 1 &&
			    strncasecmp(line, cd, sizeof(cd) - 1) == 0) {
				free(name);
				free(filename);
				name = disposition_param(line + sizeof(cd) - 1, eol, "name");
				filename =
				    disposition_param(line + sizeof(cd) - 1, eol, "filename");
			}
			line = eol + 2;
		}
		const char *data = hend + 4;
		/* the part ends at CRLF + delimiter */
		char tail[88];
		int tlen = snprintf(tail, sizeof(tail), "\r\n%s", delim);
		const char *next = find(data, (size_t)(end - data), tail, (size_t)tlen);
		if (!next) {
			free(name);
			free(filename);
			return -EPROTO;
		}
		int r = on_part(name ? name : "", filename ? filename : "", data,
				(size_t)(next - data), arg);
		free(name);
		free(filename);
		if (r)
			return r;
		p = next + 2;
	}
}
