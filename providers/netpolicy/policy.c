/* Network policy text and the allow-list matcher (policy.h). */
#include "policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

void sfs_netpolicy_free(struct sfs_netpolicy *p)
{
	free(p->rules);
	p->rules = NULL;
	p->n = 0;
	p->mode = SFS_NET_HOST;
}

bool sfs_netpolicy_norm_host(const char *host, char *out, size_t len)
{
	size_t n = strlen(host);
	if (n && host[n - 1] == '.')
		n--;
	if (n == 0 || n >= len || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)host[i];
		/* names, IPv4 and (bracketless) IPv6 addresses */
		if (!isalnum(c) && c != '-' && c != '.' && c != ':' && c != '_')
			return false;
		/* no empty label: ".x", "a..b", "x.." (one trailing dot is gone) */
		if (c == '.' && (i == 0 || host[i - 1] == '.' || i == n - 1))
			return false;
		out[i] = (char)tolower(c);
	}
	out[n] = '\0';
	return true;
}

/* One rule: `[*.]HOST[:PORT]` or `[V6]:PORT`. */
static int parse_rule(const char *s, struct sfs_net_rule *r, struct sfs_err *err)
{
	char buf[300];
	if (strlen(s) >= sizeof(buf))
		return sfs_errf(err, -EINVAL, "network: host \"%.40s...\" is too long", s);
	strcpy(buf, s);
	memset(r, 0, sizeof(*r));
	char *host = buf, *port = NULL;
	if (host[0] == '[') {
		char *end = strchr(host, ']');
		if (!end || (end[1] && end[1] != ':'))
			return sfs_errf(err, -EINVAL, "network: bad address \"%s\"", s);
		*end = '\0';
		port = end[1] ? end + 2 : NULL;
		host++;
	} else {
		char *colon = strchr(host, ':');
		if (colon && strchr(colon + 1, ':'))
			return sfs_errf(err, -EINVAL,
					"network: write an IPv6 address as [ADDR] in \"%s\"", s);
		if (colon) {
			*colon = '\0';
			port = colon + 1;
		}
	}
	if (port) {
		char *end;
		long v = strtol(port, &end, 10);
		if (!*port || *end || v < 1 || v > 65535)
			return sfs_errf(err, -EINVAL, "network: bad port in \"%s\"", s);
		r->port = (int)v;
	}
	if (strncmp(host, "*.", 2) == 0) {
		r->subdomains = true;
		host += 2;
		/* `*.com` would be most of the internet */
		if (!strchr(host, '.'))
			return sfs_errf(
			    err, -EINVAL,
			    "network: \"%s\" is too wide (a *. rule needs a name with a dot "
			    "after it)",
			    s);
	}
	if (strchr(host, '*') || !sfs_netpolicy_norm_host(host, r->host, sizeof(r->host)))
		return sfs_errf(err, -EINVAL,
				"network: bad host \"%s\" (a name, an address, or *.NAME for its "
				"subdomains)",
				s);
	return 0;
}

int sfs_netpolicy_parse(const char *text, struct sfs_netpolicy *p, struct sfs_err *err)
{
	memset(p, 0, sizeof(*p));
	if (strcmp(text, "host") == 0)
		return 0;
	if (strcmp(text, "none") == 0) {
		p->mode = SFS_NET_NONE;
		return 0;
	}
	if (strncmp(text, "allow:", 6) != 0)
		return sfs_errf(err, -EINVAL,
				"network: \"%s\" is not none, host or allow:HOST[,HOST...]", text);
	const char *list = text + 6;
	size_t cap = 1;
	for (const char *c = list; *c; c++)
		cap += *c == ',';
	struct sfs_netpolicy out = {.mode = SFS_NET_ALLOW};
	out.rules = calloc(cap, sizeof(*out.rules));
	if (!out.rules)
		return sfs_errf(err, -ENOMEM, "out of memory");
	const char *s = list;
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		char one[300];
		if (len == 0 || len >= sizeof(one)) {
			sfs_netpolicy_free(&out);
			return sfs_errf(err, -EINVAL, "network: %s host in \"%s\"",
					len ? "a too long" : "an empty", text);
		}
		memcpy(one, s, len);
		one[len] = '\0';
		int r = parse_rule(one, &out.rules[out.n], err);
		if (r) {
			sfs_netpolicy_free(&out);
			return r;
		}
		out.n++;
		if (!comma)
			break;
		s = comma + 1;
	}
	*p = out;
	return 0;
}

/* Whether name is suffix or ends in ".suffix". */
static bool below(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);
	return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, suffix) == 0;
}

bool sfs_netpolicy_allows(const struct sfs_netpolicy *p, const char *host, int port)
{
	if (p->mode == SFS_NET_HOST)
		return true;
	char name[256];
	if (p->mode != SFS_NET_ALLOW || !sfs_netpolicy_norm_host(host, name, sizeof(name)))
		return false;
	for (size_t i = 0; i < p->n; i++) {
		const struct sfs_net_rule *r = &p->rules[i];
		bool port_ok = r->port ? port == r->port : port == 80 || port == 443;
		if (!port_ok)
			continue;
		if (r->subdomains ? below(name, r->host) : strcmp(name, r->host) == 0)
			return true;
	}
	return false;
}

/* An IPv4 address (host order) the proxy must not lead to. */
static bool v4_refused(uint32_t a)
{
	return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 ||
	       (a >> 22) == (100 << 2 | 1) ||		/* 100.64/10, CGNAT */
	       (a >> 16) == (169 << 8 | 254) ||		/* link-local, metadata */
	       (a >> 20) == (172 << 4 | 1) ||		/* 172.16/12 */
	       (a >> 8) == (192u << 16 | 0 << 8 | 0) || /* 192.0.0/24 */
	       (a >> 16) == (192u << 8 | 168) ||	/* 192.168/16 */
	       (a >> 17) == (198u << 7 | 18 >> 1) ||	/* 198.18/15 */
	       (a >> 28) >= 14;				/* multicast, reserved, broadcast */
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return false;
}

bool sfs_netpolicy_addr_refused(const struct sockaddr *sa, const struct sockaddr *const *own,
				size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (own[i] && same_addr(sa, own[i]))
			return true;
	if (sa->sa_family == AF_INET)
		return v4_refused(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family != AF_INET6)
		return true;
	const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	static const unsigned char zero[12], mapped[12] = {[10] = 0xff, [11] = 0xff},
					     nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	uint32_t tail =
	    (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	/* ::, ::1 and IPv4-compatible ::a.b.c.d; ::ffff:a.b.c.d */
	if (!memcmp(b, zero, 12) || !memcmp(b, mapped, 12))
		return true;
	/* NAT64 64:ff9b::a.b.c.d (DNS64 answers so for IPv4-only names):
	 * the gateway leads wherever a.b.c.d does */
	if (!memcmp(b, nat64, 12))
		return v4_refused(tail);
	/* local-use NAT64 64:ff9b:1::/48: any of its addresses may map anywhere */
	if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 &&
	    b[5] == 0x01)
		return true;
	/* 6to4 2002:AABB:CCDD::/48 carries the IPv4 address AA.BB.CC.DD */
	if (b[0] == 0x20 && b[1] == 0x02)
		return v4_refused((uint32_t)b[2] << 24 | (uint32_t)b[3] << 16 |
				  (uint32_t)b[4] << 8 | b[5]);
	return (b[0] & 0xfe) == 0xfc ||		  /* fc00::/7 unique-local */
	       (b[0] == 0xfe && (b[1] & 0x80)) || /* fe80::/10 link-, fec0::/10 site-local */
	       b[0] == 0xff;			  /* multicast */
}
