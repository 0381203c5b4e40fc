/* Shared by the files of fs/snapshots; not for use outside. */
#ifndef SFS_SNAPSHOTS_INTERNAL_H
#define SFS_SNAPSHOTS_INTERNAL_H

#include "pmap.h"
#include "snapshots.h"

#include <git2.h>
#include <sys/stat.h>

/* ---- store.c ---- */
/* Opens the store (made on first use); the caller frees it. */
int st_open(git_repository **repo, struct sfs_err *err);
/* err from libgit2's last error: "WHAT: message", -EIO (-ENOENT when
 * libgit2 says not found). */
int st_error(struct sfs_err *err, int rc, const char *what);
/* Writes all of p to fd: 0 or -errno. */
int st_write_all(int fd, const void *p, size_t len);
/* The git mode's implied permission bits: 0644, 0755 (files), 0755 (dirs). */
mode_t st_implied_perm(git_filemode_t m);
/* Makes odb keep what is written through it in memory, for this handle
 * only (a diff's objects, which no snapshot names). */
int st_scratch(git_odb *odb, struct sfs_err *err);
/* Which store this is (device and inode of its objects directory; 0 when
 * there is none yet): a stat cache made for another store is not used. */
uint64_t st_identity(void);
/* The writer lock (gc.c): every function that writes objects or a stat
 * cache holds it shared; snap_gc holds it exclusive while it sweeps. */
void st_writers_shared(void);
void st_writers_exclusive(void);
void st_writers_unlock(void);

/* ---- cache.c: the stat cache ---- */
struct sc_entry {
	uint64_t size, ino;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
	uint32_t mode;
	git_oid oid;
};
struct scache {
	struct pmap index; /* path -> position in v; keys are paths[] */
	struct sc_entry *v;
	char **paths; /* into blob (as loaded) or malloc'd (noted since) */
	char *blob;   /* the file as read */
	size_t bloblen;
	size_t n, cap;
	int64_t now; /* entries changed in this second or later are not kept */
	size_t next; /* the record after the last hit: where the next lookup looks first */
	bool dirty;
};
int scache_load(struct scache *c, const char *path);
/* The blob id of the file at path if the cache knows it unchanged. */
bool scache_hit(struct scache *c, const char *path, const struct stat *st, git_oid *oid);
/* The same with the caller's cursor: only reads c (threads may share it). */
bool scache_hit_at(const struct scache *c, const char *path, const struct stat *st, git_oid *oid,
		   size_t *next);
/* Remembers path's blob (not for files changed too recently to trust). */
int scache_note(struct scache *c, const char *path, const struct stat *st, const git_oid *oid);
int scache_save(struct scache *c, const char *path);
void scache_free(struct scache *c);
/* cache_pool.c: an operation's cache, from memory when the file is still
 * the one it was kept for, else read (scache_load); and back, written
 * first when save (a cache not saved with notes is dropped). */
void scache_open(struct scache *c, const char *path);
void scache_close(struct scache *c, const char *path, bool save);
/* Forgets the kept caches (gc, which may remove their files; shutdown). */
void scache_pool_clear(void);

/* ---- record.c: a directory tree into the store ---- */
struct rec {
	git_repository *repo;
	git_odb *odb;
	struct scache *cache;
	struct snap_stats st;
	struct sfs_buf modes; /* "OCTAL PATH\0" for bits the git mode cannot say */
	struct sfs_err *err;
};
/* Writes the tree under dirfd (whose path is rel, "" for the root) and
 * returns its id. */
int rec_tree(struct rec *r, int dirfd, const char *rel, git_oid *out);
/* The blob of one entry (a file or a symlink) named name in dirfd. */
int rec_blob(struct rec *r, int dirfd, const char *name, const char *rel, const struct stat *st,
	     git_oid *out);
/* The regular file name in dirfd opened for reading (through
 * providers/untrusted: no symlink, O_NONBLOCK, type checked on the fd),
 * its stat in *st: the fd, -EAGAIN when name is no longer a regular file,
 * -EFBIG above snapshot.max_file_size (the size in *st). */
int rec_open(int dirfd, const char *name, struct stat *st);
/* The blob id of a file or symlink without storing it: from the cache, or
 * hashed (and then noted in the cache, which may be NULL). */
int rec_hash(struct scache *cache, int dirfd, const char *name, const char *rel,
	     const struct stat *st, git_oid *oid);
/* The git mode of a stat, or 0 for what a tree cannot hold. */
git_filemode_t rec_filemode(const struct stat *st);
/* Whether a name is left out of snapshots (".git"). */
bool rec_ignored(const char *name);

struct manifest;
/* ---- compare.c: what differs between a tree and a directory ---- */
struct paths {
	char **v;
	size_t n, cap;
};
int paths_add(struct paths *p, const char *path);
void paths_free(struct paths *p);
/* The paths (relative; a directory stands for all below it) where the
 * directory under rootfd differs from tree t; reads only files the cache
 * does not vouch for, and stores nothing. */
int cmp_tree(const struct manifest *m, int rootfd, struct scache *cache, struct paths *out,
	     struct sfs_err *err);

/* ---- manifest.c: a snapshot's tree in memory, shared read-only ---- */
struct mf_ent {
	uint32_t name; /* offset in names */
	git_filemode_t mode;
	int32_t sub; /* a tree's directory in dirs, or -1 (not a tree, or unreadable) */
	git_oid oid;
};
struct mf_dir {
	uint32_t first, n; /* ents[first .. first + n), sorted by strcmp of name */
	git_oid names;	   /* a hash of those names (the stat cache's id for a directory) */
};
struct manifest {
	git_oid commit;
	struct mf_ent *ents;
	struct mf_dir *dirs; /* dirs[0] is the root */
	char *names;
	size_t nents, ndirs, namelen;
	unsigned refs; /* under the cache's lock */
	uint64_t used; /* when last handed out, for eviction */
};
/* The manifest of commit cid, from the cache or read (opening *repo when it
 * is NULL; the caller frees it); release it with mf_put. */
int mf_get(git_repository **repo, const git_oid *cid, struct manifest **out, struct sfs_err *err);
void mf_put(struct manifest *m);
/* Forgets every cached manifest (after gc, and at shutdown). */
void mf_cache_clear(void);
/* The entry named name in directory dir, or NULL. */
const struct mf_ent *mf_find(const struct manifest *m, uint32_t dir, const char *name);
/* The entry at a relative path ("a/b"), or NULL. */
const struct mf_ent *mf_bypath(const struct manifest *m, const char *path);
static inline const char *mf_name(const struct manifest *m, const struct mf_ent *e)
{
	return m->names + e->name;
}

/* The modes blob of a commit as path -> mode. */
int st_modes_load(git_repository *repo, const git_commit *c, struct pmap *modes);

#endif
