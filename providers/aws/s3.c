/*
 * S3 over the HTTP kit: URLs (path-style or virtual-host), signing, S3's
 * XML errors as errno + message, and ListObjectsV2 parsing (a small scanner:
 * the shapes are flat, provider-apis-aws-gcp.md §5).
 */
#include "aws.h"
#include "sigv4.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../http/http.h"
#include "../strbuf.h"
#include "../util.h"

/* Decodes the five XML entities and numeric ones below 128. */
static char *xml_unescape(const char *s, size_t n)
{
	char *o = malloc(n + 1), *d = o;
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		static const struct {
			const char *ent;
			char c;
		} ents[] = {{"&amp;", '&'},
			    {"&lt;", '<'},
			    {"&gt;", '>'},
			    {"&quot;", '"'},
			    {"&apos;", '\''}};
		bool done = false;
		for (size_t e = 0; s[i] == '&' && e < 5 && !done; e++) {
			size_t el = strlen(ents[e].ent);
			if (i + el <= n && !strncmp(s + i, ents[e].ent, el)) {
				*d++ = ents[e].c;
				i += el - 1;
				done = true;
			}
		}
		if (!done && s[i] == '&' && i + 3 < n && s[i + 1] == '#') {
			char *end;
			long v = strtol(s + i + 2, &end, s[i + 2] == 'x' ? 0 : 10);
			if (s[i + 2] == 'x')
				v = strtol(s + i + 3, &end, 16);
			if (end < s + n && *end == ';' && v > 0 && v < 128) {
				*d++ = (char)v;
				i = (size_t)(end - s);
				done = true;
			}
		}
		if (!done)
			*d++ = s[i];
	}
	*d = 0;
	return o;
}

/* The first <tag>...</tag> in [s, e): its text's bounds. */
static bool find_tag(const char *s, const char *e, const char *tag, const char **ts,
		     const char **te)
{
	char open[64], close[64];
	if (sfs_pathf(open, sizeof(open), "<%s>", tag) < 0 ||
	    sfs_pathf(close, sizeof(close), "</%s>", tag) < 0)
		return false;
	size_t ol = strlen(open), cl = strlen(close);
	for (const char *p = s; p + ol <= e; p++) {
		if (memcmp(p, open, ol))
			continue;
		for (const char *q = p + ol; q + cl <= e; q++)
			if (!memcmp(q, close, cl)) {
				*ts = p + ol;
				*te = q;
				return true;
			}
		return false;
	}
	return false;
}

char *aws_xml_text(const char *xml, size_t len, const char *tag)
{
	const char *ts, *te;
	if (!xml || !find_tag(xml, xml + len, tag, &ts, &te))
		return NULL;
	return xml_unescape(ts, (size_t)(te - ts));
}

/* 2026-01-02T03:04:05.000Z as unix seconds (0 when unparseable). */
static int64_t iso_time(const char *s)
{
	struct tm tm = {0};
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (int64_t)timegm(&tm);
}

int aws_s3_parse_list(const char *xml, size_t len, struct aws_s3_list *l)
{
	if (!xml || !strstr(xml, "<ListBucketResult"))
		return -EPROTO;
	const char *p = xml, *e = xml + len, *ts, *te;
	while (find_tag(p, e, "Contents", &ts, &te)) {
		void *n = realloc(l->objs, (l->nobjs + 1) * sizeof(*l->objs));
		if (!n)
			return -ENOMEM;
		l->objs = n;
		struct aws_s3_obj *o = &l->objs[l->nobjs];
		memset(o, 0, sizeof(*o));
		o->key = aws_xml_text(ts, (size_t)(te - ts), "Key");
		char *sz = aws_xml_text(ts, (size_t)(te - ts), "Size");
		char *lm = aws_xml_text(ts, (size_t)(te - ts), "LastModified");
		o->size = sz ? strtoll(sz, NULL, 10) : 0;
		o->mtime = iso_time(lm);
		free(sz);
		free(lm);
		if (!o->key)
			return -EPROTO;
		l->nobjs++;
		p = te;
	}
	p = xml;
	while (find_tag(p, e, "CommonPrefixes", &ts, &te)) {
		void *n = realloc(l->prefixes, (l->nprefixes + 1) * sizeof(*l->prefixes));
		if (!n)
			return -ENOMEM;
		l->prefixes = n;
		l->prefixes[l->nprefixes] = aws_xml_text(ts, (size_t)(te - ts), "Prefix");
		if (!l->prefixes[l->nprefixes])
			return -EPROTO;
		l->nprefixes++;
		p = te;
	}
	free(l->next_token);
	l->next_token = NULL;
	char *trunc = aws_xml_text(xml, len, "IsTruncated");
	if (trunc && !strcmp(trunc, "true")) {
		l->next_token = aws_xml_text(xml, len, "NextContinuationToken");
		if (!l->next_token) {
			free(trunc);
			return -EPROTO;
		}
	}
	free(trunc);
	return 0;
}

void aws_s3_list_free(struct aws_s3_list *l)
{
	for (size_t i = 0; i < l->nobjs; i++)
		free(l->objs[i].key);
	for (size_t i = 0; i < l->nprefixes; i++)
		free(l->prefixes[i]);
	free(l->objs);
	free(l->prefixes);
	free(l->next_token);
	memset(l, 0, sizeof(*l));
}

/* The errno of an S3 error code (the status decides the rest). */
static int code_errno(const char *code, long status)
{
	if (!code)
		return sfs_http_status_errno(status);
	if (!strcmp(code, "NoSuchKey") || !strcmp(code, "NoSuchBucket") ||
	    !strcmp(code, "NoSuchUpload"))
		return -ENOENT;
	if (!strcmp(code, "AccessDenied") || !strcmp(code, "SignatureDoesNotMatch") ||
	    !strcmp(code, "InvalidAccessKeyId") || !strcmp(code, "InvalidToken") ||
	    !strcmp(code, "ExpiredToken") || !strcmp(code, "RequestTimeTooSkewed"))
		return -EACCES;
	if (!strcmp(code, "SlowDown") || status == 503)
		return -EAGAIN;
	return status >= 500 ? -EIO : sfs_http_status_errno(status);
}

/* A hint for the codes a user can act on. */
static const char *code_hint(const char *code)
{
	if (!code)
		return "";
	if (!strcmp(code, "SignatureDoesNotMatch"))
		return " (check AWS_SECRET_ACCESS_KEY / aws_secret_access_key)";
	if (!strcmp(code, "InvalidAccessKeyId"))
		return " (check AWS_ACCESS_KEY_ID / aws_access_key_id)";
	if (!strcmp(code, "NoSuchBucket"))
		return " (check bucket= / aws.bucket and the region)";
	if (!strcmp(code, "ExpiredToken"))
		return " (the session token has expired: renew AWS_SESSION_TOKEN)";
	if (!strcmp(code, "AccessDenied"))
		return " (the keys' policy does not allow this on the bucket)";
	if (!strcmp(code, "SlowDown"))
		return " (S3 is throttling; retried with backoff, still refused)";
	return "";
}

int aws_s3_url(const struct aws_config *c, const char *bucket, const char *key, const char *query,
	       struct sfs_buf *url)
{
	int rc = 0;
	const char *ep = c->s3_endpoint;
	if (c->s3_path_style) {
		rc = sfs_buf_printf(url, "%s/", ep);
		if (!rc)
			rc = sfs_sigv4_uri_encode(url, bucket, strlen(bucket), false);
	} else {
		/* https://BUCKET.host[:port] */
		const char *auth = strstr(ep, "://");
		auth = auth ? auth + 3 : ep;
		rc = sfs_buf_printf(url, "%.*s%s.%s", (int)(auth - ep), ep, bucket, auth);
	}
	if (!rc && key) {
		rc = sfs_buf_addc(url, '/');
		if (!rc)
			rc = sfs_sigv4_uri_encode(url, key, strlen(key), true);
	} else if (!rc && !c->s3_path_style) {
		rc = sfs_buf_addc(url, '/');
	}
	if (!rc && query && *query)
		rc = sfs_buf_printf(url, "?%s", query);
	return rc;
}

int aws_s3(const struct aws_config *c, const char *bucket, const struct aws_s3_call *call,
	   long *status, struct sfs_buf *resp_body, char **hdr, struct sfs_err *err)
{
	struct sfs_buf url = {0};
	struct aws_signed sig = {0};
	struct sfs_http_resp resp = {0};
	struct sfs_http_fd sink = {.fd = call->sink_fd};
	const char *what_key = call->key ? call->key : "";
	int rc = aws_s3_url(c, bucket, call->key, call->query, &url);
	if (rc)
		return sfs_errf(err, -ENOMEM, "out of memory");
	rc = aws_sign(c, "s3", call->method, url.buf, call->headers, NULL, call->body,
		      call->body_len, time(NULL), &sig, err);
	if (rc)
		goto out;
	struct sfs_http_req req = {
	    .method = call->method,
	    .url = url.buf,
	    .headers = sig.list,
	    .body = call->body,
	    .body_len = call->body_len,
	    .capture_header = call->capture,
	    .retry_unsafe = call->retry_unsafe,
	    .what = "aws: s3",
	};
	if (call->sink_fd >= 0) {
		req.sink = sfs_http_fd_sink;
		req.sink_reset = sfs_http_fd_rewind;
		req.sink_arg = &sink;
	}
	rc = sfs_http_do(&req, &resp, err);
	if (rc)
		goto out;
	if (status)
		*status = resp.status;
	if (resp.status < 200 || resp.status >= 300) {
		char *code = aws_xml_text(resp.body, resp.len, "Code");
		char *msg = aws_xml_text(resp.body, resp.len, "Message");
		/* a HEAD answer has no body: its status says enough */
		const char *dflt = resp.status == 404	? "NotFound"
				   : resp.status == 403 ? "AccessDenied"
				   : resp.status == 503 ? "SlowDown"
							: "error";
		rc = sfs_errf(err, code_errno(code ? code : dflt, resp.status),
			      "aws: s3 %s s3://%s/%s: %s: %s%s (HTTP %ld)", call->method, bucket,
			      what_key, code ? code : dflt, msg ? msg : "no message",
			      code_hint(code ? code : dflt), resp.status);
		free(code);
		free(msg);
		goto out;
	}
	if (resp_body)
		rc = sfs_buf_add(resp_body, resp.body ? resp.body : "", resp.len);
	if (!rc && hdr) {
		*hdr = resp.header ? strdup(resp.header) : NULL;
		if (resp.header && !*hdr)
			rc = -ENOMEM;
	}
	if (rc)
		rc = sfs_errf(err, -ENOMEM, "out of memory");
out:
	sfs_http_resp_free(&resp);
	aws_signed_free(&sig);
	sfs_buf_free(&url);
	return rc;
}

int aws_s3_list(const struct aws_config *c, const char *bucket, const char *prefix, bool delim,
		size_t max, struct aws_s3_list *l, struct sfs_err *err)
{
	memset(l, 0, sizeof(*l));
	char *token = NULL;
	int rc = 0;
	do {
		struct sfs_buf q = {0}, body = {0};
		rc = sfs_buf_adds(&q, "list-type=2");
		if (!rc && delim)
			rc = sfs_buf_adds(&q, "&delimiter=%2F");
		if (!rc && max)
			rc = sfs_buf_printf(&q, "&max-keys=%zu", max);
		if (!rc && prefix && *prefix) {
			rc = sfs_buf_adds(&q, "&prefix=");
			if (!rc)
				rc = sfs_sigv4_uri_encode(&q, prefix, strlen(prefix), false);
		}
		if (!rc && token) {
			rc = sfs_buf_adds(&q, "&continuation-token=");
			if (!rc)
				rc = sfs_sigv4_uri_encode(&q, token, strlen(token), false);
		}
		if (rc) {
			rc = sfs_errf(err, -ENOMEM, "out of memory");
		} else {
			struct aws_s3_call call = {.method = "GET", .query = q.buf, .sink_fd = -1};
			rc = aws_s3(c, bucket, &call, NULL, &body, NULL, err);
		}
		if (!rc) {
			rc = aws_s3_parse_list(body.buf, body.len, l);
			if (rc)
				rc = sfs_errf(err, rc, "aws: s3 list s3://%s/%s: %s", bucket,
					      prefix ? prefix : "",
					      rc == -ENOMEM ? "out of memory"
							    : "cannot parse the answer");
		}
		free(token);
		token = NULL;
		if (!rc && l->next_token && (!max || l->nobjs + l->nprefixes < max))
			token = strdup(l->next_token);
		sfs_buf_free(&q);
		sfs_buf_free(&body);
	} while (!rc && token);
	if (rc)
		aws_s3_list_free(l);
	return rc;
}
