/*
 * The head of a request to the allow-list proxy (pure: unit-tested in
 * test_netpolicy.c, fuzzed by tests/fuzz/fuzz_proxy_request.c).  Two forms
 * are served: `CONNECT host:port HTTP/1.x` (a tunnel, TLS or anything) and
 * an absolute-URI `METHOD http://host[:port]/path HTTP/1.x`, which the proxy
 * sends on in origin form (`METHOD /path HTTP/1.x`).  https:// absolute URIs
 * (TLS would be the proxy's to do) and user:password@ authorities are
 * refused.
 */
#ifndef SFS_NETPOLICY_REQUEST_H
#define SFS_NETPOLICY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

/* The most a head may take: a client that sends more is refused. */
#define SFS_PROXY_HEAD_MAX 16384

struct sfs_proxy_req {
	bool connect;
	char method[24];
	char host[256]; /* as the client wrote it, without [ ] around IPv6 */
	int port;
	size_t line_len;	   /* the request line, CRLF included */
	size_t head_len;	   /* the whole head, the blank line included */
	size_t path_off, path_len; /* origin form inside the buffer (not CONNECT); */
	bool path_root;		   /* or "/" when the URI had no path */
	char version[12];	   /* "HTTP/1.1" */
};

/* 1: a whole head was parsed into r; 0: not yet (more bytes needed);
 * -EINVAL: not a request the proxy serves; -E2BIG: the head is too long;
 * -EPROTONOSUPPORT: an https:// absolute URI. */
int sfs_proxy_parse(const char *buf, size_t len, struct sfs_proxy_req *r);

/* The head an absolute-URI request r (parsed from buf) is sent upstream
 * with, into out: the request line in origin form, the client's header
 * lines but Host, Connection, Keep-Alive and Proxy-*, then `Host: ` the
 * URI's authority (RFC 9112 3.2.2: a proxy replaces the client's Host, so a
 * server on an allowed address cannot be asked for another site) and
 * `Connection: close` (one request per connection: a second one would go
 * to the same server unread).  Its length; -EINVAL for a head a server
 * could read differently from the proxy (a CR or LF alone, a NUL, a
 * control byte in the target, a folded header line, both Content-Length
 * and Transfer-Encoding); -E2BIG when it does not fit in len. */
int sfs_proxy_origin_head(const char *buf, const struct sfs_proxy_req *r, char *out, size_t len);

#endif
