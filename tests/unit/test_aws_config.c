/*
 * The aws provider's pure parts: ~/.aws INI parsing, the precedence of the
 * credential/region/endpoint chain (env, AWS_PROFILE, the two files), and
 * the headers of a signed request (x-amz-content-sha256 with the body hash
 * or UNSIGNED-PAYLOAD, the session token signed, secrets redacted).
 */
#include "check.h"

#include "providers/aws/aws.h"
#include "providers/aws/sigv4.h"
#include "providers/redact.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/sfs-aws-XXXXXX";
static char cred_path[256], cfg_path[256];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static const char *vars[] = {"AWS_ACCESS_KEY_ID",
			     "AWS_SECRET_ACCESS_KEY",
			     "AWS_SESSION_TOKEN",
			     "AWS_PROFILE",
			     "AWS_REGION",
			     "AWS_DEFAULT_REGION",
			     "AWS_ENDPOINT_URL",
			     "AWS_ENDPOINT_URL_S3",
			     "AWS_ENDPOINT_URL_ECS",
			     "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS",
			     "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
			     NULL};

/* A clean environment with both files pointing into dir. */
static void reset_env(const char *creds, const char *config)
{
	for (int i = 0; vars[i]; i++)
		unsetenv(vars[i]);
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred_path, 1);
	setenv("AWS_CONFIG_FILE", cfg_path, 1);
	unlink(cred_path);
	unlink(cfg_path);
	if (creds)
		write_file(cred_path, creds);
	if (config)
		write_file(cfg_path, config);
}

static const char creds_text[] = "# comment\n"
				 "[default]\n"
				 "aws_access_key_id = AKIDDEFAULT\n"
				 "aws_secret_access_key = secret-default\n"
				 "\n"
				 "; another comment\n"
				 "[ dev ]\n"
				 "aws_access_key_id=AKIDDEV\n"
				 "aws_secret_access_key=secret-dev\n"
				 "aws_session_token = token-dev\n";

static const char config_text[] = "[default]\n"
				  "region = eu-west-1\n"
				  "[profile dev]\n"
				  "region = ap-south-1\n"
				  "s3 =\n"
				  "  addressing_style = virtual\n"
				  "endpoint_url = http://127.0.0.1:7000/\n"
				  "[profile cfgonly]\n"
				  "aws_access_key_id = AKIDCFG\n"
				  "aws_secret_access_key = secret-cfg\n";

static void test_ini(void)
{
	char *v = aws_ini_get(creds_text, "dev", "aws_session_token");
	CHECK_STREQ(v, "token-dev");
	free(v);
	v = aws_ini_get(creds_text, "default", "aws_session_token");
	CHECK(v == NULL);
	v = aws_ini_get(config_text, "profile dev", "s3.addressing_style");
	CHECK_STREQ(v, "virtual");
	free(v);
	/* the nested block ends at the next unindented key */
	v = aws_ini_get(config_text, "profile dev", "endpoint_url");
	CHECK_STREQ(v, "http://127.0.0.1:7000/");
	free(v);
	v = aws_ini_get(config_text, "profile dev", "s3.endpoint_url");
	CHECK(v == NULL);
	v = aws_ini_get("[a]\n# k = no\nk = yes", "a", "k");
	CHECK_STREQ(v, "yes");
	free(v);
	CHECK(aws_ini_get(NULL, "a", "k") == NULL);
}

static void test_env_keys_beat_profile(void)
{
	reset_env(creds_text, config_text);
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret-env", 1);
	setenv("AWS_SESSION_TOKEN", "token-env", 1);
	setenv("AWS_PROFILE", "dev", 1);
	struct aws_config c;
	struct sfs_err err = {0};
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.access_key, "AKIDENV");
	CHECK_STREQ(c.secret_key, "secret-env");
	CHECK_STREQ(c.session_token, "token-env");
	CHECK_STREQ(c.creds_source, "environment");
	/* the profile still gives the region */
	CHECK_STREQ(c.region, "ap-south-1");
	CHECK_STREQ(aws_config_missing(&c), "");
	/* the secret and the token are redacted from now on */
	char *r = sfs_redact_dup("key secret-env tok token-env");
	CHECK(r && !strstr(r, "secret-env") && !strstr(r, "token-env"));
	free(r);
	aws_config_free(&c);
	/* only one of the two env keys: the files are used */
	unsetenv("AWS_SECRET_ACCESS_KEY");
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.access_key, "AKIDDEV");
	aws_config_free(&c);
}

static void test_profiles(void)
{
	reset_env(creds_text, config_text);
	struct aws_config c;
	struct sfs_err err = {0};
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.profile, "default");
	CHECK_STREQ(c.access_key, "AKIDDEFAULT");
	CHECK(c.session_token == NULL);
	CHECK_STREQ(c.region, "eu-west-1");
	CHECK(strstr(c.creds_source, "credentials file") && strstr(c.creds_source, "[default]"));
	CHECK_STREQ(c.s3_endpoint, "https://s3.eu-west-1.amazonaws.com");
	CHECK(!c.s3_path_style);
	aws_config_free(&c);

	setenv("AWS_PROFILE", "dev", 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.access_key, "AKIDDEV");
	CHECK_STREQ(c.session_token, "token-dev");
	/* the profile's endpoint_url applies to every service; the profile
	 * asked for virtual-host addressing, which beats the path-style default */
	CHECK_STREQ(c.s3_endpoint, "http://127.0.0.1:7000");
	CHECK_STREQ(c.ecs_endpoint, "http://127.0.0.1:7000");
	CHECK(!c.s3_path_style);
	aws_config_free(&c);

	/* keys only in the config file */
	setenv("AWS_PROFILE", "cfgonly", 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.access_key, "AKIDCFG");
	CHECK(strstr(c.creds_source, "config file") && strstr(c.creds_source, "[profile cfgonly]"));
	CHECK_STREQ(c.region, AWS_DEFAULT_REGION);
	aws_config_free(&c);

	/* a named profile nobody has is an error naming both files */
	setenv("AWS_PROFILE", "nosuch", 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), -ENOENT);
	CHECK(strstr(err.msg, "nosuch") && strstr(err.msg, cred_path) && strstr(err.msg, cfg_path));

	/* no files, no env: loads, and says what is missing */
	reset_env(NULL, NULL);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK(c.access_key == NULL);
	CHECK(strstr(aws_config_missing(&c), "AWS_ACCESS_KEY_ID") != NULL);
	struct aws_signed s;
	CHECK_INT(aws_sign(&c, "s3", "GET", "http://h/b/k", NULL, NULL, NULL, 0, 0, &s, &err),
		  -EACCES);
	CHECK(strstr(err.msg, "credentials") != NULL);
	aws_config_free(&c);
}

static void test_region_and_endpoints(void)
{
	reset_env(creds_text, config_text);
	setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
	struct aws_config c;
	struct sfs_err err = {0};
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.region, "us-west-1");
	aws_config_free(&c);
	setenv("AWS_REGION", "us-west-2", 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.region, "us-west-2");
	CHECK_STREQ(c.logs_endpoint, "https://logs.us-west-2.amazonaws.com");
	aws_config_free(&c);
	/* the config row beats the env */
	CHECK_INT(aws_config_load(&c, "sa-east-1", NULL, &err), 0);
	CHECK_STREQ(c.region, "sa-east-1");
	aws_config_free(&c);

	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1111/", 1);
	setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2222", 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.s3_endpoint, "http://127.0.0.1:2222");
	CHECK_STREQ(c.ecs_endpoint, "http://127.0.0.1:1111");
	CHECK_STREQ(c.logs_endpoint, "http://127.0.0.1:1111");
	/* an endpoint override means path-style unless asked otherwise */
	CHECK(c.s3_path_style);
	aws_config_free(&c);
	CHECK_INT(aws_config_load(&c, NULL, "virtual", &err), 0);
	CHECK(!c.s3_path_style);
	aws_config_free(&c);
	setenv("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", "http://127.0.0.1:3333", 1);
	setenv("AWS_ENDPOINT_URL_ECS", "http://127.0.0.1:4444", 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.logs_endpoint, "http://127.0.0.1:3333");
	CHECK_STREQ(c.ecs_endpoint, "http://127.0.0.1:4444");
	aws_config_free(&c);
	setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), 0);
	CHECK_STREQ(c.s3_endpoint, "https://s3.us-west-2.amazonaws.com");
	aws_config_free(&c);
}

/* A name too long for its buffer is refused, never cut to one that names
 * another profile, another ini key or another region's endpoint. */
static void test_too_long_is_refused(void)
{
	char name[400], cfg[600], key[300], ini[500];
	struct aws_config c;
	struct sfs_err err = {0};
	/* "profile " + 291 'a' fills the section buffer: a longer AWS_PROFILE
	 * cut there would read [profile aaa...a]'s keys */
	memset(name, 'a', 291);
	name[291] = 0;
	snprintf(cfg, sizeof(cfg),
		 "[profile %s]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = s\n", name);
	reset_env(NULL, cfg);
	strcat(name, "zzzz");
	setenv("AWS_PROFILE", name, 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), -ENAMETOOLONG);
	CHECK(strstr(err.msg, "AWS_PROFILE") != NULL);

	/* a region too long for an endpoint host */
	reset_env(NULL, NULL);
	memset(name, 'r', 300);
	name[300] = 0;
	setenv("AWS_REGION", name, 1);
	CHECK_INT(aws_config_load(&c, NULL, NULL, &err), -ENAMETOOLONG);
	CHECK(strstr(err.msg, "region") != NULL);
	reset_env(NULL, NULL);

	/* a nested key too long is no key asked for, not its first 255 bytes */
	memset(key, 'k', 298);
	key[298] = 0;
	snprintf(ini, sizeof(ini), "[a]\ns3 =\n  %s = evil\n", key);
	key[252] = 0;
	char want[310];
	snprintf(want, sizeof(want), "s3.%s", key);
	CHECK(aws_ini_get(ini, "a", want) == NULL);
}

static const char *hdr(const struct aws_signed *s, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < s->n; i++)
		if (!strncasecmp(s->list[i], name, n) && s->list[i][n] == ':')
			return s->list[i] + n + 2;
	return NULL;
}

static void test_sign_s3_docs_example(void)
{
	/* The GET Object example of the S3 SigV4 documentation
	 * ("Signature calculation: Authorization header", examplebucket,
	 * test.txt, Range bytes=0-9, 20130524T000000Z) */
	struct aws_config c = {.access_key = "AKIAIOSFODNN7EXAMPLE",
			       .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			       .region = "us-east-1"};
	const char *extra[] = {"Range: bytes=0-9", NULL};
	struct aws_signed s;
	struct sfs_err err = {0};
	CHECK_INT(aws_sign(&c, "s3", "GET", "https://examplebucket.s3.amazonaws.com/test.txt",
			   extra, NULL, NULL, 0, 1369353600, &s, &err),
		  0);
	CHECK_STREQ(hdr(&s, "X-Amz-Content-Sha256"), SFS_SIGV4_EMPTY_SHA256);
	CHECK_STREQ(hdr(&s, "Host"), "examplebucket.s3.amazonaws.com");
	CHECK_STREQ(hdr(&s, "Authorization"),
		    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
		    "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
		    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	CHECK(s.list[s.n] == NULL);
	aws_signed_free(&s);
}

static void test_sign_payload_and_token(void)
{
	struct aws_config c = {.access_key = "AKID",
			       .secret_key = "sekrit",
			       .session_token = "tok/en+",
			       .region = "eu-west-1"};
	struct aws_signed s;
	struct sfs_err err = {0};
	char h[65];
	/* a body's hash is sent and signed */
	CHECK_INT(aws_sign(&c, "s3", "PUT", "http://127.0.0.1:9000/b/dir/a%20b.txt", NULL, NULL,
			   "hello", 5, 0, &s, &err),
		  0);
	sfs_sha256_hex("hello", 5, h);
	CHECK_STREQ(hdr(&s, "X-Amz-Content-Sha256"), h);
	CHECK_STREQ(hdr(&s, "Host"), "127.0.0.1:9000");
	CHECK_STREQ(hdr(&s, "X-Amz-Date"), "19700101T000000Z");
	CHECK_STREQ(hdr(&s, "X-Amz-Security-Token"), "tok/en+");
	const char *a = hdr(&s, "Authorization");
	CHECK(a && strstr(a, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
			     "x-amz-security-token,") != NULL);
	CHECK(a && strstr(a, "Credential=AKID/19700101/eu-west-1/s3/aws4_request") != NULL);
	char *first = a ? strdup(a) : NULL;
	aws_signed_free(&s);
	/* UNSIGNED-PAYLOAD goes in as given and changes the signature */
	CHECK_INT(aws_sign(&c, "s3", "PUT", "http://127.0.0.1:9000/b/dir/a%20b.txt", NULL,
			   SFS_SIGV4_UNSIGNED_PAYLOAD, NULL, 0, 0, &s, &err),
		  0);
	CHECK_STREQ(hdr(&s, "X-Amz-Content-Sha256"), "UNSIGNED-PAYLOAD");
	CHECK(first && hdr(&s, "Authorization") && strcmp(first, hdr(&s, "Authorization")));
	free(first);
	aws_signed_free(&s);
	/* other services: no content hash header; extra x-amz headers signed */
	c.session_token = NULL;
	const char *extra[] = {"X-Amz-Target: Logs_20140328.GetLogEvents",
			       "Content-Type: application/x-amz-json-1.1", NULL};
	CHECK_INT(aws_sign(&c, "logs", "POST", "http://127.0.0.1:9000/", extra, NULL, "{}", 2, 0,
			   &s, &err),
		  0);
	CHECK(hdr(&s, "X-Amz-Content-Sha256") == NULL);
	CHECK(hdr(&s, "X-Amz-Security-Token") == NULL);
	a = hdr(&s, "Authorization");
	CHECK(a && strstr(a, "SignedHeaders=content-type;host;x-amz-date;x-amz-target,"));
	CHECK_STREQ(hdr(&s, "X-Amz-Target"), "Logs_20140328.GetLogEvents");
	aws_signed_free(&s);
	/* a header line without a colon is refused, nothing half-built */
	const char *bad[] = {"NoColon", NULL};
	CHECK_INT(aws_sign(&c, "s3", "GET", "http://h/b/k", bad, NULL, NULL, 0, 0, &s, &err),
		  -EINVAL);
	CHECK_INT(s.n, 0);
}

static void setup(void)
{
	CHECK(mkdtemp(dir) != NULL);
	snprintf(cred_path, sizeof(cred_path), "%s/credentials", dir);
	snprintf(cfg_path, sizeof(cfg_path), "%s/config", dir);
}

static void teardown(void)
{
	unlink(cred_path);
	unlink(cfg_path);
	rmdir(dir);
}

CHECK_MAIN(CHECK_CASE(setup), CHECK_CASE(test_ini), CHECK_CASE(test_env_keys_beat_profile),
	   CHECK_CASE(test_profiles), CHECK_CASE(test_region_and_endpoints),
	   CHECK_CASE(test_too_long_is_refused), CHECK_CASE(test_sign_s3_docs_example),
	   CHECK_CASE(test_sign_payload_and_token), CHECK_CASE(teardown))
