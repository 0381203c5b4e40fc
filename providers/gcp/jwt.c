/*
 * The service-account key file and the RS256 JWT it signs
 * (provider-apis-aws-gcp.md §7.2).  The private key is parsed once with
 * OpenSSL; its PEM text is never copied into a message.
 */
#include "gcp.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../http/http.h"
#include "../redact.h"
#include "../strbuf.h"
#include "../util.h"

static int field(json_t *o, const char *name, const char *origin, char **out, struct sfs_err *err)
{
	const char *v = json_string_value(json_object_get(o, name));
	if (!v || !*v)
		return sfs_errf(err, -EINVAL, "gcp: key file %s has no \"%s\"", origin, name);
	*out = strdup(v);
	return *out ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
}

int gcp_key_parse(const char *text, const char *origin, struct gcp_key *k, struct sfs_err *err)
{
	memset(k, 0, sizeof(*k));
	json_t *o = json_loads(text, 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return sfs_errf(err, -EINVAL, "gcp: key file %s is not a JSON object", origin);
	}
	int rc = 0;
	const char *type = json_string_value(json_object_get(o, "type"));
	if (type && strcmp(type, "service_account") != 0) {
		char t[64];
		sfs_escape_text(type, strlen(type), t, sizeof(t));
		rc = sfs_errf(err, -EINVAL,
			      "gcp: key file %s is of type \"%s\"; only service_account keys are "
			      "supported",
			      origin, t);
		goto out;
	}
	char *pem = NULL;
	if ((rc = field(o, "client_email", origin, &k->client_email, err)) ||
	    (rc = field(o, "private_key_id", origin, &k->private_key_id, err)) ||
	    (rc = field(o, "token_uri", origin, &k->token_uri, err)) ||
	    (rc = field(o, "private_key", origin, &pem, err)))
		goto out;
	const char *proj = json_string_value(json_object_get(o, "project_id"));
	if (proj && !(k->project_id = strdup(proj))) {
		rc = sfs_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	/* the key id travels in every JWT header: hide it like the key */
	sfs_redact_add_secret(k->private_key_id);
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	explicit_bzero(pem, strlen(pem));
	free(pem);
	if (!pkey || EVP_PKEY_base_id(pkey) != EVP_PKEY_RSA) {
		EVP_PKEY_free(pkey);
		rc = sfs_errf(err, -EINVAL,
			      "gcp: key file %s: \"private_key\" is not an RSA private key in PEM "
			      "form",
			      origin);
		goto out;
	}
	k->pkey = pkey;
out:
	json_decref(o);
	if (rc)
		gcp_key_free(k);
	return rc;
}

int gcp_key_load(const char *path, struct gcp_key *k, struct sfs_err *err)
{
	memset(k, 0, sizeof(*k));
	char *text = NULL;
	size_t len = 0;
	int rc = sfs_read_file(path, &text, &len);
	if (rc)
		return sfs_errf(err, rc, "gcp: cannot read key file %s: %s", path, strerror(-rc));
	rc = gcp_key_parse(text, path, k, err);
	explicit_bzero(text, len);
	free(text);
	return rc;
}

void gcp_key_free(struct gcp_key *k)
{
	free(k->client_email);
	free(k->private_key_id);
	free(k->token_uri);
	free(k->project_id);
	EVP_PKEY_free(k->pkey);
	memset(k, 0, sizeof(*k));
}

/* appends base64url(data) to b */
static int add_b64url(struct sfs_buf *b, const void *data, size_t n)
{
	char *enc = malloc(4 * ((n + 2) / 3) + 1);
	if (!enc)
		return -ENOMEM;
	size_t len = sfs_base64url_encode(data, n, enc);
	int rc = sfs_buf_add(b, enc, len);
	free(enc);
	return rc;
}

static int add_b64url_json(struct sfs_buf *b, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!s)
		return -ENOMEM;
	int rc = add_b64url(b, s, strlen(s));
	free(s);
	return rc;
}

int gcp_jwt_build(const struct gcp_key *k, const char *scope, const char *aud, time_t now,
		  char **out, struct sfs_err *err)
{
	*out = NULL;
	struct sfs_buf b = {0};
	int rc = add_b64url_json(&b, json_pack("{s:s, s:s, s:s}", "alg", "RS256", "typ", "JWT",
					       "kid", k->private_key_id));
	if (!rc)
		rc = sfs_buf_add(&b, ".", 1);
	if (!rc)
		rc = add_b64url_json(&b,
				     json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", k->client_email,
					       "scope", scope, "aud", aud, "iat", (json_int_t)now,
					       "exp", (json_int_t)now + GCP_JWT_LIFETIME));
	if (rc) {
		sfs_buf_free(&b);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	/* RSASSA-PKCS1-v1_5 with SHA-256 over "header.claims" (RSA's default padding) */
	unsigned char sig[1024];
	size_t siglen = sizeof(sig);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	bool ok = md && (size_t)EVP_PKEY_get_size(k->pkey) <= sizeof(sig) &&
		  EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k->pkey) == 1 &&
		  EVP_DigestSign(md, sig, &siglen, (const unsigned char *)b.buf, b.len) == 1;
	EVP_MD_CTX_free(md);
	if (!ok) {
		sfs_buf_free(&b);
		return sfs_errf(err, -EINVAL, "gcp: signing the JWT with the key of %s failed",
				k->client_email);
	}
	if (sfs_buf_add(&b, ".", 1) || add_b64url(&b, sig, siglen) || !(*out = sfs_buf_take(&b))) {
		sfs_buf_free(&b);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	return 0;
}
