/*
 * The daemon's allow-list proxy (network=allow:): an HTTP forward proxy with
 * CONNECT, no TLS interception.  One thread accepts on every sandbox's
 * listeners (a unix socket in the sandbox's net directory, bound into it at
 * /run/sandboxfs/proxy.sock, and 127.0.0.1:3128 inside its network
 * namespace); each connection is served by a thread of its own.  Started on
 * the first attach (always after fuse_daemonize: attaches come from FUSE
 * workers and the journal engine), joined by sfs_proxy_shutdown.
 */
#ifndef SFS_NETPOLICY_PROXY_H
#define SFS_NETPOLICY_PROXY_H

#include "../err.h"
#include "../local/isolation.h"

/* The port runs reach the proxy on inside their network namespace. */
#define SFS_PROXY_PORT 3128

/* Attaches (or updates) sandbox `key`: with an allow: policy its listeners
 * exist and its allow-list is `policy`; with none or host it has none. */
int sfs_proxy_attach_sandbox(const char *key, const char *name, const struct sfs_holder *h,
			     const char *netdir, const char *policy, struct sfs_err *err);
void sfs_proxy_detach_sandbox(const char *key);
/* Stops every thread and closes every listener and connection. */
void sfs_proxy_shutdown(void);

#endif
