/*
 * Git sources and setup commands for new sandboxes (SPEC §9).  The git work
 * itself is the git kit's (providers/git: mirrors, refs, checkout, no FUSE);
 * this file decides where the tree goes and drives setup through the ordinary
 * run machinery, so setup runs are runs/1…k with journals like any other.
 */
#include "source.h"
#include "ctl.h"
#include "tree.h"
#include "wsnap.h"

#include "../journal/journal.h"
#include "../providers/git/git.h"
#include "../providers/http/http.h"
#include "../providers/redact.h"
#include "../providers/tar.h"
#include "../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const source_keys[] = {"source", "ref", "depth", "setup", NULL};

bool source_key(const char *key)
{
	for (const char *const *k = source_keys; *k; k++)
		if (strcmp(key, *k) == 0)
			return true;
	return false;
}

/* A password written into the URL (https://user:pw@host/…) is a credential:
 * hidden everywhere from now on. */
static void redact_url_password(const char *url)
{
	const char *sep = strstr(url, "://");
	if (!sep)
		return;
	const char *auth = sep + 3, *slash = strchr(auth, '/');
	const char *at = memchr(auth, '@', slash ? (size_t)(slash - auth) : strlen(auth));
	const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	if (!colon || colon + 1 >= at)
		return;
	char *pw = strndup(colon + 1, (size_t)(at - colon - 1)); /* whole, however long */
	if (pw)
		sfs_redact_add_secret(pw);
	free(pw);
}

static bool host_workspace(const struct sfs_provider *p)
{
	return p->host_fs && p->ops->workspace_root_fd;
}

int source_check(const struct sfs_provider *p, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *src = sfs_kv_get(opts, "source"), *ref = sfs_kv_get(opts, "ref");
	const char *depth = sfs_kv_get(opts, "depth");
	if (!src && (ref || depth))
		return sfs_errf(err, -EINVAL, "new: %s= needs source=", ref ? "ref" : "depth");
	if (src && sfs_kv_get(opts, "base"))
		return sfs_errf(err, -EINVAL, "new: source= and base= exclude each other");
	for (size_t i = 0; i < opts->n; i++) {
		if (strcmp(opts->v[i].key, "setup") != 0)
			continue;
		const char *c = opts->v[i].val;
		while (*c == ' ' || *c == '\t')
			c++;
		if (!*c)
			return sfs_errf(err, -EINVAL, "new: setup= needs a command");
		int r = sfs_provider_require(p, SFS_CAP_EXEC, err);
		if (r)
			return r;
	}
	if (!src)
		return 0;
	redact_url_password(src);
	/* the token is hidden from the first source= on, whatever fails next */
	(void)sfs_http_credential(SFS_GIT_TOKEN_ENV, "git.token");
	(void)sfs_http_credential(SFS_GIT_SSH_PASSPHRASE_ENV, "git.ssh_passphrase");
	int r = sfs_git_url_classify(src, err);
	if (r < 0)
		return r;
	if (ref && (r = sfs_git_ref_check(ref, err)))
		return r;
	long v;
	if (depth && ctl_parse_int(depth, 1, 1L << 30, &v) < 0)
		return sfs_errf(err, -EINVAL, "new: depth=%s: not a whole number from 1", depth);
	if ((r = sfs_provider_require(p, SFS_CAP_FS, err)))
		return r;
	/* the tree is checked out on this host: straight into a host workspace,
	 * else into a temporary tree that goes up in one bulk transfer */
	if (!host_workspace(p) && !p->ops->fs_put_tree)
		return sfs_errf(err, -EOPNOTSUPP,
				"new: source= is not supported on provider %s (it has no bulk "
				"upload)",
				p->name);
	return 0;
}

static void report(void *ctx, const char *text)
{
	sfs_sb_set_progress(ctx, text);
}

/* 1 when dir has entries, 0 when empty, or -errno. */
static int dir_has_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	int any = 0;
	while (!any && (e = readdir(d)))
		any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return any;
}

/* Empties dir (which was empty before the checkout): nothing half-made. */
static void clear_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char path[4200];
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (sfs_pathf(path, sizeof(path), "%s/%s", dir, e->d_name) == 0)
			sfs_rm_rf(path);
	}
	closedir(d);
}

/* Checks the tree out in a temporary directory of the state dir, makes one
 * tar of it and hands that to the provider's bulk upload; both go after. */
static int upload_tree(struct sfs_sandbox *sb, const char *mirror, const char *src, const char *oid,
		       const char *branch, struct sfs_err *err)
{
	char tree[4200], tarp[4200];
	if (sfs_pathf(tree, sizeof(tree), "%s/source-tree", sb->statedir) < 0 ||
	    sfs_pathf(tarp, sizeof(tarp), "%s/source.tar", sb->statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "source: %s: path too long", sb->statedir);
	sfs_rm_rf(tree);
	int r = sfs_mkdir_p(tree, 0700);
	if (r)
		return sfs_errf(err, r, "new: source=: %s: %s", tree, strerror(-r));
	r = sfs_git_checkout(mirror, src, oid, branch, tree, report, sb, err);
	int fd = -1;
	if (!r && (fd = open(tarp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		r = sfs_errf(err, -errno, "new: source=: %s: %s", tarp, strerror(errno));
	if (!r)
		r = sfs_tar_write_dir(tree, fd, err);
	struct stat st;
	if (!r && (fstat(fd, &st) < 0 || lseek(fd, 0, SEEK_SET) < 0))
		r = sfs_errf(err, -errno, "new: source=: %s: %s", tarp, strerror(errno));
	if (!r) {
		char text[64];
		snprintf(text, sizeof(text), "upload %.1f MiB", (double)st.st_size / 1048576);
		sfs_sb_set_progress(sb, text);
		r = sb->provider->ops->fs_put_tree(sb, fd, st.st_size, err);
	}
	/* a remote workspace's snapshots/base from the checkout itself, not
	 * fetched back (one on this host, docker's, is taken from the
	 * workspace by tree_create) */
	bool base = !r && wsnap_possible(sb) && !wsnap_on_host(sb);
	int tfd = base ? open(tree, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	if (base && tfd < 0)
		r = sfs_errf(err, -errno, "new: source=: %s: %s", tree, strerror(errno));
	if (tfd >= 0) {
		r = wsnap_take_tree(sb, "base", tfd, err);
		close(tfd);
	}
	sfs_rm_rf(tree);
	if (fd >= 0)
		close(fd);
	unlink(tarp);
	return r;
}

int source_populate(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *src = sfs_kv_get(opts, "source"), *ref = sfs_kv_get(opts, "ref");
	if (!src)
		return 0;
	bool local = host_workspace(sb->provider);
	const char *dest = sb->workspace; /* the op holder reads it bare */
	if (!dest)
		return sfs_errf(err, -EIO, "new: source=: the sandbox has no workspace");
	int r = local ? dir_has_entries(dest) : 0;
	if (r)
		return r < 0
			   ? sfs_errf(err, r, "new: source=: workspace %s: %s", dest, strerror(-r))
			   : sfs_errf(err, -EEXIST, "new: source=: workspace %s is not empty",
				      dest);
	sfs_sb_set_progress(sb, "clone 0% 0/0 objects");
	char *mirror = NULL, *branch = NULL, oid[41];
	struct sfs_git_fetch_stats st = {0};
	r = sfs_git_mirror_update(sfs_state_dir, src, report, sb, &mirror, &st, err);
	if (!r) {
		sfs_log(SFS_LOG_INFO, "%s: source %s: %s, %u objects fetched (%llu bytes)",
			sb->name, src, st.created ? "new mirror" : "mirror updated",
			st.received_objects, (unsigned long long)st.received_bytes);
		r = sfs_git_mirror_resolve(mirror, ref, oid, &branch, err);
	}
	if (!r && local) {
		r = sfs_git_checkout(mirror, src, oid, branch, dest, report, sb, err);
		if (r)
			clear_dir(dest);
	} else if (!r) {
		r = upload_tree(sb, mirror, src, oid, branch, err);
	}
	free(mirror);
	free(branch);
	sfs_sb_set_progress(sb, NULL);
	return r;
}

int source_setup(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	int total = 0, k = 0;
	for (size_t i = 0; i < opts->n; i++)
		total += strcmp(opts->v[i].key, "setup") == 0;
	for (size_t i = 0; i < opts->n; i++) {
		if (strcmp(opts->v[i].key, "setup") != 0)
			continue;
		const char *cmd = opts->v[i].val;
		k++;
		char text[200];
		snprintf(text, sizeof(text), "setup %d/%d", k, total);
		/* progress changes under op_mutex (provider.h's owner rule) */
		pthread_mutex_lock(&sb->op_mutex);
		sfs_sb_set_progress(sb, text);
		pthread_mutex_unlock(&sb->op_mutex);
		int n = 0;
		int r = tree_exec_setup(sb, cmd, &n, err);
		if (r)
			return r;
		struct sfs_run *run = tree_run(sb, n);
		if (run)
			journal_wait_end(run, -1, 0);
		char st[64] = "lost";
		if (run)
			journal_status_text(run, st, sizeof(st));
		/* no command text: this goes to status, which others may read,
		 * while runs/N/cmd keeps runs_mode */
		if (strcmp(st, "exited 0") != 0)
			return sfs_errf(
			    err, -EIO,
			    "setup %d/%d (run %d) %s; see runs/%d/cmd and runs/%d/journal", k,
			    total, n, st, n, n);
	}
	if (total) {
		pthread_mutex_lock(&sb->op_mutex);
		sfs_sb_set_progress(sb, NULL);
		pthread_mutex_unlock(&sb->op_mutex);
	}
	return 0;
}
