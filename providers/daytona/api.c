/* Talking to Daytona: auth, URLs, sandbox objects, state polling, exec. */
#include "daytona.h"

#include "../config.h"
#include "../options.h"
#include "../priv_str.h"
#include "../redact.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Daytona's own state of a sandbox (sb->priv): its toolbox base URL
 * (priv_str.h). */
json_t *dt_state_save(const struct sfs_sandbox *sb)
{
	return sfs_priv_str_save(sb, "toolbox");
}

int dt_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err)
{
	return sfs_priv_str_load(sb, saved, "toolbox", err); /* without: resume finds it again */
}

void dt_state_free(struct sfs_sandbox *sb)
{
	sfs_priv_str_free(sb);
}

void dt_state_take(struct sfs_sandbox *dst, struct sfs_sandbox *src)
{
	sfs_priv_str_take(dst, src);
}

/* The toolbox API changes its answers on this header (provider-apis.md §1.1). */
static const char *const dt_headers[] = {
    "X-Daytona-SDK-Version: 0.190.0",
    "X-Daytona-Source: sandboxfs",
    NULL,
};

const char *dt_api_key(void)
{
	return sfs_http_credential("DAYTONA_API_KEY", "daytona.api_key");
}

static char *api_base(void)
{
	return sfs_http_base_url("daytona.api_url", "DAYTONA_API_URL", DT_DEFAULT_API);
}

static long timeout_ms(void)
{
	return (long)(sfs_opt_get_double("daytona.timeout") * 1000);
}

static int need_key(const char **key, struct sfs_err *err)
{
	*key = dt_api_key();
	if (!*key)
		return sfs_errf(err, -EACCES,
				"daytona: no API key (set DAYTONA_API_KEY or daytona.api_key)");
	return 0;
}

int dt_api(const char *method, const char *path, json_t *body, json_t **out, long *status,
	   struct sfs_err *err)
{
	const char *key;
	int r = need_key(&key, err);
	if (r)
		return r;
	char *base = api_base();
	char *url = NULL;
	if (!base || asprintf(&url, "%s%s", base, path) < 0) {
		free(base);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(base);
	struct sfs_http_req req = {.method = method,
				   .url = url,
				   .headers = dt_headers,
				   .bearer = key,
				   .json = body,
				   .timeout_ms = timeout_ms(),
				   .what = "daytona"};
	r = sfs_http_json(&req, status, out, err);
	free(url);
	return r;
}

/* The key and the URL of a toolbox path of sb (free *url). */
static int toolbox_url(struct sfs_sandbox *sb, const char *path, const char **key, char **url,
		       struct sfs_err *err)
{
	int r = need_key(key, err);
	if (r)
		return r;
	char *base = sfs_priv_str_dup(sb);
	if (!base)
		return sfs_errf(err, -EIO, "daytona: sandbox %s has no toolbox address", sb->name);
	r = asprintf(url, "%s%s", base, path);
	free(base);
	return r < 0 ? sfs_errf(err, -ENOMEM, "out of memory") : 0;
}

int dt_toolbox_req(struct sfs_sandbox *sb, const char *path, struct sfs_http_req *req,
		   struct sfs_http_resp *resp, struct sfs_err *err)
{
	const char *key;
	char *url;
	int r = toolbox_url(sb, path, &key, &url, err);
	if (r)
		return r;
	req->url = url;
	req->headers = dt_headers;
	req->bearer = key;
	req->what = "daytona";
	if (!req->timeout_ms)
		req->timeout_ms = timeout_ms();
	r = sfs_http_do(req, resp, err);
	free(url);
	req->url = NULL;
	return r;
}

int dt_toolbox(struct sfs_sandbox *sb, const char *method, const char *path, json_t *body,
	       json_t **out, struct sfs_err *err)
{
	const char *key;
	char *url;
	int r = toolbox_url(sb, path, &key, &url, err);
	if (r)
		return r;
	struct sfs_http_req req = {.method = method,
				   .url = url,
				   .headers = dt_headers,
				   .bearer = key,
				   .json = body,
				   .timeout_ms = timeout_ms(),
				   .what = "daytona"};
	r = sfs_http_json(&req, NULL, out, err);
	free(url);
	return r;
}

int dt_adopt(struct sfs_sandbox *sb, json_t *o, struct sfs_err *err)
{
	const char *id = json_string_value(json_object_get(o, "id"));
	const char *proxy = json_string_value(json_object_get(o, "toolboxProxyUrl"));
	if (!id)
		return sfs_errf(err, -EPROTO, "daytona: the sandbox answer has no id");
	char *tb = NULL;
	if (proxy && *proxy) {
		size_t pl = strlen(proxy);
		while (pl && proxy[pl - 1] == '/')
			pl--;
		if (asprintf(&tb, "%.*s/%s", (int)pl, proxy, id) < 0)
			tb = NULL;
	} else {
		/* older deployments: the API proxies the toolbox itself */
		char *base = api_base();
		if (!base || asprintf(&tb, "%s/toolbox/%s/toolbox", base, id) < 0)
			tb = NULL;
		free(base);
	}
	int r = tb ? sfs_priv_str_set(sb, tb) : -ENOMEM;
	free(tb);
	if (r)
		return sfs_errf(err, -ENOMEM, "out of memory");
	/* the id is shown in status and saved in the registry: its owner
	 * publishes it */
	return sfs_sb_publish(sb, id, NULL, NULL, err);
}

int dt_wait_state(struct sfs_sandbox *sb, const char *want, struct sfs_err *err)
{
	double limit = sfs_opt_get_double("daytona.create_timeout");
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long delay_ms = 100;
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandbox/%s", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "daytona: sandbox id too long");
	for (;;) {
		json_t *o = NULL;
		int r = dt_api("GET", path, NULL, &o, NULL, err);
		if (r)
			return r;
		const char *state = json_string_value(json_object_get(o, "state"));
		if (state && !strcmp(state, want)) {
			r = dt_adopt(sb, o, err);
			json_decref(o);
			return r;
		}
		if (state && (!strcmp(state, "error") || !strcmp(state, "build_failed") ||
			      !strcmp(state, "destroyed"))) {
			const char *why = json_string_value(json_object_get(o, "errorReason"));
			r = sfs_errf(err, -EIO, "daytona: sandbox %s is %s%s%s", sb->id, state,
				     why ? ": " : "", why ? why : "");
			json_decref(o);
			return r;
		}
		json_decref(o);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - t0.tv_sec) > limit)
			return sfs_errf(err, -ETIMEDOUT,
					"daytona: sandbox %s did not become %s within %.0f s "
					"(state %s)",
					sb->id, want, limit, state ? state : "unknown");
		struct timespec d = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
		nanosleep(&d, NULL);
		if (delay_ms < 1000)
			delay_ms = delay_ms * 2 > 1000 ? 1000 : delay_ms * 2;
	}
}

int dt_fetch_workdir(struct sfs_sandbox *sb, struct sfs_err *err)
{
	json_t *o = NULL;
	struct sfs_err ignored = {0};
	const char *dir = NULL;
	/* newer daemons say /work-dir, older ones /project-dir */
	if (dt_toolbox(sb, "GET", "/work-dir", NULL, &o, &ignored) == 0)
		dir = json_string_value(json_object_get(o, "dir"));
	if (!dir) {
		json_decref(o);
		o = NULL;
		int r = dt_toolbox(sb, "GET", "/project-dir", NULL, &o, err);
		if (r && r != -ENOENT)
			return r;
		dir = json_string_value(json_object_get(o, "dir"));
	}
	char *ws = strdup(dir && dir[0] == '/' ? dir : "/home/daytona");
	json_decref(o);
	if (!ws)
		return sfs_errf(err, -ENOMEM, "out of memory");
	size_t n = strlen(ws);
	while (n > 1 && ws[n - 1] == '/')
		ws[--n] = '\0';
	int r = sfs_sb_publish(sb, NULL, NULL, ws, err);
	free(ws);
	return r;
}

char *dt_abs_path(struct sfs_sandbox *sb, const char *rel, bool escape)
{
	/* called without sb->op_mutex (FUSE workers): a restore may replace
	 * the workspace meanwhile, so read a copy */
	char *wsc = sfs_sb_dup_workspace(sb);
	const char *ws = wsc ? wsc : "/home/daytona";
	char *abs = NULL;
	int n = asprintf(&abs, "%s%s%s", ws, rel[0] && strcmp(ws, "/") ? "/" : "", rel);
	free(wsc);
	if (n < 0)
		return NULL;
	if (!escape)
		return abs;
	char *e = sfs_http_escape(abs);
	free(abs);
	return e;
}

int dt_exec(struct sfs_sandbox *sb, const char *script, const char *const *args, long timeout,
	    int *exit, char **out, struct sfs_err *err)
{
	struct sfs_sh_cmd c;
	int r = sfs_sh_script(&c, script, "sandboxfs", args, err);
	if (r)
		return r;
	r = dt_exec_cmd(sb, &c, timeout, exit, out, err);
	sfs_sh_cmd_free(&c);
	return r;
}

int dt_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *sh, long timeout, int *exit,
		char **out, struct sfs_err *err)
{
	char *cmd = NULL;
	int r = sfs_sh_cmd_string(sh, &cmd, err);
	if (r)
		return r;
	json_t *body = json_pack("{s:s}", "command", cmd);
	free(cmd);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct sfs_http_req req = {.method = "POST", .json = body, .timeout_ms = timeout};
	/* these scripts only read, or are written to be repeated */
	req.retry_unsafe = true;
	if (timeout)
		req.max_attempts = 2;
	struct sfs_http_resp resp;
	r = dt_toolbox_req(sb, "/process/execute", &req, &resp, err);
	json_decref(body);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300) {
		char text[512];
		sfs_http_error_text(resp.body, resp.len, text, sizeof(text));
		r = sfs_errf(err, sfs_http_status_errno(resp.status),
			     "daytona: exec in %s: HTTP %ld: %s", sb->name, resp.status, text);
		sfs_http_resp_free(&resp);
		return r;
	}
	json_t *o = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
	sfs_http_resp_free(&resp);
	if (!o)
		return sfs_errf(err, -EPROTO, "daytona: exec in %s: unreadable answer", sb->name);
	*exit = (int)json_integer_value(json_object_get(o, "exitCode"));
	const char *result = json_string_value(json_object_get(o, "result"));
	if (out) {
		*out = strdup(result ? result : "");
		if (!*out)
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	json_decref(o);
	return r;
}
