/* Downloads written into a file: the sink, and the request shape every
 * provider's fs_read makes with it. */
#include "http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int sfs_http_fd_sink(const void *data, size_t len, void *arg)
{
	struct sfs_http_fd *s = arg;
	const char *p = data;
	while (len) {
		ssize_t w = pwrite(s->fd, p, len, s->pos);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
		s->pos += w;
	}
	return 0;
}

int sfs_http_fd_rewind(void *arg)
{
	struct sfs_http_fd *s = arg;
	s->pos = 0;
	return ftruncate(s->fd, 0);
}

static int status_verrf(struct sfs_err *err, const struct sfs_http_resp *resp, const char *fmt,
			va_list ap)
{
	char what[1024], text[512];
	vsnprintf(what, sizeof(what), fmt, ap);
	sfs_http_error_text(resp->body, resp->len, text, sizeof(text));
	int code = sfs_http_status_errno(resp->status);
	/* a read of a directory: the file APIs answer 400 and say so */
	if (resp->status == 400 && strcasestr(text, "is a directory"))
		code = -EISDIR;
	return sfs_errf(err, code ? code : -EIO, "%s: HTTP %ld%s%s", what, resp->status,
			text[0] ? ": " : "", text);
}

int sfs_http_status_errf(struct sfs_err *err, const struct sfs_http_resp *resp, const char *fmt,
			 ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = status_verrf(err, resp, fmt, ap);
	va_end(ap);
	return r;
}

int sfs_http_download_fd(sfs_http_perform_fn *perform, void *ctx, const char *route,
			 struct sfs_http_req *req, int fd, struct sfs_err *err, const char *fmt,
			 ...)
{
	struct sfs_http_fd s = {.fd = fd};
	req->sink = sfs_http_fd_sink;
	req->sink_reset = sfs_http_fd_rewind;
	req->sink_arg = &s;
	struct sfs_http_resp resp = {0};
	int r = perform(ctx, route, req, &resp, err);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300) {
		va_list ap;
		va_start(ap, fmt);
		r = status_verrf(err, &resp, fmt, ap);
		va_end(ap);
	}
	sfs_http_resp_free(&resp);
	return r;
}
