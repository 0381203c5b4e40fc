/*
 * What a run's task gets instead of keys (docs/aws.md "Runs"): presigned
 * URLs (SigV4 query form, provider-apis-aws-gcp.md §1.4) for the objects it
 * reads and deletes, and one browser POST policy that lets it upload any
 * key under the workspace prefix, with mode and mtime metadata and nothing
 * else.  Both expire; neither carries the secret key.
 */
#include "aws.h"
#include "sigv4.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../http/http.h"
#include "../strbuf.h"
#include "../util.h"

static int credential(const struct aws_config *c, const char *date, char *out, size_t len)
{
	return sfs_pathf(out, len, "%s/%.8s/%s/s3/aws4_request", c->access_key, date, c->region);
}

int aws_presign(const struct aws_config *c, const char *method, const char *bucket, const char *key,
		long expires, time_t now, char **out, struct sfs_err *err)
{
	*out = NULL;
	if (!c->access_key || !c->secret_key)
		return sfs_errf(err, -EACCES, "aws: no %s", aws_config_missing(c));
	char date[17], cred[512];
	sfs_sigv4_amz_date(now, date);
	if (credential(c, date, cred, sizeof(cred)) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "aws: access key or region too long");
	struct sfs_buf q = {0}, url = {0}, path = {0}, creq = {0}, sh = {0}, sts = {0};
	int rc = sfs_buf_adds(&q, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=");
	if (!rc)
		rc = sfs_sigv4_uri_encode(&q, cred, strlen(cred), false);
	if (!rc)
		rc = sfs_buf_printf(&q, "&X-Amz-Date=%s&X-Amz-Expires=%ld", date, expires);
	if (!rc && c->session_token) {
		rc = sfs_buf_adds(&q, "&X-Amz-Security-Token=");
		if (!rc)
			rc = sfs_sigv4_uri_encode(&q, c->session_token, strlen(c->session_token),
						  false);
	}
	if (!rc)
		rc = sfs_buf_adds(&q, "&X-Amz-SignedHeaders=host");
	if (!rc)
		rc = aws_s3_url(c, bucket, key, q.buf, &url);
	if (rc) {
		rc = sfs_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	/* host and the decoded path back out of the URL, as aws_sign does */
	const char *auth = strstr(url.buf, "://") + 3;
	size_t alen = strcspn(auth, "/?");
	const char *p = auth + alen;
	size_t plen = strcspn(p, "?");
	char host[256];
	if (sfs_pathf(host, sizeof(host), "%.*s", (int)alen, auth) < 0) {
		rc = sfs_errf(err, -ENAMETOOLONG, "aws: S3 host too long");
		goto out;
	}
	rc = plen ? sfs_sigv4_uri_decode(&path, p, plen) : sfs_buf_addc(&path, '/');
	struct sfs_sigv4_hdr h = {"host", host};
	struct sfs_sigv4_req r = {.method = method,
				  .path = path.buf,
				  .query = q.buf,
				  .headers = &h,
				  .nheaders = 1,
				  .payload_hash = SFS_SIGV4_UNSIGNED_PAYLOAD,
				  .s3 = true};
	struct sfs_sigv4_key k = {.access_key = c->access_key,
				  .secret_key = c->secret_key,
				  .region = c->region,
				  .service = "s3",
				  .amz_date = date};
	char sig[65];
	if (!rc)
		rc = sfs_sigv4_canonical_request(&r, &creq, &sh);
	if (!rc)
		rc = sfs_sigv4_string_to_sign(creq.buf, creq.len, &k, &sts);
	if (!rc)
		rc = sfs_sigv4_sign_text(&k, sts.buf, sts.len, sig);
	if (!rc)
		rc = sfs_buf_printf(&url, "&X-Amz-Signature=%s", sig);
	if (rc)
		rc = sfs_errf(err, rc, "aws: cannot presign a URL (%s)", strerror(-rc));
	else
		*out = sfs_buf_take(&url);
out:
	sfs_buf_free(&q);
	sfs_buf_free(&url);
	sfs_buf_free(&path);
	sfs_buf_free(&creq);
	sfs_buf_free(&sh);
	sfs_buf_free(&sts);
	return rc;
}

void aws_post_free(struct aws_post *p)
{
	free(p->url);
	free(p->policy);
	memset(p, 0, sizeof(*p));
}

int aws_post_policy(const struct aws_config *c, const char *bucket, const char *prefix,
		    long expires, time_t now, struct aws_post *p, struct sfs_err *err)
{
	memset(p, 0, sizeof(*p));
	if (!c->access_key || !c->secret_key)
		return sfs_errf(err, -EACCES, "aws: no %s", aws_config_missing(c));
	sfs_sigv4_amz_date(now, p->date);
	if (credential(c, p->date, p->credential, sizeof(p->credential)) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "aws: access key or region too long");
	time_t until = now + expires;
	struct tm tm;
	char exp[40];
	gmtime_r(&until, &tm);
	strftime(exp, sizeof(exp), "%Y-%m-%dT%H:%M:%S.000Z", &tm);
	json_t *conds =
	    json_pack("[{s:s}, [s,s,s], [s,s,s], [s,s,s], {s:s}, {s:s}, {s:s}]", "bucket", bucket,
		      "starts-with", "$key", prefix, "starts-with", "$x-amz-meta-mode", "",
		      "starts-with", "$x-amz-meta-mtime", "", "x-amz-algorithm", "AWS4-HMAC-SHA256",
		      "x-amz-credential", p->credential, "x-amz-date", p->date);
	if (conds && c->session_token)
		json_array_append_new(conds,
				      json_pack("{s:s}", "x-amz-security-token", c->session_token));
	json_t *doc =
	    conds ? json_pack("{s:s, s:o}", "expiration", exp, "conditions", conds) : NULL;
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	struct sfs_buf url = {0};
	int rc = text ? aws_s3_url(c, bucket, NULL, NULL, &url) : -ENOMEM;
	if (!rc) {
		size_t n = strlen(text);
		p->policy = malloc(4 * ((n + 2) / 3) + 1);
		if (!p->policy)
			rc = -ENOMEM;
		else
			p->policy[sfs_base64_encode((const unsigned char *)text, n, p->policy)] = 0;
	}
	if (!rc) {
		struct sfs_sigv4_key k = {.access_key = c->access_key,
					  .secret_key = c->secret_key,
					  .region = c->region,
					  .service = "s3",
					  .amz_date = p->date};
		rc = sfs_sigv4_sign_text(&k, p->policy, strlen(p->policy), p->signature);
	}
	free(text);
	if (!rc)
		p->url = sfs_buf_take(&url);
	sfs_buf_free(&url);
	if (rc) {
		aws_post_free(p);
		return sfs_errf(err, rc, "aws: cannot sign an upload policy (%s)", strerror(-rc));
	}
	return 0;
}
