/* Parsing a proxy request's head (request.h). */
#include "request.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Where "\r\n\r\n" ends in buf, or 0. */
static size_t head_end(const char *buf, size_t len)
{
	for (size_t i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

/* host[:port] or [v6][:port] in s[0..n); def is the port when none. */
static int parse_authority(const char *s, size_t n, int def, bool need_port,
			   struct sfs_proxy_req *r)
{
	const char *host = s, *port = NULL;
	size_t hlen;
	if (n && s[0] == '[') {
		const char *end = memchr(s, ']', n);
		if (!end)
			return -EINVAL;
		host = s + 1;
		hlen = (size_t)(end - host);
		size_t rest = n - (size_t)(end + 1 - s);
		if (rest) {
			if (end[1] != ':')
				return -EINVAL;
			port = end + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);
		hlen = colon ? (size_t)(colon - s) : n;
		port = colon ? colon + 1 : NULL;
	}
	if (hlen == 0 || hlen >= sizeof(r->host))
		return -EINVAL;
	for (size_t i = 0; i < hlen; i++) {
		unsigned char c = (unsigned char)host[i];
		if (!isalnum(c) && c != '-' && c != '.' && c != ':' && c != '_')
			return -EINVAL;
	}
	memcpy(r->host, host, hlen);
	r->host[hlen] = '\0';
	if (!port) {
		if (need_port)
			return -EINVAL;
		r->port = def;
		return 0;
	}
	size_t plen = n - (size_t)(port - s);
	if (plen == 0 || plen > 5)
		return -EINVAL;
	int v = 0;
	for (size_t i = 0; i < plen; i++) {
		if (!isdigit((unsigned char)port[i]))
			return -EINVAL;
		v = v * 10 + (port[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	r->port = v;
	return 0;
}

int sfs_proxy_parse(const char *buf, size_t len, struct sfs_proxy_req *r)
{
	memset(r, 0, sizeof(*r));
	size_t end = head_end(buf, len < SFS_PROXY_HEAD_MAX ? len : SFS_PROXY_HEAD_MAX);
	if (!end)
		return len >= SFS_PROXY_HEAD_MAX ? -E2BIG : 0;
	const char *eol = memchr(buf, '\r', end);
	if (!eol || eol[1] != '\n')
		return -EINVAL;
	r->line_len = (size_t)(eol - buf) + 2;
	r->head_len = end;
	/* METHOD SP TARGET SP VERSION */
	const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
	if (!sp1 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof(r->method))
		return -EINVAL;
	const char *target = sp1 + 1;
	const char *sp2 = memchr(target, ' ', (size_t)(eol - target));
	if (!sp2 || sp2 == target)
		return -EINVAL;
	size_t vlen = (size_t)(eol - (sp2 + 1));
	if (vlen != 8 ||
	    (strncmp(sp2 + 1, "HTTP/1.1", 8) != 0 && strncmp(sp2 + 1, "HTTP/1.0", 8) != 0))
		return -EINVAL;
	memcpy(r->version, sp2 + 1, 8);
	memcpy(r->method, buf, (size_t)(sp1 - buf));
	for (const char *m = r->method; *m; m++)
		if (!isupper((unsigned char)*m))
			return -EINVAL;
	size_t tlen = (size_t)(sp2 - target);
	if (strcmp(r->method, "CONNECT") == 0) {
		r->connect = true;
		return parse_authority(target, tlen, 0, true, r) ? -EINVAL : 1;
	}
	if (tlen >= 8 && strncasecmp(target, "https://", 8) == 0)
		return -EPROTONOSUPPORT;
	if (tlen < 7 || strncasecmp(target, "http://", 7) != 0)
		return -EINVAL;
	const char *auth = target + 7;
	size_t alen = 0;
	while (alen < tlen - 7 && auth[alen] != '/' && auth[alen] != '?' && auth[alen] != '#')
		alen++;
	if (memchr(auth, '@', alen))
		return -EINVAL;
	if (parse_authority(auth, alen, 80, false, r))
		return -EINVAL;
	r->path_off = (size_t)(auth + alen - buf);
	r->path_len = tlen - 7 - alen;
	if (r->path_len && auth[alen] == '#')
		return -EINVAL;
	r->path_root = r->path_len == 0 || auth[alen] != '/';
	return 1;
}

/* ---- the head sent upstream ------------------------------------------- */

static int put(char *out, size_t len, size_t *at, const char *s, size_t n)
{
	if (n >= len - *at)
		return -E2BIG;
	memcpy(out + *at, s, n);
	*at += n;
	out[*at] = '\0';
	return 0;
}

/* RFC 9110 5.6.2 token characters: what a field name is made of. */
static bool tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Whether name[0..n) is one of the fields the proxy drops: its own
 * (Proxy-*), the hop-by-hop ones, and Host, which it writes itself. */
static bool dropped(const char *name, size_t n)
{
	static const char *const hop[] = {"host",    "connection", "keep-alive",
					  "upgrade", "te",	   "trailer"};
	if (n >= 6 && strncasecmp(name, "proxy-", 6) == 0)
		return true;
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (strlen(hop[i]) == n && strncasecmp(name, hop[i], n) == 0)
			return true;
	return false;
}

int sfs_proxy_origin_head(const char *buf, const struct sfs_proxy_req *r, char *out, size_t len)
{
	if (r->connect || len == 0)
		return -EINVAL;
	/* line ends are CRLF and nothing else, and no NUL: a server that
	 * splits on a lone LF would see fields the proxy did not */
	for (size_t i = 0; i < r->head_len; i++) {
		char c = buf[i];
		if (c == '\0' || (c == '\r' && (i + 1 >= r->head_len || buf[i + 1] != '\n')) ||
		    (c == '\n' && (i == 0 || buf[i - 1] != '\r')))
			return -EINVAL;
	}
	const char *path = buf + r->path_off;
	for (size_t i = 0; i < r->path_len; i++)
		if ((unsigned char)path[i] <= 0x20 || (unsigned char)path[i] >= 0x7f)
			return -EINVAL;
	size_t at = 0;
	int e;
	out[0] = '\0';
	if ((e = put(out, len, &at, r->method, strlen(r->method))) ||
	    (e = put(out, len, &at, " ", 1)) ||
	    (r->path_root && (e = put(out, len, &at, "/", 1))) ||
	    (e = put(out, len, &at, path, r->path_len)) || (e = put(out, len, &at, " ", 1)) ||
	    (e = put(out, len, &at, r->version, strlen(r->version))) ||
	    (e = put(out, len, &at, "\r\n", 2)))
		return e;
	bool has_length = false, has_chunked = false;
	/* the field lines: from after the request line to the blank line */
	for (size_t i = r->line_len; i + 2 < r->head_len;) {
		const char *line = buf + i;
		const char *eol = memchr(line, '\r', r->head_len - i);
		size_t n = (size_t)(eol - line);
		const char *colon = memchr(line, ':', n);
		/* a folded line (obs-fold) or a name with blanks: refused, as
		 * RFC 9112 5.1 and 5.2 let a proxy do */
		if (!colon || colon == line)
			return -EINVAL;
		for (const char *c = line; c < colon; c++)
			if (!tchar((unsigned char)*c))
				return -EINVAL;
		size_t nl = (size_t)(colon - line);
		if (nl == 14 && strncasecmp(line, "content-length", nl) == 0)
			has_length = true;
		if (nl == 17 && strncasecmp(line, "transfer-encoding", nl) == 0)
			has_chunked = true;
		if (!dropped(line, nl) && (e = put(out, len, &at, line, n + 2)))
			return e;
		i += n + 2;
	}
	if (has_length && has_chunked)
		return -EINVAL;
	char host[300];
	bool v6 = strchr(r->host, ':') != NULL;
	int hn = r->port == 80 ? snprintf(host, sizeof(host), "Host: %s%s%s\r\n", v6 ? "[" : "",
					  r->host, v6 ? "]" : "")
			       : snprintf(host, sizeof(host), "Host: %s%s%s:%d\r\n", v6 ? "[" : "",
					  r->host, v6 ? "]" : "", r->port);
	static const char close_[] = "Connection: close\r\n\r\n";
	if ((e = put(out, len, &at, host, (size_t)hn)) ||
	    (e = put(out, len, &at, close_, sizeof(close_) - 1)))
		return e;
	return (int)at;
}
