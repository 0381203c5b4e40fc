/* Network policies: the text of network= and the allow-list matcher
 * (providers/netpolicy/policy.c), and the proxy's request-head parser
 * (providers/netpolicy/request.c). */
#include "check.h"

#include "providers/netpolicy/policy.h"
#include "providers/netpolicy/request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static int parse(const char *text, struct sfs_netpolicy *p)
{
	struct sfs_err err = {0};
	int r = sfs_netpolicy_parse(text, p, &err);
	if (r)
		CHECK(err.msg[0] != '\0');
	return r;
}

static void test_modes(void)
{
	struct sfs_netpolicy p;
	CHECK_INT(parse("host", &p), 0);
	CHECK_INT(p.mode, SFS_NET_HOST);
	CHECK(sfs_netpolicy_allows(&p, "anything.example", 1234));
	sfs_netpolicy_free(&p);
	CHECK_INT(parse("none", &p), 0);
	CHECK_INT(p.mode, SFS_NET_NONE);
	CHECK(!sfs_netpolicy_allows(&p, "example.com", 443));
	sfs_netpolicy_free(&p);
	CHECK_INT(parse("allow:example.com", &p), 0);
	CHECK_INT(p.mode, SFS_NET_ALLOW);
	CHECK_INT(p.n, 1);
	sfs_netpolicy_free(&p);
}

static void test_bad_text(void)
{
	static const char *const bad[] = {
	    "", "Host", "allow", "allow:", "allow:,x.com", "allow:x.com,", "allow:*", "allow:*.com",
	    "allow:a.*.com", "allow:x.com:0", "allow:x.com:65536", "allow:x.com:8a", "allow:::1",
	    "allow:[::1", "allow:[::1]x", "allow:x y.com", "allow:x/y.com", "allow:http://x.com",
	    "block",
	    /* empty labels (found by fuzz_proxy_request: "example.." was kept as
	     * "example." and then matched nothing) */
	    "allow:example..", "allow:.x.com", "allow:a..b.com", "allow:*..x.com"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sfs_netpolicy p;
		if (parse(bad[i], &p) != -EINVAL)
			fprintf(stderr, "    accepted: \"%s\"\n", bad[i]);
		CHECK(p.rules == NULL && p.n == 0);
	}
	struct sfs_netpolicy p;
	CHECK_INT(parse("allow:[::1]:8080,127.0.0.1", &p), 0);
	CHECK(sfs_netpolicy_allows(&p, "::1", 8080));
	CHECK(sfs_netpolicy_allows(&p, "127.0.0.1", 443));
	CHECK(!sfs_netpolicy_allows(&p, "127.0.0.2", 443));
	sfs_netpolicy_free(&p);
}

static void test_matcher(void)
{
	struct sfs_netpolicy p;
	CHECK_INT(parse("allow:Example.COM,*.x.org,api.test:8443", &p), 0);
	/* exact names, any case, one trailing dot; ports 80 and 443 only */
	CHECK(sfs_netpolicy_allows(&p, "example.com", 443));
	CHECK(sfs_netpolicy_allows(&p, "EXAMPLE.com.", 80));
	CHECK(!sfs_netpolicy_allows(&p, "example.com", 22));
	CHECK(!sfs_netpolicy_allows(&p, "www.example.com", 443));
	CHECK(!sfs_netpolicy_allows(&p, "example.com.evil.net", 443));
	CHECK(!sfs_netpolicy_allows(&p, "evilexample.com", 443));
	CHECK(!sfs_netpolicy_allows(&p, "example.com..", 443));
	/* *.x.org: every depth below, never x.org itself or a lookalike */
	CHECK(sfs_netpolicy_allows(&p, "a.x.org", 443));
	CHECK(sfs_netpolicy_allows(&p, "a.b.x.org", 80));
	CHECK(!sfs_netpolicy_allows(&p, "x.org", 443));
	CHECK(!sfs_netpolicy_allows(&p, "evilx.org", 443));
	CHECK(!sfs_netpolicy_allows(&p, ".x.org", 443));
	/* an explicit port replaces 80 and 443 */
	CHECK(sfs_netpolicy_allows(&p, "api.test", 8443));
	CHECK(!sfs_netpolicy_allows(&p, "api.test", 443));
	/* names that are not names */
	CHECK(!sfs_netpolicy_allows(&p, "", 443));
	CHECK(!sfs_netpolicy_allows(&p, "exa mple.com", 443));
	sfs_netpolicy_free(&p);
}

static int req(const char *text, struct sfs_proxy_req *r)
{
	return sfs_proxy_parse(text, strlen(text), r);
}

static void test_request_connect(void)
{
	struct sfs_proxy_req r;
	const char *t = "CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nTLS";
	CHECK_INT(req(t, &r), 1);
	CHECK(r.connect);
	CHECK_STREQ(r.host, "Example.com");
	CHECK_INT(r.port, 443);
	CHECK_INT(r.head_len, strlen(t) - 3);
	CHECK_INT(req("CONNECT [::1]:8443 HTTP/1.0\r\n\r\n", &r), 1);
	CHECK_STREQ(r.host, "::1");
	CHECK_INT(r.port, 8443);
	/* a port is required; junk in it is not a port */
	CHECK_INT(req("CONNECT example.com HTTP/1.1\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("CONNECT example.com:99999 HTTP/1.1\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("CONNECT example.com:4x3 HTTP/1.1\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("CONNECT [::1 HTTP/1.1\r\n\r\n", &r), -EINVAL);
}

static void test_request_absolute(void)
{
	struct sfs_proxy_req r;
	const char *t = "GET http://h.test:8080/a/b?c=d HTTP/1.1\r\nHost: h.test\r\n\r\n";
	CHECK_INT(req(t, &r), 1);
	CHECK(!r.connect);
	CHECK_STREQ(r.method, "GET");
	CHECK_STREQ(r.host, "h.test");
	CHECK_INT(r.port, 8080);
	CHECK(!r.path_root);
	CHECK_INT(r.path_len, strlen("/a/b?c=d"));
	CHECK(strncmp(t + r.path_off, "/a/b?c=d", r.path_len) == 0);
	CHECK_INT(r.line_len, strlen("GET http://h.test:8080/a/b?c=d HTTP/1.1\r\n"));
	CHECK_INT(req("POST HTTP://h.test HTTP/1.0\r\n\r\n", &r), 1);
	CHECK_INT(r.port, 80);
	CHECK(r.path_root);
	CHECK_INT(req("GET http://h.test?q HTTP/1.1\r\n\r\n", &r), 1);
	CHECK(r.path_root);
	CHECK_INT(req("GET https://h.test/ HTTP/1.1\r\n\r\n", &r), -EPROTONOSUPPORT);
	/* origin form, credentials, other schemes and versions are not served */
	CHECK_INT(req("GET / HTTP/1.1\r\nHost: h.test\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("GET http://u:p@h.test/ HTTP/1.1\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("GET ftp://h.test/ HTTP/1.1\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("GET http://h.test/ HTTP/2.0\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("get http://h.test/ HTTP/1.1\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("GET  http://h.test/ HTTP/1.1\r\n\r\n", &r), -EINVAL);
	CHECK_INT(req("GET http:///x HTTP/1.1\r\n\r\n", &r), -EINVAL);
}

static void test_request_incomplete(void)
{
	struct sfs_proxy_req r;
	const char *t = "CONNECT a.test:443 HTTP/1.1\r\nX: y\r\n\r\n";
	/* every proper prefix asks for more */
	for (size_t i = 0; i < strlen(t); i++)
		CHECK_INT(sfs_proxy_parse(t, i, &r), 0);
	CHECK_INT(sfs_proxy_parse(t, strlen(t), &r), 1);
	/* a head that never ends is cut at SFS_PROXY_HEAD_MAX */
	static char big[SFS_PROXY_HEAD_MAX + 10];
	memset(big, 'a', sizeof(big));
	CHECK_INT(sfs_proxy_parse(big, sizeof(big), &r), -E2BIG);
}

/* refused(TEXT): sfs_netpolicy_addr_refused for the address TEXT, with
 * 192.0.2.2 and 2001:db8::2 as the host's own. */
static bool refused(const char *text)
{
	struct sockaddr_in a4 = {.sin_family = AF_INET}, o4 = {.sin_family = AF_INET};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6}, o6 = {.sin6_family = AF_INET6};
	inet_pton(AF_INET, "192.0.2.2", &o4.sin_addr);
	inet_pton(AF_INET6, "2001:db8::2", &o6.sin6_addr);
	const struct sockaddr *own[] = {(struct sockaddr *)&o4, (struct sockaddr *)&o6};
	if (inet_pton(AF_INET, text, &a4.sin_addr) == 1)
		return sfs_netpolicy_addr_refused((struct sockaddr *)&a4, own, 2);
	CHECK(inet_pton(AF_INET6, text, &a6.sin6_addr) == 1);
	return sfs_netpolicy_addr_refused((struct sockaddr *)&a6, own, 2);
}

static void test_addr_refused(void)
{
	const char *bad[] = {"127.0.0.1",
			     "10.1.2.3",
			     "172.16.0.1",
			     "172.31.255.255",
			     "192.168.1.1",
			     "169.254.169.254",
			     "100.64.0.1",
			     "0.0.0.0",
			     "192.0.0.170",
			     "198.18.0.1",
			     "224.0.0.1",
			     "255.255.255.255",
			     "240.0.0.1",
			     "192.0.2.2",
			     "::1",
			     "::",
			     "::127.0.0.1",
			     "::ffff:127.0.0.1",
			     "::ffff:8.8.8.8",
			     "64:ff9b::7f00:1",
			     "64:ff9b::a9fe:a9fe",
			     "64:ff9b:1::1",
			     "2002:7f00:1::1",
			     "2002:a00:1::1",
			     "fd00:ec2::254",
			     "fe80::1",
			     "fec0::1",
			     "ff02::1",
			     "2001:db8::2"};
	const char *good[] = {"8.8.8.8",	 "172.32.0.1",	    "100.128.0.1",
			      "192.0.3.1",	 "2606:4700::1111", "64:ff9b::808:808",
			      "2002:808:808::1", "192.0.2.3",	    "2001:db8::3"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!refused(bad[i])) {
			fprintf(stderr, "not refused: %s\n", bad[i]);
			CHECK(false);
		}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (refused(good[i])) {
			fprintf(stderr, "refused: %s\n", good[i]);
			CHECK(false);
		}
}

/* origin_head(TEXT): the head sfs_proxy_origin_head makes of TEXT, or its
 * negative errno as text. */
static const char *origin_head(const char *text)
{
	static char out[SFS_PROXY_HEAD_MAX + 512];
	struct sfs_proxy_req r;
	if (req(text, &r) != 1)
		return "unparsed";
	int n = sfs_proxy_origin_head(text, &r, out, sizeof(out));
	if (n < 0)
		snprintf(out, sizeof(out), "%d", n);
	return out;
}

static void test_origin_head(void)
{
	/* Host is the URI's whatever the client said (a server on an allowed
	 * address must not be asked for another site); hop-by-hop and Proxy-*
	 * fields go; one request per connection */
	CHECK_STREQ(
	    origin_head("GET http://good.test:8080/a?b HTTP/1.1\r\nHost: evil.test\r\n"
			"Accept: */*\r\nProxy-Authorization: Basic eA==\r\nhOsT: evil2\r\n"
			"Connection: keep-alive\r\nProxy-Connection: keep-alive\r\n\r\nbody"),
	    "GET /a?b HTTP/1.1\r\nAccept: */*\r\nHost: good.test:8080\r\n"
	    "Connection: close\r\n\r\n");
	CHECK_STREQ(origin_head("POST http://[::1]?q HTTP/1.0\r\nContent-Length: 3\r\n\r\n"),
		    "POST /?q HTTP/1.0\r\nContent-Length: 3\r\nHost: [::1]\r\n"
		    "Connection: close\r\n\r\n");
	/* heads a server could read otherwise than the proxy: refused */
	CHECK_STREQ(origin_head("GET http://good.test/ HTTP/1.1\r\nX: a\nHost: evil\r\n\r\n"),
		    "-22");
	CHECK_STREQ(origin_head("GET http://good.test/ HTTP/1.1\r\nX: a\rHost: evil\r\n\r\n"),
		    "-22");
	CHECK_STREQ(origin_head("GET http://good.test/ HTTP/1.1\r\nX: a\r\n Host: evil\r\n\r\n"),
		    "-22");
	CHECK_STREQ(origin_head("GET http://good.test/ HTTP/1.1\r\nHost : evil\r\n\r\n"), "-22");
	CHECK_STREQ(origin_head("GET http://good.test/ HTTP/1.1\r\nno colon\r\n\r\n"), "-22");
	CHECK_STREQ(origin_head("GET http://good.test/\x01 HTTP/1.1\r\n\r\n"), "-22");
	CHECK_STREQ(origin_head("POST http://good.test/ HTTP/1.1\r\nContent-Length: 5\r\n"
				"Transfer-Encoding: chunked\r\n\r\n"),
		    "-22");
	/* a NUL inside the head */
	static const char nul[] = "GET http://good.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
	struct sfs_proxy_req r;
	char out[256];
	CHECK_INT(sfs_proxy_parse(nul, sizeof(nul) - 1, &r), 1);
	CHECK_INT(sfs_proxy_origin_head(nul, &r, out, sizeof(out)), -EINVAL);
	/* too small a buffer is E2BIG, never a cut head */
	const char *t = "GET http://good.test/ HTTP/1.1\r\nAccept: */*\r\n\r\n";
	CHECK_INT(req(t, &r), 1);
	CHECK_INT(sfs_proxy_origin_head(t, &r, out, 20), -E2BIG);
}

CHECK_MAIN(CHECK_CASE(test_modes), CHECK_CASE(test_bad_text), CHECK_CASE(test_matcher),
	   CHECK_CASE(test_request_connect), CHECK_CASE(test_request_absolute),
	   CHECK_CASE(test_request_incomplete), CHECK_CASE(test_origin_head),
	   CHECK_CASE(test_addr_refused))
