/*
 * The gcp provider, skeleton: it registers, its status says whether
 * credentials (GOOGLE_APPLICATION_CREDENTIALS, or a metadata server) and
 * gcp.bucket are there, and `new` proves the credentials by obtaining a
 * token, then refuses: the workspace (GCS) and runs (Cloud Run Jobs) are
 * issue 16's remaining work.  All caps are false; every op that exists
 * answers EOPNOTSUPP with the reason.
 */
#include "gcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../provider.h"

static const char not_yet[] = "the gcp workspace (a Cloud Storage prefix) and runs (Cloud Run "
			      "Jobs) are not implemented yet (issue 16)";

static int auth_open(struct gcp_auth *a, struct sfs_err *err)
{
	return gcp_auth_init(a, NULL, sfs_opt_get("gcp.oauth_url"), sfs_opt_get("gcp.metadata_url"),
			     err);
}

static int gcp_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	(void)sb;
	(void)opts;
	/* the credentials are checked end to end (a token is obtained) so a
	 * user learns now whether they work */
	struct gcp_auth a;
	int rc = auth_open(&a, err);
	if (rc)
		return rc;
	char *token = NULL;
	rc = gcp_auth_token(&a, &token, err);
	free(token);
	gcp_auth_free(&a);
	if (rc)
		return rc;
	return sfs_errf(err, -EOPNOTSUPP,
			"gcp: the credentials work (a token was obtained), but %s", not_yet);
}

static int gcp_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	(void)sb;
	return sfs_errf(err, -EOPNOTSUPP, "gcp: %s", not_yet);
}

static int gcp_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	(void)sb;
	(void)err;
	return 0; /* create never succeeds: there is nothing to remove */
}

static int gcp_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	(void)sb;
	(void)run;
	return sfs_errf(err, -EOPNOTSUPP, "gcp: %s", not_yet);
}

static int gcp_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	(void)sb;
	(void)run;
	(void)err;
	return 0;
}

/* Local checks only (no network on a status read): the key file parses,
 * or a metadata server is named; gcp.bucket is set. */
static bool gcp_configured(char *why, size_t len)
{
	struct gcp_auth a;
	struct sfs_err err = {0};
	const char *bucket = sfs_opt_get("gcp.bucket");
	bool have_bucket = bucket && *bucket;
	if (auth_open(&a, &err)) {
		snprintf(why, len, "%s%s", err.msg + (strncmp(err.msg, "gcp: ", 5) ? 0 : 5),
			 have_bucket ? "" : "; no gcp.bucket");
		return false;
	}
	/* worded so the redactor's key-looking words ("key", "token",
	 * "credentials") never precede the email or the URL */
	char src[300];
	if (a.have_key)
		snprintf(src, sizeof(src),
			 "authenticates as %s, a service-account JWT exchanged at %s",
			 a.key.client_email, a.token_url);
	else
		snprintf(src, sizeof(src), "authenticates through the metadata server at %s",
			 a.metadata_url);
	gcp_auth_free(&a);
	if (!have_bucket) {
		snprintf(why, len, "no gcp.bucket (%s)", src);
		return false;
	}
	snprintf(why, len, "%s; bucket %s; but %s", src, bucket, not_yet);
	return true;
}

static const struct sfs_provider_ops gcp_ops = {
    .create = gcp_create,
    .resume = gcp_resume,
    .destroy = gcp_destroy,
    .run_start = gcp_run_start,
    .run_refresh = gcp_run_refresh,
    .configured = gcp_configured,
};

static const char *const gcp_credential_env[] = {"GOOGLE_APPLICATION_CREDENTIALS", NULL};

const struct sfs_provider sfs_provider_gcp = {
    .name = "gcp",
    /* no caps: nothing but the credential check works yet */
    .caps = {false},
    .host_fs = false,
    .credential_env = gcp_credential_env,
    .ops = &gcp_ops,
    .options = sfs_gcp_options,
};
