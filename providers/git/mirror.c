/*
 * Bare mirrors of git sources, one per URL, under STATE/git/mirrors.
 *
 * A mirror is named by a hash of its URL and records the URL as its origin,
 * so a (vanishingly unlikely) hash collision is detected, not served.  A new
 * mirror is fetched into a temporary directory and renamed into place once
 * complete; updates take an flock on NAME.lock so two `new`s from the same
 * source fetch one after the other, the second finding little to fetch.
 */
#include "git.h"
#include "internal.h"

#include "../http/http.h"
#include "../util.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;

static void init_libgit2(void)
{
	init_result = git_libgit2_init() < 0 ? -EIO : 0;
	if (!init_result)
		gk_ca_init();
}

int gk_init(struct sfs_err *err)
{
	pthread_once(&init_once, init_libgit2);
	if (init_result)
		return sfs_errf(err, init_result, "libgit2 could not start");
	return 0;
}

int gk_error(struct sfs_err *err, int rc, const char *what)
{
	const git_error *e = git_error_last();
	const char *msg = e && e->message ? e->message : "unknown error";
	int code = -EIO;
	if (rc == GIT_ENOTFOUND || (e && strstr(msg, "could not find repository")))
		code = -ENOENT;
	else if (rc == GIT_EAUTH)
		code = -EACCES;
	/* the message passes the redactor on its way to status and logs */
	return sfs_errf(err, code, "%s: %s", what, msg);
}

void gk_report(struct gk_progress *p, const char *phase, size_t done, size_t total, uint64_t bytes)
{
	if (!p->fn)
		return;
	unsigned pct = total ? (unsigned)(done * 100 / total) : 0;
	/* one report per percent and phase: status readers see it move,
	 * the records lock is not taken per object */
	if (p->phase == phase && p->pct == pct && done != total)
		return;
	p->phase = phase;
	p->pct = pct;
	char text[160];
	sfs_git_progress_text(text, sizeof(text), phase, done, total, bytes);
	p->fn(p->ctx, text);
}

static int transfer_cb(const git_indexer_progress *st, void *payload)
{
	struct gk_progress *p = payload;
	if (st->received_objects < st->total_objects || st->total_deltas == 0)
		gk_report(p, p->fetch_phase, st->received_objects, st->total_objects,
			  st->received_bytes);
	else
		gk_report(p, "resolve", st->indexed_deltas, st->total_deltas, 0);
	return 0;
}

/* A local source packs its objects for us first (libgit2's packbuilder),
 * which is most of a local clone's time: shown as clone progress too. */
static int pack_cb(int stage, uint32_t current, uint32_t total, void *payload)
{
	struct gk_progress *p = payload;
	if (stage == GIT_PACKBUILDER_DELTAFICATION)
		gk_report(p, p->fetch_phase, current, total, 0);
	return 0;
}

void gk_callbacks(git_remote_callbacks *cb, struct gk_progress *p)
{
	cb->transfer_progress = transfer_cb;
	cb->pack_progress = pack_cb;
	cb->credentials = gk_cred_cb;
	cb->certificate_check = gk_cert_cb;
	cb->payload = p;
}

/* FNV-1a, 64 bits: a stable directory name for a URL. */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

/* The URL libgit2 is given: a host path is used as it is. */
static int check_source(const char *url, struct sfs_err *err)
{
	int kind = sfs_git_url_classify(url, err);
	if (kind < 0)
		return kind;
	if (kind == SFS_GIT_URL_HTTPS) {
		int r = gk_ca_check(err);
		if (r)
			return r;
	}
	if (kind == SFS_GIT_URL_PATH || kind == SFS_GIT_URL_FILE) {
		const char *path = kind == SFS_GIT_URL_FILE ? url + strlen("file://") : url;
		struct stat st;
		if (stat(path, &st) < 0)
			return sfs_errf(err, -errno, "source: %s: %s", url, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return sfs_errf(err, -ENOENT, "source: %s: not a git repository", url);
	}
	return 0;
}

/*
 * libgit2 1.5 leaks a PCRE2 match block (~20 KiB) on every regex that does
 * not match (fixed upstream by libgit2 PR #6382), and named remotes,
 * insteadOf rewriting and branch upstreams all match config keys by regex:
 * about 2 MB per clone in a daemon that lives for weeks.  So the mirror has
 * no named remote: its URL is the config key sandboxfs.url, and each fetch
 * is an anonymous remote with explicit refspecs and no insteadOf lookup.
 */
static int fetch_into(git_repository *repo, const char *url, bool created, struct gk_progress *p,
		      struct sfs_git_fetch_stats *stats, struct sfs_err *err)
{
	git_remote *remote = NULL;
	git_config *cfg = NULL;
	git_buf head = {0}, saved = {0};
	int r = 0;
	int rc = git_repository_config(&cfg, repo);
	if (rc < 0)
		return gk_error(err, rc, "source: mirror config");
	if (created)
		rc = git_config_set_string(cfg, "sandboxfs.url", url);
	else if ((rc = git_config_get_string_buf(&saved, cfg, "sandboxfs.url")) == 0 &&
		 strcmp(saved.ptr, url) != 0) {
		r = sfs_errf(err, -EIO, "source: mirror %s belongs to another URL",
			     git_repository_path(repo));
		goto out;
	}
	if (rc < 0) {
		r = gk_error(err, rc, "source: mirror config");
		goto out;
	}
	git_remote_create_options ro;
	git_remote_create_options_init(&ro, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	ro.repository = repo;
	ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	if ((rc = git_remote_create_with_opts(&remote, url, &ro)) < 0) {
		r = gk_error(err, rc, "source: remote");
		goto out;
	}
	git_remote_callbacks cb;
	git_remote_init_callbacks(&cb, GIT_REMOTE_CALLBACKS_VERSION);
	gk_callbacks(&cb, p);
	p->fetch_phase = "clone";
	rc = git_remote_connect(remote, GIT_DIRECTION_FETCH, &cb, NULL, NULL);
	if (rc < 0) {
		char what[600];
		snprintf(what, sizeof(what), "source: %s", url); /* message: may be cut */
		r = gk_error(err, rc, what);
		if (r == -ENOENT && err) {
			char why[SFS_ERR_MAX];
			snprintf(why, sizeof(why), "%s", err->msg); /* message: may be cut */
			sfs_errf(err, r, "%s (not a git repository)", why);
		}
		goto out;
	}
	/* the source's HEAD names its default branch: the mirror's HEAD follows it */
	int have_head = git_remote_default_branch(&head, remote) == 0;
	char *specs[] = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
	git_strarray refspecs = {specs, 2};
	git_fetch_options fo;
	git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
	fo.callbacks = cb;
	fo.prune = GIT_FETCH_PRUNE;
	fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE; /* the refspecs have them */
	rc = git_remote_download(remote, &refspecs, &fo);
	if (rc == 0)
		rc = git_remote_update_tips(remote, &cb, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE, NULL);
	if (rc == 0)
		rc = git_remote_prune(remote, &cb);
	if (rc < 0) {
		r = gk_error(err, rc, "source: fetch");
		goto out;
	}
	const git_indexer_progress *st = git_remote_stats(remote);
	if (stats) {
		stats->created = created;
		stats->received_objects = st->received_objects;
		stats->received_bytes = st->received_bytes;
	}
	if (have_head && (rc = git_repository_set_head(repo, head.ptr)) < 0) {
		r = gk_error(err, rc, "source: mirror HEAD");
		goto out;
	}
	if (!have_head && created) {
		r = sfs_errf(err, -ENOENT, "source: %s has no branches (an empty repository?)",
			     url);
		goto out;
	}
out:
	if (remote)
		git_remote_disconnect(remote);
	git_buf_dispose(&head);
	git_buf_dispose(&saved);
	git_remote_free(remote);
	git_config_free(cfg);
	return r;
}

/* An flock on path, made if missing.  A lock file is removed by a holder
 * whose new mirror failed (nothing left behind), so after locking, the
 * path must still be the file locked; else lock again.  fd or -errno. */
static int lock_file(const char *path, struct sfs_err *err)
{
	for (;;) {
		int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return sfs_errf(err, -errno, "source: %s: %s", path, strerror(errno));
		struct stat a, b;
		if (flock(fd, LOCK_EX) < 0 || fstat(fd, &a) < 0) {
			int r = sfs_errf(err, -errno, "source: lock %s: %s", path, strerror(errno));
			close(fd);
			return r;
		}
		if (stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
}

int sfs_git_mirror_update(const char *statedir, const char *url, sfs_git_progress_fn progress,
			  void *ctx, char **mirror, struct sfs_git_fetch_stats *stats,
			  struct sfs_err *err)
{
	*mirror = NULL;
	int r = gk_init(err);
	if (r || (r = check_source(url, err)))
		return r;
	char dir[4096], path[4200], lock[4200], tmp[4200];
	if (sfs_pathf(dir, sizeof(dir), "%s/git/mirrors", statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "source: %s: path too long", statedir);
	if ((r = sfs_mkdir_p(dir, 0700)))
		return sfs_errf(err, r, "source: %s: %s", dir, strerror(-r));
	uint64_t h = fnv1a(url);
	/* dir fits 4096 bytes, these 4200: never cut */
	snprintf(path, sizeof(path), "%s/%016llx.git", dir,
		 (unsigned long long)h); /* may be cut: never */
	snprintf(lock, sizeof(lock), "%s/%016llx.lock", dir,
		 (unsigned long long)h); /* may be cut: never */
	int lfd = lock_file(lock, err);
	if (lfd < 0)
		return lfd;
	struct gk_progress p = {.fn = progress, .ctx = ctx, .url = url};
	git_repository *repo = NULL;
	bool created = access(path, F_OK) != 0;
	const char *at = path;
	if (created) {
		snprintf(tmp, sizeof(tmp), "%s/.tmp-%016llx-XXXXXX", dir,
			 (unsigned long long)h); /* may be cut: never */
		if (!mkdtemp(tmp)) {
			r = sfs_errf(err, -errno, "source: %s: %s", tmp, strerror(errno));
			goto out;
		}
		at = tmp;
	}
	int rc = created ? git_repository_init(&repo, at, 1) : git_repository_open_bare(&repo, at);
	if (rc < 0) {
		r = gk_error(err, rc, "source: mirror");
		goto out;
	}
	r = fetch_into(repo, url, created, &p, stats, err);
	git_repository_free(repo);
	if (!r && created && rename(tmp, path) < 0)
		r = sfs_errf(err, -errno, "source: mirror %s: %s", path, strerror(errno));
	if (!r && !(*mirror = strdup(path)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
out:
	if (created && at == tmp && (r || access(tmp, F_OK) == 0))
		sfs_rm_rf(tmp); /* a half-fetched mirror is never kept */
	if (created && r)
		unlink(lock); /* still locked: a waiter sees the inode change and retries */
	flock(lfd, LOCK_UN);
	close(lfd);
	return r;
}

int sfs_git_mirror_resolve(const char *mirror, const char *ref, char oid[41], char **branch,
			   struct sfs_err *err)
{
	*branch = NULL;
	int r = gk_init(err);
	if (r)
		return r;
	git_repository *repo = NULL;
	int rc = git_repository_open_bare(&repo, mirror);
	if (rc < 0)
		return gk_error(err, rc, "source: mirror");
	git_object *commit = NULL;
	git_reference *found = NULL;
	if (!ref) {
		rc = git_repository_head(&found, repo);
		if (rc < 0)
			r = sfs_errf(err, -ENOENT, "source has no default branch");
	} else {
		char names[2][256];
		bool maybe_sha;
		size_t n = sfs_git_ref_candidates(ref, names, 2, &maybe_sha);
		for (size_t i = 0; i < n && !found; i++)
			if (git_reference_lookup(&found, repo, names[i]) < 0)
				found = NULL;
		if (!found && maybe_sha) {
			git_oid id;
			if (git_oid_fromstrn(&id, ref, strlen(ref)) == 0 &&
			    git_object_lookup_prefix(&commit, repo, &id, strlen(ref),
						     GIT_OBJECT_ANY) == 0) {
				git_object *peeled = NULL;
				rc = git_object_peel(&peeled, commit, GIT_OBJECT_COMMIT);
				git_object_free(commit);
				commit = rc < 0 ? NULL : peeled;
			}
		}
		if (!found && !commit)
			r = sfs_errf(
			    err, -ENOENT,
			    "ref \"%s\": no branch, tag or commit of that name in the source", ref);
	}
	if (!r && found) {
		rc = git_reference_peel(&commit, found, GIT_OBJECT_COMMIT);
		if (rc < 0)
			r = gk_error(err, rc, "ref");
		else if (git_reference_is_branch(found) &&
			 !(*branch = strdup(git_reference_shorthand(found))))
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (!r)
		git_oid_tostr(oid, 41, git_object_id(commit));
	git_object_free(commit);
	git_reference_free(found);
	git_repository_free(repo);
	if (r) {
		free(*branch);
		*branch = NULL;
	}
	return r;
}
