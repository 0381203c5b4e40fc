/* JSON calls and what a non-2xx answer means. */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int sfs_http_status_errno(long status)
{
	if (status >= 200 && status < 300)
		return 0;
	switch (status) {
	case 400:
	case 422:
		return -EINVAL;
	case 401:
	case 403:
		return -EACCES;
	case 404:
	case 410:
		return -ENOENT;
	case 408:
	case 504:
		return -ETIMEDOUT;
	case 409:
		return -EBUSY;
	case 413:
		return -EFBIG;
	case 429:
		return -EAGAIN;
	case 507:
		return -ENOSPC;
	}
	return -EIO;
}

void sfs_http_error_text(const char *body, size_t len, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (!body || !len)
		return;
	json_t *v = json_loadb(body, len, 0, NULL);
	if (v) {
		json_t *m = json_object_get(v, "message");
		if (json_is_array(m))
			m = json_array_get(m, 0);
		if (!json_is_string(m))
			m = json_object_get(v, "error");
		if (json_is_object(m))
			m = json_object_get(m, "message");
		if (json_is_string(m))
			snprintf(buf, cap, "%s", json_string_value(m)); /* message: may be cut */
		json_decref(v);
		if (buf[0])
			return;
	}
	size_t n = len < 200 ? len : 200;
	snprintf(buf, cap, "%.*s", (int)n, body); /* message: may be cut */
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

int sfs_http_json(const struct sfs_http_req *req, long *status, json_t **out, struct sfs_err *err)
{
	struct sfs_http_resp resp;
	if (out)
		*out = NULL;
	int r = sfs_http_do(req, &resp, err);
	if (r)
		return r;
	if (status)
		*status = resp.status;
	r = sfs_http_status_errno(resp.status);
	if (r) {
		char text[512], where[512];
		sfs_http_error_text(resp.body, resp.len, text, sizeof(text));
		snprintf(where, sizeof(where), "%.*s", (int)strcspn(req->url, "?"),
			 req->url); /* message: may be cut */
		r = sfs_errf(err, r, "%s: %s %s: HTTP %ld%s%s", req->what ? req->what : "http",
			     req->method ? req->method : "GET", where, resp.status,
			     text[0] ? ": " : "", text);
	} else if (out && resp.len) {
		json_error_t jerr;
		*out = json_loadb(resp.body, resp.len, JSON_DECODE_ANY, &jerr);
		if (!*out)
			r = sfs_errf(err, -EPROTO, "%s: %s: unreadable JSON answer: %s",
				     req->what ? req->what : "http", req->url, jerr.text);
	}
	sfs_http_resp_free(&resp);
	return r;
}
