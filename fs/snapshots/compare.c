/*
 * What differs between a snapshot's tree and a live directory, as a list of
 * paths, without writing anything: each directory's entries are matched by
 * name against the snapshot's (its manifest: manifest.c), a file's blob id comes from the stat
 * cache or from hashing it (git_odb_hash: nothing stored), and a directory that is new, gone or of
 * another kind is one path.  The diff is then made of just those paths (diff.c), which is what
 * keeps `cat snapshots/ID/diff` close to `git diff`: no tree is built or written for the unchanged
 * rest.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cmp {
	const struct manifest *m;
	struct scache *cache;
	struct paths *out;
	struct sfs_err *err;
	char path[8192]; /* the current path, grown and cut as the walk goes */
	size_t plen;
};

int paths_add(struct paths *p, const char *path)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		char **v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	if (!(p->v[p->n] = strdup(path)))
		return -ENOMEM;
	p->n++;
	return 0;
}

void paths_free(struct paths *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

int rec_hash(struct scache *cache, int dirfd, const char *name, const char *rel,
	     const struct stat *st, git_oid *oid)
{
	if (S_ISLNK(st->st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(dirfd, name, target, sizeof(target));
		if (n < 0)
			return -errno;
		return git_odb_hash(oid, target, (size_t)n, GIT_OBJECT_BLOB) < 0 ? -EIO : 0;
	}
	if (cache && scache_hit(cache, rel, st, oid))
		return 0;
	void *data;
	size_t len;
	int r = rec_map(dirfd, name, &data, &len, NULL);
	if (r)
		return r;
	int rc = git_odb_hash(oid, data ? data : "", len, GIT_OBJECT_BLOB);
	rec_unmap(data, len);
	if (rc < 0)
		return -EIO;
	if (cache)
		scache_note(cache, rel, st, oid);
	return 0;
}

/* Appends /name to c->path; returns the old length to cut back to, or
 * (size_t)-1 when the path would not fit. */
static size_t push(struct cmp *c, const char *name)
{
	size_t old = c->plen, n = strlen(name);
	if (old + n + 2 > sizeof(c->path))
		return (size_t)-1;
	if (old)
		c->path[c->plen++] = '/';
	memcpy(c->path + c->plen, name, n + 1);
	c->plen += n;
	return old;
}

static void pop(struct cmp *c, size_t old)
{
	c->plen = old;
	c->path[old] = '\0';
}

static int cmp_dir(struct cmp *c, int dirfd, uint32_t dir);

static int cmp_entry(struct cmp *c, int dirfd, const char *name, const char *rel,
		     const struct mf_ent *e)
{
	struct stat st;
	git_filemode_t fm = 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		fm = rec_filemode(&st);
	if (!fm) /* gone, or a special file (never recorded) */
		return e ? paths_add(c->out, rel) : 0;
	if (!e || e->mode != fm)
		return paths_add(c->out, rel);
	if (fm == GIT_FILEMODE_TREE) {
		int fd = e->sub < 0
			     ? -1
			     : openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return paths_add(c->out, rel); /* let the diff writer say what it is */
		int r = cmp_dir(c, fd, (uint32_t)e->sub);
		close(fd);
		return r;
	}
	git_oid oid;
	if (rec_hash(c->cache, dirfd, name, rel, &st, &oid) || !git_oid_equal(&oid, &e->oid))
		return paths_add(c->out, rel);
	return 0;
}

static int cmp_dir(struct cmp *c, int dirfd, uint32_t dir)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return sfs_errf(c->err, -errno, "diff: open %s: %s", c->plen ? c->path : ".",
				strerror(errno));
	}
	const struct manifest *m = c->m;
	size_t n = m->dirs[dir].n, found = 0;
	int r = 0;
	struct dirent *de;
	while (!r && (de = readdir(d))) {
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || rec_ignored(name))
			continue;
		const struct mf_ent *e = mf_find(m, dir, name);
		found += e != NULL;
		size_t old = push(c, name);
		if (old == (size_t)-1) {
			r = -ENAMETOOLONG;
			break;
		}
		r = cmp_entry(c, dirfd, name, c->path, e);
		pop(c, old);
	}
	/* the tree's entries the directory lacks (special files that replaced
	 * one were listed above) */
	for (size_t i = 0; !r && found < n && i < n; i++) {
		const char *name = mf_name(m, &m->ents[m->dirs[dir].first + i]);
		struct stat st;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
			continue;
		size_t old = push(c, name);
		r = old == (size_t)-1 ? -ENAMETOOLONG : paths_add(c->out, c->path);
		if (old != (size_t)-1)
			pop(c, old);
	}
	closedir(d);
	if (r == -ENOMEM || r == -ENAMETOOLONG)
		return sfs_errf(c->err, r,
				r == -ENOMEM ? "out of memory" : "diff: a path is too long");
	return r;
}

int cmp_tree(const struct manifest *m, int rootfd, struct scache *cache, struct paths *out,
	     struct sfs_err *err)
{
	struct cmp *c = calloc(1, sizeof(*c)); /* its path buffer: not on a worker's stack */
	if (!c)
		return sfs_errf(err, -ENOMEM, "out of memory");
	*c = (struct cmp){.m = m, .cache = cache, .out = out, .err = err};
	int r = cmp_dir(c, rootfd, 0);
	free(c);
	return r;
}
