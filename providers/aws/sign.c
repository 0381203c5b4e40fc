/* The signed headers of one AWS request (aws.h, sigv4.h). */
#include "aws.h"
#include "sigv4.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../strbuf.h"

static int add_line(struct aws_signed *s, const char *name, const char *value)
{
	if (s->n >= AWS_MAX_HDRS)
		return -E2BIG;
	struct sfs_buf b = {0};
	if (sfs_buf_printf(&b, "%s: %s", name, value))
		return -ENOMEM;
	s->lines[s->n] = sfs_buf_take(&b);
	if (!s->lines[s->n])
		return -ENOMEM;
	s->list[s->n] = s->lines[s->n];
	s->n++;
	s->list[s->n] = NULL;
	return 0;
}

void aws_signed_free(struct aws_signed *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->lines[i]);
	memset(s, 0, sizeof(*s));
}

int aws_sign(const struct aws_config *c, const char *service, const char *method, const char *url,
	     const char *const *extra, const char *payload_hash, const void *body, size_t len,
	     time_t now, struct aws_signed *out, struct sfs_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!c->access_key || !c->secret_key)
		return sfs_errf(err, -EACCES, "aws: no %s", aws_config_missing(c));
	const char *auth = strstr(url, "://");
	if (!auth)
		return sfs_errf(err, -EINVAL, "aws: not an absolute URL");
	auth += 3;
	size_t alen = strcspn(auth, "/?");
	const char *path = auth + alen;
	size_t plen = strcspn(path, "?");
	const char *query = path[plen] == '?' ? path + plen + 1 : NULL;
	bool s3 = !strcmp(service, "s3");

	char *host = strndup(auth, alen);
	/* the path as signed is the decoded key: the signer encodes it once
	 * more, the same way the URL was built */
	struct sfs_buf dpath = {0};
	struct sfs_sigv4_hdr *h = calloc(AWS_MAX_HDRS, sizeof(*h));
	struct sfs_buf authz = {0};
	char date[17], bodyhash[65];
	int rc = host && h ? 0 : -ENOMEM;
	if (!rc)
		rc = plen ? sfs_sigv4_uri_decode(&dpath, path, plen) : sfs_buf_addc(&dpath, '/');
	if (rc)
		goto out;
	char *q = query ? strdup(query) : NULL;
	if (query && !q) {
		rc = -ENOMEM;
		goto out;
	}

	sfs_sigv4_amz_date(now, date);
	if (!payload_hash) {
		sfs_sha256_hex(body ? body : "", body ? len : 0, bodyhash);
		payload_hash = bodyhash;
	}
	rc = add_line(out, "Host", host);
	if (!rc)
		rc = add_line(out, "X-Amz-Date", date);
	if (!rc && s3)
		rc = add_line(out, "X-Amz-Content-Sha256", payload_hash);
	/* the token is signed ("header before" of the suite): S3, ECS and Logs
	 * all accept it so, and some services accept nothing else */
	if (!rc && c->session_token)
		rc = add_line(out, "X-Amz-Security-Token", c->session_token);
	for (size_t i = 0; !rc && extra && extra[i]; i++) {
		const char *colon = strchr(extra[i], ':');
		if (!colon) {
			rc = -EINVAL;
			break;
		}
		char *name = strndup(extra[i], (size_t)(colon - extra[i]));
		const char *v = colon + 1;
		while (*v == ' ')
			v++;
		rc = name ? add_line(out, name, v) : -ENOMEM;
		free(name);
	}
	size_t nh = 0;
	for (size_t i = 0; !rc && i < out->n; i++) {
		char *colon = strchr(out->lines[i], ':');
		*colon = 0; /* split in place for the signer, restored below */
		h[nh].name = out->lines[i];
		h[nh].value = colon + 2;
		nh++;
	}
	if (!rc) {
		struct sfs_sigv4_req r = {.method = method,
					  .path = dpath.buf,
					  .query = q,
					  .headers = h,
					  .nheaders = nh,
					  .payload_hash = payload_hash,
					  .s3 = s3};
		struct sfs_sigv4_key k = {.access_key = c->access_key,
					  .secret_key = c->secret_key,
					  .region = c->region,
					  .service = service,
					  .amz_date = date};
		rc = sfs_sigv4_authorization(&r, &k, &authz, NULL, NULL);
	}
	for (size_t i = 0; i < nh; i++)
		out->lines[i][strlen(out->lines[i])] = ':';
	if (!rc)
		rc = add_line(out, "Authorization", authz.buf);
	free(q);
out:
	free(host);
	sfs_buf_free(&dpath);
	free(h);
	sfs_buf_free(&authz);
	if (rc) {
		aws_signed_free(out);
		return sfs_errf(err, rc, "aws: cannot sign the request (%s)", strerror(-rc));
	}
	return 0;
}
