/*
 * Who the git kit trusts and what it proves (SPEC §9): credentials for a
 * source, the ssh host key check and the https CA list.
 *
 * - ssh: the key file git.ssh_key (its passphrase, if any, from
 *   $SANDBOXFS_GIT_SSH_PASSPHRASE or git.ssh_passphrase: a secret) or else
 *   the ssh agent ($SSH_AUTH_SOCK).  The host key must be listed for the
 *   host (and port) in git.known_hosts when that is set (OpenSSH format,
 *   hashed names too: libssh2 reads it), else in the daemon user's
 *   ~/.ssh/known_hosts (libgit2's own check).  Nothing is accepted on first
 *   use: an unknown host is refused like a wrong key.
 * - http(s): the token ($SANDBOXFS_GIT_TOKEN or git.token) as a Basic
 *   password; an https server's certificate must chain to git.ca_file (or
 *   $SSL_CERT_FILE), which replaces the system's list, else to the system's.
 */
#include "git.h"
#include "internal.h"

#include "../config.h"
#include "../http/http.h"
#include "../util.h"

#include <errno.h>
#include <git2.h>
#include <libssh2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gk_cred_cb(git_credential **out, const char *url, const char *user, unsigned int allowed,
	       void *payload)
{
	(void)url;
	struct gk_progress *p = payload;
	if (p->cred_tries++ >= 2)
		return GIT_EAUTH; /* refused twice: do not loop */
	const char *name = user && *user ? user : "git";
	if (allowed & GIT_CREDENTIAL_SSH_KEY) {
		const char *key = sfs_config_get("git.ssh_key", NULL);
		if (!key || !*key)
			return git_credential_ssh_key_from_agent(out, name);
		char pub[4200];
		if (sfs_pathf(pub, sizeof(pub), "%s.pub", key) < 0)
			pub[0] = '\0'; /* no public key file: never one of a cut name */
		const char *pass =
		    sfs_http_credential(SFS_GIT_SSH_PASSPHRASE_ENV, "git.ssh_passphrase");
		return git_credential_ssh_key_new(
		    out, name, pub[0] && access(pub, R_OK) == 0 ? pub : NULL, key, pass);
	}
	if (allowed & GIT_CREDENTIAL_USERNAME)
		return git_credential_username_new(out, name);
	if (allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
		const char *token = sfs_http_credential(SFS_GIT_TOKEN_ENV, "git.token");
		if (token)
			return git_credential_userpass_plaintext_new(
			    out, user && *user ? user : "x-access-token", token);
	}
	return GIT_PASSTHROUGH;
}

static int knownhost_type(git_cert_ssh_raw_type_t t)
{
	switch (t) {
	case GIT_CERT_SSH_RAW_TYPE_RSA:
		return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
	case GIT_CERT_SSH_RAW_TYPE_DSS:
		return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
	case GIT_CERT_SSH_RAW_TYPE_KEY_ECDSA_256:
		return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
	case GIT_CERT_SSH_RAW_TYPE_KEY_ECDSA_384:
		return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
	case GIT_CERT_SSH_RAW_TYPE_KEY_ECDSA_521:
		return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
	case GIT_CERT_SSH_RAW_TYPE_KEY_ED25519:
		return LIBSSH2_KNOWNHOST_KEY_ED25519;
	default:
		return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
	}
}

/* The host key against git.known_hosts: 0, or GIT_ECERTIFICATE with
 * libgit2's error message set (it becomes the `new` error). */
static int check_known_hosts(const git_cert_hostkey *hk, const char *host, int port,
			     const char *file)
{
	if (!(hk->type & GIT_CERT_SSH_RAW)) {
		git_error_set_str(GIT_ERROR_SSH, "ssh host key: libgit2 gave no raw key to check");
		return GIT_ECERTIFICATE;
	}
	/* a session only to hold the list: knownhost calls never connect */
	LIBSSH2_SESSION *s = libssh2_session_init();
	LIBSSH2_KNOWNHOSTS *kh = s ? libssh2_knownhost_init(s) : NULL;
	char msg[600];
	int rc = GIT_ECERTIFICATE;
	if (!kh)
		snprintf(msg, sizeof(msg), "ssh host key: out of memory");
	else if (libssh2_knownhost_readfile(kh, file, LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0)
		snprintf(msg, sizeof(msg), "ssh host key: git.known_hosts %s cannot be read",
			 file); /* message: may be cut */
	else {
		int check = libssh2_knownhost_checkp(kh, host, port, hk->hostkey, hk->hostkey_len,
						     LIBSSH2_KNOWNHOST_TYPE_PLAIN |
							 LIBSSH2_KNOWNHOST_KEYENC_RAW |
							 knownhost_type(hk->raw_type),
						     NULL);
		if (check == LIBSSH2_KNOWNHOST_CHECK_MATCH)
			rc = 0;
		else
			snprintf(msg, sizeof(msg),
				 "ssh host key of %s port %d %s git.known_hosts %s", host, port,
				 check == LIBSSH2_KNOWNHOST_CHECK_MISMATCH
				     ? "does NOT match the one listed in"
				     : "is not listed in",
				 file); /* message: may be cut */
	}
	if (rc)
		git_error_set_str(GIT_ERROR_SSH, msg);
	if (kh)
		libssh2_knownhost_free(kh);
	if (s)
		libssh2_session_free(s);
	return rc;
}

int gk_cert_cb(git_cert *cert, int valid, const char *host, void *payload)
{
	struct gk_progress *p = payload;
	const char *file = sfs_config_get("git.known_hosts", NULL);
	if (cert->cert_type != GIT_CERT_HOSTKEY_LIBSSH2 || !file || !*file)
		return GIT_PASSTHROUGH; /* libgit2's verdict (`valid`) stands */
	(void)valid;
	return check_known_hosts((const git_cert_hostkey *)cert, host,
				 p->url ? sfs_git_url_port(p->url) : 22, file);
}

static char ca_error[SFS_ERR_MAX];

void gk_ca_init(void)
{
	const char *ca = sfs_config_get("git.ca_file", NULL);
	const char *what = "git.ca_file";
	if (!ca || !*ca) {
		ca = getenv("SSL_CERT_FILE");
		what = "$SSL_CERT_FILE";
	}
	if (!ca || !*ca)
		return;
	if (access(ca, R_OK) < 0) {
		snprintf(ca_error, sizeof(ca_error), "%s %s: %s", what, ca,
			 strerror(errno)); /* message: may be cut */
		return;
	}
	if (git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, ca, NULL) < 0) {
		const git_error *e = git_error_last();
		snprintf(ca_error, sizeof(ca_error), "%s %s: %s", what, ca,
			 e && e->message ? e->message
					 : "not a certificate file"); /* message: may be cut */
	}
}

int gk_ca_check(struct sfs_err *err)
{
	if (ca_error[0])
		return sfs_errf(err, -EINVAL, "source: %s", ca_error);
	return 0;
}
