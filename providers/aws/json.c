/*
 * The awsJson1.1 services (ECS, CloudWatch Logs): POST / with X-Amz-Target,
 * a JSON body, SigV4 for the service; errors are {"__type", "message"}
 * (provider-apis-aws-gcp.md §1.6).  JSON services throttle with HTTP 400
 * and __type ThrottlingException, which the HTTP kit cannot tell from a
 * client error, so those are retried here with the kit's backoff (and the
 * server's Retry-After when it sends one).
 */
#include "aws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../http/http.h"
#include "../util.h"

/* __type may be "Name", "ns#Name" or "Name:url": the Name. */
static void error_type(const char *t, char *out, size_t len)
{
	const char *h = t ? strrchr(t, '#') : NULL;
	t = h ? h + 1 : (t ? t : "");
	if (sfs_pathf(out, len, "%.*s", (int)strcspn(t, ":"), t) < 0)
		return; /* out is "": no type, never a cut one that names another */
}

static bool throttled(const char *type, long status)
{
	static const char *const codes[] = {
	    "ThrottlingException",	  "Throttling",		  "ThrottledException",
	    "TooManyRequestsException",	  "RequestLimitExceeded", "RequestThrottled",
	    "ServiceUnavailableException"};
	for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++)
		if (!strcmp(type, codes[i]))
			return true;
	return status == 429 || status == 503;
}

static int type_errno(const char *type, long status)
{
	if (strstr(type, "AccessDenied") || !strcmp(type, "UnrecognizedClientException") ||
	    !strcmp(type, "InvalidSignatureException") || !strcmp(type, "ExpiredTokenException") ||
	    !strcmp(type, "ExpiredToken") || !strcmp(type, "IncompleteSignature") ||
	    !strcmp(type, "MissingAuthenticationToken"))
		return -EACCES;
	if (strstr(type, "NotFound"))
		return -ENOENT;
	if (throttled(type, status))
		return -EAGAIN;
	if (!strcmp(type, "InvalidParameterException") || !strcmp(type, "ClientException"))
		return -EINVAL;
	return status >= 500 ? -EIO : sfs_http_status_errno(status);
}

static const char *type_hint(const char *type)
{
	if (!strcmp(type, "ExpiredTokenException") || !strcmp(type, "ExpiredToken"))
		return " (the session token has expired: renew AWS_SESSION_TOKEN)";
	if (!strcmp(type, "UnrecognizedClientException"))
		return " (check AWS_ACCESS_KEY_ID / aws_access_key_id)";
	if (!strcmp(type, "InvalidSignatureException"))
		return " (check AWS_SECRET_ACCESS_KEY / aws_secret_access_key)";
	if (!strcmp(type, "ClusterNotFoundException"))
		return " (check cluster= / aws.cluster and the region)";
	return "";
}

int aws_json(const struct aws_config *c, const char *service, const char *target, json_t *body,
	     json_t **out, struct sfs_err *err)
{
	bool logs = !strcmp(service, "logs"), cb = !strcmp(service, "codebuild");
	const char *ep = logs ? c->logs_endpoint : cb ? c->codebuild_endpoint : c->ecs_endpoint;
	const char *prefix = logs ? "Logs_20140328"
			     : cb ? "CodeBuild_20161006"
				  : "AmazonEC2ContainerServiceV20141113";
	const char *op = target;
	char url[1024], th[160];
	if (out)
		*out = NULL;
	if (snprintf(url, sizeof(url), "%s/", ep) >= (int)sizeof(url))
		return sfs_errf(err, -ENAMETOOLONG, "aws: %s endpoint too long", service);
	if (sfs_pathf(th, sizeof(th), "X-Amz-Target: %s.%s", prefix, target) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "aws: %s target %s too long", service, target);
	char *text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return sfs_errf(err, -ENOMEM, "out of memory");
	/* Content-Type goes through the kit (which always sends one for a
	 * body), unsigned: SigV4 needs only host and the x-amz-* headers */
	const char *extra[] = {th, NULL};
	int max = (int)sfs_opt_get_double("http.attempts");
	if (max < 1)
		max = 1;
	int rc = 0;
	for (int attempt = 1;; attempt++) {
		struct aws_signed sig;
		struct sfs_http_resp resp = {0};
		rc = aws_sign(c, service, "POST", url, extra, NULL, text, strlen(text), time(NULL),
			      &sig, err);
		if (rc)
			break;
		struct sfs_http_req req = {.method = "POST",
					   .url = url,
					   .headers = sig.list,
					   .body = text,
					   .body_len = strlen(text),
					   .content_type = "application/x-amz-json-1.1",
					   .capture_header = "Retry-After",
					   /* reads and StopTask are harmless to repeat;
					    * RunTask carries a clientToken */
					   .retry_unsafe = true,
					   .what = service};
		rc = sfs_http_do(&req, &resp, err);
		aws_signed_free(&sig);
		if (rc) {
			sfs_http_resp_free(&resp);
			break;
		}
		if (resp.status >= 200 && resp.status < 300) {
			json_t *j =
			    resp.len ? json_loadb(resp.body, resp.len, 0, NULL) : json_object();
			sfs_http_resp_free(&resp);
			if (!j)
				rc = sfs_errf(err, -EPROTO, "aws: %s %s: the answer is not JSON",
					      service, op);
			else if (out)
				*out = j;
			else
				json_decref(j);
			break;
		}
		json_t *e = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
		char type[96];
		error_type(json_string_value(json_object_get(e, "__type")), type, sizeof(type));
		const char *msg = json_string_value(json_object_get(e, "message"));
		if (!msg)
			msg = json_string_value(json_object_get(e, "Message"));
		long ra = resp.header ? sfs_http_parse_retry_after(resp.header, time(NULL)) : -1;
		/* 5xx and 429 were retried by the HTTP kit already */
		if (throttled(type, resp.status) && resp.status == 400 && attempt < max) {
			json_decref(e);
			sfs_http_resp_free(&resp);
			long ms = sfs_http_backoff_ms(attempt, ra >= 0 ? ra : 0,
						      (double)random() / ((double)RAND_MAX + 1));
			struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			continue;
		}
		rc = sfs_errf(
		    err, type_errno(type, resp.status), "aws: %s %s: %s: %s%s%s (HTTP %ld)",
		    service, op, *type ? type : "error", msg ? msg : "no message", type_hint(type),
		    throttled(type, resp.status) ? " (throttled; retried with backoff)" : "",
		    resp.status);
		json_decref(e);
		sfs_http_resp_free(&resp);
		break;
	}
	free(text);
	return rc;
}
