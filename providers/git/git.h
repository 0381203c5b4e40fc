/*
 * The git kit (SPEC §9): sources for new workspaces, on libgit2.
 *
 * A source URL is fetched into a bare mirror kept per URL under
 * STATE/git/mirrors, so the next sandbox from the same source fetches only
 * what is new; a workspace is then cloned from the mirror into a host
 * directory (the workspace itself for local sandboxes, a temporary tree that
 * a remote provider uploads in one transfer otherwise).  No FUSE and no
 * sandbox records in here: callers pass a progress callback.
 *
 * Pure parts (url.c: URL classification, ref rules, progress text) have unit
 * tests in tests/unit/test_git.c; the rest is exercised by tests/bats/git.bats.
 */
#ifndef SFS_GIT_H
#define SFS_GIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../err.h"

/* Where an https source's token comes from (else the config's git.token);
 * never handed on to a run. */
#define SFS_GIT_TOKEN_ENV "SANDBOXFS_GIT_TOKEN"
/* Where the passphrase of git.ssh_key comes from (else git.ssh_passphrase);
 * never handed on to a run either. */
#define SFS_GIT_SSH_PASSPHRASE_ENV "SANDBOXFS_GIT_SSH_PASSPHRASE"

enum sfs_git_url_kind {
	SFS_GIT_URL_HTTPS,
	SFS_GIT_URL_HTTP,
	SFS_GIT_URL_GIT,
	SFS_GIT_URL_SSH, /* ssh://… and scp-like user@host:path */
	SFS_GIT_URL_FILE,
	SFS_GIT_URL_PATH, /* an absolute host path */
};

/* The kind of src (>= 0), or -EINVAL with a message naming what is wrong:
 * empty, control characters or blanks, an unknown scheme, no host, a
 * relative host path. */
int sfs_git_url_classify(const char *src, struct sfs_err *err);
/* "file", "https", … for messages. */
const char *sfs_git_url_kind_name(enum sfs_git_url_kind k);

/* The port an ssh URL names (ssh://[user@]host:PORT/…), else 22. */
int sfs_git_url_port(const char *url);

/* Checks a ref= value against git's ref-name rules (git-check-ref-format)
 * plus: not starting with '-'.  0 or -EINVAL with a message. */
int sfs_git_ref_check(const char *ref, struct sfs_err *err);

/* The order in which a ref= value is looked up in a mirror: the full names to
 * try (a "refs/…" value as given; else refs/heads/R, then refs/tags/R), and
 * whether it may also be a commit id (4 to 40 hex digits), tried last.
 * Fills up to max names of size len each; returns how many. */
size_t sfs_git_ref_candidates(const char *ref, char (*names)[256], size_t max, bool *maybe_sha);

/* "clone 37% 1021/2741 objects 3.1 MiB": phase, percent of done/total, and a
 * byte count when bytes > 0 (B, KiB, MiB, GiB with one decimal). */
void sfs_git_progress_text(char *buf, size_t len, const char *phase, size_t done, size_t total,
			   uint64_t bytes);

/* Reports progress text (as above); may be called often. */
typedef void (*sfs_git_progress_fn)(void *ctx, const char *text);

/* What the last mirror update did (for logs and tests). */
struct sfs_git_fetch_stats {
	bool created;		   /* the mirror was new: a full fetch */
	unsigned received_objects; /* objects fetched this time */
	uint64_t received_bytes;
};

/*
 * Brings the mirror of url up to date under statedir/git/mirrors and returns
 * its path (*mirror, malloc'd).  A new mirror is fetched into a temporary
 * directory and renamed into place only when complete, so a failure leaves
 * nothing; updates of one mirror are serialised by a lock file.
 * Errors: -EINVAL bad URL, -ENOENT no repository there, -EIO unreachable or
 * a transport failure.
 */
int sfs_git_mirror_update(const char *statedir, const char *url, sfs_git_progress_fn progress,
			  void *ctx, char **mirror, struct sfs_git_fetch_stats *stats,
			  struct sfs_err *err);

/* Resolves ref (NULL: the source's default branch) in the mirror to a
 * commit id (hex, 41 bytes) and tells whether it named a branch (then
 * *branch gets its short name, malloc'd; else NULL).  -ENOENT when missing. */
int sfs_git_mirror_resolve(const char *mirror, const char *ref, char oid[41], char **branch,
			   struct sfs_err *err);

/* Clones the mirror into dest (an existing empty directory): remote origin is
 * url, the branch (or a detached HEAD at oid) is checked out.  On failure dest
 * may hold a partial tree: the caller removes it. */
int sfs_git_checkout(const char *mirror, const char *url, const char *oid, const char *branch,
		     const char *dest, sfs_git_progress_fn progress, void *ctx,
		     struct sfs_err *err);

#endif
