/* Shared by the git kit's files; not for use outside providers/git. */
#ifndef SFS_GIT_INTERNAL_H
#define SFS_GIT_INTERNAL_H

#include "git.h"

#include <git2.h>

struct gk_progress {
	sfs_git_progress_fn fn;
	void *ctx;
	const char *phase; /* last reported */
	unsigned pct;
	const char *fetch_phase; /* what a transfer is called: "clone", "copy" */
	int cred_tries;
	const char *url; /* the source: the port of an ssh host key check */
};

/* git_libgit2_init, once per process. */
int gk_init(struct sfs_err *err);
/* Fills err from libgit2's last error: -ENOENT for "no repository there",
 * -EACCES for refused credentials, else -EIO.  Returns the code. */
int gk_error(struct sfs_err *err, int rc, const char *what);
void gk_report(struct gk_progress *p, const char *phase, size_t done, size_t total, uint64_t bytes);
void gk_callbacks(git_remote_callbacks *cb, struct gk_progress *p);

/* auth.c: credentials (ssh key file or agent, the https token), the ssh
 * host key check against git.known_hosts, the https CA list. */
int gk_cred_cb(git_credential **out, const char *url, const char *user, unsigned int allowed,
	       void *payload);
int gk_cert_cb(git_cert *cert, int valid, const char *host, void *payload);
/* Sets git.ca_file (or $SSL_CERT_FILE) as libgit2's CA list: once, at init
 * (the setting is process-wide, and swapping it under a handshake is not
 * safe); a bad file is remembered for gk_ca_check. */
void gk_ca_init(void);
/* 0, or -EINVAL saying why the CA file could not be used. */
int gk_ca_check(struct sfs_err *err);

#endif
