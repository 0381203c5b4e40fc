/*
 * Garbage collection of the object store: deleting a snapshot (rmdir
 * snapshots/ID, forget, a destroyed sandbox) drops only its ref, so the
 * objects only it used would stay forever.  snap_gc marks every object
 * reachable from any ref of the store (commits, their trees and blobs, the
 * modes blob a commit's trailer names) and deletes the loose objects not
 * marked (the store never packs: libgit2 writes loose objects).
 *
 * Concurrent writers: every object is written by snap_take or snap_restore
 * of this daemon (a diff keeps its objects in memory), each holding the
 * store's writer lock shared from loading its stat cache to its ref (a
 * diff holds it too, for its stat cache); the sweep holds it exclusive, so
 * no object is swept between being written and being referenced, and no
 * grace period is needed.  A stat cache vouches for blob ids without
 * reading them (ids of a snapshot that is then dropped), so a cache naming
 * an object that is not kept is removed: that sandbox's next snapshot
 * rereads its files instead of naming a deleted blob.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A set of object ids: open addressing on the id's first bytes. */
struct oidset {
	git_oid *v;
	unsigned char *used;
	size_t cap, n;
};

static size_t slot(const struct oidset *s, const git_oid *id)
{
	size_t h;
	memcpy(&h, id->id, sizeof(h));
	return h & (s->cap - 1);
}

static bool set_has(const struct oidset *s, const git_oid *id)
{
	if (!s->cap)
		return false;
	for (size_t i = slot(s, id);; i = (i + 1) & (s->cap - 1)) {
		if (!s->used[i])
			return false;
		if (git_oid_equal(&s->v[i], id))
			return true;
	}
}

/* 1 added, 0 present already, -ENOMEM */
static int set_add(struct oidset *s, const git_oid *id)
{
	if ((s->n + 1) * 2 > s->cap) {
		struct oidset g = {.cap = s->cap ? s->cap * 2 : 4096};
		g.v = malloc(g.cap * sizeof(*g.v));
		g.used = calloc(g.cap, 1);
		if (!g.v || !g.used) {
			free(g.v);
			free(g.used);
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cap; i++)
			if (s->used[i])
				set_add(&g, &s->v[i]);
		free(s->v);
		free(s->used);
		*s = g;
	}
	size_t i = slot(s, id);
	for (; s->used[i]; i = (i + 1) & (s->cap - 1))
		if (git_oid_equal(&s->v[i], id))
			return 0;
	s->used[i] = 1;
	s->v[i] = *id;
	s->n++;
	return 1;
}

static void set_free(struct oidset *s)
{
	free(s->v);
	free(s->used);
	memset(s, 0, sizeof(*s));
}

/* Marks a tree and everything below it; a tree marked before is not walked
 * again (snapshots share most of their trees). */
static int mark_tree(git_repository *repo, struct oidset *live, const git_oid *id)
{
	int a = set_add(live, id);
	if (a <= 0)
		return a;
	git_tree *t;
	if (git_tree_lookup(&t, repo, id) < 0)
		return 0; /* missing (git's empty tree need not be stored): nothing below */
	int r = 0;
	for (size_t i = 0, n = git_tree_entrycount(t); i < n && r >= 0; i++) {
		const git_tree_entry *e = git_tree_entry_byindex(t, i);
		if (git_tree_entry_type(e) == GIT_OBJECT_TREE)
			r = mark_tree(repo, live, git_tree_entry_id(e));
		else
			r = set_add(live, git_tree_entry_id(e));
	}
	git_tree_free(t);
	return r < 0 ? r : 0;
}

static int mark_commit(git_repository *repo, struct oidset *live, const git_oid *id)
{
	int a = set_add(live, id);
	if (a <= 0)
		return a;
	git_commit *c;
	if (git_commit_lookup(&c, repo, id) < 0)
		return 0;
	int r = mark_tree(repo, live, git_commit_tree_id(c));
	/* the modes blob is named only in the message's trailer */
	const char *m = strstr(git_commit_message(c), "Sandboxfs-Modes: ");
	git_oid modes;
	if (r >= 0 && m && git_oid_fromstrn(&modes, m + 17, GIT_OID_HEXSZ) == 0)
		r = set_add(live, &modes);
	for (unsigned i = 0, n = git_commit_parentcount(c); r >= 0 && i < n; i++)
		r = mark_commit(repo, live, git_commit_parent_id(c, i));
	git_commit_free(c);
	return r < 0 ? r : 0;
}

static int mark_refs(git_repository *repo, struct oidset *live, struct sfs_err *err)
{
	git_reference_iterator *it;
	int rc = git_reference_iterator_new(&it, repo);
	if (rc < 0)
		return st_error(err, rc, "gc: listing refs");
	git_reference *ref;
	int r = 0;
	while (r >= 0 && (rc = git_reference_next(&ref, it)) == 0) {
		git_object *o = NULL;
		if (git_reference_peel(&o, ref, GIT_OBJECT_ANY) == 0) {
			if (git_object_type(o) == GIT_OBJECT_COMMIT)
				r = mark_commit(repo, live, git_object_id(o));
			else if (git_object_type(o) == GIT_OBJECT_TREE)
				r = mark_tree(repo, live, git_object_id(o));
			else
				r = set_add(live, git_object_id(o));
		}
		git_object_free(o);
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	if (r < 0)
		return sfs_errf(err, -ENOMEM, "gc: out of memory");
	if (rc != GIT_ITEROVER)
		return st_error(err, rc, "gc: reading refs");
	return 0;
}

/* Deletes the loose objects not in live under objects/XX/. */
static void sweep(const char *objects, const struct oidset *live, struct snap_gc_stats *st)
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 256; i++) {
		char dir[4400];
		if (snprintf(dir, sizeof(dir), "%s/%c%c", objects, hex[i >> 4], hex[i & 15]) >=
		    (int)sizeof(dir))
			return; /* objects fits 4300 bytes, dir 4400: never */
		DIR *d = opendir(dir);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d))) {
			char full[GIT_OID_HEXSZ + 1];
			git_oid id;
			if (strlen(de->d_name) != GIT_OID_HEXSZ - 2)
				continue; /* a temporary file of a writer, or . and .. */
			snprintf(full, sizeof(full), "%c%c%s", hex[i >> 4], hex[i & 15],
				 de->d_name); /* may be cut: never, its length was checked */
			if (git_oid_fromstr(&id, full) < 0)
				continue;
			if (set_has(live, &id)) {
				st->kept++;
				continue;
			}
			struct stat sb;
			if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
			    unlinkat(dirfd(d), de->d_name, 0) == 0) {
				st->removed++;
				st->removed_bytes += (uint64_t)sb.st_size;
			}
		}
		closedir(d);
		rmdir(dir); /* when empty: libgit2 makes it again on the next write */
	}
}

/* Removes each stat cache that vouches for an object not kept. */
static void drop_caches(const char *cache_glob, const struct oidset *live, struct snap_gc_stats *st)
{
	glob_t g;
	if (!cache_glob || glob(cache_glob, 0, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct scache c;
		scache_load(&c, g.gl_pathv[i]);
		bool stale = false;
		for (size_t k = 0; k < c.n && !stale; k++) /* a directory's id is no object */
			stale = !S_ISDIR(c.v[k].mode) && !set_has(live, &c.v[k].oid);
		scache_free(&c);
		if (stale && unlink(g.gl_pathv[i]) == 0)
			st->caches_dropped++;
	}
	globfree(&g);
}

int snap_gc(const char *cache_glob, struct snap_gc_stats *st, struct sfs_err *err)
{
	struct snap_gc_stats local = {0};
	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	git_repository *repo;
	st_writers_exclusive();
	int r = st_open(&repo, err);
	if (r) {
		st_writers_unlock();
		return r;
	}
	/* no operation holds a cache now (writers wait): the next one reads
	 * its file, which drop_caches checks */
	scache_pool_clear();
	struct oidset live = {0};
	r = mark_refs(repo, &live, err);
	if (!r) {
		char objects[4300];
		if (snprintf(objects, sizeof(objects), "%s/objects", git_repository_path(repo)) <
		    (int)sizeof(objects))
			sweep(objects, &live,
			      st); /* else no sweep, never one of another directory */
		drop_caches(cache_glob, &live, st);
		mf_cache_clear(); /* a dropped snapshot's manifest names swept blobs */
	}
	set_free(&live);
	git_repository_free(repo);
	st_writers_unlock();
	return r;
}
