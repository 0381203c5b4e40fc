/*
 * A workspace cloned from a mirror: a normal non-bare repository whose origin
 * is the source URL (so `git fetch` inside the sandbox goes to the source, not
 * to the host's cache), with the branch or a detached HEAD checked out.
 */
#include "git.h"
#include "internal.h"
#include "../util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int copy_file(const char *from, const char *to, mode_t mode, struct sfs_err *err);

/* Hard-links (or copies, across filesystems) every file under from into to,
 * making directories: git never changes an object or pack file in place, so
 * sharing them with the mirror is safe (what `git clone --local` does). */
static int link_tree(const char *from, const char *to, struct sfs_err *err)
{
	DIR *d = opendir(from);
	if (!d)
		return sfs_errf(err, -errno, "source: %s: %s", from, strerror(errno));
	if (mkdir(to, 0755) < 0 && errno != EEXIST) {
		int r = sfs_errf(err, -errno, "source: %s: %s", to, strerror(errno));
		closedir(d);
		return r;
	}
	int r = 0;
	struct dirent *e;
	char a[4200], b[4200];
	while (!r && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		struct stat st;
		if (sfs_pathf(a, sizeof(a), "%s/%s", from, e->d_name) < 0 ||
		    sfs_pathf(b, sizeof(b), "%s/%s", to, e->d_name) < 0)
			r = sfs_errf(err, -ENAMETOOLONG, "source: %s/%s: path too long", from,
				     e->d_name);
		else if (lstat(a, &st) < 0)
			r = sfs_errf(err, -errno, "source: %s: %s", a, strerror(errno));
		else if (S_ISDIR(st.st_mode))
			r = link_tree(a, b, err);
		else if (S_ISREG(st.st_mode) && link(a, b) < 0 && errno != EEXIST)
			r = copy_file(a, b, st.st_mode & 0777, err);
	}
	closedir(d);
	return r;
}

static int copy_file(const char *from, const char *to, mode_t mode, struct sfs_err *err)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return sfs_errf(err, -errno, "source: %s: %s", from, strerror(errno));
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	int r = 0;
	if (out < 0)
		r = sfs_errf(err, -errno, "source: %s: %s", to, strerror(errno));
	char buf[65536];
	ssize_t n;
	while (!r && (n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write(out, buf, (size_t)n) != n)
			r = sfs_errf(err, -(errno ? errno : EIO), "source: copy %s: %s", to,
				     strerror(errno ? errno : EIO));
	}
	if (out >= 0 && close(out) < 0 && !r)
		r = sfs_errf(err, -errno, "source: %s: %s", to, strerror(errno));
	close(in);
	return r;
}

struct ref_copy {
	git_repository *mirror, *dest;
	int rc;
};

/* The mirror's branches become origin's remote-tracking branches; tags stay tags. */
static int copy_ref(const char *name, void *payload)
{
	struct ref_copy *c = payload;
	char to[600];
	if (strncmp(name, "refs/heads/", 11) == 0)
		c->rc = sfs_pathf(to, sizeof(to), "refs/remotes/origin/%s", name + 11);
	else if (strncmp(name, "refs/tags/", 10) == 0)
		c->rc = sfs_pathf(to, sizeof(to), "%s", name);
	else
		return 0;
	if (c->rc < 0)
		return c->rc = GIT_EINVALIDSPEC; /* never a ref of a cut name */
	git_oid id;
	git_reference *ref = NULL;
	if ((c->rc = git_reference_name_to_id(&id, c->mirror, name)) < 0 ||
	    (c->rc = git_reference_create(&ref, c->dest, to, &id, 1, "clone")) < 0)
		return c->rc;
	git_reference_free(ref);
	return 0;
}

static void checkout_cb(const char *path, size_t done, size_t total, void *payload)
{
	gk_report(payload, "checkout", done, total, 0);
}

int sfs_git_checkout(const char *mirror, const char *url, const char *oid, const char *branch,
		     const char *dest, sfs_git_progress_fn progress, void *ctx, struct sfs_err *err)
{
	int r = gk_init(err);
	if (r)
		return r;
	struct gk_progress p = {.fn = progress, .ctx = ctx, .fetch_phase = "copy"};
	git_repository *repo = NULL;
	git_config *cfg = NULL;
	git_repository *msrc = NULL;
	git_commit *commit = NULL;
	git_reference *local = NULL;
	int rc = git_repository_init(&repo, dest, 0);
	if (rc < 0)
		return gk_error(err, rc, "source: init workspace repository");
	/* origin written as config keys, not through git_remote_create (see
	 * mirror.c on libgit2 1.5's regex leak) */
	if ((rc = git_repository_config(&cfg, repo)) < 0 ||
	    (rc = git_config_set_string(cfg, "remote.origin.url", url)) < 0 ||
	    (rc = git_config_set_string(cfg, "remote.origin.fetch",
					"+refs/heads/*:refs/remotes/origin/*")) < 0) {
		r = gk_error(err, rc, "source: origin");
		goto out;
	}
	/* objects come from the mirror (linked, not repacked), under origin's names */
	char from[4200], to[4200];
	if (sfs_pathf(from, sizeof(from), "%s/objects", mirror) < 0 ||
	    sfs_pathf(to, sizeof(to), "%s/.git/objects", dest) < 0) {
		r = sfs_errf(err, -ENAMETOOLONG, "source: %s: path too long", dest);
		goto out;
	}
	gk_report(&p, "copy", 0, 1, 0);
	if ((r = link_tree(from, to, err)))
		goto out;
	if ((rc = git_repository_open_bare(&msrc, mirror)) < 0) {
		r = gk_error(err, rc, "source: mirror");
		goto out;
	}
	struct ref_copy rcopy = {msrc, repo, 0};
	if ((rc = git_reference_foreach_name(msrc, copy_ref, &rcopy)) < 0) {
		r = gk_error(err, rcopy.rc < 0 ? rcopy.rc : rc, "source: refs");
		goto out;
	}
	gk_report(&p, "copy", 1, 1, 0);
	git_oid id;
	if (git_oid_fromstr(&id, oid) < 0 || (rc = git_commit_lookup(&commit, repo, &id)) < 0) {
		r = gk_error(err, rc < 0 ? rc : -1, "source: commit");
		goto out;
	}
	if (branch) {
		char head[300];
		char key[400];
		if (sfs_pathf(head, sizeof(head), "refs/heads/%s", branch) < 0 ||
		    sfs_pathf(key, sizeof(key), "branch.%s.merge", branch) < 0) {
			r = sfs_errf(err, -ENAMETOOLONG, "source: branch %.64s...: name too long",
				     branch);
			goto out;
		}
		(void)!sfs_pathf(key, sizeof(key), "branch.%s.remote", branch); /* shorter: fits */
		if ((rc = git_branch_create(&local, repo, branch, commit, 0)) < 0 ||
		    (rc = git_config_set_string(cfg, key, "origin")) < 0 ||
		    ((void)!sfs_pathf(key, sizeof(key), "branch.%s.merge", branch),
		     rc = git_config_set_string(cfg, key, head)) < 0 ||
		    (rc = git_repository_set_head(repo, head)) < 0) {
			r = gk_error(err, rc, "source: branch");
			goto out;
		}
	} else if ((rc = git_repository_set_head_detached(repo, &id)) < 0) {
		r = gk_error(err, rc, "source: HEAD");
		goto out;
	}
	git_checkout_options co;
	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	co.checkout_strategy = GIT_CHECKOUT_FORCE;
	co.progress_cb = checkout_cb;
	co.progress_payload = &p;
	if ((rc = git_checkout_head(repo, &co)) < 0)
		r = gk_error(err, rc, "source: checkout");
out:
	git_reference_free(local);
	git_commit_free(commit);
	git_repository_free(msrc);
	git_config_free(cfg);
	git_repository_free(repo);
	return r;
}
