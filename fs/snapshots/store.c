/*
 * The object store (STATE/git/store, a bare repository) and what is read
 * back from it: snapshots as commits, their trailers, their trees.
 */
#include "internal.h"

#include "../../providers/util.h"

#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char store_path[4200];
static pthread_rwlock_t writers = PTHREAD_RWLOCK_INITIALIZER;

void st_writers_shared(void)
{
	pthread_rwlock_rdlock(&writers);
}

void st_writers_exclusive(void)
{
	pthread_rwlock_wrlock(&writers);
}

void st_writers_unlock(void)
{
	pthread_rwlock_unlock(&writers);
}
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;

static void init_libgit2(void)
{
	init_result = git_libgit2_init() < 0 ? -EIO : 0;
}

int st_error(struct sfs_err *err, int rc, const char *what)
{
	const git_error *e = git_error_last();
	return sfs_errf(err, rc == GIT_ENOTFOUND ? -ENOENT : -EIO, "%s: %s", what,
			e && e->message ? e->message : "libgit2 failed");
}

int st_write_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	while (len) {
		ssize_t n = write(fd, c, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

mode_t st_implied_perm(git_filemode_t m)
{
	return m == GIT_FILEMODE_BLOB ? 0644 : 0755;
}

uint64_t st_identity(void)
{
	char objects[4300];
	struct stat st;
	if (sfs_pathf(objects, sizeof(objects), "%s/objects", store_path) < 0)
		return 0;
	if (stat(objects, &st) < 0)
		return 0;
	return ((uint64_t)st.st_dev << 40) ^ (uint64_t)st.st_ino;
}

int st_scratch(git_odb *odb, struct sfs_err *err)
{
	git_odb_backend *mem = NULL;
	int rc = git_mempack_new(&mem);
	/* above the loose objects (priority 1): every write lands here */
	if (rc >= 0 && (rc = git_odb_add_backend(odb, mem, 100)) < 0)
		mem->free(mem);
	return rc < 0 ? st_error(err, rc, "diff: an object store in memory") : 0;
}

int snap_store_init(const char *statedir, struct sfs_err *err)
{
	pthread_once(&init_once, init_libgit2);
	if (init_result)
		return sfs_errf(err, init_result, "libgit2 could not start");
	/* Every id a tree or commit names was written to this store just
	 * before (or is vouched for by a stat cache made for this store:
	 * cache.c), so libgit2's check that each exists (a loose object
	 * opened and inflated per entry: most of a second snapshot's time)
	 * is skipped.  Process-wide; providers/git only reads objects. */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
	if (sfs_pathf(store_path, sizeof(store_path), "%s/git/store", statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "snapshot: %s/git/store: path too long",
				statedir);
	return 0;
}

/* The browse handle: one repository shared under a lock (libgit2 objects
 * are not for concurrent use), opened on first use. */
static pthread_mutex_t browse_mu = PTHREAD_MUTEX_INITIALIZER;
static git_repository *browse_repo;

void snap_store_shutdown(void)
{
	pthread_mutex_lock(&browse_mu);
	git_repository_free(browse_repo);
	browse_repo = NULL;
	pthread_mutex_unlock(&browse_mu);
	mf_cache_clear();
	scache_pool_clear();
}

int st_open(git_repository **repo, struct sfs_err *err)
{
	if (!store_path[0])
		return sfs_errf(err, -EIO, "snapshot: the object store is not set up");
	int rc = git_repository_open_bare(repo, store_path);
	if (rc == GIT_ENOTFOUND) {
		char parent[4300];
		memcpy(parent, store_path, strlen(store_path) + 1); /* fits: 4200 < 4300 */
		*strrchr(parent, '/') = '\0';
		int r = sfs_mkdir_p(parent, 0700);
		if (r)
			return sfs_errf(err, r, "snapshot: %s: %s", parent, strerror(-r));
		/* two first snapshots at once: one makes it (two inits at once
		 * collide on config.lock), the other opens what it made */
		static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
		pthread_mutex_lock(&init_mu);
		rc = git_repository_open_bare(repo, store_path);
		if (rc == GIT_ENOTFOUND)
			rc = git_repository_init(repo, store_path, 1);
		pthread_mutex_unlock(&init_mu);
	}
	return rc < 0 ? st_error(err, rc, "snapshot: the object store") : 0;
}

static int ref_name(char *buf, size_t len, const char *key, const char *id)
{
	return sfs_pathf(buf, len, "refs/sandboxfs/%s/%s", key, id);
}

int snap_take(int rootfd, const char *cache, const char *key, const char *id, const char *label,
	      int64_t when, char commit[41], struct snap_stats *st, struct sfs_err *err)
{
	struct rec r = {.err = err};
	struct scache sc;
	st_writers_shared(); /* no sweep until the commit has its ref */
	scache_open(&sc, cache);
	r.cache = &sc;
	int ret = st_open(&r.repo, err);
	int rc = ret ? 0 : git_repository_odb(&r.odb, r.repo);
	if (rc < 0)
		ret = st_error(err, rc, "snapshot: the object store");
	git_oid tree, modes, cid;
	if (!ret)
		ret = rec_tree(&r, rootfd, "", &tree);
	bool has_modes = r.modes.len > 0;
	if (!ret && has_modes &&
	    (rc = git_odb_write(&modes, r.odb, r.modes.buf, r.modes.len, GIT_OBJECT_BLOB)) < 0)
		ret = st_error(err, rc, "snapshot: writing the modes");
	git_tree *t = NULL;
	git_signature *sig = NULL;
	if (!ret && (rc = git_tree_lookup(&t, r.repo, &tree)) < 0)
		ret = st_error(err, rc, "snapshot: the tree");
	if (!ret && (rc = git_signature_new(&sig, "sandboxfs", "sandboxfs@localhost", when, 0)) < 0)
		ret = st_error(err, rc, "snapshot: a signature");
	char *msg = NULL;
	char mhex[41] = "none";
	if (!ret && has_modes)
		git_oid_tostr(mhex, sizeof(mhex), &modes);
	if (!ret &&
	    asprintf(&msg,
		     "snapshot %s\n\nSandboxfs-Sandbox: %s\nSandboxfs-Files: %" PRIu64
		     "\nSandboxfs-Bytes: %" PRIu64 "\nSandboxfs-Skipped: %" PRIu64
		     "\nSandboxfs-Modes: %s\n",
		     label ? label : "-", key, r.st.files, r.st.bytes, r.st.skipped, mhex) < 0) {
		msg = NULL;
		ret = sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (!ret &&
	    (rc = git_commit_create(&cid, r.repo, NULL, sig, sig, NULL, msg, t, 0, NULL)) < 0)
		ret = st_error(err, rc, "snapshot: the commit");
	char ref[512];
	git_reference *ref_obj = NULL;
	if (!ret && ref_name(ref, sizeof(ref), key, id) < 0)
		ret = sfs_errf(err, -ENAMETOOLONG, "snapshot: ref name too long");
	if (!ret && (rc = git_reference_create(&ref_obj, r.repo, ref, &cid, 1, "snapshot")) < 0)
		ret = st_error(err, rc, "snapshot: its ref");
	git_reference_free(ref_obj);
	free(msg);
	git_signature_free(sig);
	git_tree_free(t);
	if (!ret) {
		git_oid_tostr(commit, 41, &cid);
		if (st)
			*st = r.st;
	}
	scache_close(&sc, cache, !ret);
	sfs_buf_free(&r.modes);
	git_odb_free(r.odb);
	git_repository_free(r.repo);
	st_writers_unlock();
	return ret;
}

int snap_forget(const char *key, const char *id, struct sfs_err *err)
{
	git_repository *repo;
	int r = st_open(&repo, err);
	if (r)
		return r;
	char ref[512], glob[512];
	if (ref_name(ref, sizeof(ref), key, id ? id : "*") < 0 ||
	    sfs_pathf(glob, sizeof(glob), "%s", ref) < 0) {
		git_repository_free(repo);
		return sfs_errf(err, -ENAMETOOLONG, "snapshot: ref name too long");
	}
	git_reference_iterator *it = NULL;
	int rc = id ? 0 : git_reference_iterator_glob_new(&it, repo, glob);
	int dropped = 0;
	if (id) {
		git_oid was;
		/* removing a missing ref is no error to libgit2: ask first */
		dropped = git_reference_name_to_id(&was, repo, ref) == 0;
		rc = git_reference_remove(repo, ref);
		if (rc == GIT_ENOTFOUND)
			rc = 0;
	} else {
		const char *name;
		while (rc == 0 && (rc = git_reference_next_name(&name, it)) == 0)
			if ((rc = git_reference_remove(repo, name)) == 0)
				dropped++;
		if (rc == GIT_ITEROVER)
			rc = 0;
	}
	git_reference_iterator_free(it);
	if (rc < 0)
		r = st_error(err, rc, "snapshot: dropping its ref");
	git_repository_free(repo);
	return r ? r : dropped;
}

static int commit_of(git_repository *repo, const char *hex, git_commit **c)
{
	git_oid oid;
	if (git_oid_fromstr(&oid, hex) < 0)
		return -EINVAL;
	return git_commit_lookup(c, repo, &oid) < 0 ? -ENOENT : 0;
}

static uint64_t trailer_u64(const char *msg, const char *key)
{
	const char *p = strstr(msg, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

int snap_info_read(const char *commit, struct snap_info *info, struct sfs_err *err)
{
	memset(info, 0, sizeof(*info));
	git_repository *repo;
	int r = st_open(&repo, err);
	if (r)
		return r;
	git_commit *c = NULL;
	if (commit_of(repo, commit, &c)) {
		git_repository_free(repo);
		return sfs_errf(err, -ENOENT, "snapshot: commit %s is not in the store", commit);
	}
	const char *msg = git_commit_message(c);
	if (strncmp(msg, "snapshot ", 9) == 0) {
		size_t n = strcspn(msg + 9, "\n");
		snprintf(info->label, sizeof(info->label), "%.*s", (int)n,
			 msg + 9); /* message: may be cut */
	}
	const char *k = strstr(msg, "Sandboxfs-Sandbox: ");
	if (k)
		if (sfs_pathf(info->key, sizeof(info->key), "%.*s", (int)strcspn(k + 19, "\n"),
			      k + 19) < 0)
			info->key[0] = '\0'; /* a key that is not one: no sandbox's */
	info->st.files = trailer_u64(msg, "Sandboxfs-Files: ");
	info->st.bytes = trailer_u64(msg, "Sandboxfs-Bytes: ");
	info->st.skipped = trailer_u64(msg, "Sandboxfs-Skipped: ");
	info->time = (int64_t)git_commit_time(c);
	if (sfs_pathf(info->commit, sizeof(info->commit), "%s", commit) < 0)
		info->commit[0] = '\0'; /* commit_of found it: a full id, never */
	git_commit_free(c);
	git_repository_free(repo);
	return 0;
}

int st_modes_load(git_repository *repo, const git_commit *c, struct pmap *modes)
{
	const char *p = strstr(git_commit_message(c), "Sandboxfs-Modes: ");
	git_oid oid;
	if (!p || git_oid_fromstrn(&oid, p + 17, 40) < 0)
		return 0; /* "none" */
	git_blob *b = NULL;
	if (git_blob_lookup(&b, repo, &oid) < 0)
		return -EIO;
	const char *s = git_blob_rawcontent(b), *end = s + git_blob_rawsize(b);
	int r = 0;
	while (!r && s < end) {
		const char *z = memchr(s, '\0', (size_t)(end - s));
		if (!z)
			break;
		char *sp;
		unsigned long m = strtoul(s, &sp, 8);
		if (*sp == ' ')
			r = pmap_put(modes, sp + 1, m);
		s = z + 1;
	}
	git_blob_free(b);
	return r;
}

/* ---- browse ---- */

/* The cached modes of the last commit browsed (lookups come in bursts). */
static git_oid browse_modes_of;
static struct pmap browse_modes;

static int browse_open(const char *commit, git_commit **c)
{
	if (!browse_repo && st_open(&browse_repo, NULL))
		return -EIO;
	int r = commit_of(browse_repo, commit, c);
	if (r)
		return r;
	if (!git_oid_equal(&browse_modes_of, git_commit_id(*c))) {
		pmap_free(&browse_modes);
		if (st_modes_load(browse_repo, *c, &browse_modes)) {
			memset(&browse_modes_of, 0, sizeof(browse_modes_of));
			pmap_free(&browse_modes);
			git_commit_free(*c);
			return -EIO;
		}
		git_oid_cpy(&browse_modes_of, git_commit_id(*c));
	}
	return 0;
}

static void node_of(const git_tree_entry *e, const char *path, struct snap_node *n)
{
	git_filemode_t fm = git_tree_entry_filemode(e);
	git_oid_tostr(n->oid, sizeof(n->oid), git_tree_entry_id(e));
	uint64_t m = 0;
	mode_t perm = fm == GIT_FILEMODE_LINK ? 0777 : st_implied_perm(fm);
	if (fm != GIT_FILEMODE_LINK && pmap_get(&browse_modes, path, &m))
		perm = (mode_t)m & 07777;
	n->mode = (fm == GIT_FILEMODE_TREE   ? S_IFDIR
		   : fm == GIT_FILEMODE_LINK ? S_IFLNK
					     : S_IFREG) |
		  perm;
	n->size = 0;
	if (fm != GIT_FILEMODE_TREE) {
		size_t sz = 0;
		git_object_t t;
		git_odb *odb = NULL;
		if (git_repository_odb(&odb, browse_repo) == 0 &&
		    git_odb_read_header(&sz, &t, odb, git_tree_entry_id(e)) == 0)
			n->size = sz;
		git_odb_free(odb);
	}
}

int snap_lookup(const char *commit, const char *path, struct snap_node *node)
{
	pthread_mutex_lock(&browse_mu);
	git_commit *c = NULL;
	int r = browse_open(commit, &c);
	if (!r && !*path) {
		git_oid_tostr(node->oid, sizeof(node->oid), git_commit_tree_id(c));
		node->mode = S_IFDIR | 0755;
		node->size = 0;
	} else if (!r) {
		git_tree *t = NULL;
		git_tree_entry *e = NULL;
		if (git_commit_tree(&t, c) < 0 || git_tree_entry_bypath(&e, t, path) < 0)
			r = -ENOENT;
		else
			node_of(e, path, node);
		git_tree_entry_free(e);
		git_tree_free(t);
	}
	git_commit_free(c);
	pthread_mutex_unlock(&browse_mu);
	return r;
}

void snap_dirents_free(struct snap_dirent *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

int snap_list(const char *commit, const char *path, struct snap_dirent **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&browse_mu);
	git_commit *c = NULL;
	git_tree *root = NULL, *t = NULL;
	git_tree_entry *e = NULL;
	int r = browse_open(commit, &c);
	if (!r && git_commit_tree(&root, c) < 0)
		r = -EIO;
	if (!r && *path) {
		if (git_tree_entry_bypath(&e, root, path) < 0)
			r = -ENOENT;
		else if (git_tree_entry_type(e) != GIT_OBJECT_TREE)
			r = -ENOTDIR;
		else if (git_tree_lookup(&t, browse_repo, git_tree_entry_id(e)) < 0)
			r = -EIO;
	}
	const git_tree *dir = *path ? t : root;
	size_t cnt = r ? 0 : git_tree_entrycount(dir);
	struct snap_dirent *v = cnt ? calloc(cnt, sizeof(*v)) : NULL;
	if (cnt && !v)
		r = -ENOMEM;
	for (size_t i = 0; !r && i < cnt; i++) {
		const git_tree_entry *x = git_tree_entry_byindex(dir, i);
		char *p = NULL;
		if (asprintf(&p, "%s%s%s", path, *path ? "/" : "", git_tree_entry_name(x)) < 0 ||
		    !(v[i].name = strdup(git_tree_entry_name(x)))) {
			free(p);
			r = -ENOMEM;
			break;
		}
		node_of(x, p, &v[i].node);
		free(p);
		*n = i + 1;
	}
	if (r) {
		snap_dirents_free(v, *n);
		*n = 0;
	} else {
		*out = v;
	}
	git_tree_entry_free(e);
	git_tree_free(t);
	git_tree_free(root);
	git_commit_free(c);
	pthread_mutex_unlock(&browse_mu);
	return r;
}

int snap_blob(const char *oid, char **data, size_t *len)
{
	git_oid id;
	if (git_oid_fromstr(&id, oid) < 0)
		return -EINVAL;
	pthread_mutex_lock(&browse_mu);
	int r = browse_repo || st_open(&browse_repo, NULL) == 0 ? 0 : -EIO;
	git_blob *b = NULL;
	if (!r && git_blob_lookup(&b, browse_repo, &id) < 0)
		r = -ENOENT;
	if (!r) {
		*len = (size_t)git_blob_rawsize(b);
		*data = malloc(*len ? *len : 1);
		if (!*data)
			r = -ENOMEM;
		else
			memcpy(*data, git_blob_rawcontent(b), *len);
	}
	git_blob_free(b);
	pthread_mutex_unlock(&browse_mu);
	return r;
}
