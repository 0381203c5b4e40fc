/*
 * libFuzzer harness: the allow-list proxy's request-head parser and the
 * network policy parser (providers/netpolicy).  Each input is both a
 * request head (which must parse into fields that lie inside it, give
 * the same answer whatever prefix arrived first, and be sent upstream with
 * CRLF lines and one Host) and policy text (whose
 * rules must match their own hosts).
 */
#include "providers/netpolicy/policy.h"
#include "providers/netpolicy/request.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_request(const char *buf, size_t len)
{
	struct sfs_proxy_req r;
	int v = sfs_proxy_parse(buf, len, &r);
	if (v != 1)
		return;
	if (r.head_len > len || r.line_len > r.head_len || !r.host[0] || r.port < 1 ||
	    r.port > 65535)
		abort();
	if (!r.connect && r.path_off + r.path_len > r.line_len)
		abort();
	/* a client's head may arrive in any pieces: a shorter prefix that ends
	 * before the head must ask for more, never decide otherwise */
	struct sfs_proxy_req q;
	if (sfs_proxy_parse(buf, r.head_len - 1, &q) != 0)
		abort();
	/* the head sent upstream: CRLF lines only, and one Host, the proxy's */
	static char out[SFS_PROXY_HEAD_MAX + 512];
	int n = r.connect ? -1 : sfs_proxy_origin_head(buf, &r, out, sizeof(out));
	if (n <= 0)
		return;
	if ((size_t)n != strlen(out) || n < 4 || strcmp(out + n - 4, "\r\n\r\n") != 0)
		abort();
	for (int i = 0; i < n; i++)
		if ((out[i] == '\n') != (i > 0 && out[i - 1] == '\r'))
			abort();
	const char *h = strstr(out, "\r\nHost: ");
	if (!h || strstr(h + 1, "\r\nHost: "))
		abort();
}

static void check_policy(const char *text)
{
	struct sfs_netpolicy p;
	struct sfs_err err = {0};
	if (sfs_netpolicy_parse(text, &p, &err) != 0) {
		if (p.rules || p.n)
			abort();
		return;
	}
	for (size_t i = 0; i < p.n; i++) {
		const struct sfs_net_rule *rule = &p.rules[i];
		char name[300];
		snprintf(name, sizeof(name), "%s%s", rule->subdomains ? "a." : "", rule->host);
		/* every rule lets its own host through (names up to 253 bytes) */
		if (strlen(name) <= 253 &&
		    !sfs_netpolicy_allows(&p, name, rule->port ? rule->port : 443))
			abort();
	}
	sfs_netpolicy_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_request((const char *)data, size);
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	check_policy(text);
	free(text);
	return 0;
}
