/*
 * The gcp provider's tokens: base64url vectors, the RS256 JWT built from a
 * service-account key (an RSA key generated here with `openssl genpkey`, a
 * test-only key that lives in a temporary directory) checked with
 * `openssl dgst -verify`, key-file errors, the cache's staleness with an
 * injected clock, and the exchange against tests/emulators/gcp_oauth (which
 * checks the signature with the key's public half): caching, one exchange
 * for concurrent callers, retry of a 503, Google's error text, the
 * metadata-server token, and that the emulator refuses an expired JWT, a
 * foreign audience and an unknown issuer.
 */
#include "check.h"

#include "providers/gcp/gcp.h"
#include "providers/http/http.h"
#include "providers/redact.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EMAIL "sfs-test@sfs-test-project.iam.gserviceaccount.com"
#define KID "0123456789abcdef-test-key-id"

static char dir[] = "/tmp/sfs-gcp-XXXXXX";
static char key_pem[256], pub_pem[256], key_json[256], other_json[256];
static char base_url[128];
static pid_t emu_pid;

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	static char buf[16384];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

static int run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* a key file with the PEM at pem_path; drop names a field to leave out */
static void write_key_json(const char *path, const char *pem_path, const char *drop,
			   const char *pem_override)
{
	char *pem = pem_override ? strdup(pem_override) : read_all(pem_path);
	json_t *o =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "service_account", "project_id",
		      "sfs-test-project", "private_key_id", KID, "private_key", pem ? pem : "",
		      "client_email", EMAIL, "token_uri", "https://oauth2.googleapis.com/token");
	if (drop)
		json_object_del(o, drop);
	CHECK(json_dump_file(o, path, 0) == 0);
	json_decref(o);
	free(pem);
}

static void setup(void)
{
	CHECK(mkdtemp(dir) != NULL);
	snprintf(key_pem, sizeof(key_pem), "%s/key.pem", dir);
	snprintf(pub_pem, sizeof(pub_pem), "%s/pub.pem", dir);
	snprintf(key_json, sizeof(key_json), "%s/key.json", dir);
	snprintf(other_json, sizeof(other_json), "%s/other.json", dir);
	char cmd[1024];
	/* PKCS#8 PEM ("BEGIN PRIVATE KEY"), as Google's key files carry */
	snprintf(cmd, sizeof(cmd),
		 "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out %s 2>/dev/null"
		 " && openssl pkey -in %s -pubout -out %s"
		 " && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048"
		 " -out %s/other.pem 2>/dev/null",
		 key_pem, key_pem, pub_pem, dir);
	CHECK_INT(run(cmd), 0);
	write_key_json(key_json, key_pem, NULL, NULL);
	char other_pem[256];
	snprintf(other_pem, sizeof(other_pem), "%s/other.pem", dir);
	write_key_json(other_json, other_pem, NULL, NULL);
}

static void teardown(void)
{
	if (emu_pid > 0) {
		kill(emu_pid, SIGTERM);
		waitpid(emu_pid, NULL, 0);
	}
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(run(cmd), 0);
}

static long b64url_decode(const char *in, size_t n, unsigned char *out)
{
	char *std = malloc(n + 4);
	size_t i;
	for (i = 0; i < n; i++)
		std[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
	while (i % 4)
		std[i++] = '=';
	long r = sfs_base64_decode(std, i, out);
	free(std);
	return r;
}

static void test_base64url(void)
{
	static const struct {
		const char *in, *want;
	} v[] = {
	    /* RFC 4648 §10 vectors, padding dropped */
	    {"", ""},
	    {"f", "Zg"},
	    {"fo", "Zm8"},
	    {"foo", "Zm9v"},
	    {"foob", "Zm9vYg"},
	    {"fooba", "Zm9vYmE"},
	    {"foobar", "Zm9vYmFy"},
	    /* the two letters that differ from standard base64 ("+/8=") */
	    {"\xfb\xff", "-_8"},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char out[32];
		size_t n =
		    sfs_base64url_encode((const unsigned char *)v[i].in, strlen(v[i].in), out);
		CHECK_STREQ(out, v[i].want);
		CHECK_INT(n, strlen(v[i].want));
	}
}

static json_t *decode_part(const char *s, size_t n)
{
	unsigned char buf[2048];
	long len = b64url_decode(s, n, buf);
	if (len < 0)
		return NULL;
	return json_loadb((const char *)buf, (size_t)len, 0, NULL);
}

static void test_jwt_signature(void)
{
	struct gcp_key k;
	struct sfs_err err = {0};
	CHECK_INT(gcp_key_load(key_json, &k, &err), 0);
	CHECK_STREQ(k.client_email, EMAIL);
	CHECK_STREQ(k.project_id, "sfs-test-project");
	char *jwt = NULL;
	CHECK_INT(gcp_jwt_build(&k, GCP_SCOPE_CLOUD, GCP_TOKEN_AUD, 1700000000, &jwt, &err), 0);
	gcp_key_free(&k);
	if (!jwt)
		return;
	CHECK(strchr(jwt, '=') == NULL && strchr(jwt, '+') == NULL && strchr(jwt, '/') == NULL);
	char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	CHECK(d1 && d2 && !strchr(d2 + 1, '.'));
	if (!d1 || !d2) {
		free(jwt);
		return;
	}
	json_t *h = decode_part(jwt, (size_t)(d1 - jwt));
	json_t *c = decode_part(d1 + 1, (size_t)(d2 - d1 - 1));
	CHECK_STREQ(json_string_value(json_object_get(h, "alg")), "RS256");
	CHECK_STREQ(json_string_value(json_object_get(h, "typ")), "JWT");
	CHECK_STREQ(json_string_value(json_object_get(h, "kid")), KID);
	CHECK_STREQ(json_string_value(json_object_get(c, "iss")), EMAIL);
	CHECK_STREQ(json_string_value(json_object_get(c, "scope")), GCP_SCOPE_CLOUD);
	CHECK_STREQ(json_string_value(json_object_get(c, "aud")), GCP_TOKEN_AUD);
	CHECK_INT(json_integer_value(json_object_get(c, "iat")), 1700000000);
	CHECK_INT(json_integer_value(json_object_get(c, "exp")), 1700000000 + 3600);
	json_decref(h);
	json_decref(c);

	/* OpenSSL's own verify with the public half: the signature is RS256 over
	 * "header.claims" */
	char input[256], sig[256], cmd[1024];
	snprintf(input, sizeof(input), "%s/input", dir);
	snprintf(sig, sizeof(sig), "%s/sig", dir);
	FILE *f = fopen(input, "w");
	CHECK(f != NULL);
	if (f) {
		fwrite(jwt, 1, (size_t)(d2 - jwt), f);
		fclose(f);
	}
	unsigned char raw[1024];
	long n = b64url_decode(d2 + 1, strlen(d2 + 1), raw);
	CHECK_INT(n, 256); /* 2048-bit RSA */
	f = fopen(sig, "w");
	CHECK(f != NULL);
	if (f && n > 0) {
		fwrite(raw, 1, (size_t)n, f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd),
		 "openssl dgst -sha256 -verify %s -signature %s %s >/dev/null 2>&1", pub_pem, sig,
		 input);
	CHECK_INT(run(cmd), 0);
	/* and a changed claim no longer verifies (the check can fail) */
	f = fopen(input, "a");
	if (f) {
		fputc('x', f);
		fclose(f);
	}
	CHECK(run(cmd) != 0);
	free(jwt);
}

static void expect_key_error(const char *path, int code, const char *needle)
{
	struct gcp_key k;
	struct sfs_err err = {0};
	CHECK_INT(gcp_key_load(path, &k, &err), code);
	if (!strstr(err.msg, needle))
		fprintf(stderr, "    message: %s\n    wanted: %s\n", err.msg, needle);
	CHECK(strstr(err.msg, needle) != NULL);
	CHECK(strstr(err.msg, "PRIVATE KEY") == NULL && strstr(err.msg, KID) == NULL);
	CHECK(k.pkey == NULL && k.client_email == NULL);
}

static void test_key_errors(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/missing.json", dir);
	expect_key_error(path, -ENOENT, "cannot read key file");
	expect_key_error(path, -ENOENT, path);

	static const char *const fields[] = {"client_email", "private_key", "token_uri",
					     "private_key_id"};
	for (size_t i = 0; i < 4; i++) {
		write_key_json(path, key_pem, fields[i], NULL);
		char want[64];
		snprintf(want, sizeof(want), "has no \"%s\"", fields[i]);
		expect_key_error(path, -EINVAL, want);
	}
	/* a PEM that is not a key, and a truncated one */
	write_key_json(path, NULL, NULL,
		       "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n");
	expect_key_error(path, -EINVAL, "is not an RSA private key in PEM form");
	char *pem = read_all(key_pem);
	if (pem) {
		pem[strlen(pem) / 2] = '\0';
		write_key_json(path, NULL, NULL, pem);
		free(pem);
		expect_key_error(path, -EINVAL, "is not an RSA private key in PEM form");
	}
	write_file(path, "{not json");
	expect_key_error(path, -EINVAL, "is not a JSON object");
	write_file(path, "{\"type\":\"authorized_user\",\"client_id\":\"x\"}");
	expect_key_error(path, -EINVAL, "only service_account keys are supported");
}

static void test_stale_at(void)
{
	CHECK_INT(gcp_token_stale_at(1000, 3599), 1000 + 3599 - GCP_TOKEN_EARLY);
	CHECK_INT(gcp_token_stale_at(1000, 451), 1000 + 451 - GCP_TOKEN_EARLY);
	/* short-lived tokens are used for half their life */
	CHECK_INT(gcp_token_stale_at(1000, 100), 1050);
	CHECK_INT(gcp_token_stale_at(1000, 0), 1000);
	CHECK_INT(gcp_token_stale_at(1000, -1), 1000);
}

static void test_no_credentials(void)
{
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("GCE_METADATA_HOST");
	struct gcp_auth a;
	struct sfs_err err = {0};
	CHECK_INT(gcp_auth_init(&a, NULL, NULL, NULL, &err), -ENOENT);
	CHECK(strstr(err.msg, "GOOGLE_APPLICATION_CREDENTIALS") != NULL);
	CHECK(strstr(err.msg, "GCE_METADATA_HOST") != NULL);
	/* a bad key file is its own error, not "no credentials" */
	setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/sfs-key.json", 1);
	CHECK_INT(gcp_auth_init(&a, NULL, NULL, NULL, &err), -ENOENT);
	CHECK(strstr(err.msg, "/nonexistent/sfs-key.json") != NULL);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
}

/* ---- against the emulator ---------------------------------------------------- */

static void start_emulator(void)
{
	char port_file[300];
	snprintf(port_file, sizeof(port_file), "%s/port", dir);
	emu_pid = fork();
	if (emu_pid == 0) {
		execlp("python3", "python3", SFS_GCP_OAUTH_EMULATOR, "--pubkey", pub_pem, "--email",
		       EMAIL, "--kid", KID, "--port-file", port_file, (char *)NULL);
		_exit(127);
	}
	CHECK(emu_pid > 0);
	for (int i = 0; i < 300; i++) { /* python's start under load: up to 30 s */
		char *p = read_all(port_file);
		if (p) {
			snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", atoi(p));
			free(p);
			return;
		}
		usleep(100000);
	}
	CHECK(!"emulator did not start");
}

static json_t *emu(const char *method, const char *path, const char *body)
{
	char url[256];
	snprintf(url, sizeof(url), "%s%s", base_url, path);
	struct sfs_http_req req = {.method = method,
				   .url = url,
				   .body = body,
				   .body_len = body ? strlen(body) : 0,
				   .content_type = body ? "application/json" : NULL};
	long status = 0;
	json_t *out = NULL;
	struct sfs_err err = {0};
	CHECK_INT(sfs_http_json(&req, &status, &out, &err), 0);
	return out;
}

static long emu_stat(const char *name)
{
	json_t *s = emu("GET", "/_emu/stats", NULL);
	long v = (long)json_integer_value(json_object_get(s, name));
	json_decref(s);
	return v;
}

static void faults(const char *json)
{
	json_decref(emu("POST", "/_emu/faults", json));
}

static time_t fake_now;
static time_t fake_clock(void)
{
	return fake_now;
}

static bool issued(const char *tok)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/_emu/tokeninfo?access_token=%s", base_url, tok);
	struct sfs_http_req req = {.method = "GET", .url = url};
	struct sfs_http_resp resp = {0};
	struct sfs_err err = {0};
	bool ok = sfs_http_do(&req, &resp, &err) == 0 && resp.status == 200;
	sfs_http_resp_free(&resp);
	return ok;
}

static void test_exchange_and_cache(void)
{
	char token_url[200];
	snprintf(token_url, sizeof(token_url), "%s/token", base_url);
	struct gcp_auth a;
	struct sfs_err err = {0};
	CHECK_INT(gcp_auth_init(&a, key_json, token_url, NULL, &err), 0);
	a.now = fake_clock;
	fake_now = 1000;
	long before = emu_stat("tokens");
	char *t1 = NULL, *t2 = NULL, *t3 = NULL;
	CHECK_INT(gcp_auth_token(&a, &t1, &err), 0);
	if (err.code)
		fprintf(stderr, "    %s\n", err.msg);
	CHECK(t1 && issued(t1));
	/* the token is a secret to the redactor */
	char *red = t1 ? sfs_redact_dup(t1) : NULL;
	CHECK(red && !strstr(red, t1));
	free(red);
	/* cached until GCP_TOKEN_EARLY before its 3599 s run out */
	fake_now = 1000 + 3599 - GCP_TOKEN_EARLY - 1;
	CHECK_INT(gcp_auth_token(&a, &t2, &err), 0);
	CHECK(t1 && t2 && strcmp(t1, t2) == 0);
	CHECK_INT(emu_stat("tokens"), before + 1);
	fake_now++;
	CHECK_INT(gcp_auth_token(&a, &t3, &err), 0);
	CHECK(t1 && t3 && strcmp(t1, t3) != 0 && issued(t3));
	CHECK_INT(emu_stat("tokens"), before + 2);
	CHECK_INT(a.fetches, 2);
	/* after a 401 from an API the caller drops it: a new one is fetched */
	gcp_auth_invalidate(&a);
	free(t2);
	t2 = NULL;
	CHECK_INT(gcp_auth_token(&a, &t2, &err), 0);
	CHECK_INT(emu_stat("tokens"), before + 3);
	free(t1);
	free(t2);
	free(t3);
	gcp_auth_free(&a);
}

static void *take_token(void *arg)
{
	struct gcp_auth *a = arg;
	char *t = NULL;
	struct sfs_err err = {0};
	int rc = gcp_auth_token(a, &t, &err);
	free(t);
	return (void *)(intptr_t)rc;
}

static void test_concurrent_callers(void)
{
	char token_url[200];
	snprintf(token_url, sizeof(token_url), "%s/token", base_url);
	struct gcp_auth a;
	struct sfs_err err = {0};
	CHECK_INT(gcp_auth_init(&a, key_json, token_url, NULL, &err), 0);
	long before = emu_stat("tokens");
	pthread_t th[8];
	for (int i = 0; i < 8; i++)
		CHECK_INT(pthread_create(&th[i], NULL, take_token, &a), 0);
	for (int i = 0; i < 8; i++) {
		void *rc = NULL;
		pthread_join(th[i], &rc);
		CHECK_INT((intptr_t)rc, 0);
	}
	/* one exchange served all eight */
	CHECK_INT(emu_stat("tokens"), before + 1);
	gcp_auth_free(&a);
}

static void test_errors_from_the_endpoint(void)
{
	char token_url[200];
	snprintf(token_url, sizeof(token_url), "%s/token", base_url);
	struct gcp_auth a;
	struct sfs_err err = {0};
	char *t = NULL;
	/* a key the endpoint does not know: the emulator's signature check fails */
	CHECK_INT(gcp_auth_init(&a, other_json, token_url, NULL, &err), 0);
	CHECK_INT(gcp_auth_token(&a, &t, &err), -EACCES);
	CHECK(t == NULL);
	CHECK(strstr(err.msg, "HTTP 400: invalid_grant: Invalid JWT Signature.") != NULL);
	CHECK(strstr(err.msg, token_url) != NULL);
	/* the URL survives the redactor every message passes (no key-looking
	 * word right before it) */
	char *red = sfs_redact_dup(err.msg);
	CHECK(red && strstr(red, token_url) != NULL);
	free(red);
	CHECK(strstr(err.msg, "eyJ") == NULL); /* no assertion in the message */
	gcp_auth_free(&a);

	/* a transient 503 is retried by the HTTP kit */
	CHECK_INT(gcp_auth_init(&a, key_json, token_url, NULL, &err), 0);
	faults("{\"fail_status\":503,\"fail_count\":1,\"retry_after\":0}");
	CHECK_INT(gcp_auth_token(&a, &t, &err), 0);
	CHECK(t && issued(t));
	free(t);
	t = NULL;
	/* Google's error text reaches the message */
	gcp_auth_invalidate(&a);
	faults("{\"reject\":\"Invalid grant: account not found\"}");
	CHECK_INT(gcp_auth_token(&a, &t, &err), -EACCES);
	CHECK(strstr(err.msg, "invalid_grant: Invalid grant: account not found") != NULL);
	faults("{\"reject\":\"\"}");
	gcp_auth_free(&a);

	/* a token that expires at once is handed to its caller, never cached */
	CHECK_INT(gcp_auth_init(&a, key_json, token_url, NULL, &err), 0);
	faults("{\"expires_in\":0}");
	long before = emu_stat("tokens");
	for (int i = 0; i < 2; i++) {
		CHECK_INT(gcp_auth_token(&a, &t, &err), 0);
		free(t);
		t = NULL;
	}
	CHECK_INT(emu_stat("tokens"), before + 2);
	faults("{\"expires_in\":null}");
	gcp_auth_free(&a);
}

/* POSTs a JWT grant with assertion jwt; the status, the body into body */
static long grant(const char *jwt, char *body, size_t cap)
{
	char url[200], *form = NULL;
	snprintf(url, sizeof(url), "%s/token", base_url);
	CHECK(asprintf(&form,
		       "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-bearer"
		       "&assertion=%s",
		       jwt) > 0);
	struct sfs_http_req req = {.method = "POST",
				   .url = url,
				   .body = form,
				   .body_len = strlen(form),
				   .content_type = "application/x-www-form-urlencoded"};
	struct sfs_http_resp resp = {0};
	struct sfs_err err = {0};
	CHECK_INT(sfs_http_do(&req, &resp, &err), 0);
	snprintf(body, cap, "%s", resp.body ? resp.body : "");
	long st = resp.status;
	sfs_http_resp_free(&resp);
	free(form);
	return st;
}

/* the emulator's own checks can fail: an expired JWT, an unknown issuer */
static void test_emulator_rejects(void)
{
	struct gcp_key k;
	struct sfs_err err = {0};
	char *jwt = NULL, body[1024];
	CHECK_INT(gcp_key_load(key_json, &k, &err), 0);
	CHECK_INT(gcp_jwt_build(&k, GCP_SCOPE_CLOUD, GCP_TOKEN_AUD, time(NULL), &jwt, &err), 0);
	CHECK_INT(grant(jwt, body, sizeof(body)), 200);
	free(jwt);
	CHECK_INT(gcp_jwt_build(&k, GCP_SCOPE_CLOUD, GCP_TOKEN_AUD, time(NULL) - 7200, &jwt, &err),
		  0);
	CHECK_INT(grant(jwt, body, sizeof(body)), 400);
	CHECK(strstr(body, "Check your iat and exp values") != NULL);
	free(jwt);
	CHECK_INT(gcp_jwt_build(&k, GCP_SCOPE_CLOUD, "https://elsewhere.example/token", time(NULL),
				&jwt, &err),
		  0);
	CHECK_INT(grant(jwt, body, sizeof(body)), 400);
	CHECK(strstr(body, "audience") != NULL);
	free(jwt);
	free(k.client_email);
	k.client_email = strdup("someone-else@sfs-test-project.iam.gserviceaccount.com");
	CHECK_INT(gcp_jwt_build(&k, GCP_SCOPE_CLOUD, GCP_TOKEN_AUD, time(NULL), &jwt, &err), 0);
	CHECK_INT(grant(jwt, body, sizeof(body)), 401);
	CHECK(strstr(body, "invalid_client") != NULL);
	free(jwt);
	gcp_key_free(&k);
}

static void test_metadata_server(void)
{
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	/* GCE_METADATA_HOST is host:port without a scheme */
	setenv("GCE_METADATA_HOST", base_url + strlen("http://"), 1);
	struct gcp_auth a;
	struct sfs_err err = {0};
	char *t = NULL;
	CHECK_INT(gcp_auth_init(&a, NULL, NULL, NULL, &err), 0);
	CHECK_INT(gcp_auth_token(&a, &t, &err), 0);
	CHECK(t && issued(t));
	free(t);
	gcp_auth_free(&a);
	unsetenv("GCE_METADATA_HOST");
	/* gcp.metadata_url, a trailing '/' allowed */
	char root[200];
	snprintf(root, sizeof(root), "%s/", base_url);
	t = NULL;
	CHECK_INT(gcp_auth_init(&a, NULL, NULL, root, &err), 0);
	CHECK_INT(gcp_auth_token(&a, &t, &err), 0);
	CHECK(t && issued(t));
	free(t);
	gcp_auth_free(&a);
}

static void test_all(void)
{
	setup();
	test_jwt_signature();
	test_key_errors();
	test_no_credentials();
	start_emulator();
	if (base_url[0]) {
		test_exchange_and_cache();
		test_concurrent_callers();
		test_errors_from_the_endpoint();
		test_emulator_rejects();
		test_metadata_server();
	}
	teardown();
}

CHECK_MAIN(CHECK_CASE(test_base64url), CHECK_CASE(test_stale_at), CHECK_CASE(test_all))
