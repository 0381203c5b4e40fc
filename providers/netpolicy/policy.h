/*
 * Network policies (SPEC §11): `none`, `host` or `allow:HOST[,HOST...]`,
 * parsed and matched here (pure: no I/O, unit-tested in test_netpolicy.c).
 * A rule is a host name or address, `*.SUFFIX` for every name below SUFFIX
 * (any depth, never SUFFIX itself), with an optional `:PORT`; without a port
 * it allows 80 and 443 (HTTP and HTTPS).
 */
#ifndef SFS_NETPOLICY_H
#define SFS_NETPOLICY_H

#include "../err.h"

#include <stdbool.h>
#include <stddef.h>

enum sfs_net_mode { SFS_NET_HOST, SFS_NET_NONE, SFS_NET_ALLOW };

struct sfs_net_rule {
	char host[256]; /* lower case, no trailing dot; for `*.x.com` it is "x.com" */
	bool subdomains;
	int port; /* 0: 80 and 443 */
};

struct sfs_netpolicy {
	enum sfs_net_mode mode;
	struct sfs_net_rule *rules;
	size_t n;
};

/* Parses text; -EINVAL with a message naming the bad part.  p is left
 * empty on failure. */
int sfs_netpolicy_parse(const char *text, struct sfs_netpolicy *p, struct sfs_err *err);
void sfs_netpolicy_free(struct sfs_netpolicy *p);

/* Lower-cases host into out and strips one trailing dot; false when the
 * name is not a host name or address (empty, too long, odd bytes). */
bool sfs_netpolicy_norm_host(const char *host, char *out, size_t len);

/* Whether an allow-list policy lets a connection to host:port through
 * (host as the client named it; matched case-insensitively). */
bool sfs_netpolicy_allows(const struct sfs_netpolicy *p, const char *host, int port);

struct sockaddr;

/* Whether a connection to sa, an address DNS gave for an allowed name,
 * must be refused: the host itself and the networks behind it (loopback,
 * private, CGNAT, link-local with cloud metadata, unique- and site-local,
 * unspecified, multicast, broadcast, reserved), an IPv4 address of those
 * inside IPv6 (mapped, compatible, NAT64 64:ff9b::/96 and /48, 6to4), or
 * one of own[0..n), the host's own interface addresses. */
bool sfs_netpolicy_addr_refused(const struct sockaddr *sa, const struct sockaddr *const *own,
				size_t n);

#endif
