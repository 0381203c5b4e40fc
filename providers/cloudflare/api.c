/* Talking to the bridge: credentials, URLs, JSON calls and their errors. */
#include "cloudflare.h"

#include "../options.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cf_creds(char **url, const char **token, struct sfs_err *err)
{
	*url = sfs_http_base_url("cloudflare.url", "CLOUDFLARE_SANDBOX_URL", NULL);
	*token = sfs_http_credential("CLOUDFLARE_SANDBOX_TOKEN", "cloudflare.token");
	if (!*url)
		return sfs_errf(err, -EACCES,
				"cloudflare: no bridge: set CLOUDFLARE_SANDBOX_URL (or "
				"cloudflare.url) to the sandbox bridge Worker's URL");
	/* the bridge skips auth when its key is unset, but ours never runs open */
	if (!*token) {
		free(*url);
		*url = NULL;
		return sfs_errf(err, -EACCES,
				"cloudflare: no credentials: set CLOUDFLARE_SANDBOX_TOKEN (or "
				"cloudflare.token) to the bridge's SANDBOX_API_KEY");
	}
	return 0;
}

int cf_req(const char *path, struct sfs_http_req *req, struct sfs_http_resp *resp,
	   struct sfs_err *err)
{
	char *base = NULL;
	const char *token = NULL;
	int r = cf_creds(&base, &token, err);
	if (r)
		return r;
	char *url = NULL;
	if (asprintf(&url, "%s%s", base, path) < 0)
		url = NULL;
	free(base);
	if (!url)
		return sfs_errf(err, -ENOMEM, "out of memory");
	req->url = url;
	req->bearer = token;
	req->what = "cloudflare";
	if (!req->timeout_ms)
		req->timeout_ms = (long)(sfs_opt_get_double("cloudflare.timeout") * 1000);
	r = sfs_http_do(req, resp, err);
	free(url);
	req->url = NULL;
	return r;
}

int cf_status_err(const char *what, const char *subject, struct sfs_http_resp *resp,
		  struct sfs_err *err)
{
	return sfs_http_status_errf(err, resp, "cloudflare: %s %s", what, subject);
}

int cf_call(const char *method, const char *path, json_t **out, struct sfs_err *err)
{
	struct sfs_http_req req = {.method = method};
	struct sfs_http_resp resp;
	if (out)
		*out = NULL;
	int r = cf_req(path, &req, &resp, err);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300) {
		r = cf_status_err(method, path, &resp, err);
	} else if (out && resp.len) {
		json_error_t jerr;
		if (!(*out = json_loadb(resp.body, resp.len, 0, &jerr)))
			r = sfs_errf(err, -EPROTO, "cloudflare: %s %s: unreadable answer: %s",
				     method, path, jerr.text);
	}
	sfs_http_resp_free(&resp);
	return r;
}

int cf_path(const char *id, const char *suffix, char *buf, size_t len, struct sfs_err *err)
{
	if (!id)
		return sfs_errf(err, -EINVAL, "cloudflare: no sandbox id");
	char *e = sfs_http_escape_component(id);
	if (!e)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int n = snprintf(buf, len, "/v1/sandbox/%s%s", e, suffix);
	free(e);
	return n < 0 || (size_t)n >= len
		   ? sfs_errf(err, -ENAMETOOLONG, "cloudflare: sandbox path too long")
		   : 0;
}

/* sb->priv: calls in flight and whether sb is being destroyed, read by
 * FUSE workers and the journal engine while an op may set it: a leaf lock
 * (provider.h's lock order). */
struct cf_state {
	int inflight;
	bool closing;
};
static pthread_mutex_t cf_state_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cf_state_cv = PTHREAD_COND_INITIALIZER;

/* sb's state, made on first use; NULL on ENOMEM.  Under cf_state_mu. */
static struct cf_state *state_of(struct sfs_sandbox *sb)
{
	if (!sb->priv)
		sb->priv = calloc(1, sizeof(struct cf_state));
	return sb->priv;
}

int cf_sb_closing(struct sfs_sandbox *sb, bool undo, long wait_ms)
{
	pthread_mutex_lock(&cf_state_mu);
	struct cf_state *st = state_of(sb);
	if (st)
		st->closing = !undo;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (st && !undo && st->inflight > 0)
		if (pthread_cond_timedwait(&cf_state_cv, &cf_state_mu, &until))
			break;
	pthread_mutex_unlock(&cf_state_mu);
	return st ? 0 : -ENOMEM;
}

void cf_state_free(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&cf_state_mu);
	free(sb->priv);
	sb->priv = NULL;
	pthread_mutex_unlock(&cf_state_mu);
}

int cf_sb_begin(struct sfs_sandbox *sb, const char *suffix, char *buf, size_t len,
		struct sfs_err *err)
{
	pthread_mutex_lock(&cf_state_mu);
	struct cf_state *st = state_of(sb);
	bool gone = st && st->closing;
	if (st && !gone)
		st->inflight++;
	pthread_mutex_unlock(&cf_state_mu);
	if (!st)
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (gone)
		return sfs_errf(err, -ENOENT, "cloudflare: sandbox %s is destroyed", sb->name);
	char *id = sfs_sb_dup_id(sb);
	int r = id ? cf_path(id, suffix, buf, len, err)
		   : sfs_errf(err, -EIO, "cloudflare: sandbox %s has no id", sb->name);
	free(id);
	if (r)
		cf_sb_end(sb);
	return r;
}

void cf_sb_end(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&cf_state_mu);
	struct cf_state *st = sb->priv;
	if (st && st->inflight > 0 && --st->inflight == 0)
		pthread_cond_broadcast(&cf_state_cv);
	pthread_mutex_unlock(&cf_state_mu);
}

char *cf_abs_path(struct sfs_sandbox *sb, const char *rel)
{
	/* called without sb->op_mutex (FUSE workers): read a copy */
	char *wsc = sfs_sb_dup_workspace(sb);
	const char *ws = wsc ? wsc : CF_WORKSPACE;
	char *abs = NULL;
	if (asprintf(&abs, "%s%s%s", ws, rel[0] && strcmp(ws, "/") ? "/" : "", rel) < 0)
		abs = NULL;
	free(wsc);
	return abs;
}
