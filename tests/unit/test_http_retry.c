/* Retry policy, backoff, Retry-After, base64, escaping, error texts. */
#include "check.h"

#include "providers/http/http.h"

#include <errno.h>
#include <stdlib.h>

static void test_should_retry(void)
{
	/* idempotent: 5xx, 429, resets and timeouts are retried */
	CHECK(sfs_http_should_retry(true, SFS_HTTP_OK, 503, 1, 4));
	CHECK(sfs_http_should_retry(true, SFS_HTTP_OK, 500, 1, 4));
	CHECK(sfs_http_should_retry(true, SFS_HTTP_OK, 429, 3, 4));
	CHECK(sfs_http_should_retry(true, SFS_HTTP_BROKEN, 0, 1, 4));
	CHECK(sfs_http_should_retry(true, SFS_HTTP_TIMEOUT, 0, 1, 4));
	CHECK(!sfs_http_should_retry(true, SFS_HTTP_OK, 503, 4, 4));
	CHECK(!sfs_http_should_retry(true, SFS_HTTP_OK, 404, 1, 4));
	CHECK(!sfs_http_should_retry(true, SFS_HTTP_OK, 200, 1, 4));
	CHECK(!sfs_http_should_retry(true, SFS_HTTP_FATAL, 0, 1, 4));
	/* a POST: only when nothing was run */
	CHECK(!sfs_http_should_retry(false, SFS_HTTP_OK, 503, 1, 4));
	CHECK(!sfs_http_should_retry(false, SFS_HTTP_BROKEN, 0, 1, 4));
	CHECK(!sfs_http_should_retry(false, SFS_HTTP_TIMEOUT, 0, 1, 4));
	CHECK(sfs_http_should_retry(false, SFS_HTTP_NO_CONNECT, 0, 1, 4));
	CHECK(sfs_http_should_retry(false, SFS_HTTP_OK, 429, 1, 4));
}

static void test_backoff(void)
{
	/* grows, stays within [d/2, d], capped at 5 s */
	CHECK_INT(sfs_http_backoff_ms(1, -1, 0.0), 50);
	CHECK_INT(sfs_http_backoff_ms(1, -1, 0.999), 99);
	CHECK_INT(sfs_http_backoff_ms(2, -1, 0.0), 100);
	CHECK_INT(sfs_http_backoff_ms(3, -1, 0.5), 300);
	CHECK_INT(sfs_http_backoff_ms(30, -1, 0.0), 2500);
	CHECK(sfs_http_backoff_ms(30, -1, 0.99) <= 5000);
	/* Retry-After wins when longer, capped at 30 s */
	CHECK_INT(sfs_http_backoff_ms(1, 2000, 0.5), 2000);
	CHECK_INT(sfs_http_backoff_ms(1, 0, 0.0), 50);
	CHECK_INT(sfs_http_backoff_ms(1, 999999, 0.0), 30000);
}

static void test_retry_after(void)
{
	CHECK_INT(sfs_http_parse_retry_after("3", 0), 3000);
	CHECK_INT(sfs_http_parse_retry_after(" 0 ", 0), 0);
	CHECK_INT(sfs_http_parse_retry_after("soon", 0), -1);
	CHECK_INT(sfs_http_parse_retry_after("-1", 0), -1);
	CHECK_INT(sfs_http_parse_retry_after(NULL, 0), -1);
	/* Wed, 21 Oct 2015 07:28:00 GMT = 1445412480 */
	CHECK_INT(sfs_http_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470), 10000);
	CHECK_INT(sfs_http_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490), 0);
}

static void test_base64(void)
{
	unsigned char out[64];
	char enc[64];
	const char *cases[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (size_t i = 0; i < 7; i++) {
		sfs_base64_encode((const unsigned char *)cases[i], strlen(cases[i]), enc);
		CHECK_STREQ(enc, want[i]);
		long n = sfs_base64_decode(want[i], strlen(want[i]), out);
		CHECK_INT(n, (long)strlen(cases[i]));
		out[n < 0 ? 0 : n] = 0;
		CHECK_STREQ((char *)out, cases[i]);
	}
	/* `base64` wraps at 76 columns and ends with a newline */
	CHECK_INT(sfs_base64_decode("Zm9v\nYmFy\n", 10, out), 6);
	CHECK_INT(sfs_base64_decode("Zm9vY", 5, out), -EINVAL);
	CHECK_INT(sfs_base64_decode("Zm9v!mFy", 8, out), -EINVAL);
	CHECK_INT(sfs_base64_decode("Zg==Zg==", 8, out), -EINVAL);
	unsigned char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	char big[400];
	unsigned char back[300];
	sfs_base64_encode(all, 256, big);
	CHECK_INT(sfs_base64_decode(big, strlen(big), back), 256);
	CHECK(memcmp(all, back, 256) == 0);
}

static void test_escape_and_errors(void)
{
	char *e = sfs_http_escape("dir/a b&c=d%é");
	CHECK_STREQ(e, "dir/a%20b%26c%3Dd%25%C3%A9");
	free(e);
	e = sfs_http_escape_component("{\"label\":[\"x/y=1\"]}");
	CHECK_STREQ(e, "%7B%22label%22%3A%5B%22x%2Fy%3D1%22%5D%7D");
	free(e);
	char buf[128];
	const char *nest =
	    "{\"statusCode\":404,\"message\":\"file not found\",\"code\":\"Not Found\"}";
	sfs_http_error_text(nest, strlen(nest), buf, sizeof(buf));
	CHECK_STREQ(buf, "file not found");
	const char *arr = "{\"message\":[\"name must be a string\"]}";
	sfs_http_error_text(arr, strlen(arr), buf, sizeof(buf));
	CHECK_STREQ(buf, "name must be a string");
	sfs_http_error_text("plain\ntext", 10, buf, sizeof(buf));
	CHECK_STREQ(buf, "plain text");
	CHECK_INT(sfs_http_status_errno(200), 0);
	CHECK_INT(sfs_http_status_errno(404), -ENOENT);
	CHECK_INT(sfs_http_status_errno(401), -EACCES);
	CHECK_INT(sfs_http_status_errno(409), -EBUSY);
	CHECK_INT(sfs_http_status_errno(502), -EIO);
}

CHECK_MAIN(CHECK_CASE(test_should_retry), CHECK_CASE(test_backoff), CHECK_CASE(test_retry_after),
	   CHECK_CASE(test_base64), CHECK_CASE(test_escape_and_errors))
