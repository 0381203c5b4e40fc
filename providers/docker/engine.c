#include "engine.h"

#include "../config.h"
#include "../http/http.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* The endpoint, from -o docker.host=, DOCKER_HOST, or the default socket. */
static const char *host_setting(void)
{
	const char *h = sfs_config_get("docker.host", NULL);
	if (!h || !*h)
		h = getenv("DOCKER_HOST");
	if (!h || !*h)
		h = "unix:///var/run/docker.sock";
	return h;
}

const char *dk_where(void)
{
	const char *h = host_setting();
	return strncmp(h, "unix://", 7) == 0 ? h + 7 : h;
}

struct target {
	char url_base[512]; /* "http://localhost" or "https://host:port" */
	char socket[512];   /* unix socket path, or "" */
	bool tls;
};

static int get_target(struct target *t, struct sfs_err *err)
{
	const char *h = host_setting();
	memset(t, 0, sizeof(*t));
	if (strncmp(h, "unix://", 7) == 0) {
		if (sfs_pathf(t->socket, sizeof(t->socket), "%s", h + 7) < 0)
			return sfs_errf(err, -ENAMETOOLONG,
					"docker.host: the socket path is too long");
		snprintf(t->url_base, sizeof(t->url_base), "http://localhost");
		return 0;
	}
	if (strncmp(h, "tcp://", 6) == 0) {
		const char *v = getenv("DOCKER_TLS_VERIFY");
		t->tls = v && *v && strcmp(v, "0") != 0;
		if (sfs_pathf(t->url_base, sizeof(t->url_base), "%s://%s",
			      t->tls ? "https" : "http", h + 6) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "docker.host: too long");
		size_t l = strlen(t->url_base);
		if (l && t->url_base[l - 1] == '/')
			t->url_base[l - 1] = '\0';
		return 0;
	}
	return sfs_errf(err, -EINVAL,
			"docker: DOCKER_HOST=%s: expected unix:///PATH or tcp://HOST:PORT", h);
}

#define PATH_STAT_HEADER "X-Docker-Container-Path-Stat"

/* A request as the HTTP kit takes it (whose pool keeps the connection to
 * the engine open between calls): the URL below the API version, the
 * socket or TLS files of the target, in buffers that live as long as it. */
struct call {
	struct sfs_http_req req;
	char url[2048];
	char ca[1024], cert[1024], key[1024];
	char ctype[256];
};

static int prepare(struct call *k, const struct target *t, const char *method, const char *path,
		   const char *ctype, long timeout_s, struct sfs_err *err)
{
	memset(k, 0, sizeof(*k));
	if (snprintf(k->url, sizeof(k->url), "%s%s%s", t->url_base, DK_API, path) >=
	    (int)sizeof(k->url))
		return sfs_errf(err, -ENAMETOOLONG, "docker: request path too long");
	k->req.method = method;
	k->req.url = k->url;
	k->req.what = "docker";
	k->req.max_attempts = 1; /* the engine is local: a failure is not transient */
	k->req.timeout_ms = timeout_s > 0 ? timeout_s * 1000 : -1;
	k->req.capture_header = PATH_STAT_HEADER;
	if (t->socket[0])
		k->req.unix_socket = t->socket;
	const char *dir = getenv("DOCKER_CERT_PATH");
	if (t->tls && dir && *dir) {
		if (sfs_pathf(k->ca, sizeof(k->ca), "%s/ca.pem", dir) < 0 ||
		    sfs_pathf(k->cert, sizeof(k->cert), "%s/cert.pem", dir) < 0 ||
		    sfs_pathf(k->key, sizeof(k->key), "%s/key.pem", dir) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "DOCKER_CERT_PATH is too long");
		k->req.tls_ca = k->ca;
		k->req.tls_cert = k->cert;
		k->req.tls_key = k->key;
	}
	if (ctype) {
		if (sfs_pathf(k->ctype, sizeof(k->ctype), "%s", ctype) < 0)
			return sfs_errf(err, -EINVAL, "docker: content type too long");
		k->req.content_type = k->ctype;
	}
	return 0;
}

/* A transport failure, said so that a user knows what to fix. */
static int transport_error(const struct target *t, const char *why, struct sfs_err *err)
{
	struct stat st;
	if (t->socket[0] && stat(t->socket, &st) < 0)
		return sfs_errf(err, -EIO,
				"docker: cannot reach %s: %s (is dockerd running? set DOCKER_HOST "
				"or -o docker.host=)",
				t->socket, strerror(errno));
	return sfs_errf(err, -EIO, "docker: cannot reach %s: %s", dk_where(), why);
}

/* The shared body of dk_request and dk_upload. */
static int perform(const char *method, const char *path, const char *ctype, const void *body,
		   size_t len, dk_source read, void *read_arg, long timeout_s, struct dk_resp *resp,
		   struct sfs_err *err)
{
	memset(resp, 0, sizeof(*resp));
	struct target t;
	int r = get_target(&t, err);
	if (r)
		return r;
	struct call k;
	r = prepare(&k, &t, method, path, ctype, timeout_s, err);
	if (r)
		return r;
	if (read) {
		k.req.read = read;
		k.req.read_arg = read_arg;
		k.req.read_len = len;
	} else if (body) {
		k.req.body = body;
		k.req.body_len = len;
		if (!ctype)
			k.req.content_type = "application/octet-stream";
	}
	struct sfs_http_resp hr;
	struct sfs_err herr = {0};
	r = sfs_http_do(&k.req, &hr, &herr);
	if (r)
		return r == -ENOMEM ? sfs_errf(err, r, "out of memory")
				    : transport_error(&t, herr.msg, err);
	resp->status = hr.status;
	resp->body = hr.body;
	resp->len = hr.len;
	resp->path_stat = hr.header;
	return 0;
}

int dk_request(const char *method, const char *path, const char *ctype, const void *body,
	       size_t len, long timeout_s, struct dk_resp *resp, struct sfs_err *err)
{
	return perform(method, path, ctype, body, len, NULL, NULL, timeout_s, resp, err);
}

int dk_upload(const char *method, const char *path, const char *ctype, dk_source read, void *arg,
	      size_t size, long timeout_s, struct dk_resp *resp, struct sfs_err *err)
{
	return perform(method, path, ctype, NULL, size, read, arg, timeout_s, resp, err);
}

void dk_resp_free(struct dk_resp *resp)
{
	free(resp->body);
	free(resp->path_stat);
	resp->body = resp->path_stat = NULL;
	resp->len = 0;
}

void dk_reply_message(const struct dk_resp *resp, char *buf, size_t len)
{
	json_t *j = resp->len ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (m)
		snprintf(buf, len, "%s", m); /* message: may be cut */
	else if (resp->len)
		snprintf(buf, len, "%.*s", (int)(resp->len > 300 ? 300 : resp->len),
			 resp->body); /* message: may be cut */
	else
		snprintf(buf, len, "HTTP %ld", resp->status);
	json_decref(j);
	size_t l = strlen(buf);
	while (l && (buf[l - 1] == '\n' || buf[l - 1] == ' '))
		buf[--l] = '\0';
}

int dk_json(const char *method, const char *path, json_t *body, long timeout_s, json_t **out,
	    const char *what, struct sfs_err *err)
{
	if (out)
		*out = NULL;
	char *text = NULL;
	if (body && !(text = json_dumps(body, JSON_COMPACT)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct dk_resp resp;
	int r = dk_request(method, path, text ? "application/json" : NULL, text,
			   text ? strlen(text) : 0, timeout_s, &resp, err);
	free(text);
	if (r)
		return r;
	if (resp.status >= 400) {
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		r = sfs_errf(err, sfs_http_status_errno(resp.status), "docker: %s: %s", what, msg);
		dk_resp_free(&resp);
		return r;
	}
	if (out && resp.len) {
		json_error_t jerr;
		*out = json_loadb(resp.body, resp.len, 0, &jerr);
		if (!*out) {
			dk_resp_free(&resp);
			return sfs_errf(err, -EIO, "docker: %s: unreadable reply: %s", what,
					jerr.text);
		}
	}
	r = (int)resp.status;
	dk_resp_free(&resp);
	return r;
}

struct stream_ctx {
	dk_sink sink;
	void *arg;
};

static int to_sink(const void *data, size_t len, void *arg)
{
	struct stream_ctx *s = arg;
	return s->sink(s->arg, data, len) ? 0 : 1; /* 1: stop, no error */
}

int dk_stream(const char *method, const char *path, json_t *body, dk_sink sink, void *arg,
	      const int *stop, struct sfs_err *err)
{
	struct target t;
	int r = get_target(&t, err);
	if (r)
		return r;
	struct call k;
	r = prepare(&k, &t, method, path, NULL, 0, err);
	if (r)
		return r;
	struct stream_ctx s = {.sink = sink, .arg = arg};
	k.req.json = body;
	k.req.sink = to_sink;
	k.req.sink_arg = &s;
	k.req.stop = stop;
	k.req.capture_header = NULL;
	/* its own connection: an attached exec takes it over for good */
	k.req.forbid_reuse = true;
	struct sfs_http_resp hr;
	struct sfs_err herr = {0};
	r = sfs_http_do(&k.req, &hr, &herr);
	if (r == -ECANCELED)
		return sfs_errf(err, -ECANCELED, "docker: stream stopped");
	if (r)
		return r == -ENOMEM ? sfs_errf(err, r, "out of memory")
				    : transport_error(&t, herr.msg, err);
	if (hr.status >= 400) {
		struct dk_resp resp = {.status = hr.status, .body = hr.body, .len = hr.len};
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		sfs_http_resp_free(&hr);
		return sfs_errf(err, sfs_http_status_errno(hr.status), "docker: %s", msg);
	}
	sfs_http_resp_free(&hr);
	return (int)hr.status;
}

void dk_engine_shutdown(void)
{
	sfs_http_close_idle(); /* the kit's pool holds the engine connections */
}
