/*
 * The pure parts of the aws provider's runs: presigned URLs (the S3
 * documentation's query-string example), the POST upload policy and its
 * signature, where a sandbox's run scripts go, and the task script's
 * manifest and quoting.
 */
#include "check.h"

#include "providers/aws/aws.h"
#include "providers/aws/sigv4.h"
#include "providers/http/http.h"
#include "providers/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_presign_s3_docs_example(void)
{
	/* "Authenticating Requests: Using Query Parameters", the GET example:
	 * examplebucket/test.txt, 20130524T000000Z, 86400 s */
	struct aws_config c = {.access_key = "AKIAIOSFODNN7EXAMPLE",
			       .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			       .region = "us-east-1",
			       .s3_endpoint = "https://s3.amazonaws.com",
			       .s3_path_style = false};
	char *url = NULL;
	struct sfs_err err = {0};
	CHECK_INT(
	    aws_presign(&c, "GET", "examplebucket", "test.txt", 86400, 1369353600, &url, &err), 0);
	CHECK_STREQ(url,
		    "https://examplebucket.s3.amazonaws.com/test.txt"
		    "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F"
		    "20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
		    "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
		    "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
	free(url);
	/* a session token is part of the signed query */
	c.session_token = "tok/en+=";
	c.s3_endpoint = "http://127.0.0.1:9000";
	c.s3_path_style = true;
	CHECK_INT(aws_presign(&c, "DELETE", "b", "dir/a b", 60, 1369353600, &url, &err), 0);
	CHECK(url && !strncmp(url, "http://127.0.0.1:9000/b/dir/a%20b?", 34));
	CHECK(url && strstr(url, "&X-Amz-Security-Token=tok%2Fen%2B%3D&X-Amz-SignedHeaders=host&"));
	free(url);
	/* no keys: refused, named */
	struct aws_config none = {.region = "us-east-1", .s3_endpoint = "http://h"};
	CHECK_INT(aws_presign(&none, "GET", "b", "k", 60, 0, &url, &err), -EACCES);
	CHECK(url == NULL);
}

static void test_sign_text_uses_the_signing_key(void)
{
	/* kSigning of the reference's check (iam, 20120215) */
	static const unsigned char ksign[32] = {0xf4, 0x78, 0x0e, 0x2d, 0x9f, 0x65, 0xfa, 0x89,
						0x5f, 0x9c, 0x67, 0xb3, 0x2c, 0xe1, 0xba, 0xf0,
						0xb0, 0xd8, 0xa4, 0x35, 0x05, 0xa0, 0x00, 0xa1,
						0xa9, 0xe0, 0x90, 0xd4, 0x14, 0xdb, 0x40, 0x4d};
	struct sfs_sigv4_key k = {.access_key = "AKIDEXAMPLE",
				  .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
				  .region = "us-east-1",
				  .service = "iam",
				  .amz_date = "20120215T000000Z"};
	char got[65], want[65];
	unsigned char mac[32];
	CHECK_INT(sfs_sigv4_sign_text(&k, "policy-text", 11, got), 0);
	CHECK_INT(sfs_hmac_sha256(ksign, 32, "policy-text", 11, mac), 0);
	for (int i = 0; i < 32; i++)
		snprintf(want + 2 * i, 3, "%02x", mac[i]);
	CHECK_STREQ(got, want);
}

static void test_post_policy(void)
{
	struct aws_config c = {.access_key = "AKID",
			       .secret_key = "sekrit",
			       .session_token = "TOKEN",
			       .region = "eu-west-1",
			       .s3_endpoint = "http://127.0.0.1:9000",
			       .s3_path_style = true};
	struct aws_post p;
	struct sfs_err err = {0};
	CHECK_INT(aws_post_policy(&c, "bkt", "team/ws1/", 3600, 1369353600, &p, &err), 0);
	CHECK_STREQ(p.url, "http://127.0.0.1:9000/bkt");
	CHECK_STREQ(p.date, "20130524T000000Z");
	CHECK_STREQ(p.credential, "AKID/20130524/eu-west-1/s3/aws4_request");
	unsigned char dec[4096];
	long n = sfs_base64_decode(p.policy, strlen(p.policy), dec);
	CHECK(n > 0 && n < (long)sizeof(dec));
	dec[n > 0 ? n : 0] = 0;
	const char *doc = (const char *)dec;
	CHECK(strstr(doc, "\"expiration\":\"2013-05-24T01:00:00.000Z\""));
	CHECK(strstr(doc, "{\"bucket\":\"bkt\"}"));
	CHECK(strstr(doc, "[\"starts-with\",\"$key\",\"team/ws1/\"]"));
	CHECK(strstr(doc, "[\"starts-with\",\"$x-amz-meta-mode\",\"\"]"));
	CHECK(strstr(doc, "{\"x-amz-security-token\":\"TOKEN\"}"));
	/* nothing but those may ride along: no content-type, no acl */
	CHECK(!strstr(doc, "acl") && !strstr(doc, "content-type"));
	struct sfs_sigv4_key k = {.access_key = "AKID",
				  .secret_key = "sekrit",
				  .region = "eu-west-1",
				  .service = "s3",
				  .amz_date = p.date};
	char sig[65];
	CHECK_INT(sfs_sigv4_sign_text(&k, p.policy, strlen(p.policy), sig), 0);
	CHECK_STREQ(p.signature, sig);
	aws_post_free(&p);
}

static void test_meta_prefix(void)
{
	char out[64];
	CHECK_INT(aws_meta_prefix("team/ws/s1/", out, sizeof(out)), 0);
	CHECK_STREQ(out, "team/ws/.sandboxfs/s1/");
	CHECK_INT(aws_meta_prefix("s1/", out, sizeof(out)), 0);
	CHECK_STREQ(out, ".sandboxfs/s1/");
	CHECK_INT(aws_meta_prefix("s1", out, sizeof(out)), -EINVAL);
	CHECK_INT(aws_meta_prefix("averyveryverylongprefix/averyveryverylongname/", out, 16),
		  -ENAMETOOLONG);
}

static void test_job_script(void)
{
	struct sfs_buf m = {0}, s = {0};
	CHECK_INT(aws_job_manifest_add(&m, false, "http://g?a=1&b=2", "http://d", "dir/a b.txt"),
		  0);
	CHECK_INT(aws_job_manifest_add(&m, true, NULL, "http://x", "dir"), 0);
	CHECK_INT(aws_job_manifest_add(&m, false, "g", "d", "two\nlines"), -EINVAL);
	CHECK_INT(aws_job_manifest_add(&m, false, "g", "d", "SFS_MANIFEST_END"), -EINVAL);
	CHECK_INT(aws_job_manifest_add(&m, false, "g", "d", "../etc/x"), -EINVAL);
	CHECK_INT(aws_job_manifest_add(&m, false, "g", "d", "a/./b"), -EINVAL);
	CHECK_INT(aws_job_manifest_add(&m, false, "g", "d", "a//b"), -EINVAL);
	CHECK_INT(aws_job_manifest_add(&m, false, "g", "d", "a/.."), -EINVAL);
	CHECK_INT(aws_job_manifest_add(&m, false, "g", "d", "/abs"), -EINVAL);
	CHECK_STREQ(m.buf, "f http://g?a=1&b=2 http://d dir/a b.txt\nd - http://x dir\n");
	struct aws_post p = {.url = "http://h/b", .policy = "UE9M", .signature = "abc"};
	snprintf(p.date, sizeof(p.date), "20130524T000000Z");
	snprintf(p.credential, sizeof(p.credential), "AKID/x");
	struct aws_job j = {.workdir = "/work space",
			    .rundir = "/tmp/r",
			    .root = "it's/",
			    .post = &p,
			    .manifest = m.buf,
			    .wrapper = "'/bin/sh' '-c' 'true'"};
	struct sfs_err err = {0};
	CHECK_INT(aws_job_script(&j, &s, &err), 0);
	/* values are single-quoted assignments, never spliced into code */
	CHECK(strstr(s.buf, "\nW='/work space'\n"));
	CHECK(strstr(s.buf, "\nROOT='it'\\''s/'\n"));
	CHECK(strstr(s.buf, "\nTOK=''\n"));
	CHECK(strstr(s.buf, "<<'SFS_MANIFEST_END'\nf http://g?a=1&b=2 http://d dir/a b.txt\n"
			    "d - http://x dir\nSFS_MANIFEST_END\n"));
	CHECK(strstr(s.buf, "\n'/bin/sh' '-c' 'true' &\n"));
	CHECK(strstr(s.buf, "\nPAR=1\n")); /* .parallel 0 */
	/* the script's own % signs survive the template */
	CHECK(strstr(s.buf, "DM=$(printf '%04o' $((0666 & ~0$(umask))))"));
	CHECK(strstr(s.buf, " %{http_code}\\\\n"));
	sfs_buf_free(&m);
	sfs_buf_free(&s);
}

CHECK_MAIN(CHECK_CASE(test_presign_s3_docs_example),
	   CHECK_CASE(test_sign_text_uses_the_signing_key), CHECK_CASE(test_post_policy),
	   CHECK_CASE(test_meta_prefix), CHECK_CASE(test_job_script))
