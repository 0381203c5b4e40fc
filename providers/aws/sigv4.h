/*
 * AWS Signature Version 4 (header form), pure: canonical request, string to
 * sign, signing key and the Authorization value, written against the AWS
 * SigV4 test suite (tests/vectors/sigv4, run by tests/unit/test_sigv4.c).
 * SHA-256 and HMAC come from OpenSSL's libcrypto (docs/aws.md says why).
 */
#ifndef SFS_AWS_SIGV4_H
#define SFS_AWS_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "../strbuf.h"

/* SHA-256 of nothing, and S3's marker for a body left out of the signature */
#define SFS_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SFS_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

struct sfs_sigv4_hdr {
	const char *name; /* any case */
	const char *value;
};

struct sfs_sigv4_req {
	const char *method;
	/* The decoded path ("/bucket/a b.txt"); it is percent-encoded once
	 * here, the same way sfs_sigv4_uri_encode builds the wire path. */
	const char *path;
	const char *query; /* as on the wire, without '?'; NULL or "" for none */
	/* Every header to sign, Host (with :port when not default) and
	 * X-Amz-Date included; repeated names are joined in order. */
	const struct sfs_sigv4_hdr *headers;
	size_t nheaders;
	/* Hex SHA-256 of the body or UNSIGNED-PAYLOAD; NULL: hash body here. */
	const char *payload_hash;
	const void *body;
	size_t body_len;
	/* S3 rules: the path is signed as is (no "."/".."/"//" normalisation). */
	bool s3;
};

struct sfs_sigv4_key {
	const char *access_key, *secret_key;
	const char *region, *service;
	const char *amz_date; /* YYYYMMDDTHHMMSSZ, the request's X-Amz-Date */
};

/* Lower-case hex SHA-256 of n bytes into out[65]. */
void sfs_sha256_hex(const void *data, size_t n, char out[65]);
/* HMAC-SHA256 into out[32]; 0 or -EIO. */
int sfs_hmac_sha256(const void *key, size_t klen, const void *data, size_t n,
		    unsigned char out[32]);
/* Appends s[0..n) with every byte but A-Z a-z 0-9 - _ . ~ (and '/' when
 * keep_slash) as %XX (upper-case hex).  0 or -ENOMEM. */
int sfs_sigv4_uri_encode(struct sfs_buf *out, const char *s, size_t n, bool keep_slash);
/* Appends s[0..n) percent-decoded (a '%' not followed by two hex digits
 * stays literal; '+' stays '+': AWS does not read it as a space).  0 or
 * -ENOMEM. */
int sfs_sigv4_uri_decode(struct sfs_buf *out, const char *s, size_t n);
/* t as X-Amz-Date (UTC) into out[17]. */
void sfs_sigv4_amz_date(time_t t, char out[17]);

/* The canonical request (no trailing newline) and the SignedHeaders list.
 * 0, -EINVAL (no method/path/amz date), -ENOMEM. */
int sfs_sigv4_canonical_request(const struct sfs_sigv4_req *r, struct sfs_buf *creq,
				struct sfs_buf *signed_headers);
/* "AWS4-HMAC-SHA256\n{date}\n{scope}\n{hex sha256(creq)}". */
int sfs_sigv4_string_to_sign(const char *creq, size_t creq_len, const struct sfs_sigv4_key *k,
			     struct sfs_buf *out);
/* The Authorization header value for r; creq/sts (may be NULL) get the
 * intermediate texts (tests, and S3 emulator debugging).  0, -EINVAL,
 * -ENOMEM, -EIO. */
int sfs_sigv4_authorization(const struct sfs_sigv4_req *r, const struct sfs_sigv4_key *k,
			    struct sfs_buf *authz, struct sfs_buf *creq, struct sfs_buf *sts);

/* Lower-hex HMAC of text with k's signing key (for k->amz_date's day):
 * a presigned URL's string to sign, or a browser POST policy (base64).
 * 0, -ENOMEM, -EIO. */
int sfs_sigv4_sign_text(const struct sfs_sigv4_key *k, const char *text, size_t len,
			char sighex[65]);

#endif
