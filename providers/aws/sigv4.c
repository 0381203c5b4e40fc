/* AWS Signature Version 4: see sigv4.h and docs/aws.md. */
#include "sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

static const char hexdig[] = "0123456789abcdef";

static void hex(const unsigned char *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdig[d[i] >> 4];
		out[2 * i + 1] = hexdig[d[i] & 15];
	}
	out[2 * n] = 0;
}

void sfs_sha256_hex(const void *data, size_t n, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	/* EVP_Digest with SHA-256 fails only when OpenSSL is out of memory:
	 * an all-zero digest then makes the signature not match (403), which
	 * is the visible outcome we want rather than a crash */
	if (!EVP_Digest(data, n, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		memset(md, 0, 32);
	hex(md, 32, out);
}

int sfs_hmac_sha256(const void *key, size_t klen, const void *data, size_t n, unsigned char out[32])
{
	unsigned int len = 0;
	if (!HMAC(EVP_sha256(), key, (int)klen, data, n, out, &len) || len != 32)
		return -EIO;
	return 0;
}

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

int sfs_sigv4_uri_encode(struct sfs_buf *out, const char *s, size_t n, bool keep_slash)
{
	static const char up[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int rc;
		if (unreserved(c) || (keep_slash && c == '/')) {
			rc = sfs_buf_addc(out, (char)c);
		} else {
			char e[3] = {'%', up[c >> 4], up[c & 15]};
			rc = sfs_buf_add(out, e, 3);
		}
		if (rc)
			return rc;
	}
	return 0;
}

void sfs_sigv4_amz_date(time_t t, char out[17])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int sfs_sigv4_uri_decode(struct sfs_buf *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc;
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			rc = sfs_buf_addc(out, (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2])));
			i += 2;
		} else {
			rc = sfs_buf_addc(out, s[i]);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- canonical URI ---------------------------------------------------- */

/* Non-S3 paths: drop "." and empty segments, ".." pops one; a trailing
 * '/' of the original is kept (RFC 3986 remove_dot_segments as botocore
 * applies it through posixpath.normpath). */
static int normalise_path(const char *p, struct sfs_buf *out)
{
	size_t n = strlen(p);
	size_t *starts = calloc(n + 1, sizeof(*starts));
	size_t *lens = calloc(n + 1, sizeof(*lens));
	size_t depth = 0;
	int rc = 0;
	if (!starts || !lens) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n;) {
		while (i < n && p[i] == '/')
			i++;
		size_t s = i;
		while (i < n && p[i] != '/')
			i++;
		size_t len = i - s;
		if (len == 0 || (len == 1 && p[s] == '.'))
			continue;
		if (len == 2 && p[s] == '.' && p[s + 1] == '.') {
			if (depth)
				depth--;
			continue;
		}
		starts[depth] = s;
		lens[depth] = len;
		depth++;
	}
	sfs_buf_reset(out);
	for (size_t d = 0; d < depth && !rc; d++) {
		rc = sfs_buf_addc(out, '/');
		if (!rc)
			rc = sfs_buf_add(out, p + starts[d], lens[d]);
	}
	if (!rc && (depth == 0 || (n && p[n - 1] == '/')))
		rc = sfs_buf_addc(out, '/');
out:
	free(starts);
	free(lens);
	return rc;
}

static int canonical_uri(const struct sfs_sigv4_req *r, struct sfs_buf *creq)
{
	const char *p = r->path[0] ? r->path : "/";
	if (r->s3)
		return sfs_sigv4_uri_encode(creq, p, strlen(p), true);
	struct sfs_buf norm = {0};
	int rc = normalise_path(p, &norm);
	if (!rc)
		rc = sfs_sigv4_uri_encode(creq, norm.buf, norm.len, true);
	sfs_buf_free(&norm);
	return rc;
}

/* ---- canonical query -------------------------------------------------- */

struct qparam {
	char *name, *value; /* encoded once */
};

static int qparam_cmp(const void *a, const void *b)
{
	const struct qparam *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

/* Decodes then encodes one name or value, so "%E1%88%B4" and the raw
 * bytes both come out as "%E1%88%B4" and nothing is encoded twice. */
static char *requote(const char *s, size_t n, struct sfs_buf *tmp)
{
	struct sfs_buf out = {0};
	sfs_buf_reset(tmp);
	if (sfs_sigv4_uri_decode(tmp, s, n) ||
	    sfs_sigv4_uri_encode(&out, tmp->buf, tmp->len, false)) {
		sfs_buf_free(&out);
		return NULL;
	}
	return out.buf ? sfs_buf_take(&out) : strdup("");
}

static int canonical_query(const char *q, struct sfs_buf *creq)
{
	if (!q || !*q)
		return 0;
	size_t cap = 1;
	for (const char *c = q; *c; c++)
		cap += *c == '&';
	struct qparam *ps = calloc(cap, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	struct sfs_buf tmp = {0};
	size_t np = 0;
	int rc = 0;
	for (const char *s = q; *s && !rc;) {
		const char *e = strchr(s, '&');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len) {
			const char *eq = memchr(s, '=', len);
			size_t nlen = eq ? (size_t)(eq - s) : len;
			ps[np].name = requote(s, nlen, &tmp);
			ps[np].value = eq ? requote(eq + 1, len - nlen - 1, &tmp) : strdup("");
			if (!ps[np].name || !ps[np].value)
				rc = -ENOMEM;
			np++;
		}
		s += len + (e ? 1 : 0);
	}
	if (!rc) {
		qsort(ps, np, sizeof(*ps), qparam_cmp);
		for (size_t i = 0; i < np && !rc; i++)
			rc = sfs_buf_printf(creq, "%s%s=%s", i ? "&" : "", ps[i].name, ps[i].value);
	}
	for (size_t i = 0; i < np; i++) {
		free(ps[i].name);
		free(ps[i].value);
	}
	free(ps);
	sfs_buf_free(&tmp);
	return rc;
}

/* ---- canonical headers ------------------------------------------------ */

struct chdr {
	char *name, *value; /* lower-case name; trimmed, runs of blanks collapsed */
	size_t order;
};

static int chdr_cmp(const void *a, const void *b)
{
	const struct chdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static char *lower_dup(const char *s)
{
	char *d = strdup(s);
	for (char *c = d; c && *c; c++)
		*c = (char)tolower((unsigned char)*c);
	return d;
}

/* Trims and collapses every run of spaces, tabs and folded line breaks
 * (also inside quotes: the suite's "a   b   c" becomes "a b c"). */
static char *squeeze(const char *v)
{
	char *d = malloc(strlen(v) + 1), *o = d;
	if (!d)
		return NULL;
	bool blank = false;
	for (const char *c = v; *c; c++) {
		if (*c == ' ' || *c == '\t' || *c == '\r' || *c == '\n') {
			blank = o != d;
			continue;
		}
		if (blank)
			*o++ = ' ';
		blank = false;
		*o++ = *c;
	}
	*o = 0;
	return d;
}

static int canonical_headers(const struct sfs_sigv4_req *r, struct sfs_buf *creq,
			     struct sfs_buf *signed_headers)
{
	struct chdr *hs = calloc(r->nheaders ? r->nheaders : 1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; i < r->nheaders && !rc; i++) {
		hs[i].name = lower_dup(r->headers[i].name);
		hs[i].value = squeeze(r->headers[i].value ? r->headers[i].value : "");
		hs[i].order = i;
		if (!hs[i].name || !hs[i].value)
			rc = -ENOMEM;
	}
	if (!rc)
		qsort(hs, r->nheaders, sizeof(*hs), chdr_cmp);
	sfs_buf_reset(signed_headers);
	for (size_t i = 0; i < r->nheaders && !rc; i++) {
		bool again = i && !strcmp(hs[i].name, hs[i - 1].name);
		if (again) {
			/* the previous line's "\n" becomes ",value\n" */
			creq->len--;
			rc = sfs_buf_printf(creq, ",%s\n", hs[i].value);
			continue;
		}
		rc = sfs_buf_printf(creq, "%s:%s\n", hs[i].name, hs[i].value);
		if (!rc)
			rc = sfs_buf_printf(signed_headers, "%s%s", signed_headers->len ? ";" : "",
					    hs[i].name);
	}
	for (size_t i = 0; i < r->nheaders; i++) {
		free(hs[i].name);
		free(hs[i].value);
	}
	free(hs);
	return rc;
}

int sfs_sigv4_canonical_request(const struct sfs_sigv4_req *r, struct sfs_buf *creq,
				struct sfs_buf *signed_headers)
{
	if (!r->method || !r->path)
		return -EINVAL;
	sfs_buf_reset(creq);
	int rc = sfs_buf_printf(creq, "%s\n", r->method);
	if (!rc)
		rc = canonical_uri(r, creq);
	if (!rc)
		rc = sfs_buf_addc(creq, '\n');
	if (!rc)
		rc = canonical_query(r->query, creq);
	if (!rc)
		rc = sfs_buf_addc(creq, '\n');
	if (!rc)
		rc = canonical_headers(r, creq, signed_headers);
	if (!rc)
		rc = sfs_buf_printf(creq, "\n%s\n", signed_headers->buf ? signed_headers->buf : "");
	if (rc)
		return rc;
	if (r->payload_hash)
		return sfs_buf_adds(creq, r->payload_hash);
	char h[65];
	sfs_sha256_hex(r->body ? r->body : "", r->body ? r->body_len : 0, h);
	return sfs_buf_adds(creq, h);
}

int sfs_sigv4_string_to_sign(const char *creq, size_t creq_len, const struct sfs_sigv4_key *k,
			     struct sfs_buf *out)
{
	if (!k->amz_date || strlen(k->amz_date) != 16 || !k->region || !k->service)
		return -EINVAL;
	char h[65];
	sfs_sha256_hex(creq, creq_len, h);
	sfs_buf_reset(out);
	return sfs_buf_printf(out, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", k->amz_date,
			      k->amz_date, k->region, k->service, h);
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), service), "aws4_request") */
static int signing_key(const struct sfs_sigv4_key *k, unsigned char out[32])
{
	size_t slen = strlen(k->secret_key);
	char *first = malloc(slen + 5);
	if (!first)
		return -ENOMEM;
	memcpy(first, "AWS4", 4);
	memcpy(first + 4, k->secret_key, slen + 1);
	unsigned char a[32], b[32];
	int rc = sfs_hmac_sha256(first, slen + 4, k->amz_date, 8, a);
	/* the secret must not linger in freed memory */
	OPENSSL_cleanse(first, slen + 4);
	free(first);
	if (!rc)
		rc = sfs_hmac_sha256(a, 32, k->region, strlen(k->region), b);
	if (!rc)
		rc = sfs_hmac_sha256(b, 32, k->service, strlen(k->service), a);
	if (!rc)
		rc = sfs_hmac_sha256(a, 32, "aws4_request", 12, out);
	OPENSSL_cleanse(a, sizeof(a));
	OPENSSL_cleanse(b, sizeof(b));
	return rc;
}

int sfs_sigv4_sign_text(const struct sfs_sigv4_key *k, const char *text, size_t len,
			char sighex[65])
{
	unsigned char key[32], sig[32];
	int rc = signing_key(k, key);
	if (!rc)
		rc = sfs_hmac_sha256(key, 32, text, len, sig);
	OPENSSL_cleanse(key, sizeof(key));
	if (!rc)
		hex(sig, 32, sighex);
	return rc;
}

int sfs_sigv4_authorization(const struct sfs_sigv4_req *r, const struct sfs_sigv4_key *k,
			    struct sfs_buf *authz, struct sfs_buf *creq_out,
			    struct sfs_buf *sts_out)
{
	if (!k->access_key || !k->secret_key)
		return -EINVAL;
	struct sfs_buf creq = {0}, sh = {0}, sts = {0};
	unsigned char key[32], sig[32];
	char sighex[65];
	int rc = sfs_sigv4_canonical_request(r, &creq, &sh);
	if (!rc)
		rc = sfs_sigv4_string_to_sign(creq.buf, creq.len, k, &sts);
	if (!rc)
		rc = signing_key(k, key);
	if (!rc)
		rc = sfs_hmac_sha256(key, 32, sts.buf, sts.len, sig);
	OPENSSL_cleanse(key, sizeof(key));
	if (!rc) {
		hex(sig, 32, sighex);
		sfs_buf_reset(authz);
		rc = sfs_buf_printf(authz,
				    "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
				    "SignedHeaders=%s, Signature=%s",
				    k->access_key, k->amz_date, k->region, k->service,
				    sh.buf ? sh.buf : "", sighex);
	}
	if (!rc && creq_out) {
		sfs_buf_reset(creq_out);
		rc = sfs_buf_add(creq_out, creq.buf, creq.len);
	}
	if (!rc && sts_out) {
		sfs_buf_reset(sts_out);
		rc = sfs_buf_add(sts_out, sts.buf, sts.len);
	}
	sfs_buf_free(&creq);
	sfs_buf_free(&sh);
	sfs_buf_free(&sts);
	return rc;
}
