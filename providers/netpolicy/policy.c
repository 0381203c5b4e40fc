/* Network policy text and the allow-list matcher (policy.h). */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
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
