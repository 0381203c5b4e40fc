/*
 * The gcp provider's common call path: one token source per process (the
 * credentials come from the daemon's environment), the API roots with
 * their test overrides, and one authenticated request with Google's error
 * JSON turned into a readable message (provider-apis-aws-gcp.md §7.3).
 */
#include "gcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../http/http.h"
#include "../util.h"

static pthread_mutex_t session_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gcp_auth *session;

int gcp_session(struct gcp_auth **out, struct sfs_err *err)
{
	pthread_mutex_lock(&session_mu);
	int rc = 0;
	if (!session) {
		struct gcp_auth *a = calloc(1, sizeof(*a));
		if (!a)
			rc = sfs_errf(err, -ENOMEM, "out of memory");
		else if ((rc = gcp_auth_init(a, NULL, sfs_opt_get("gcp.oauth_url"),
					     sfs_opt_get("gcp.metadata_url"), err)))
			free(a);
		else
			session = a;
	}
	*out = session;
	pthread_mutex_unlock(&session_mu);
	return rc;
}

void gcp_session_shutdown(void)
{
	pthread_mutex_lock(&session_mu);
	if (session) {
		gcp_auth_free(session);
		free(session);
		session = NULL;
	}
	pthread_mutex_unlock(&session_mu);
}

/* opt, else env (a host:port gets http://), else dflt; no trailing '/'. */
static char *root_url(const char *opt, const char *env, const char *dflt)
{
	const char *v = sfs_opt_get(opt);
	if (!v || !*v)
		v = getenv(env);
	char *s = NULL;
	if (!v || !*v)
		s = strdup(dflt);
	else if (strstr(v, "://"))
		s = strdup(v);
	else if (asprintf(&s, "http://%s", v) < 0)
		s = NULL;
	if (s) {
		size_t n = strlen(s);
		while (n && s[n - 1] == '/')
			s[--n] = '\0';
	}
	return s;
}

char *gcp_storage_url(void)
{
	return root_url("gcp.storage_url", "STORAGE_EMULATOR_HOST",
			"https://storage.googleapis.com");
}

char *gcp_run_url(void)
{
	return root_url("gcp.run_url", "CLOUDSDK_API_ENDPOINT_OVERRIDES_RUN",
			"https://run.googleapis.com");
}

char *gcp_logging_url(void)
{
	return root_url("gcp.logging_url", "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING",
			"https://logging.googleapis.com");
}

long long gcp_int64(json_t *v)
{
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v)) {
		char *end;
		long long n = strtoll(json_string_value(v), &end, 10);
		return *json_string_value(v) && !*end ? n : -1;
	}
	return -1;
}

int64_t gcp_time(const char *s)
{
	struct tm tm = {0};
	if (!s)
		return 0;
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return 0;
	return (int64_t)timegm(&tm);
}

/* Google's error JSON: {"error":{"code","message","status","errors":[{"reason"}]}}. */
static void error_text(const char *body, size_t len, char *status, size_t scap, char *msg,
		       size_t mcap)
{
	json_t *o = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *e = json_object_get(o, "error");
	const char *st = json_string_value(json_object_get(e, "status"));
	const char *reason = json_string_value(
	    json_object_get(json_array_get(json_object_get(e, "errors"), 0), "reason"));
	const char *m = json_string_value(json_object_get(e, "message"));
	if (sfs_pathf(status, scap, "%s", st ? st : reason ? reason : "") < 0)
		*status = 0; /* no status, never a cut one that names another */
	if (m) {
		sfs_escape_text(m, strlen(m), msg, mcap);
	} else {
		sfs_http_error_text(body, len, msg, mcap);
	}
	json_decref(o);
}

static const char *hint_of(long status)
{
	switch (status) {
	case 401:
		return " (the access token was refused twice: expired or revoked credentials?)";
	case 403:
		return " (the service account lacks a permission here)";
	case 429:
		return " (throttled: still refused after the retries)";
	}
	return "";
}

int gcp_call(const struct gcp_call *c, long *status, json_t **out, char **hdr, struct sfs_err *err)
{
	if (status)
		*status = 0;
	if (out)
		*out = NULL;
	if (hdr)
		*hdr = NULL;
	struct gcp_auth *a;
	int rc = gcp_session(&a, err);
	if (rc)
		return rc;
	struct sfs_http_resp resp = {0};
	for (int attempt = 0;; attempt++) {
		char *token = NULL;
		if ((rc = gcp_auth_token(a, &token, err)))
			return rc;
		struct sfs_http_fd sink = {.fd = c->sink_fd};
		struct sfs_http_req req = {
		    .method = c->method,
		    .url = c->url,
		    .headers = c->headers,
		    .bearer = token,
		    .json = c->json,
		    .body = c->body,
		    .body_len = c->body_len,
		    .content_type = c->content_type,
		    .capture_header = c->capture,
		    .retry_unsafe = c->retry_unsafe,
		    .what = "gcp",
		    .calls = c->calls,
		};
		if (c->sink_fd >= 0) {
			req.sink = sfs_http_fd_sink;
			req.sink_reset = sfs_http_fd_rewind;
			req.sink_arg = &sink;
		}
		memset(&resp, 0, sizeof(resp));
		rc = sfs_http_do(&req, &resp, err);
		free(token);
		if (rc)
			return rc;
		if (resp.status == 401 && attempt == 0) {
			/* the cached token may have been revoked or be older
			 * than the server's clock thinks: one fresh one */
			gcp_auth_invalidate(a);
			sfs_http_resp_free(&resp);
			continue;
		}
		break;
	}
	if (status)
		*status = resp.status;
	bool ok = (resp.status >= 200 && resp.status < 300) || (c->ok_308 && resp.status == 308);
	if (!ok) {
		char st[64], msg[600];
		error_text(resp.body, resp.len, st, sizeof(st), msg, sizeof(msg));
		int e = sfs_http_status_errno(resp.status);
		if (!e)
			e = -EIO;
		rc = sfs_errf(err, e, "gcp: %s: HTTP %ld%s%s%s%s%s", c->what ? c->what : c->url,
			      resp.status, *st ? " " : "", st, *msg ? ": " : "", msg,
			      hint_of(resp.status));
	} else {
		if (out && resp.len && c->sink_fd < 0) {
			json_error_t jerr;
			*out = json_loadb(resp.body, resp.len, 0, &jerr);
			if (!*out)
				rc = sfs_errf(err, -EPROTO, "gcp: %s: unreadable JSON answer: %s",
					      c->what ? c->what : c->url, jerr.text);
		}
		if (!rc && hdr && resp.header) {
			*hdr = resp.header;
			resp.header = NULL;
		}
	}
	sfs_http_resp_free(&resp);
	return rc;
}
