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
};

/* git_libgit2_init, once per process. */
int gk_init(struct sfs_err *err);
/* Fills err from libgit2's last error: -ENOENT for "no repository there",
 * -EACCES for refused credentials, else -EIO.  Returns the code. */
int gk_error(struct sfs_err *err, int rc, const char *what);
void gk_report(struct gk_progress *p, const char *phase, size_t done, size_t total, uint64_t bytes);
void gk_callbacks(git_remote_callbacks *cb, struct gk_progress *p);

#endif
