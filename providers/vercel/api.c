/* Talking to Vercel: credentials, URLs, the session of a sandbox, waited commands. */
#include "vercel.h"

#include "../config.h"
#include "../options.h"
#include "../priv_str.h"
#include "../redact.h"
#include "../sh/sh.h"
#include "../strbuf.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- credentials ------------------------------------------------------------ */

/* The string value of claim `key` in the JSON payload, into buf. */
static int claim(json_t *o, const char *key, char *buf, size_t len)
{
	const char *v = json_string_value(json_object_get(o, key));
	if (!v || !*v || strlen(v) >= len)
		return -EINVAL;
	memcpy(buf, v, strlen(v) + 1); /* its length checked above */
	return 0;
}

int vc_oidc_claims(const char *jwt, char *team, size_t tlen, char *project, size_t plen)
{
	const char *a = strchr(jwt, '.');
	const char *b = a ? strchr(a + 1, '.') : NULL;
	if (!a || !b || b == a + 1)
		return -EINVAL;
	/* base64url without padding to standard base64 */
	size_t n = (size_t)(b - a - 1);
	char *std = malloc(n + 4);
	unsigned char *raw = malloc(n + 4);
	int r = -EINVAL;
	if (!std || !raw) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		std[i] = a[1 + i] == '-' ? '+' : a[1 + i] == '_' ? '/' : a[1 + i];
	while (n % 4)
		std[n++] = '=';
	long m = sfs_base64_decode(std, n, raw);
	if (m < 0)
		goto out;
	json_t *o = json_loadb((const char *)raw, (size_t)m, 0, NULL);
	if (o && !claim(o, "owner_id", team, tlen) && !claim(o, "project_id", project, plen))
		r = 0;
	json_decref(o);
out:
	free(std);
	free(raw);
	return r;
}

/* An identifier from env, else the config key; "" when neither. */
static void ident(const char *env, const char *key, char *buf, size_t len)
{
	const char *v = getenv(env);
	if (!v || !*v)
		v = sfs_opt_get(key);
	(void)!sfs_pathf(buf, len, "%s", v ? v : ""); /* "" (none) if it does not fit */
}

int vc_creds(struct vc_creds *c, struct sfs_err *err)
{
	memset(c, 0, sizeof(*c));
	ident("VERCEL_TEAM_ID", "vercel.team_id", c->team, sizeof(c->team));
	ident("VERCEL_PROJECT_ID", "vercel.project_id", c->project, sizeof(c->project));
	c->token = sfs_http_credential("VERCEL_TOKEN", "vercel.token");
	if (c->token) {
		if (!c->team[0])
			return sfs_errf(err, -EACCES,
					"vercel: VERCEL_TOKEN is set but VERCEL_TEAM_ID is not "
					"(or vercel.team_id)");
		if (!c->project[0])
			return sfs_errf(err, -EACCES,
					"vercel: VERCEL_TOKEN is set but VERCEL_PROJECT_ID is not "
					"(or vercel.project_id)");
		return 0;
	}
	c->token = sfs_http_credential("VERCEL_OIDC_TOKEN", NULL);
	if (!c->token)
		return sfs_errf(err, -EACCES,
				"vercel: no credentials: set VERCEL_TOKEN, VERCEL_TEAM_ID and "
				"VERCEL_PROJECT_ID, or VERCEL_OIDC_TOKEN");
	/* explicit ids win over the token's claims */
	char team[128], project[128];
	if (vc_oidc_claims(c->token, team, sizeof(team), project, sizeof(project)))
		return sfs_errf(err, -EACCES,
				"vercel: VERCEL_OIDC_TOKEN is not a JWT whose payload has owner_id "
				"and project_id");
	if (!c->team[0])
		if (sfs_pathf(c->team, sizeof(c->team), "%s", team) < 0)
			return sfs_errf(err, -EINVAL, "vercel: the token's team id is too long");
	if (!c->project[0])
		if (sfs_pathf(c->project, sizeof(c->project), "%s", project) < 0)
			return sfs_errf(err, -EINVAL, "vercel: the token's project id is too long");
	return 0;
}

/* ---- requests ------------------------------------------------------------------ */

static long timeout_ms(void)
{
	return (long)(sfs_opt_get_double("vercel.timeout") * 1000);
}

int vc_req(const char *path, const char *query, bool project, struct sfs_http_req *req,
	   struct sfs_http_resp *resp, struct sfs_err *err)
{
	struct vc_creds c;
	int r = vc_creds(&c, err);
	if (r)
		return r;
	char *base = sfs_http_base_url("vercel.api_url", "VERCEL_API_URL", VC_DEFAULT_API);
	char *team = sfs_http_escape_component(c.team);
	char *proj = sfs_http_escape_component(c.project);
	char *url = NULL;
	if (!base || !team || !proj ||
	    asprintf(&url, "%s%s?teamId=%s%s%s%s%s", base, path, team, project ? "&projectId=" : "",
		     project ? proj : "", query ? "&" : "", query ? query : "") < 0)
		url = NULL;
	free(base);
	free(team);
	free(proj);
	if (!url)
		return sfs_errf(err, -ENOMEM, "out of memory");
	req->url = url;
	req->bearer = c.token;
	req->what = "vercel";
	if (!req->timeout_ms)
		req->timeout_ms = timeout_ms();
	r = sfs_http_do(req, resp, err);
	free(url);
	req->url = NULL;
	return r;
}

int vc_call(const char *method, const char *path, const char *query, bool project, json_t *body,
	    json_t **out, struct sfs_err *err)
{
	struct sfs_http_req req = {.method = method, .json = body};
	struct sfs_http_resp resp;
	if (out)
		*out = NULL;
	int r = vc_req(path, query, project, &req, &resp, err);
	if (r)
		return r;
	r = sfs_http_status_errno(resp.status);
	if (r) {
		char text[512];
		sfs_http_error_text(resp.body, resp.len, text, sizeof(text));
		r = sfs_errf(err, r, "vercel: %s %s: HTTP %ld%s%s", method, path, resp.status,
			     text[0] ? ": " : "", text);
	} else if (out && resp.len) {
		json_error_t jerr;
		if (!(*out = json_loadb(resp.body, resp.len, 0, &jerr)))
			r = sfs_errf(err, -EPROTO, "vercel: %s %s: unreadable answer: %s", method,
				     path, jerr.text);
	}
	sfs_http_resp_free(&resp);
	return r;
}

/* ---- the session: private state ------------------------------------------------- */

/* The current session's id (sb->priv, priv_str.h). */
json_t *vc_state_save(const struct sfs_sandbox *sb)
{
	return sfs_priv_str_save(sb, "session");
}

int vc_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err)
{
	return sfs_priv_str_load(sb, saved, "session", err); /* without: resume finds it */
}

void vc_state_free(struct sfs_sandbox *sb)
{
	sfs_priv_str_free(sb);
}

int vc_session_path(struct sfs_sandbox *sb, const char *suffix, char *buf, size_t len,
		    struct sfs_err *err)
{
	char *sid = sfs_priv_str_dup(sb);
	int n = sid ? snprintf(buf, len, "/v2/sandboxes/sessions/%s%s", sid, suffix) : -1;
	free(sid);
	if (n < 0)
		return sfs_errf(err, -EIO, "vercel: sandbox %s has no session", sb->name);
	if ((size_t)n >= len)
		return sfs_errf(err, -ENAMETOOLONG, "vercel: session path too long");
	return 0;
}

int vc_adopt(struct sfs_sandbox *sb, json_t *answer, struct sfs_err *err)
{
	json_t *sandbox = json_object_get(answer, "sandbox");
	json_t *session = json_object_get(answer, "session");
	const char *name = json_string_value(json_object_get(sandbox, "name"));
	const char *sid = json_string_value(json_object_get(session, "id"));
	if (!name || !sid)
		return sfs_errf(err, -EPROTO, "vercel: the answer has no sandbox name or session");
	const char *cwd = json_string_value(json_object_get(session, "cwd"));
	if (!cwd || cwd[0] != '/')
		cwd = json_string_value(json_object_get(sandbox, "cwd"));
	if (!cwd || cwd[0] != '/')
		cwd = "/vercel/sandbox"; /* the documented default */
	if (sfs_priv_str_set(sb, sid))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return sfs_sb_publish(sb, name, NULL, cwd, err);
}

char *vc_abs_path(struct sfs_sandbox *sb, const char *rel)
{
	/* called without sb->op_mutex (FUSE workers): read a copy */
	char *wsc = sfs_sb_dup_workspace(sb);
	const char *ws = wsc ? wsc : "/vercel/sandbox";
	char *abs = NULL;
	if (asprintf(&abs, "%s%s%s", ws, rel[0] && strcmp(ws, "/") ? "/" : "", rel) < 0)
		abs = NULL;
	free(wsc);
	return abs;
}

/* ---- waited commands (NDJSON) ------------------------------------------------------ */

struct exec_out {
	struct sfs_ndjson nd;
	struct sfs_buf out, errtext;
	int exit; /* -1 until the last command line */
	char failure[256];
};

static int on_line(json_t *v, void *arg)
{
	struct exec_out *x = arg;
	json_t *cmd = json_object_get(v, "command");
	if (cmd) {
		json_t *code = json_object_get(cmd, "exitCode");
		if (json_is_integer(code))
			x->exit = (int)json_integer_value(code);
		return 0;
	}
	const char *stream = json_string_value(json_object_get(v, "stream"));
	json_t *data = json_object_get(v, "data");
	if (stream && !strcmp(stream, "error")) {
		const char *m = json_string_value(json_object_get(data, "message"));
		snprintf(x->failure, sizeof(x->failure), "%s",
			 m ? m : "the command failed"); /* message: may be cut */
		return 0;
	}
	const char *s = json_string_value(data);
	size_t n = json_string_length(data);
	if (!stream || !s)
		return 0;
	if (!strcmp(stream, "stdout"))
		return sfs_buf_add(&x->out, s, n) ? -ENOMEM : 0;
	if (!strcmp(stream, "stderr") && x->errtext.len < 1024)
		return sfs_buf_add(&x->errtext, s, n) ? -ENOMEM : 0;
	return 0;
}

static int exec_sink(const void *data, size_t len, void *arg)
{
	struct exec_out *x = arg;
	return sfs_ndjson_feed(&x->nd, data, len) ? -1 : 0;
}

static int exec_reset(void *arg)
{
	struct exec_out *x = arg;
	sfs_ndjson_free(&x->nd);
	x->nd = (struct sfs_ndjson){.on_value = on_line, .arg = x};
	sfs_buf_reset(&x->out);
	sfs_buf_reset(&x->errtext);
	x->exit = -1;
	x->failure[0] = '\0';
	return 0;
}

int vc_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *cmd, bool b64, long timeout,
		int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	struct sfs_sh_cmd wrapped = {0};
	const struct sfs_sh_cmd *c = cmd;
	int r;
	if (b64) {
		r = sfs_sh_b64(&wrapped, cmd, err);
		if (r)
			return r;
		c = &wrapped;
	}
	char path[256];
	r = vc_session_path(sb, "/cmd", path, sizeof(path), err);
	json_t *args = json_array(), *body = NULL;
	for (size_t i = 1; !r && args && i < c->argc; i++)
		if (json_array_append_new(args, json_string(c->argv[i])))
			r = -ENOMEM;
	if (!r && args)
		body = json_pack("{s:s, s:O, s:b, s:b}", "command", c->argv[0], "args", args,
				 "wait", 1, "logs", 1);
	json_decref(args);
	sfs_sh_cmd_free(&wrapped);
	if (!r && !body)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (r)
		return r;
	struct exec_out x = {.exit = -1};
	exec_reset(&x);
	/* these scripts only read, or are written to be repeated */
	struct sfs_http_req req = {.method = "POST",
				   .json = body,
				   .sink = exec_sink,
				   .sink_reset = exec_reset,
				   .sink_arg = &x,
				   .retry_unsafe = true,
				   .timeout_ms = timeout};
	if (timeout)
		req.max_attempts = 2;
	struct sfs_http_resp resp;
	r = vc_req(path, NULL, false, &req, &resp, err);
	json_decref(body);
	if (!r) {
		if (resp.status < 200 || resp.status >= 300) {
			char text[512];
			sfs_http_error_text(resp.body, resp.len, text, sizeof(text));
			r = sfs_errf(err, sfs_http_status_errno(resp.status),
				     "vercel: exec in %s: HTTP %ld%s%s", sb->name, resp.status,
				     text[0] ? ": " : "", text);
		} else if (sfs_ndjson_finish(&x.nd)) {
			r = sfs_errf(err, -EPROTO, "vercel: exec in %s: unreadable answer",
				     sb->name);
		} else if (x.failure[0]) {
			r = sfs_errf(err, -EIO, "vercel: exec in %s: %s", sb->name, x.failure);
		} else if (x.exit < 0) {
			r = sfs_errf(err, -EIO,
				     "vercel: exec in %s: the answer ended without an exit "
				     "code",
				     sb->name);
		}
		sfs_http_resp_free(&resp);
	}
	if (!r && b64 && x.exit < 126) {
		long m = sfs_sh_b64_unframe(&x.out);
		if (m < 0)
			r = sfs_errf(err, m == -ENOMEM ? -ENOMEM : -EIO,
				     "vercel: exec in %s: output without its frame", sb->name);
	}
	if (!r) {
		*exit = x.exit;
		/* a failing script's stderr says why */
		if (x.exit && x.errtext.len) {
			size_t l = x.errtext.len;
			while (l && x.errtext.buf[l - 1] == '\n')
				l--;
			sfs_errf(err, -EIO, "%.*s", (int)l, x.errtext.buf);
		}
		if (outlen)
			*outlen = x.out.len;
		if (out && !(*out = sfs_buf_take(&x.out)))
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	sfs_ndjson_free(&x.nd);
	sfs_buf_free(&x.out);
	sfs_buf_free(&x.errtext);
	return r;
}
