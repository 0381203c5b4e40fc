/*
 * What changed in a base workspace, for snapshots/base/diff: the paths the
 * snapshots' diff writer (fs/snapshots snap_diff_paths, through ctl/wsnap's
 * hook) then compares between the base and the view.  With overlayfs the
 * candidates are exactly what the upper layer holds (a whiteout is a
 * deletion, an opaque directory hides the base's, a file is added or, when
 * the base has it, compared), so an unchanged base file is never read and
 * a 500 000-file base costs nothing but its changed files.  The copy is
 * compared with the base by type, size, mtime and mode.  A directory is
 * always spelled out as its files, never handed on whole: hidden base files
 * must never reach a diff.
 */
#include "cow.h"
#include "walk.h"
#include "../util.h"

#include "../untrusted/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>

struct change {
	char *path;
	char kind; /* 'A' added, 'D' deleted, 'M' maybe modified (the writer compares) */
};

struct paths {
	char base[PATH_MAX], newroot[PATH_MAX];
};

struct diffctx {
	struct paths *meta;
	const char *base, *newroot; /* newroot: upper (overlay) or merged (copy) */
	int basefd, newfd;
	struct sfs_cow_hide *hide;
	struct change *v;
	size_t n, cap;
	struct sfs_err *err;
};

static int add_change(struct diffctx *c, const char *path, char kind)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct change *v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return sfs_errf(c->err, -ENOMEM, "out of memory");
		c->v = v;
		c->cap = cap;
	}
	char *p = strdup(path);
	if (!p)
		return sfs_errf(c->err, -ENOMEM, "out of memory");
	c->v[c->n++] = (struct change){p, kind};
	return 0;
}

/* ---- finding the changes -------------------------------------------------- */

static int deleted_visit(void *arg, int rootfd, const char *rel, const struct stat *st)
{
	struct diffctx *c = arg;
	if (sfs_cow_hide_match(c->hide, rel, S_ISDIR(st->st_mode)))
		return SFS_COW_WALK_SKIP;
	return S_ISDIR(st->st_mode) ? 0 : add_change(c, rel, 'D');
}

/* rel of the base is gone: every file below it too (but hidden ones). */
static int base_deleted(struct diffctx *c, const char *rel, const struct stat *bst)
{
	if (!S_ISDIR(bst->st_mode))
		return add_change(c, rel, 'D');
	return sfs_cow_walk_under(c->base, rel, false, deleted_visit, NULL, c, c->err);
}

/* Base files the new tree (c->newfd) lacks: below an opaque directory of
 * the upper layer, or anywhere in the copy. */
static int lacking_visit(void *arg, int rootfd, const char *rel, const struct stat *st)
{
	struct diffctx *c = arg;
	if (sfs_cow_hide_match(c->hide, rel, S_ISDIR(st->st_mode)))
		return SFS_COW_WALK_SKIP;
	struct stat ust;
	if (untrusted_lstat(c->newfd, rel, &ust) == 0)
		return S_ISDIR(st->st_mode) && S_ISDIR(ust.st_mode) ? 0 : SFS_COW_WALK_SKIP;
	return base_deleted(c, rel, st) ?: SFS_COW_WALK_SKIP;
}

static bool opaque(int fd, const char *rel)
{
	char v[4] = "";
	int dfd = sfs_cow_open_beneath(fd, rel, O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return false;
	ssize_t n = fgetxattr(dfd, "trusted.overlay.opaque", v, sizeof(v) - 1);
	if (n < 0)
		n = fgetxattr(dfd, "user.overlay.opaque", v, sizeof(v) - 1);
	close(dfd);
	return n == 1 && v[0] == 'y';
}

static int upper_visit(void *arg, int rootfd, const char *rel, const struct stat *st)
{
	struct diffctx *c = arg;
	bool dir = S_ISDIR(st->st_mode);
	/* the hide whiteouts, and whatever the sandbox made at a hidden path */
	if (sfs_cow_hide_match(c->hide, rel, dir))
		return SFS_COW_WALK_SKIP;
	struct stat bst;
	bool inbase = untrusted_lstat(c->basefd, rel, &bst) == 0;
	if (S_ISCHR(st->st_mode) && st->st_rdev == 0) /* a whiteout */
		return (inbase ? base_deleted(c, rel, &bst) : 0) ?: SFS_COW_WALK_SKIP;
	if (dir) {
		if (!inbase)
			return 0;
		if (!S_ISDIR(bst.st_mode))
			return add_change(c, rel, 'D'); /* a directory replaced a file */
		if (opaque(rootfd, rel)) {
			int r =
			    sfs_cow_walk_under(c->base, rel, false, lacking_visit, NULL, c, c->err);
			if (r)
				return r;
		}
		return 0;
	}
	if (!inbase)
		return add_change(c, rel, 'A');
	if (S_ISDIR(bst.st_mode)) /* a file replaced a directory */
		return base_deleted(c, rel, &bst) ?: add_change(c, rel, 'A');
	return add_change(c, rel, 'M');
}

/* The copy: every file of it against the base, then the base's files it
 * lacks.  Same type, size, mtime and mode: unchanged, not read. */
static int copy_visit(void *arg, int rootfd, const char *rel, const struct stat *st)
{
	struct diffctx *c = arg;
	bool dir = S_ISDIR(st->st_mode);
	if (sfs_cow_hide_match(c->hide, rel, dir))
		return SFS_COW_WALK_SKIP;
	struct stat bst;
	if (untrusted_lstat(c->basefd, rel, &bst) < 0)
		return dir ? 0 : add_change(c, rel, 'A');
	if (dir)
		return S_ISDIR(bst.st_mode) ? 0 : add_change(c, rel, 'D');
	if (S_ISDIR(bst.st_mode))
		return base_deleted(c, rel, &bst) ?: add_change(c, rel, 'A');
	if ((st->st_mode & S_IFMT) == (bst.st_mode & S_IFMT) && st->st_size == bst.st_size &&
	    st->st_mtim.tv_sec == bst.st_mtim.tv_sec &&
	    st->st_mtim.tv_nsec == bst.st_mtim.tv_nsec &&
	    (st->st_mode & 0100) == (bst.st_mode & 0100))
		return 0;
	return add_change(c, rel, 'M');
}

static int cmp_change(const void *x, const void *y)
{
	const struct change *a = x, *b = y;
	int d = strcmp(a->path, b->path);
	return d ? d : (a->kind == 'D' ? -1 : b->kind == 'D' ? 1 : 0);
}

static void changes_free(struct diffctx *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].path);
	free(c->v);
	sfs_cow_hide_free(c->hide);
	if (c->basefd >= 0)
		close(c->basefd);
	if (c->newfd >= 0)
		close(c->newfd);
	free(c->meta);
	memset(c, 0, sizeof(*c));
	c->basefd = c->newfd = -1;
}

/* Fills c with the changed paths of statedir's workspace, sorted. */
static int find_changes(const char *statedir, struct diffctx *c, struct sfs_err *err)
{
	*c = (struct diffctx){.basefd = -1, .newfd = -1, .err = err};
	char meta[PATH_MAX];
	if (sfs_pathf(meta, sizeof(meta), "%s/" SFS_COW_DIR "/base.json", statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "diff: %s: path too long", statedir);
	json_error_t je;
	json_t *j = json_load_file(meta, 0, &je);
	if (!j)
		return sfs_errf(err, -ENOENT, "diff: not a base workspace (%s)", je.text);
	const char *base = json_string_value(json_object_get(j, "base"));
	const char *mode = json_string_value(json_object_get(j, "mode"));
	const char *hide = json_string_value(json_object_get(j, "hide"));
	const char *hide_case = json_string_value(json_object_get(j, "hide_case"));
	bool overlay = mode && strcmp(mode, "overlay") == 0;
	int r = 0;
	c->meta = calloc(1, sizeof(*c->meta));
	if (!c->meta)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	else if (!base)
		r = sfs_errf(err, -EIO, "diff: %s names no base", meta);
	if (!r && (sfs_pathf(c->meta->base, sizeof(c->meta->base), "%s", base) < 0 ||
		   sfs_pathf(c->meta->newroot, sizeof(c->meta->newroot), "%s/" SFS_COW_DIR "/%s",
			     statedir, overlay ? "upper" : "merged") < 0))
		r = sfs_errf(err, -ENAMETOOLONG, "diff: %s: path too long", meta);
	if (!r) {
		c->base = c->meta->base;
		c->newroot = c->meta->newroot;
		bool nocase = false;
		r = sfs_cow_hide_case(hide_case, &nocase, err);
		if (!r)
			r = sfs_cow_hide_parse(hide, nocase, &c->hide, err);
	}
	json_decref(j);
	if (!r && ((c->basefd = open(c->base, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
		   (c->newfd = open(c->newroot, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0))
		r = sfs_errf(err, -errno, "diff: %s: %s", c->basefd < 0 ? c->base : c->newroot,
			     strerror(errno));
	if (!r && overlay) {
		r = sfs_cow_walk(c->newroot, true, upper_visit, NULL, c, err);
	} else if (!r) {
		r = sfs_cow_walk(c->newroot, true, copy_visit, NULL, c, err);
		if (!r)
			r = sfs_cow_walk(c->base, false, lacking_visit, NULL, c, err);
	}
	if (!r && c->n) /* qsort(NULL, 0) is undefined (UBSan stops there) */
		qsort(c->v, c->n, sizeof(*c->v), cmp_change);
	return r;
}

int sfs_cow_changed_paths(const char *statedir, int *basefd, char ***paths, size_t *n,
			  struct sfs_err *err)
{
	struct diffctx c;
	*paths = NULL;
	*n = 0;
	*basefd = -1;
	int r = find_changes(statedir, &c, err);
	char **v = r ? NULL : calloc(c.n + 1, sizeof(*v));
	if (!r && !v)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; !r && i < c.n; i++) {
		if (k && strcmp(v[k - 1], c.v[i].path) == 0)
			continue;
		v[k++] = c.v[i].path;
		c.v[i].path = NULL; /* handed over */
	}
	if (!r && (*basefd = open(c.base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = sfs_errf(err, -errno, "diff: %s: %s", c.base, strerror(errno));
	if (r) {
		for (size_t i = 0; v && i < k; i++)
			free(v[i]);
		free(v);
	} else {
		*paths = v;
		*n = k;
	}
	changes_free(&c);
	return r;
}
