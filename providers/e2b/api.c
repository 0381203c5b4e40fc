/* Talking to E2B: auth, the two planes' URLs, unary and streaming Connect
 * calls, and running the shell kit's scripts through process.Process/Start. */
#include "e2b.h"

#include "../config.h"
#include "../options.h"
#include "../redact.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* E2B's own state of a sandbox (sb->priv): the domain its envd is reached
 * under and its envd access token (sandboxes created secure).  Read by FUSE
 * workers and the journal engine while an op may replace it (restore), so
 * guarded by e2b_state_mu, a leaf lock. */
struct e2b_state {
	char *domain;
	char *token;
};
static pthread_mutex_t e2b_state_mu = PTHREAD_MUTEX_INITIALIZER;

static void state_free(struct e2b_state *st)
{
	if (st) {
		free(st->domain);
		free(st->token);
	}
	free(st);
}

/* Replaces sb's state with domain and token (taken over, may be NULL). */
static int set_state(struct sfs_sandbox *sb, char *domain, char *token)
{
	struct e2b_state *st = calloc(1, sizeof(*st));
	if (!st) {
		free(domain);
		free(token);
		return -ENOMEM;
	}
	st->domain = domain;
	st->token = token;
	if (token)
		sfs_redact_add_secret(token); /* it opens envd to anyone */
	pthread_mutex_lock(&e2b_state_mu);
	struct e2b_state *old = sb->priv;
	sb->priv = st;
	pthread_mutex_unlock(&e2b_state_mu);
	state_free(old);
	return 0;
}

json_t *e2b_state_save(const struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&e2b_state_mu);
	const struct e2b_state *st = sb->priv;
	json_t *o = NULL;
	if (st && (st->domain || st->token)) {
		o = json_object();
		if (o && st->domain)
			json_object_set_new(o, "domain", json_string(st->domain));
		if (o && st->token)
			json_object_set_new(o, "envdAccessToken", json_string(st->token));
	}
	pthread_mutex_unlock(&e2b_state_mu);
	return o;
}

int e2b_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err)
{
	const char *d = json_string_value(json_object_get(saved, "domain"));
	const char *t = json_string_value(json_object_get(saved, "envdAccessToken"));
	if (!d && !t)
		return 0; /* resume finds them again */
	char *dc = d ? strdup(d) : NULL, *tc = t ? strdup(t) : NULL;
	if ((d && !dc) || (t && !tc) || set_state(sb, dc, tc))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return 0;
}

void e2b_state_free(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&e2b_state_mu);
	struct e2b_state *st = sb->priv;
	sb->priv = NULL;
	pthread_mutex_unlock(&e2b_state_mu);
	state_free(st);
}

void e2b_state_take(struct sfs_sandbox *dst, struct sfs_sandbox *src)
{
	pthread_mutex_lock(&e2b_state_mu);
	void *old = dst->priv;
	dst->priv = src->priv;
	src->priv = old;
	pthread_mutex_unlock(&e2b_state_mu);
	e2b_state_free(src);
}

const char *e2b_api_key(void)
{
	return sfs_http_credential("E2B_API_KEY", "e2b.api_key");
}

long e2b_sandbox_timeout(void)
{
	return (long)sfs_opt_get_double("e2b.sandbox_timeout");
}

static long timeout_ms(void)
{
	return (long)(sfs_opt_get_double("e2b.timeout") * 1000);
}

/* As E2B's SDKs read them: E2B_API_URL, else https://api.$E2B_DOMAIN. */
static char *api_base(void)
{
	const char *dom = getenv("E2B_DOMAIN");
	char fallback[300];
	if (sfs_pathf(fallback, sizeof(fallback), "https://api.%s",
		      dom && *dom ? dom : E2B_DEFAULT_DOMAIN) < 0)
		return NULL; /* never the API of a cut domain */
	return sfs_http_base_url("e2b.api_url", "E2B_API_URL", fallback);
}

static int need_key(const char **key, struct sfs_err *err)
{
	*key = e2b_api_key();
	if (!*key)
		return sfs_errf(err, -EACCES, "e2b: no API key (set E2B_API_KEY or e2b.api_key)");
	return 0;
}

/* asprintf that leaves *out NULL when it fails (asprintf leaves it
 * undefined), so a cleanup may free it. */
static bool fmt(char **out, const char *f, ...) __attribute__((format(printf, 2, 3)));
static bool fmt(char **out, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vasprintf(out, f, ap);
	va_end(ap);
	if (n < 0)
		*out = NULL;
	return n >= 0;
}

int e2b_api(const char *method, const char *path, json_t *body, json_t **out, long *status,
	    struct sfs_err *err)
{
	const char *key;
	int r = need_key(&key, err);
	if (r)
		return r;
	char *base = api_base(), *url = NULL, *hkey = NULL;
	if (!base || !fmt(&url, "%s%s", base, path) || !fmt(&hkey, "X-API-Key: %s", key)) {
		free(base);
		free(url);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(base);
	const char *headers[] = {hkey, NULL};
	struct sfs_http_req req = {.method = method,
				   .url = url,
				   .headers = headers,
				   .json = body,
				   .content_type = body ? "application/json" : NULL,
				   .timeout_ms = timeout_ms(),
				   .what = "e2b"};
	r = sfs_http_json(&req, status, out, err);
	free(url);
	free(hkey);
	return r;
}

/* The envd base URL and headers of sb; every string malloc'd into h[]. */
struct envd_target {
	char *url;
	char *h[5];
};

static void target_free(struct envd_target *t)
{
	free(t->url);
	for (size_t i = 0; i < sizeof(t->h) / sizeof(t->h[0]); i++)
		free(t->h[i]);
}

static int envd_target(struct sfs_sandbox *sb, const char *path, struct envd_target *t,
		       struct sfs_err *err)
{
	memset(t, 0, sizeof(*t));
	char *id = sfs_sb_dup_id(sb);
	if (!id)
		return sfs_errf(err, -EIO, "e2b: sandbox %s has no id yet", sb->name);
	pthread_mutex_lock(&e2b_state_mu);
	const struct e2b_state *st = sb->priv;
	char *dom = st && st->domain ? strdup(st->domain) : NULL;
	char *tok = st && st->token ? strdup(st->token) : NULL;
	pthread_mutex_unlock(&e2b_state_mu);
	/* E2B_SANDBOX_URL (or e2b.sandbox_url): one address for every sandbox,
	 * which the headers route; else the sandbox's own host */
	char *base = sfs_http_base_url("e2b.sandbox_url", "E2B_SANDBOX_URL", NULL);
	const char *envdom = getenv("E2B_DOMAIN");
	int k = 0;
	bool ok = true;
	if (!base)
		ok = fmt(&base, "https://%d-%s.%s", E2B_ENVD_PORT, id,
			 dom		     ? dom
			 : envdom && *envdom ? envdom
					     : E2B_DEFAULT_DOMAIN);
	ok = ok && fmt(&t->url, "%s%s", base, path);
	ok = ok && fmt(&t->h[k++], "E2b-Sandbox-Id: %s", id);
	ok = ok && fmt(&t->h[k++], "E2b-Sandbox-Port: %d", E2B_ENVD_PORT);
	ok = ok && (t->h[k++] = strdup("Connect-Protocol-Version: 1"));
	if (ok && tok)
		ok = fmt(&t->h[k++], "X-Access-Token: %s", tok);
	free(id);
	free(dom);
	free(tok);
	if (!ok) {
		free(base);
		target_free(t);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(base);
	return 0;
}

int e2b_envd_req(struct sfs_sandbox *sb, const char *path, struct sfs_http_req *req,
		 struct sfs_http_resp *resp, struct sfs_err *err)
{
	struct envd_target t;
	int r = envd_target(sb, path, &t, err);
	if (r)
		return r;
	req->url = t.url;
	req->headers = (const char *const *)t.h;
	req->what = "e2b";
	if (!req->timeout_ms)
		req->timeout_ms = timeout_ms();
	r = sfs_http_do(req, resp, err);
	req->url = NULL;
	req->headers = NULL;
	target_free(&t);
	return r;
}

/* A failed envd answer: a Connect error {code: "not_found", message}, or
 * the proxy's {code: 502, message} (a paused or gone sandbox). */
static int envd_error(struct sfs_sandbox *sb, const char *what, struct sfs_http_resp *resp,
		      struct sfs_err *err)
{
	json_t *o = json_loadb(resp->body ? resp->body : "", resp->len, 0, NULL);
	char prefix[256];
	snprintf(prefix, sizeof(prefix), "e2b: %s in %s", what, sb->name); /* message: may be cut */
	int r;
	if (json_is_string(json_object_get(o, "code"))) {
		r = sfs_connect_error(o, prefix, err);
	} else {
		char text[512];
		sfs_http_error_text(resp->body, resp->len, text, sizeof(text));
		r = sfs_errf(err, sfs_http_status_errno(resp->status), "%s: HTTP %ld: %s", prefix,
			     resp->status, text);
	}
	json_decref(o);
	return r ? r : sfs_errf(err, -EIO, "%s: HTTP %ld", prefix, resp->status);
}

int e2b_rpc(struct sfs_sandbox *sb, const char *method, json_t *body, json_t **out,
	    struct sfs_err *err)
{
	char path[128];
	if (sfs_pathf(path, sizeof(path), "/%s", method) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: method %s: name too long", method);
	const char *m = strchr(method, '/');
	m = m ? m + 1 : method;
	struct sfs_http_req req = {.method = "POST",
				   .json = body,
				   .content_type = "application/json",
				   /* reads may be repeated; a repeated Move or MakeDir
				    * would fail on its own first success */
				   .retry_unsafe = !strcmp(m, "Stat") || !strcmp(m, "ListDir") ||
						   !strcmp(m, "List")};
	struct sfs_http_resp resp;
	int r = e2b_envd_req(sb, path, &req, &resp, err);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300) {
		r = envd_error(sb, m, &resp, err);
	} else if (out) {
		*out = json_loadb(resp.body ? resp.body : "{}", resp.len ? resp.len : 2, 0, NULL);
		if (!*out)
			r = sfs_errf(err, -EPROTO, "e2b: %s in %s: unreadable answer", m, sb->name);
	}
	sfs_http_resp_free(&resp);
	return r;
}

/* ---- streams -------------------------------------------------------------- */

struct stream {
	struct sfs_connect_dec dec;
	const struct e2b_events *ev;
	struct sfs_err *err;
	json_t *end; /* the end-of-stream message */
	int failed;  /* a handler's or the decoder's error */
	bool dropped;
};

static int on_event(struct stream *s, json_t *event)
{
	const struct e2b_events *ev = s->ev;
	json_t *x;
	if ((x = json_object_get(event, "start"))) {
		/* proto3 JSON: pid is uint32, a number; be lenient with a string */
		json_t *p = json_object_get(x, "pid");
		long pid =
		    json_is_string(p) ? atol(json_string_value(p)) : (long)json_integer_value(p);
		return ev->on_start ? ev->on_start(pid, ev->arg) : 0;
	}
	if ((x = json_object_get(event, "data"))) {
		const char *keys[] = {"stdout", "stderr", "pty"};
		for (int i = 0; i < 3; i++) {
			const char *b64 = json_string_value(json_object_get(x, keys[i]));
			if (!b64)
				continue;
			size_t n = strlen(b64);
			unsigned char *buf = malloc(3 * (n / 4) + 3);
			if (!buf)
				return sfs_errf(s->err, -ENOMEM, "out of memory");
			long k = sfs_base64_decode(b64, n, buf);
			int r = k < 0 ? sfs_errf(s->err, -EPROTO, "e2b: bad base64 in a data event")
				: ev->on_data
				    ? ev->on_data(i == 1 ? 2 : 1, (char *)buf, (size_t)k, ev->arg)
				    : 0;
			free(buf);
			if (r)
				return r;
		}
		return 0;
	}
	if ((x = json_object_get(event, "end"))) {
		/* exitCode is left out when 0 (proto3 default) */
		int code = (int)json_integer_value(json_object_get(x, "exitCode"));
		const char *status = json_string_value(json_object_get(x, "status"));
		return ev->on_end ? ev->on_end(code, json_is_true(json_object_get(x, "exited")),
					       status ? status : "", ev->arg)
				  : 0;
	}
	return 0; /* keepalive, and anything newer */
}

static int on_msg(unsigned flags, const char *json, size_t len, void *arg)
{
	struct stream *s = arg;
	json_t *o = json_loadb(json, len, 0, NULL);
	if (!o)
		return sfs_errf(s->err, -EPROTO, "e2b: unreadable stream message");
	if (flags & SFS_CONNECT_END) {
		s->end = o;
		return 0;
	}
	int r = on_event(s, json_object_get(o, "event"));
	json_decref(o);
	return r;
}

static int sink(const void *data, size_t len, void *arg)
{
	struct stream *s = arg;
	int r = sfs_connect_feed(&s->dec, data, len);
	if (r > 0) {
		s->dropped = true;
		return 1;
	}
	if (r < 0) {
		if (r == -EMSGSIZE)
			sfs_errf(s->err, r, "e2b: a stream message is over the size limit");
		else if (!s->err || !s->err->code)
			sfs_errf(s->err, r, "e2b: bad stream framing");
		s->failed = r;
		return -1;
	}
	return 0;
}

int e2b_stream(struct sfs_sandbox *sb, const char *method, json_t *body, long tmo,
	       const struct e2b_events *ev, struct sfs_err *err)
{
	char *text = json_dumps(body, JSON_COMPACT);
	struct sfs_buf env = {0};
	if (!text || sfs_connect_envelope(&env, 0, text, strlen(text))) {
		free(text);
		sfs_buf_free(&env);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(text);
	struct stream s = {.ev = ev, .err = err};
	s.dec.on_msg = on_msg;
	s.dec.arg = &s;
	char path[64];
	snprintf(path, sizeof(path), "/process.Process/%s",
		 method); /* may be cut: never, "Start" */
	struct sfs_http_req req = {.method = "POST",
				   .body = env.buf,
				   .body_len = env.len,
				   .content_type = "application/connect+json",
				   .sink = sink,
				   .sink_arg = &s,
				   .stop = ev->stop,
				   .timeout_ms = tmo};
	struct sfs_http_resp resp;
	if (err)
		err->code = 0;
	int r = e2b_envd_req(sb, path, &req, &resp, err);
	sfs_buf_free(&env);
	if (!r) {
		if (s.failed)
			r = s.failed;
		else if (resp.status < 200 || resp.status >= 300)
			r = envd_error(sb, method, &resp, err);
		else if (s.dropped || resp.stopped)
			r = 0;
		else if (sfs_connect_finish(&s.dec))
			r = sfs_errf(err, -EPROTO, "e2b: %s in %s: the stream was cut short",
				     method, sb->name);
		else {
			char prefix[160];
			snprintf(prefix, sizeof(prefix), "e2b: %s in %s", method,
				 sb->name); /* message: may be cut */
			r = sfs_connect_error(s.end, prefix, err);
		}
		sfs_http_resp_free(&resp);
	} else if (s.failed) {
		r = s.failed;
	}
	json_decref(s.end);
	sfs_connect_dec_free(&s.dec);
	return r;
}

/* ---- the shell kit through Start ------------------------------------------ */

struct collect {
	struct sfs_buf out, errtext;
	int code;
	bool ended;
};

static int c_data(int fd, const char *data, size_t len, void *arg)
{
	struct collect *c = arg;
	struct sfs_buf *b = fd == 2 ? &c->errtext : &c->out;
	if (fd == 2 && b->len > 4096)
		return 0; /* enough for a message */
	return sfs_buf_add(b, data, len) ? -ENOMEM : 0;
}

static int c_end(int code, bool exited, const char *status, void *arg)
{
	struct collect *c = arg;
	(void)status;
	c->code = exited ? code : 128 + 9; /* not exited: killed */
	c->ended = true;
	return 0;
}

json_t *e2b_start_body(const struct sfs_sh_cmd *cmd, json_t *envs, bool stdin_open)
{
	json_t *args = json_array();
	for (size_t i = 1; args && i < cmd->argc; i++)
		if (json_array_append_new(args, json_string(cmd->argv[i]))) {
			json_decref(args);
			args = NULL;
		}
	if (!envs)
		envs = json_object();
	if (!args || !envs) {
		json_decref(args);
		json_decref(envs);
		return NULL;
	}
	return json_pack("{s:{s:s, s:o, s:o}, s:b}", "process", "cmd", cmd->argv[0], "args", args,
			 "envs", envs, "stdin", stdin_open);
}

int e2b_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *cmd, long tmo, int *exit,
		 char **out, size_t *out_len, struct sfs_err *err)
{
	json_t *body = e2b_start_body(cmd, NULL, false);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct collect c = {.code = -1};
	struct e2b_events ev = {.on_data = c_data, .on_end = c_end, .arg = &c};
	int r = e2b_stream(sb, "Start", body, tmo ? tmo : timeout_ms(), &ev, err);
	json_decref(body);
	if (!r && !c.ended)
		r = sfs_errf(err, -EPROTO, "e2b: exec in %s: the stream ended without an end event",
			     sb->name);
	if (!r) {
		*exit = c.code;
		if (c.code && c.errtext.len)
			sfs_log(SFS_LOG_DEBUG, "e2b: %s: exit %d: %.*s", sb->name, c.code,
				(int)c.errtext.len, c.errtext.buf);
		if (out) {
			if (out_len)
				*out_len = c.out.len;
			*out = sfs_buf_take(&c.out);
			if (!*out)
				r = sfs_errf(err, -ENOMEM, "out of memory");
		}
	}
	sfs_buf_free(&c.out);
	sfs_buf_free(&c.errtext);
	return r;
}

int e2b_exec(struct sfs_sandbox *sb, const char *script, const char *const *args, int *exit,
	     char **out, struct sfs_err *err)
{
	struct sfs_sh_cmd c;
	int r = sfs_sh_script(&c, script, "sandboxfs", args, err);
	if (r)
		return r;
	r = e2b_exec_cmd(sb, &c, 0, exit, out, NULL, err);
	sfs_sh_cmd_free(&c);
	return r;
}

/* ---- sandboxes ------------------------------------------------------------ */

int e2b_adopt(struct sfs_sandbox *sb, json_t *o, struct sfs_err *err)
{
	const char *id = json_string_value(json_object_get(o, "sandboxID"));
	const char *dom = json_string_value(json_object_get(o, "domain"));
	const char *tok = json_string_value(json_object_get(o, "envdAccessToken"));
	if (!id)
		return sfs_errf(err, -EPROTO, "e2b: the sandbox answer has no sandboxID");
	char *dc = dom && *dom ? strdup(dom) : NULL, *tc = tok && *tok ? strdup(tok) : NULL;
	if ((dom && *dom && !dc) || (tok && *tok && !tc) || set_state(sb, dc, tc))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return sfs_sb_publish(sb, id, NULL, NULL, err);
}

int e2b_fetch_workdir(struct sfs_sandbox *sb, struct sfs_err *err)
{
	int code = -1;
	char *out = NULL;
	int r = e2b_exec(sb, "pwd", NULL, &code, &out, err);
	if (r)
		return r;
	size_t n = strlen(out);
	while (n > 1 && (out[n - 1] == '\n' || out[n - 1] == '/'))
		out[--n] = '\0';
	if (code != 0 || out[0] != '/')
		r = sfs_errf(err, -EPROTO, "e2b: %s: no working directory (pwd said \"%.60s\")",
			     sb->name, out);
	else
		r = sfs_sb_publish(sb, NULL, NULL, out, err);
	free(out);
	return r;
}

char *e2b_abs_path(struct sfs_sandbox *sb, const char *rel)
{
	char *wsc = sfs_sb_dup_workspace(sb);
	const char *ws = wsc ? wsc : "/home/user";
	char *abs = NULL;
	int n = asprintf(&abs, "%s%s%s", ws, rel[0] && strcmp(ws, "/") ? "/" : "", rel);
	free(wsc);
	return n < 0 ? NULL : abs;
}
