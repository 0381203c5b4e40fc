/* Talking to the Sprites API: token, URLs, JSON and NDJSON calls. */
#include "sprites.h"

#include "../config.h"
#include "../options.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sp_token(void)
{
	const char *t = sfs_http_credential("SPRITES_TOKEN", "sprites.token");
	return t ? t : sfs_http_credential("SPRITE_TOKEN", NULL);
}

static int need_token(const char **tok, struct sfs_err *err)
{
	*tok = sp_token();
	if (!*tok)
		return sfs_errf(err, -EACCES,
				"sprites: no token (set SPRITES_TOKEN or sprites.token)");
	return 0;
}

static long timeout_ms(void)
{
	return (long)(sfs_opt_get_double("sprites.timeout") * 1000);
}

int sp_path(char *buf, size_t len, const char *name, const char *rest)
{
	return sfs_pathf(buf, len, "/v1/sprites/%s%s", name, rest ? rest : "");
}

static char *url_of(const char *path)
{
	char *base = sfs_http_base_url("sprites.api_url", "SPRITES_API_URL", SP_DEFAULT_API);
	char *url = NULL;
	if (base && asprintf(&url, "%s%s", base, path) < 0)
		url = NULL;
	free(base);
	return url;
}

/* The token and the absolute URL of path, or the reason there are none. */
static int prepare(const char *path, const char **tok, char **url, struct sfs_err *err)
{
	int r = need_token(tok, err);
	if (r)
		return r;
	*url = url_of(path);
	return *url ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
}

int sp_api_req(const char *path, struct sfs_http_req *req, struct sfs_http_resp *resp,
	       struct sfs_err *err)
{
	const char *tok;
	char *url;
	int r = prepare(path, &tok, &url, err);
	if (r)
		return r;
	req->url = url;
	req->bearer = tok;
	req->what = "sprites";
	if (!req->timeout_ms)
		req->timeout_ms = timeout_ms();
	r = sfs_http_do(req, resp, err);
	free(url);
	req->url = NULL;
	return r;
}

int sp_api(const char *method, const char *path, json_t *body, json_t **out, long *status,
	   struct sfs_err *err)
{
	const char *tok;
	char *url;
	int r = prepare(path, &tok, &url, err);
	if (r)
		return r;
	struct sfs_http_req req = {.method = method,
				   .url = url,
				   .bearer = tok,
				   .json = body,
				   .timeout_ms = timeout_ms(),
				   .what = "sprites"};
	r = sfs_http_json(&req, status, out, err);
	free(url);
	return r;
}

struct nd {
	struct sfs_ndjson p;
	int (*on_value)(json_t *v, void *arg);
	void *arg;
	char error[512];
};

static int nd_value(json_t *v, void *arg)
{
	struct nd *n = arg;
	const char *type = json_string_value(json_object_get(v, "type"));
	if (type && !strcmp(type, "error")) {
		const char *e = json_string_value(json_object_get(v, "error"));
		if (!e)
			e = json_string_value(json_object_get(v, "message"));
		snprintf(n->error, sizeof n->error, "%s",
			 e ? e : "error"); /* message: may be cut */
		return -EIO;
	}
	return n->on_value ? n->on_value(v, n->arg) : 0;
}

static int nd_sink(const void *data, size_t len, void *arg)
{
	struct nd *n = arg;
	return sfs_ndjson_feed(&n->p, data, len);
}

int sp_api_ndjson(const char *method, const char *path, json_t *body,
		  int (*on_value)(json_t *v, void *arg), void *arg, struct sfs_err *err)
{
	struct nd n = {.on_value = on_value, .arg = arg};
	n.p.on_value = nd_value;
	n.p.arg = &n;
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (body && !text)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct sfs_http_req req = {.method = method,
				   .body = text,
				   .body_len = text ? strlen(text) : 0,
				   .content_type = text ? "application/json" : NULL,
				   .sink = nd_sink,
				   .sink_arg = &n};
	struct sfs_http_resp resp = {0};
	int r = sp_api_req(path, &req, &resp, err);
	free(text);
	if (!r && (resp.status < 200 || resp.status > 299)) {
		char msg[512];
		sfs_http_error_text(resp.body ? resp.body : "", resp.len, msg, sizeof msg);
		r = sfs_errf(err, sfs_http_status_errno(resp.status), "sprites: HTTP %ld: %s",
			     resp.status, msg);
	} else if (!r) {
		r = sfs_ndjson_finish(&n.p);
		if (r == -EIO && n.error[0])
			r = sfs_errf(err, -EIO, "sprites: %s", n.error);
		else if (r < 0)
			r = sfs_errf(err, r, "sprites: a bad progress line from %s", path);
	} else if (n.error[0]) {
		r = sfs_errf(err, -EIO, "sprites: %s", n.error);
	}
	sfs_ndjson_free(&n.p);
	sfs_http_resp_free(&resp);
	return r;
}
