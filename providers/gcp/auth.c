/*
 * Access tokens for the Google APIs (provider-apis-aws-gcp.md §7.2): the
 * service-account JWT exchanged at the token endpoint, or the metadata
 * server's token, cached until GCP_TOKEN_EARLY before expiry.
 */
#include "gcp.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../http/http.h"
#include "../redact.h"
#include "../util.h"
#include "../strbuf.h"

static time_t wall_clock(void)
{
	return time(NULL);
}

time_t gcp_token_stale_at(time_t now, long expires_in)
{
	if (expires_in <= 0)
		return now; /* stale at once: use it for this call only */
	long early = expires_in > 2 * GCP_TOKEN_EARLY ? GCP_TOKEN_EARLY : expires_in / 2;
	return now + expires_in - early;
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

int gcp_auth_init(struct gcp_auth *a, const char *key_path, const char *token_url,
		  const char *metadata_url, struct sfs_err *err)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
	a->now = wall_clock;
	int rc = 0;
	if (!key_path || !*key_path)
		key_path = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	const char *mhost = getenv("GCE_METADATA_HOST");
	if (key_path && *key_path) {
		if ((rc = gcp_key_load(key_path, &a->key, err)))
			goto fail;
		a->have_key = true;
		a->token_url = strdup(token_url && *token_url ? token_url : a->key.token_uri);
		if (!a->token_url)
			goto nomem;
	} else if (metadata_url && *metadata_url) {
		if (!(a->metadata_url = strdup(metadata_url)))
			goto nomem;
	} else if (mhost && *mhost) {
		/* GCE_METADATA_HOST is host[:port] without a scheme */
		if (asprintf(&a->metadata_url, "http://%s", mhost) < 0) {
			a->metadata_url = NULL;
			goto nomem;
		}
	} else {
		rc = sfs_errf(err, -ENOENT,
			      "gcp: no credentials: set GOOGLE_APPLICATION_CREDENTIALS to a "
			      "service-account key file, or GCE_METADATA_HOST (gcp.metadata_url) "
			      "to a metadata server");
		goto fail;
	}
	/* a trailing '/' of the metadata root would double the path's first one */
	if (a->metadata_url) {
		size_t n = strlen(a->metadata_url);
		while (n && a->metadata_url[n - 1] == '/')
			a->metadata_url[--n] = '\0';
	}
	if (!(a->scope = strdup(GCP_SCOPE_CLOUD)))
		goto nomem;
	return 0;
nomem:
	rc = sfs_errf(err, -ENOMEM, "out of memory");
fail:
	gcp_auth_free(a);
	return rc;
}

void gcp_auth_free(struct gcp_auth *a)
{
	gcp_key_free(&a->key);
	free(a->token_url);
	free(a->metadata_url);
	free(a->scope);
	free(a->token);
	pthread_mutex_destroy(&a->lock);
	memset(a, 0, sizeof(*a));
}

void gcp_auth_invalidate(struct gcp_auth *a)
{
	pthread_mutex_lock(&a->lock);
	free(a->token);
	a->token = NULL;
	pthread_mutex_unlock(&a->lock);
}

/* expires_in is a number, or (elsewhere than Google) a string of one */
static long expires_of(json_t *v)
{
	if (json_is_integer(v))
		return (long)json_integer_value(v);
	if (json_is_string(v))
		return strtol(json_string_value(v), NULL, 10);
	return -1;
}

/* Google's OAuth errors are {"error":"invalid_grant","error_description":..};
 * the API style {"error":{"message":..}} also occurs (the metadata server) */
static void oauth_error_text(const char *body, size_t len, char *buf, size_t cap)
{
	json_t *o = body ? json_loadb(body, len, 0, NULL) : NULL;
	const char *code = json_string_value(json_object_get(o, "error"));
	const char *desc = json_string_value(json_object_get(o, "error_description"));
	if (code) {
		char c[128], d[512];
		sfs_escape_text(code, strlen(code), c, sizeof(c));
		sfs_escape_text(desc ? desc : "", desc ? strlen(desc) : 0, d, sizeof(d));
		sfs_msgf(buf, cap, "%s%s%s", c, *d ? ": " : "", d);
	} else {
		sfs_http_error_text(body, len, buf, cap);
	}
	json_decref(o);
}

/* One request for a token: the JWT grant (when form is set) or the metadata GET. */
static int fetch(struct gcp_auth *a, const char *url, const char *form, char **token,
		 long *expires_in, struct sfs_err *err)
{
	static const char *const md_headers[] = {"Metadata-Flavor: Google", NULL};
	struct sfs_http_req req = {
	    .method = form ? "POST" : "GET",
	    .url = url,
	    .headers = form ? NULL : md_headers,
	    .body = form,
	    .body_len = form ? strlen(form) : 0,
	    .content_type = form ? "application/x-www-form-urlencoded" : NULL,
	    .retry_unsafe = true, /* a repeated grant only mints another token */
	    .what = "gcp token",
	};
	struct sfs_http_resp resp = {0};
	int rc = sfs_http_do(&req, &resp, err);
	if (rc)
		return rc;
	json_t *o = NULL;
	if (resp.status < 200 || resp.status > 299) {
		char text[600];
		oauth_error_text(resp.body, resp.len, text, sizeof(text));
		rc = sfs_errf(err,
			      resp.status == 400 || resp.status == 401
				  ? -EACCES
				  : sfs_http_status_errno(resp.status),
			      "gcp: exchanging for an access token at %s failed: HTTP %ld: %s", url,
			      resp.status, text);
		goto out;
	}
	o = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
	const char *tok = json_string_value(json_object_get(o, "access_token"));
	if (!tok || !*tok) {
		rc = sfs_errf(err, -EPROTO, "gcp: the answer from %s has no access_token", url);
		goto out;
	}
	sfs_redact_add_secret(tok);
	*expires_in = expires_of(json_object_get(o, "expires_in"));
	if (!(*token = strdup(tok)))
		rc = sfs_errf(err, -ENOMEM, "out of memory");
out:
	json_decref(o);
	sfs_http_resp_free(&resp);
	return rc;
}

static int refresh(struct gcp_auth *a, struct sfs_err *err)
{
	time_t now = a->now();
	char *token = NULL;
	long expires_in = -1;
	int rc;
	if (a->have_key) {
		char *jwt = NULL;
		char *form = NULL;
		/* iat is the wall clock whatever a->now says (the server checks
		 * it); aud is Google's token URL even when token_uri points elsewhere
		 * (google-auth does the same; emulators accept both) */
		rc = gcp_jwt_build(&a->key, a->scope, GCP_TOKEN_AUD, time(NULL), &jwt, err);
		if (rc)
			return rc;
		/* the JWT is base64url and '.': nothing in it needs escaping */
		if (asprintf(&form,
			     "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-bearer"
			     "&assertion=%s",
			     jwt) < 0)
			form = NULL;
		free(jwt);
		if (!form)
			return sfs_errf(err, -ENOMEM, "out of memory");
		rc = fetch(a, a->token_url, form, &token, &expires_in, err);
		free(form);
	} else {
		char *url = NULL;
		if (asprintf(&url, "%s/computeMetadata/v1/instance/service-accounts/default/token",
			     a->metadata_url) < 0)
			return sfs_errf(err, -ENOMEM, "out of memory");
		rc = fetch(a, url, NULL, &token, &expires_in, err);
		free(url);
	}
	if (rc)
		return rc;
	free(a->token);
	a->token = token;
	a->stale_at = gcp_token_stale_at(now, expires_in);
	a->fetches++;
	return 0;
}

int gcp_auth_token(struct gcp_auth *a, char **out, struct sfs_err *err)
{
	*out = NULL;
	pthread_mutex_lock(&a->lock);
	int rc = 0;
	/* a token that was stale on arrival (expires_in 0) serves its own caller */
	bool fresh = false;
	if (!a->token || a->now() >= a->stale_at) {
		rc = refresh(a, err);
		fresh = rc == 0;
	}
	if (!rc && !(*out = dup_or_null(a->token)))
		rc = sfs_errf(err, -ENOMEM, "out of memory");
	if (fresh && a->stale_at <= a->now()) {
		free(a->token);
		a->token = NULL;
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}
