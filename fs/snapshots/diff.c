/*
 * snapshots/ID/diff: the paths where the live workspace differs from the
 * snapshot (compare.c, or a copy-on-write base's own list) become two small
 * trees holding just those paths, one from the snapshot's manifest (or the base
 * directory), one from the workspace (blobs stored only for those files),
 * and libgit2 diffs them in git's own patch format: mode changes, new and
 * deleted files, symlinks, binary files as git binary patches.  What those trees need
 * that the store lacks (the workspace's changed blobs, the trees) is
 * written to an object store in memory (st_scratch), never to the disk:
 * compressing and writing loose objects for a read was a sixth of a diff,
 * and the store grew with every diff until the next gc.
 */
#include "internal.h"

#include "../../providers/untrusted/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int print(git_repository *repo, git_tree *a, git_tree *b, struct sfs_buf *out,
		 struct sfs_err *err)
{
	git_diff_options o;
	git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
	/* a changed binary file as `git diff --binary` writes it (full index
	 * line, literal or delta): `git apply` takes the whole patch, where
	 * "Binary files … differ" made it refuse all of it */
	o.flags |= GIT_DIFF_SHOW_BINARY;
	git_diff *d = NULL;
	git_buf text = GIT_BUF_INIT;
	int rc = git_diff_tree_to_tree(&d, repo, a, b, &o);
	if (rc >= 0)
		rc = git_diff_to_buf(&text, d, GIT_DIFF_FORMAT_PATCH);
	int r = rc < 0 ? st_error(err, rc, "diff") : 0;
	if (!r && text.size && sfs_buf_add(out, text.ptr, text.size))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	git_buf_dispose(&text);
	git_diff_free(d);
	return r;
}

/* Opens the directory holding path's last component beneath rootfd
 * (providers/untrusted: no symlink followed); *leaf points into path.
 * -ENOENT, -ELOOP, -ENOTDIR when it is not there as a directory. */
static int open_parent(int rootfd, const char *path, const char **leaf)
{
	const char *slash = strrchr(path, '/');
	*leaf = slash ? slash + 1 : path;
	if (!slash)
		return untrusted_open(rootfd, "", O_PATH | O_DIRECTORY);
	char *dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	int fd = untrusted_open(rootfd, dir, O_PATH | O_DIRECTORY);
	free(dir);
	return fd;
}

/* A tree holding only the listed paths as they are under rootfd. */
static int sparse_tree(struct rec *r, int rootfd, const char *const *paths, size_t n,
		       git_tree *empty, git_oid *out)
{
	git_tree_update *u = calloc(n ? n : 1, sizeof(*u));
	if (!u)
		return sfs_errf(r->err, -ENOMEM, "out of memory");
	size_t k = 0;
	int ret = 0;
	for (size_t i = 0; !ret && i < n; i++) {
		const char *leaf, *path = paths[i];
		while (*path == '/')
			path++;
		int dfd = open_parent(rootfd, path, &leaf);
		if (dfd < 0)
			continue; /* not there on this side */
		struct stat st;
		git_filemode_t fm = 0;
		if (*leaf && !rec_ignored(leaf) &&
		    fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0)
			fm = rec_filemode(&st);
		if (fm == GIT_FILEMODE_TREE) {
			int fd = untrusted_open_dir(dfd, leaf);
			ret = fd < 0 ? 0 : rec_tree(r, fd, path, &u[k].id);
			if (fd >= 0)
				close(fd);
			else
				fm = 0;
		} else if (fm) {
			ret = rec_blob(r, dfd, leaf, path, &st, &u[k].id);
		}
		close(dfd);
		if (!ret && fm) {
			u[k].action = GIT_TREE_UPDATE_UPSERT;
			u[k].filemode = fm;
			u[k].path = path;
			k++;
		}
	}
	int rc = ret ? 0 : git_tree_create_updated(out, r->repo, empty, k, u);
	if (rc < 0)
		ret = st_error(r->err, rc, "diff: a tree of the changed paths");
	free(u);
	return ret;
}

int snap_diff_paths(int oldfd, int newfd, const char *const *paths, size_t n, struct sfs_buf *out,
		    struct sfs_err *err)
{
	struct rec r = {.err = err};
	st_writers_shared(); /* reads the store while no sweep runs */
	int ret = st_open(&r.repo, err);
	int rc = ret ? 0 : git_repository_odb(&r.odb, r.repo);
	if (rc < 0)
		ret = st_error(err, rc, "diff: the object store");
	if (!ret)
		ret = st_scratch(r.odb, err);
	git_treebuilder *eb = NULL;
	git_oid eid, aid, bid;
	git_tree *empty = NULL, *a = NULL, *b = NULL;
	if (!ret && ((rc = git_treebuilder_new(&eb, r.repo, NULL)) < 0 ||
		     (rc = git_treebuilder_write(&eid, eb)) < 0 ||
		     (rc = git_tree_lookup(&empty, r.repo, &eid)) < 0))
		ret = st_error(err, rc, "diff: the empty tree");
	if (!ret)
		ret = sparse_tree(&r, oldfd, paths, n, empty, &aid);
	if (!ret)
		ret = sparse_tree(&r, newfd, paths, n, empty, &bid);
	if (!ret && ((rc = git_tree_lookup(&a, r.repo, &aid)) < 0 ||
		     (rc = git_tree_lookup(&b, r.repo, &bid)) < 0))
		ret = st_error(err, rc, "diff: the trees");
	if (!ret)
		ret = print(r.repo, a, b, out, err);
	git_tree_free(a);
	git_tree_free(b);
	git_tree_free(empty);
	git_treebuilder_free(eb);
	sfs_buf_free(&r.modes);
	git_odb_free(r.odb);
	git_repository_free(r.repo);
	st_writers_unlock();
	return ret;
}

static int cmp_paths(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A tree holding only the listed paths as they are in the snapshot. */
static int sparse_of_snapshot(struct rec *r, const struct manifest *m, const struct paths *p,
			      git_tree *empty, git_oid *out)
{
	git_tree_update *u = calloc(p->n ? p->n : 1, sizeof(*u));
	if (!u)
		return sfs_errf(r->err, -ENOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct mf_ent *e = mf_bypath(m, p->v[i]);
		if (!e)
			continue; /* not in the snapshot: added since */
		u[k].action = GIT_TREE_UPDATE_UPSERT;
		u[k].filemode = e->mode;
		git_oid_cpy(&u[k].id, &e->oid);
		u[k].path = p->v[i];
		k++;
	}
	int rc = git_tree_create_updated(out, r->repo, empty, k, u);
	free(u);
	return rc < 0 ? st_error(r->err, rc, "diff: a tree of the changed paths") : 0;
}

int snap_diff(const char *commit, int rootfd, const char *cache, struct sfs_buf *out,
	      struct sfs_err *err)
{
	struct rec r = {.err = err};
	struct scache sc;
	st_writers_shared(); /* its stat cache names blobs of the store */
	scache_open(&sc, cache);
	struct paths changed = {0};
	struct manifest *m = NULL;
	git_oid cid, aid, bid, eid;
	int rc, ret = 0;
	if (git_oid_fromstr(&cid, commit) < 0)
		ret = sfs_errf(err, -ENOENT, "diff: commit %s is not in the store", commit);
	/* nothing of the store is opened unless the manifest must be read or
	 * something differs */
	if (!ret)
		ret = mf_get(&r.repo, &cid, &m, err);
	if (!ret)
		ret = cmp_tree(m, rootfd, &sc, &changed, err);
	git_tree *empty = NULL, *a = NULL, *b = NULL;
	git_treebuilder *eb = NULL;
	if (!ret && changed.n) {
		qsort(changed.v, changed.n, sizeof(*changed.v), cmp_paths);
		if (!r.repo)
			ret = st_open(&r.repo, err);
		rc = ret ? 0 : git_repository_odb(&r.odb, r.repo);
		if (rc < 0)
			ret = st_error(err, rc, "diff: the object store");
		if (!ret)
			ret = st_scratch(r.odb, err);
		if (!ret && ((rc = git_treebuilder_new(&eb, r.repo, NULL)) < 0 ||
			     (rc = git_treebuilder_write(&eid, eb)) < 0 ||
			     (rc = git_tree_lookup(&empty, r.repo, &eid)) < 0))
			ret = st_error(err, rc, "diff: the empty tree");
		if (!ret)
			ret = sparse_of_snapshot(&r, m, &changed, empty, &aid);
		if (!ret)
			ret = sparse_tree(&r, rootfd, (const char *const *)changed.v, changed.n,
					  empty, &bid);
		if (!ret && ((rc = git_tree_lookup(&a, r.repo, &aid)) < 0 ||
			     (rc = git_tree_lookup(&b, r.repo, &bid)) < 0))
			ret = st_error(err, rc, "diff: the trees");
		if (!ret)
			ret = print(r.repo, a, b, out, err);
	}
	scache_close(&sc, cache, !ret);
	git_tree_free(a);
	git_tree_free(b);
	git_tree_free(empty);
	git_treebuilder_free(eb);
	if (m)
		mf_put(m);
	paths_free(&changed);
	sfs_buf_free(&r.modes);
	git_odb_free(r.odb);
	git_repository_free(r.repo);
	st_writers_unlock();
	return ret;
}
