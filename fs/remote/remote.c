/*
 * workspace/ for remote providers: a cache over the provider's fs_* ops
 * (SPEC §5 close-to-open), a decorator in the manner of sshfs's cache.c.
 *
 * Nodes are keyed by (sandbox serial, path) and numbered from a 48-bit
 * counter.  Each caches its attributes and, for directories, the listing
 * (whose entries carry attributes, so one fs_list answers every lookup and
 * readdirplus below it).  Everything cached is good for remote.attr_timeout
 * seconds, and only if the sandbox's generation (bumped when a run starts or
 * ends) and write counter (bumped by every mutation through us) did not move
 * while it was being fetched.
 *
 * File contents live in a cache file, STATEDIR/rcache/ID, fetched on open
 * unless the remote size and mtime still match, and written back whole on
 * flush/fsync/close when dirty.  A failed write-back leaves the data dirty
 * (and a ID.pending file naming the remote path); close/fsync then fail
 * with EIO, and a background thread retries until it goes through.
 *
 * Locking: R.mu guards the tables and every field marked so; n->io
 * serialises fetches and write-backs of one node and is taken before R.mu.
 * No provider call is made with R.mu held.
 */
#include "remote.h"

#include "../fs.h"
#include "../ino.h"
#include "../symlink_rewrite.h"

#include "../../ctl/tree.h"
#include "../../providers/config.h"
#include "../../providers/provider.h"
#include "../../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define NBUCKETS 4096

struct rsb {
	struct rsb *next;
	uint32_t serial;
	unsigned long calls;
	uint64_t gen;  /* R.mu: bumped by rws_invalidate_sandbox */
	uint64_t wctr; /* R.mu: bumped by every mutation */
	bool gone;
	char *cachedir;
};

struct rent {
	char *name;
	struct sfs_rstat st;
};

struct rnode {
	struct rnode *id_next, *path_next; /* R.mu */
	uint64_t id;
	uint32_t serial;
	struct rsb *rs;
	char *path;	  /* R.mu; "" is the root */
	bool unlinked;	  /* R.mu: no longer reachable by its path */
	uint64_t nlookup; /* R.mu */
	int pins;	  /* R.mu: open handles and operations in flight */

	bool attr_ok; /* R.mu */
	struct sfs_rstat st;
	double attr_until;
	uint64_t attr_gen;

	struct rent *ents; /* R.mu: the listing, for directories */
	size_t nents;
	bool dir_ok, listed;
	double dir_until;
	uint64_t dir_gen;

	pthread_mutex_t io;
	int cfd;     /* io: cache file or -1 */
	bool cvalid; /* io: cfd holds the remote file as of (cmtime, csize) */
	int64_t cmtime;
	off_t csize;
	bool dirty;	 /* io and R.mu (either is enough to read) */
	uint64_t wseq;	 /* R.mu: bumped by every local write */
	int nopen;	 /* R.mu */
	double retry_at; /* R.mu */
	bool failed;	 /* R.mu: the last write-back failed */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rnode *by_id[NBUCKETS], *by_path[NBUCKETS];
	struct rsb *sbs;
	uint64_t next_id;
	double ttl;
	bool raw_links;
	pthread_t retry_thread;
	bool running, stop;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- small helpers ------------------------------------------------------ */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t hash_id(uint64_t id)
{
	return (size_t)(id * 0x9E3779B97F4A7C15ULL >> 52) % NBUCKETS;
}

static size_t hash_path(uint32_t serial, const char *path)
{
	uint64_t h = 1469598103934665603ULL ^ serial;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (size_t)(h % NBUCKETS);
}

static char *join_path(const char *dir, const char *name)
{
	char *out;
	if (asprintf(&out, "%s%s%s", dir, dir[0] ? "/" : "", name) < 0)
		return NULL;
	return out;
}

static void rstat_free(struct sfs_rstat *st)
{
	free(st->link);
	st->link = NULL;
}

static int rstat_copy(struct sfs_rstat *dst, const struct sfs_rstat *src)
{
	char *link = src->link ? strdup(src->link) : NULL;
	if (src->link && !link)
		return -ENOMEM;
	free(dst->link);
	*dst = *src;
	dst->link = link;
	return 0;
}

static void ents_free(struct rent *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].st.link);
	}
	free(v);
}

static bool name_ok(const char *name)
{
	return name[0] && strcmp(name, ".") && strcmp(name, "..") && !strchr(name, '/');
}

/* ---- sandboxes ---------------------------------------------------------- */

static struct rsb *rsb_find_locked(uint32_t serial, bool create)
{
	for (struct rsb *s = R.sbs; s; s = s->next)
		if (s->serial == serial)
			return s;
	if (!create)
		return NULL;
	struct rsb *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->serial = serial;
	s->gen = 1;
	s->next = R.sbs;
	R.sbs = s;
	return s;
}

/* The cache directory of a sandbox: made on first use. */
static const char *cachedir_of(struct rsb *rs, struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	if (!rs->cachedir && sb->statedir) {
		char *d;
		if (asprintf(&d, "%s/rcache", sb->statedir) >= 0)
			rs->cachedir = d;
	}
	const char *d = rs->cachedir;
	pthread_mutex_unlock(&R.mu);
	if (d)
		sfs_mkdir_p(d, 0700);
	return d;
}

/* ---- the node table ----------------------------------------------------- */

static struct rnode *find_id_locked(uint64_t id)
{
	for (struct rnode *n = R.by_id[hash_id(id)]; n; n = n->id_next)
		if (n->id == id)
			return n;
	return NULL;
}

static struct rnode *find_path_locked(uint32_t serial, const char *path)
{
	for (struct rnode *n = R.by_path[hash_path(serial, path)]; n; n = n->path_next)
		if (n->serial == serial && !n->unlinked && strcmp(n->path, path) == 0)
			return n;
	return NULL;
}

static void unhash_path_locked(struct rnode *n)
{
	struct rnode **pp = &R.by_path[hash_path(n->serial, n->path)];
	for (; *pp; pp = &(*pp)->path_next) {
		if (*pp == n) {
			*pp = n->path_next;
			break;
		}
	}
	n->path_next = NULL;
}

static void hash_path_locked(struct rnode *n)
{
	size_t b = hash_path(n->serial, n->path);
	n->path_next = R.by_path[b];
	R.by_path[b] = n;
}

static void cache_file_name(struct rnode *n, const char *suffix, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%" PRIu64 "%s", n->rs->cachedir ? n->rs->cachedir : "/nonexistent",
		 n->id, suffix);
}

static struct rnode *new_node_locked(struct rsb *rs, const char *path)
{
	struct rnode *n = calloc(1, sizeof(*n));
	if (!n || !(n->path = strdup(path))) {
		free(n);
		return NULL;
	}
	n->id = ++R.next_id;
	n->serial = rs->serial;
	n->rs = rs;
	n->cfd = -1;
	pthread_mutex_init(&n->io, NULL);
	size_t b = hash_id(n->id);
	n->id_next = R.by_id[b];
	R.by_id[b] = n;
	hash_path_locked(n);
	return n;
}

/* Frees n when nothing needs it any more. */
static void maybe_free_locked(struct rnode *n)
{
	if (n->nlookup || n->pins || n->dirty)
		return;
	struct rnode **pp = &R.by_id[hash_id(n->id)];
	for (; *pp; pp = &(*pp)->id_next) {
		if (*pp == n) {
			*pp = n->id_next;
			break;
		}
	}
	if (!n->unlinked)
		unhash_path_locked(n);
	if (n->cfd >= 0) {
		char name[4200];
		close(n->cfd);
		cache_file_name(n, "", name, sizeof(name));
		unlink(name);
	}
	rstat_free(&n->st);
	ents_free(n->ents, n->nents);
	pthread_mutex_destroy(&n->io);
	free(n->path);
	free(n);
}

/* The node behind ino, pinned, or NULL. */
static struct rnode *node_get(fuse_ino_t ino)
{
	pthread_mutex_lock(&R.mu);
	struct rnode *n =
	    SFS_INO_KIND(ino) == SFS_K_RWS ? find_id_locked(SFS_INO_WS_ID(ino)) : NULL;
	if (n && n->rs->gone)
		n = NULL;
	if (n)
		n->pins++;
	pthread_mutex_unlock(&R.mu);
	return n;
}

static void node_put(struct rnode *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&R.mu);
	n->pins--;
	maybe_free_locked(n);
	pthread_mutex_unlock(&R.mu);
}

static char *node_path(struct rnode *n)
{
	pthread_mutex_lock(&R.mu);
	char *p = strdup(n->path);
	pthread_mutex_unlock(&R.mu);
	return p;
}

/* ---- provider calls ----------------------------------------------------- */

static struct sfs_sandbox *sandbox_of(struct rnode *n)
{
	struct sfs_sandbox *sb = tree_get_serial(n->serial);
	if (sb && !sb->provider->ops->fs_stat) {
		tree_put(sb);
		sb = NULL;
	}
	return sb;
}

static void count_call(struct rsb *rs)
{
	__atomic_add_fetch(&rs->calls, 1, __ATOMIC_RELAXED);
}

static int log_err(struct sfs_sandbox *sb, const char *what, const char *path, int r,
		   const struct sfs_err *err)
{
	if (r && r != -ENOENT && r != -EEXIST && r != -ENOTEMPTY)
		sfs_log(SFS_LOG_WARN, "%s: workspace: %s %s: %s", sb->name, what,
			path[0] ? path : "/", err->msg[0] ? err->msg : strerror(-r));
	return r;
}

static int p_stat(struct rsb *rs, struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st)
{
	struct sfs_err err = {0};
	memset(st, 0, sizeof(*st));
	count_call(rs);
	return log_err(sb, "stat", path, sb->provider->ops->fs_stat(sb, path, st, &err), &err);
}

static int p_list(struct rsb *rs, struct sfs_sandbox *sb, const char *path,
		  struct sfs_rdirent **ents, size_t *n)
{
	struct sfs_err err = {0};
	*ents = NULL;
	*n = 0;
	count_call(rs);
	return log_err(sb, "list", path, sb->provider->ops->fs_list(sb, path, ents, n, &err), &err);
}

#define P_CALL(rs, sb, what, path, op, ...)                                                        \
	({                                                                                         \
		struct sfs_err err_ = {0};                                                         \
		int r_ = -EOPNOTSUPP;                                                              \
		if ((sb)->provider->ops->op) {                                                     \
			count_call(rs);                                                            \
			r_ = (sb)->provider->ops->op((sb), __VA_ARGS__, &err_);                    \
		}                                                                                  \
		log_err((sb), (what), (path), r_, &err_);                                          \
	})

/* ---- attributes and listings -------------------------------------------- */

static bool attr_fresh_locked(struct rnode *n, double now)
{
	return n->attr_ok && n->attr_gen == n->rs->gen && now < n->attr_until;
}

static bool dir_fresh_locked(struct rnode *n, double now)
{
	return n->dir_ok && n->dir_gen == n->rs->gen && now < n->dir_until;
}

/* The workspace root's own attributes (the mount point of the listing
 * below it) matter least and are asked for on every path walk: they live
 * longer, so a warm `ls -l dir` costs only the listings. */
static double ttl_of(const struct rnode *n)
{
	return n->path[0] ? R.ttl : R.ttl * 10;
}

static void set_attr_locked(struct rnode *n, const struct sfs_rstat *st, double now)
{
	if (rstat_copy(&n->st, st) == 0) {
		n->attr_ok = true;
		n->attr_until = now + ttl_of(n);
		n->attr_gen = n->rs->gen;
	} else {
		n->attr_ok = false;
	}
}

static void drop_dir_locked(struct rnode *n)
{
	ents_free(n->ents, n->nents);
	n->ents = NULL;
	n->nents = 0;
	n->dir_ok = false;
}

static struct rent *dir_find_locked(struct rnode *d, const char *name)
{
	for (size_t i = 0; i < d->nents; i++)
		if (strcmp(d->ents[i].name, name) == 0)
			return &d->ents[i];
	return NULL;
}

/* Our own mutation changed parent/name: keep a fresh listing in step. */
static void dir_update_locked(struct rnode *d, const char *name, const struct sfs_rstat *st)
{
	if (!d || !d->dir_ok)
		return;
	struct rent *e = dir_find_locked(d, name);
	if (!st) {
		if (e) {
			free(e->name);
			free(e->st.link);
			*e = d->ents[--d->nents];
		}
		return;
	}
	if (e) {
		if (rstat_copy(&e->st, st))
			drop_dir_locked(d);
		return;
	}
	struct rent *grown = realloc(d->ents, (d->nents + 1) * sizeof(*grown));
	char *nm = strdup(name);
	if (!grown || !nm) {
		free(nm);
		if (grown)
			d->ents = grown;
		drop_dir_locked(d);
		return;
	}
	d->ents = grown;
	memset(&d->ents[d->nents], 0, sizeof(d->ents[0]));
	d->ents[d->nents].name = nm;
	if (rstat_copy(&d->ents[d->nents].st, st)) {
		free(nm);
		drop_dir_locked(d);
		return;
	}
	d->nents++;
}

static void mutated_locked(struct rsb *rs)
{
	rs->wctr++;
}

/* Moves a provider listing's names and attributes into cache entries (v keeps
 * empty shells for sfs_rdirents_free); NULL on ENOMEM, v untouched. */
static struct rent *take_entries(struct sfs_rdirent *v, size_t n)
{
	struct rent *ents = calloc(n ? n : 1, sizeof(*ents));
	if (!ents)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		ents[i].name = v[i].name;
		ents[i].st = v[i].st;
		v[i].name = NULL;
		v[i].st.link = NULL;
	}
	return ents;
}

/* Installs a listing fetched while the write counter was wctr. */
static void install_listing_locked(struct rnode *d, struct sfs_rdirent *v, size_t n, uint64_t gen,
				   uint64_t wctr, double now)
{
	if (d->rs->gen != gen || d->rs->wctr != wctr)
		return; /* something changed meanwhile: don't cache a stale view */
	struct rent *ents = take_entries(v, n);
	if (!ents)
		return;
	drop_dir_locked(d);
	d->ents = ents;
	d->nents = n;
	d->dir_ok = d->listed = true;
	d->dir_until = now + R.ttl;
	d->dir_gen = gen;
	/* children we know get the listing's attributes too */
	for (size_t i = 0; i < n; i++) {
		char *p = join_path(d->path, ents[i].name);
		struct rnode *c = p ? find_path_locked(d->serial, p) : NULL;
		free(p);
		if (c && c->nopen == 0 && !c->dirty)
			set_attr_locked(c, &ents[i].st, now);
	}
}

/* Makes d's listing fresh: 0 or -errno.  R.mu is not held. */
static int ensure_listing(struct rnode *d, struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	bool fresh = dir_fresh_locked(d, now_s());
	uint64_t gen = d->rs->gen, wctr = d->rs->wctr;
	char *path = strdup(d->path);
	pthread_mutex_unlock(&R.mu);
	if (fresh) {
		free(path);
		return 0;
	}
	if (!path)
		return -ENOMEM;
	struct sfs_rdirent *v;
	size_t n;
	int r = p_list(d->rs, sb, path, &v, &n);
	free(path);
	if (r)
		return r;
	pthread_mutex_lock(&R.mu);
	install_listing_locked(d, v, n, gen, wctr, now_s());
	bool installed = d->dir_ok;
	if (!installed) {
		/* not cacheable, but this caller still wants it */
		struct rent *ents = take_entries(v, n);
		if (ents) {
			drop_dir_locked(d);
			d->ents = ents;
			d->nents = n;
			d->dir_ok = true;
			d->listed = true;
			d->dir_until = 0; /* used once, then stale */
			d->dir_gen = d->rs->gen;
		}
		installed = ents != NULL;
	}
	pthread_mutex_unlock(&R.mu);
	sfs_rdirents_free(v, n);
	return installed ? 0 : -ENOMEM;
}

/* Fresh attributes of n into *st (caller frees st->link). */
static int node_attr(struct rnode *n, struct sfs_sandbox *sb, struct sfs_rstat *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&R.mu);
	double now = now_s();
	if (n->unlinked) {
		/* its path names something else now: what we knew is all there is */
		int r = n->attr_ok ? rstat_copy(st, &n->st) : -ENOENT;
		pthread_mutex_unlock(&R.mu);
		return r;
	}
	/* unsaved local changes: the local copy answers, the remote may be away */
	if (attr_fresh_locked(n, now) || (n->dirty && n->attr_ok)) {
		int r = rstat_copy(st, &n->st);
		pthread_mutex_unlock(&R.mu);
		return r;
	}
	uint64_t gen = n->rs->gen, wctr = n->rs->wctr;
	char *path = strdup(n->path);
	struct rnode *parent = NULL;
	const char *name = NULL;
	if (path && path[0]) {
		/* a sibling of listed files: one listing answers them all */
		char *slash = strrchr(path, '/');
		if (slash)
			*slash = '\0';
		parent = find_path_locked(n->serial, slash ? path : "");
		if (slash)
			*slash = '/';
		name = slash ? slash + 1 : path;
		if (parent && parent->listed)
			parent->pins++;
		else
			parent = NULL;
	}
	pthread_mutex_unlock(&R.mu);
	if (!path) {
		node_put(parent);
		return -ENOMEM;
	}
	if (parent) {
		int r = ensure_listing(parent, sb);
		if (!r) {
			pthread_mutex_lock(&R.mu);
			struct rent *e = dir_find_locked(parent, name);
			r = e ? rstat_copy(st, &e->st) : -ENOENT;
			if (!r && parent->dir_gen == n->rs->gen)
				set_attr_locked(n, st, now_s());
			pthread_mutex_unlock(&R.mu);
		}
		node_put(parent);
		free(path);
		return r;
	}
	int r = p_stat(n->rs, sb, path, st);
	free(path);
	if (r)
		return r;
	pthread_mutex_lock(&R.mu);
	if (n->rs->gen == gen && n->rs->wctr == wctr)
		set_attr_locked(n, st, now_s());
	pthread_mutex_unlock(&R.mu);
	return 0;
}

/* ---- symlinks (SPEC §5) ------------------------------------------------- */

/* What readlink shows for a link at `path` (relative to the workspace root
 * `root`, an absolute path inside the sandbox) pointing at `target`. */
static void show_link(const char *root, const char *path, const char *target, char *out, size_t cap)
{
	int depth = 0;
	for (const char *p = path; *p; p++)
		depth += *p == '/';
	if (R.raw_links)
		snprintf(out, cap, "%s", target);
	else if (sfs_symlink_rewrite(target, root, depth, out, cap) < 0)
		snprintf(out, cap, "%s", SFS_SYMLINK_OUTSIDE_PREFIX); /* too long to show safely */
}

/* ---- replies ------------------------------------------------------------ */

static void fill_stat(const struct sfs_rstat *rs, const char *shown_link, fuse_ino_t ino,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = rs->mode ? rs->mode : (S_IFREG | 0644);
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = S_ISLNK(st->st_mode) && shown_link ? (off_t)strlen(shown_link) : rs->size;
	st->st_blksize = 4096;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)rs->mtime;
}

static void node_stat(struct rnode *n, struct sfs_sandbox *sb, const struct sfs_rstat *rs,
		      struct stat *st)
{
	char shown[8192];
	const char *link = NULL;
	if (S_ISLNK(rs->mode) && rs->link) {
		char *path = node_path(n);
		show_link(sb ? sb->workspace : NULL, path ? path : "", rs->link, shown,
			  sizeof(shown));
		free(path);
		link = shown;
	}
	fill_stat(rs, link, SFS_INO_RWS(n->id), st);
	/* an open or unsaved file: the local copy is the truth */
	pthread_mutex_lock(&R.mu);
	bool local = (n->nopen > 0 || n->dirty) && n->cfd >= 0;
	int cfd = n->cfd;
	pthread_mutex_unlock(&R.mu);
	struct stat cst;
	if (local && S_ISREG(st->st_mode) && fstat(cfd, &cst) == 0) {
		st->st_size = cst.st_size;
		st->st_blocks = cst.st_blocks;
		if (cst.st_mtime > st->st_mtime)
			st->st_mtime = st->st_ctime = cst.st_mtime;
	}
}

static void entry_init(struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr_timeout = R.ttl;
	e->entry_timeout = R.ttl;
}

/* Finds or makes the node for path, counts one lookup, fills e. */
static int entry_for(struct rsb *rs, struct sfs_sandbox *sb, const char *path,
		     const struct sfs_rstat *st, bool cache_attr, struct fuse_entry_param *e)
{
	pthread_mutex_lock(&R.mu);
	struct rnode *n = find_path_locked(rs->serial, path);
	if (!n)
		n = new_node_locked(rs, path);
	if (!n) {
		pthread_mutex_unlock(&R.mu);
		return -ENOMEM;
	}
	if (cache_attr && n->nopen == 0 && !n->dirty)
		set_attr_locked(n, st, now_s());
	n->nlookup++;
	n->pins++;
	pthread_mutex_unlock(&R.mu);
	entry_init(e);
	e->ino = SFS_INO_RWS(n->id);
	node_stat(n, sb, st, &e->attr);
	node_put(n);
	return 0;
}

static void reply_err(fuse_req_t req, int r)
{
	fuse_reply_err(req, r == -ENOSYS || r == -EOPNOTSUPP ? EOPNOTSUPP : -r);
}

/* ---- lookup, getattr, readlink ------------------------------------------ */

void rws_lookup_root(fuse_req_t req, uint32_t serial)
{
	struct sfs_sandbox *sb = tree_get_serial(serial);
	if (!sb) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rsb_find_locked(serial, true);
	struct rnode *n = rs ? find_path_locked(serial, "") : NULL;
	if (rs && !n)
		n = new_node_locked(rs, "");
	if (n)
		n->pins++;
	pthread_mutex_unlock(&R.mu);
	if (!n) {
		tree_put(sb);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct sfs_rstat st;
	int r = node_attr(n, sb, &st);
	if (!r && !S_ISDIR(st.mode))
		r = -ENOTDIR;
	if (!r) {
		struct fuse_entry_param e;
		r = entry_for(rs, sb, "", &st, false, &e);
		e.attr_timeout = e.entry_timeout = ttl_of(n);
		if (!r)
			fuse_reply_entry(req, &e);
	}
	rstat_free(&st);
	node_put(n);
	tree_put(sb);
	if (r)
		reply_err(req, r);
}

static void rws_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rnode *d = node_get(parent);
	struct sfs_sandbox *sb = d ? sandbox_of(d) : NULL;
	int r = 0;
	char *path = NULL;
	struct sfs_rstat st = {0};
	if (!sb) {
		r = -ENOENT;
		goto out;
	}
	if (!name_ok(name) || strlen(name) > 255) {
		r = strlen(name) > 255 ? -ENAMETOOLONG : -ENOENT;
		goto out;
	}
	pthread_mutex_lock(&R.mu);
	path = join_path(d->path, name);
	double now = now_s();
	struct rnode *c = path ? find_path_locked(d->serial, path) : NULL;
	bool have = false;
	if (c && (attr_fresh_locked(c, now) || (c->dirty && c->attr_ok))) {
		have = rstat_copy(&st, &c->st) == 0;
	} else if (dir_fresh_locked(d, now)) {
		struct rent *e = dir_find_locked(d, name);
		if (!e)
			r = -ENOENT;
		else
			have = rstat_copy(&st, &e->st) == 0;
	}
	bool use_list = d->listed;
	pthread_mutex_unlock(&R.mu);
	if (!path) {
		r = -ENOMEM;
		goto out;
	}
	if (r || have)
		goto found;
	if (use_list) {
		/* a listed directory: one listing answers this and its siblings */
		r = ensure_listing(d, sb);
		if (!r) {
			pthread_mutex_lock(&R.mu);
			struct rent *e = dir_find_locked(d, name);
			r = !e ? -ENOENT : rstat_copy(&st, &e->st);
			pthread_mutex_unlock(&R.mu);
		}
	} else {
		pthread_mutex_lock(&R.mu);
		uint64_t gen = d->rs->gen, wctr = d->rs->wctr;
		pthread_mutex_unlock(&R.mu);
		r = p_stat(d->rs, sb, path, &st);
		if (!r) {
			struct fuse_entry_param e;
			pthread_mutex_lock(&R.mu);
			bool cacheable = d->rs->gen == gen && d->rs->wctr == wctr;
			pthread_mutex_unlock(&R.mu);
			r = entry_for(d->rs, sb, path, &st, cacheable, &e);
			if (!r)
				fuse_reply_entry(req, &e);
			goto done;
		}
	}
found:
	if (!r) {
		struct fuse_entry_param e;
		r = entry_for(d->rs, sb, path, &st, true, &e);
		if (!r)
			fuse_reply_entry(req, &e);
	}
done:
out:
	rstat_free(&st);
	free(path);
	if (sb)
		tree_put(sb);
	node_put(d);
	if (r)
		reply_err(req, r);
}

void rws_forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&R.mu);
	struct rnode *n = find_id_locked(SFS_INO_WS_ID(ino));
	if (n) {
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		maybe_free_locked(n);
	}
	pthread_mutex_unlock(&R.mu);
}

static void rws_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	rws_forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void rws_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		rws_forget_one(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void rws_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rnode *n = node_get(ino);
	struct sfs_sandbox *sb = n ? sandbox_of(n) : NULL;
	if (!sb) {
		node_put(n);
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct sfs_rstat st;
	int r = node_attr(n, sb, &st);
	if (r == -ENOENT) {
		/* gone remotely but open here: the local copy answers */
		pthread_mutex_lock(&R.mu);
		bool local = n->nopen > 0 && n->attr_ok;
		if (local)
			r = rstat_copy(&st, &n->st);
		pthread_mutex_unlock(&R.mu);
	}
	if (r) {
		reply_err(req, r);
	} else {
		struct stat out;
		node_stat(n, sb, &st, &out);
		fuse_reply_attr(req, &out, ttl_of(n));
	}
	rstat_free(&st);
	tree_put(sb);
	node_put(n);
}

static void rws_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct rnode *n = node_get(ino);
	struct sfs_sandbox *sb = n ? sandbox_of(n) : NULL;
	if (!sb) {
		node_put(n);
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct sfs_rstat st;
	int r = node_attr(n, sb, &st);
	if (!r && S_ISLNK(st.mode) && !st.link) {
		/* listings may not carry targets: ask for this one */
		char *path = node_path(n);
		rstat_free(&st);
		r = path ? p_stat(n->rs, sb, path, &st) : -ENOMEM;
		free(path);
	}
	if (!r && (!S_ISLNK(st.mode) || !st.link))
		r = -EINVAL;
	if (!r) {
		char shown[8192];
		char *path = node_path(n);
		show_link(sb->workspace, path ? path : "", st.link, shown, sizeof(shown));
		free(path);
		fuse_reply_readlink(req, shown);
	} else {
		reply_err(req, r);
	}
	rstat_free(&st);
	tree_put(sb);
	node_put(n);
}

/* ---- contents ----------------------------------------------------------- */

/* An open file: close writes back only through handles that could write,
 * so a reader's close never fails for someone else's unsaved data. */
struct rfh {
	struct rnode *n;
	bool writable;
};

static struct rnode *handle_node(struct fuse_file_info *fi)
{
	return ((struct rfh *)(uintptr_t)fi->fh)->n;
}

/* Gives fi a handle on n; the caller has counted the open and pinned n. */
static int attach_handle(struct fuse_file_info *fi, struct rnode *n)
{
	struct rfh *h = malloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->n = n;
	h->writable = (fi->flags & O_ACCMODE) != O_RDONLY;
	fi->fh = (uintptr_t)h;
	return 0;
}

/* Undoes an open that the kernel never got. */
static void drop_open(struct fuse_file_info *fi, struct rnode *n)
{
	free((void *)(uintptr_t)fi->fh);
	fi->fh = 0;
	pthread_mutex_lock(&R.mu);
	n->nopen--;
	n->pins--;
	maybe_free_locked(n);
	pthread_mutex_unlock(&R.mu);
}

static int open_cache_file(struct rnode *n, struct sfs_sandbox *sb)
{
	if (n->cfd >= 0)
		return 0;
	if (!cachedir_of(n->rs, sb))
		return -ENOMEM;
	char name[4200];
	cache_file_name(n, "", name, sizeof(name));
	int fd = open(name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&R.mu);
	n->cfd = fd;
	pthread_mutex_unlock(&R.mu);
	return 0;
}

/* Records (or clears) that n has data the remote does not. */
static void mark_pending(struct rnode *n, bool pending, const char *path)
{
	char name[4200];
	cache_file_name(n, ".pending", name, sizeof(name));
	if (!pending) {
		unlink(name);
		return;
	}
	char text[4200];
	int len = snprintf(text, sizeof(text), "%s\n", path);
	sfs_write_file_atomic(name, text, (size_t)len, NULL);
}

/* Fetches n's contents into its cache file; io held. */
static int fetch(struct rnode *n, struct sfs_sandbox *sb, const char *path,
		 const struct sfs_rstat *st)
{
	int r = open_cache_file(n, sb);
	if (r)
		return r;
	if (ftruncate(n->cfd, 0) < 0)
		return -errno;
	n->cvalid = false;
	r = P_CALL(n->rs, sb, "read", path, fs_read, path, n->cfd);
	if (r)
		return r;
	struct stat cst;
	if (fstat(n->cfd, &cst) < 0)
		return -errno;
	n->cvalid = true;
	n->csize = cst.st_size;
	n->cmtime = st->mtime;
	return 0;
}

static void set_dirty(struct rnode *n, bool dirty)
{
	pthread_mutex_lock(&R.mu);
	n->dirty = dirty;
	if (dirty)
		n->wseq++;
	pthread_mutex_unlock(&R.mu);
}

/* Writes n's cache file back; io held.  0, or -EIO with the data kept. */
static int write_back(struct rnode *n, struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	bool dirty = n->dirty, unlinked = n->unlinked;
	uint64_t seq = n->wseq;
	char *path = strdup(n->path);
	mode_t mode = n->attr_ok ? (n->st.mode & 07777) : 0644;
	pthread_mutex_unlock(&R.mu);
	if (!dirty || unlinked || n->cfd < 0) {
		if (unlinked && dirty)
			set_dirty(n, false); /* the file is gone: nothing to save it to */
		free(path);
		return 0;
	}
	if (!path)
		return -ENOMEM;
	int r = P_CALL(n->rs, sb, "write back", path, fs_write, path, n->cfd, mode ? mode : 0644);
	if (r) {
		mark_pending(n, true, path);
		pthread_mutex_lock(&R.mu);
		n->failed = true;
		n->retry_at = now_s() + sfs_config_get_double("remote.retry_interval", 1.0);
		pthread_mutex_unlock(&R.mu);
		pthread_cond_signal(&R.cv);
		sfs_log(SFS_LOG_WARN, "%s: workspace: %s not saved yet (kept in %s, retrying)",
			sb->name, path, n->rs->cachedir ? n->rs->cachedir : "the cache");
		free(path);
		return -EIO;
	}
	struct stat cst;
	off_t size = fstat(n->cfd, &cst) == 0 ? cst.st_size : 0;
	pthread_mutex_lock(&R.mu);
	bool again = n->wseq != seq; /* written to meanwhile: stays dirty */
	if (!again)
		n->dirty = false;
	bool was_failed = n->failed;
	n->failed = false;
	mutated_locked(n->rs);
	pthread_mutex_unlock(&R.mu);
	mark_pending(n, false, path);
	if (was_failed)
		sfs_log(SFS_LOG_INFO, "%s: workspace: %s saved after a retry", sb->name, path);
	/* learn the remote mtime, so the next open knows its copy is current */
	struct sfs_rstat st;
	if (p_stat(n->rs, sb, path, &st) == 0) {
		n->cvalid = st.size == size;
		n->csize = size;
		n->cmtime = st.mtime;
		char *slash = strrchr(path, '/');
		if (slash)
			*slash = '\0';
		pthread_mutex_lock(&R.mu);
		set_attr_locked(n, &st, now_s());
		dir_update_locked(find_path_locked(n->serial, slash ? path : ""),
				  slash ? slash + 1 : path, &st);
		pthread_mutex_unlock(&R.mu);
		rstat_free(&st);
	} else {
		n->cvalid = false;
		pthread_mutex_lock(&R.mu);
		n->attr_ok = false;
		pthread_mutex_unlock(&R.mu);
	}
	free(path);
	return 0;
}

static void rws_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rnode *n = node_get(ino);
	struct sfs_sandbox *sb = n ? sandbox_of(n) : NULL;
	if (!sb) {
		node_put(n);
		fuse_reply_err(req, ENOENT);
		return;
	}
	pthread_mutex_lock(&n->io);
	int r = 0;
	bool keep = false;
	struct sfs_rstat st = {0};
	char *path = node_path(n);
	if (!path) {
		r = -ENOMEM;
	} else if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		/* nothing to fetch: the contents are about to go */
		r = open_cache_file(n, sb);
		if (!r && ftruncate(n->cfd, 0) < 0)
			r = -errno;
		if (!r)
			set_dirty(n, true);
	} else if (n->dirty && n->cfd >= 0) {
		keep = true; /* unsaved local data wins over the remote copy */
	} else {
		r = node_attr(n, sb, &st);
		if (!r && S_ISDIR(st.mode))
			r = -EISDIR;
		else if (!r && !S_ISREG(st.mode))
			r = -EINVAL;
		else if (!r && n->cfd >= 0 && n->cvalid && n->csize == st.size &&
			 n->cmtime == st.mtime)
			keep = true;
		else if (!r)
			r = fetch(n, sb, path, &st);
	}
	if (!r) {
		pthread_mutex_lock(&R.mu);
		n->nopen++;
		n->pins++; /* the handle's */
		pthread_mutex_unlock(&R.mu);
	}
	pthread_mutex_unlock(&n->io);
	rstat_free(&st);
	free(path);
	tree_put(sb);
	if (r) {
		node_put(n);
		reply_err(req, r);
		return;
	}
	fi->keep_cache = keep;
	node_put(n);
	if (attach_handle(fi, n)) {
		pthread_mutex_lock(&R.mu);
		n->nopen--;
		n->pins--;
		maybe_free_locked(n);
		pthread_mutex_unlock(&R.mu);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fuse_reply_open(req, fi) == -ENOENT)
		drop_open(fi, n);
}

static void rws_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct rnode *n = handle_node(fi);
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = n->cfd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void rws_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			  struct fuse_file_info *fi)
{
	struct rnode *n = handle_node(fi);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = n->cfd;
	out.buf[0].pos = off;
	ssize_t w = fuse_buf_copy(&out, in, 0);
	if (w < 0) {
		fuse_reply_err(req, (int)-w);
		return;
	}
	set_dirty(n, true);
	fuse_reply_write(req, (size_t)w);
}

static int flush_node(struct rnode *n)
{
	struct sfs_sandbox *sb = sandbox_of(n);
	if (!sb)
		return 0;
	pthread_mutex_lock(&n->io);
	int r = n->dirty ? write_back(n, sb) : 0;
	pthread_mutex_unlock(&n->io);
	tree_put(sb);
	return r;
}

static void rws_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rfh *h = (struct rfh *)(uintptr_t)fi->fh;
	fuse_reply_err(req, h->writable ? -flush_node(h->n) : 0);
}

static void rws_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, fi ? -flush_node(handle_node(fi)) : 0);
}

static void rws_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rnode *n = handle_node(fi);
	free((void *)(uintptr_t)fi->fh);
	pthread_mutex_lock(&R.mu);
	n->nopen--;
	n->pins--;
	bool dirty = n->dirty;
	maybe_free_locked(n);
	pthread_mutex_unlock(&R.mu);
	if (dirty)
		pthread_cond_signal(&R.cv); /* the retry thread takes it from here */
	fuse_reply_err(req, 0);
}

/* ---- setattr ------------------------------------------------------------ */

static void rws_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	struct rnode *n = node_get(ino);
	struct sfs_sandbox *sb = n ? sandbox_of(n) : NULL;
	if (!sb) {
		node_put(n);
		fuse_reply_err(req, ENOENT);
		return;
	}
	int r = 0;
	char *path = node_path(n);
	struct sfs_rstat st = {0};
	if (!path)
		r = -ENOMEM;
	if (!r && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
	    (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != getuid()) ||
	     ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != getgid())))
		r = -EPERM;
	if (!r)
		r = node_attr(n, sb, &st);
	if (!r && (to_set & FUSE_SET_ATTR_MODE)) {
		r = P_CALL(n->rs, sb, "chmod", path, fs_chmod, path, attr->st_mode & 07777);
		if (!r) {
			st.mode = (st.mode & S_IFMT) | (attr->st_mode & 07777);
			pthread_mutex_lock(&R.mu);
			mutated_locked(n->rs);
			set_attr_locked(n, &st, now_s());
			pthread_mutex_unlock(&R.mu);
		}
	}
	if (!r && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (!S_ISREG(st.mode))
			r = S_ISDIR(st.mode) ? -EISDIR : -EINVAL;
		pthread_mutex_lock(&n->io);
		if (!r && !n->dirty && !(n->cvalid && n->csize == st.size && n->cmtime == st.mtime))
			r = attr->st_size == 0 ? open_cache_file(n, sb) : fetch(n, sb, path, &st);
		if (!r && ftruncate(n->cfd, attr->st_size) < 0)
			r = -errno;
		if (!r) {
			set_dirty(n, true);
			pthread_mutex_lock(&R.mu);
			bool open = n->nopen > 0;
			pthread_mutex_unlock(&R.mu);
			/* truncate(1) on a closed file is saved now; an open one on close */
			if (!open)
				r = write_back(n, sb);
		}
		pthread_mutex_unlock(&n->io);
		st.size = attr->st_size;
	}
	if (!r && (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))) {
		/* no remote utimens: the time shows until the cache expires */
		st.mtime = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? (int64_t)time(NULL)
							      : (int64_t)attr->st_mtime;
	}
	if (!r) {
		struct stat out;
		node_stat(n, sb, &st, &out);
		fuse_reply_attr(req, &out, R.ttl);
	} else {
		reply_err(req, r);
	}
	rstat_free(&st);
	free(path);
	tree_put(sb);
	node_put(n);
}

/* ---- namespace changes -------------------------------------------------- */

/* Resolves parent ino + name to a pinned parent, its sandbox and the path. */
static int begin(fuse_ino_t parent, const char *name, struct rnode **d, struct sfs_sandbox **sb,
		 char **path)
{
	*d = node_get(parent);
	*sb = *d ? sandbox_of(*d) : NULL;
	*path = NULL;
	if (!*sb)
		return -ENOENT;
	if (!name_ok(name))
		return -EINVAL;
	if (strlen(name) > 255)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&R.mu);
	*path = join_path((*d)->path, name);
	pthread_mutex_unlock(&R.mu);
	return *path ? 0 : -ENOMEM;
}

static void end(struct rnode *d, struct sfs_sandbox *sb, char *path)
{
	free(path);
	if (sb)
		tree_put(sb);
	node_put(d);
}

/* After a successful create/mkdir/symlink: the parent's listing and a node. */
static void created(fuse_req_t req, struct rnode *d, struct sfs_sandbox *sb, const char *path,
		    const char *name, const struct sfs_rstat *st, struct fuse_file_info *fi,
		    int cfd)
{
	pthread_mutex_lock(&R.mu);
	mutated_locked(d->rs);
	dir_update_locked(d, name, st);
	pthread_mutex_unlock(&R.mu);
	struct fuse_entry_param e;
	int r = entry_for(d->rs, sb, path, st, true, &e);
	if (r) {
		if (cfd >= 0)
			close(cfd);
		reply_err(req, r);
		return;
	}
	if (!fi) {
		fuse_reply_entry(req, &e);
		return;
	}
	pthread_mutex_lock(&R.mu);
	struct rnode *n = find_id_locked(SFS_INO_WS_ID(e.ino));
	n->pins++;
	n->nopen++;
	if (n->cfd >= 0)
		close(n->cfd);
	n->cfd = cfd;
	pthread_mutex_unlock(&R.mu);
	pthread_mutex_lock(&n->io);
	n->cvalid = true;
	n->csize = 0;
	n->cmtime = st->mtime;
	pthread_mutex_unlock(&n->io);
	if (attach_handle(fi, n)) {
		pthread_mutex_lock(&R.mu);
		n->nopen--;
		n->pins--;
		maybe_free_locked(n);
		pthread_mutex_unlock(&R.mu);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		drop_open(fi, n);
}

static void rws_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct rnode *d;
	struct sfs_sandbox *sb;
	char *path;
	int r = begin(parent, name, &d, &sb, &path);
	int cfd = -1;
	char tmpl[4200];
	if (!r && !cachedir_of(d->rs, sb))
		r = -ENOMEM;
	if (!r) {
		snprintf(tmpl, sizeof(tmpl), "%s/new-XXXXXX", d->rs->cachedir);
		cfd = mkostemp(tmpl, O_CLOEXEC);
		if (cfd < 0)
			r = -errno;
	}
	if (!r && (fi->flags & O_EXCL)) {
		/* a fresh listing answers; otherwise ask */
		pthread_mutex_lock(&R.mu);
		bool known = dir_fresh_locked(d, now_s());
		bool exists = known && dir_find_locked(d, name);
		pthread_mutex_unlock(&R.mu);
		struct sfs_rstat old;
		if (!known && p_stat(d->rs, sb, path, &old) == 0) {
			exists = true;
			rstat_free(&old);
		}
		if (exists)
			r = -EEXIST;
	}
	/* created remotely at once, so every later call (rename ...) finds it */
	if (!r)
		r = P_CALL(d->rs, sb, "create", path, fs_write, path, cfd, mode & 07777);
	if (!r) {
		struct sfs_rstat st = {.mode = S_IFREG | (mode & 07777), .mtime = time(NULL)};
		/* the cache file takes the node's name once the node exists */
		created(req, d, sb, path, name, &st, fi, cfd);
		pthread_mutex_lock(&R.mu);
		struct rnode *n = find_path_locked(d->serial, path);
		char final[4200];
		if (n && n->cfd == cfd) {
			cache_file_name(n, "", final, sizeof(final));
			if (rename(tmpl, final) < 0)
				sfs_log(SFS_LOG_WARN, "workspace cache: %s: %s", final,
					strerror(errno));
		} else {
			unlink(tmpl);
		}
		pthread_mutex_unlock(&R.mu);
	} else {
		if (cfd >= 0) {
			close(cfd);
			unlink(tmpl);
		}
		reply_err(req, r);
	}
	end(d, sb, path);
}

static void rws_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	struct rnode *d;
	struct sfs_sandbox *sb;
	char *path;
	int r = begin(parent, name, &d, &sb, &path);
	int fd = -1;
	if (!r) {
		FILE *f = tmpfile();
		fd = f ? dup(fileno(f)) : -1;
		if (f)
			fclose(f);
		if (fd < 0)
			r = -errno;
	}
	if (!r)
		r = P_CALL(d->rs, sb, "create", path, fs_write, path, fd, mode & 07777);
	if (fd >= 0)
		close(fd);
	if (!r) {
		struct sfs_rstat st = {.mode = S_IFREG | (mode & 07777), .mtime = time(NULL)};
		created(req, d, sb, path, name, &st, NULL, -1);
	} else {
		reply_err(req, r);
	}
	end(d, sb, path);
}

static void rws_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct rnode *d;
	struct sfs_sandbox *sb;
	char *path;
	int r = begin(parent, name, &d, &sb, &path);
	if (!r)
		r = P_CALL(d->rs, sb, "mkdir", path, fs_mkdir, path, mode & 07777);
	if (!r) {
		struct sfs_rstat st = {.mode = S_IFDIR | (mode & 07777), .mtime = time(NULL)};
		created(req, d, sb, path, name, &st, NULL, -1);
	} else {
		reply_err(req, r);
	}
	end(d, sb, path);
}

static void rws_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct rnode *d;
	struct sfs_sandbox *sb;
	char *path;
	int r = begin(parent, name, &d, &sb, &path);
	if (!r)
		r = P_CALL(d->rs, sb, "symlink", path, fs_symlink, link, path);
	if (!r) {
		struct sfs_rstat st = {.mode = S_IFLNK | 0777,
				       .size = (off_t)strlen(link),
				       .mtime = time(NULL),
				       .link = (char *)link};
		created(req, d, sb, path, name, &st, NULL, -1);
	} else {
		reply_err(req, r);
	}
	end(d, sb, path);
}

/* A path no longer names node n (unlinked, or replaced by a rename). */
static void detach_path_locked(uint32_t serial, const char *path)
{
	struct rnode *n = find_path_locked(serial, path);
	if (!n)
		return;
	unhash_path_locked(n);
	n->unlinked = true;
	maybe_free_locked(n);
}

static void remove_common(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct rnode *d;
	struct sfs_sandbox *sb;
	char *path;
	int r = begin(parent, name, &d, &sb, &path);
	if (!r && dir) {
		/* a known non-empty listing answers without a round trip */
		pthread_mutex_lock(&R.mu);
		struct rnode *c = find_path_locked(d->serial, path);
		if (c && dir_fresh_locked(c, now_s()) && c->nents > 0)
			r = -ENOTEMPTY;
		pthread_mutex_unlock(&R.mu);
	}
	if (!r)
		r = P_CALL(d->rs, sb, dir ? "rmdir" : "unlink", path, fs_remove, path, dir);
	if (!r) {
		pthread_mutex_lock(&R.mu);
		mutated_locked(d->rs);
		dir_update_locked(d, name, NULL);
		detach_path_locked(d->serial, path);
		pthread_mutex_unlock(&R.mu);
	}
	fuse_reply_err(req, r == -EOPNOTSUPP ? EOPNOTSUPP : -r);
	end(d, sb, path);
}

static void rws_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, false);
}

static void rws_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, true);
}

/* Moves every node at `from` or below it to `to`. */
static void repath_locked(uint32_t serial, const char *from, const char *to)
{
	size_t fl = strlen(from);
	struct rnode *moved = NULL;
	for (size_t b = 0; b < NBUCKETS; b++) {
		for (struct rnode *n = R.by_id[b]; n; n = n->id_next) {
			if (n->serial != serial || n->unlinked)
				continue;
			if (strncmp(n->path, from, fl) || (n->path[fl] && n->path[fl] != '/'))
				continue;
			char *np;
			if (asprintf(&np, "%s%s", to, n->path + fl) < 0) {
				/* cannot follow it: make it unreachable rather than wrong */
				unhash_path_locked(n);
				n->unlinked = true;
				continue;
			}
			unhash_path_locked(n);
			free(n->path);
			n->path = np;
			n->attr_ok = false;
			/* rehash after the walk: path buckets are not the id buckets */
			n->path_next = moved;
			moved = n;
		}
	}
	while (moved) {
		struct rnode *n = moved;
		moved = n->path_next;
		hash_path_locked(n);
	}
}

static void rws_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	if (flags & ~RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct rnode *d, *nd = NULL;
	struct sfs_sandbox *sb, *nsb = NULL;
	char *from, *to = NULL;
	int r = begin(parent, name, &d, &sb, &from);
	if (!r)
		r = begin(newparent, newname, &nd, &nsb, &to);
	if (!r && nd->serial != d->serial)
		r = -EXDEV;
	struct sfs_rstat st = {0};
	if (!r && (flags & RENAME_NOREPLACE)) {
		int s = p_stat(d->rs, sb, to, &st);
		rstat_free(&st);
		if (s == 0)
			r = -EEXIST;
	}
	/* hold the moving file's io so no write-back goes to the old path */
	pthread_mutex_lock(&R.mu);
	struct rnode *src = r ? NULL : find_path_locked(d->serial, from);
	if (src)
		src->pins++;
	pthread_mutex_unlock(&R.mu);
	if (src)
		pthread_mutex_lock(&src->io);
	if (!r)
		r = P_CALL(d->rs, sb, "rename", from, fs_rename, from, to);
	if (!r) {
		pthread_mutex_lock(&R.mu);
		mutated_locked(d->rs);
		struct rent *e = dir_find_locked(d, name);
		bool have = e && rstat_copy(&st, &e->st) == 0;
		dir_update_locked(d, name, NULL);
		if (have)
			dir_update_locked(nd, newname, &st);
		else
			drop_dir_locked(nd);
		detach_path_locked(d->serial, to);
		repath_locked(d->serial, from, to);
		pthread_mutex_unlock(&R.mu);
		rstat_free(&st);
	}
	if (src) {
		pthread_mutex_unlock(&src->io);
		node_put(src);
	}
	reply_err(req, r);
	end(nd, nsb, to);
	end(d, sb, from);
}

static void rws_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EPERM); /* no hard links through the file API */
}

/* ---- directories -------------------------------------------------------- */

struct rdh {
	struct rent *v;
	size_t n;
	fuse_ino_t self;
	char *path;
};

static void rws_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rnode *d = node_get(ino);
	struct sfs_sandbox *sb = d ? sandbox_of(d) : NULL;
	if (!sb) {
		node_put(d);
		fuse_reply_err(req, ENOENT);
		return;
	}
	int r = ensure_listing(d, sb);
	struct rdh *h = r ? NULL : calloc(1, sizeof(*h));
	if (!r && !h)
		r = -ENOMEM;
	if (!r) {
		/* the listing as it is now, for the whole walk */
		pthread_mutex_lock(&R.mu);
		h->v = calloc(d->nents ? d->nents : 1, sizeof(*h->v));
		h->path = strdup(d->path);
		if (!h->v || !h->path)
			r = -ENOMEM;
		for (size_t i = 0; !r && i < d->nents; i++) {
			h->v[i].name = strdup(d->ents[i].name);
			if (!h->v[i].name || rstat_copy(&h->v[i].st, &d->ents[i].st))
				r = -ENOMEM;
			h->n = i + 1;
		}
		pthread_mutex_unlock(&R.mu);
		h->self = ino;
	}
	tree_put(sb);
	node_put(d);
	if (r) {
		if (h) {
			ents_free(h->v, h->n);
			free(h->path);
			free(h);
		}
		reply_err(req, r);
		return;
	}
	fi->fh = (uintptr_t)h;
	fi->cache_readdir = 0;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		ents_free(h->v, h->n);
		free(h->path);
		free(h);
	}
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, bool plus)
{
	struct rdh *h = (struct rdh *)(uintptr_t)fi->fh;
	struct rnode *d = node_get(ino);
	struct sfs_sandbox *sb = d ? sandbox_of(d) : NULL;
	if (!sb) {
		node_put(d);
		fuse_reply_err(req, ENOENT);
		return;
	}
	char *buf = malloc(size);
	if (!buf) {
		tree_put(sb);
		node_put(d);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	for (off_t i = off; i < (off_t)h->n + 2; i++) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		const char *name;
		if (i < 2) {
			name = i == 0 ? "." : "..";
			e.attr.st_ino = i == 0 ? ino : FUSE_ROOT_ID;
			e.attr.st_mode = S_IFDIR;
			if (plus) {
				/* no lookup is counted for these: ino 0 says so */
				e.ino = 0;
			}
		} else {
			struct rent *ent = &h->v[i - 2];
			name = ent->name;
			e.attr.st_mode = ent->st.mode;
			e.attr.st_ino = 1; /* plain readdir needs a non-zero placeholder */
		}
		size_t need;
		if (!plus || i < 2) {
			need = plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
							     i + 1)
				    : fuse_add_direntry(req, buf + used, size - used, name, &e.attr,
							i + 1);
			if (need > size - used)
				break;
			used += need;
			continue;
		}
		/* fits? measure first: a counted lookup must reach the kernel */
		struct fuse_entry_param probe;
		memset(&probe, 0, sizeof(probe));
		if (fuse_add_direntry_plus(req, NULL, 0, name, &probe, i + 1) > size - used)
			break;
		char *path = join_path(h->path, name);
		int r = path ? entry_for(d->rs, sb, path, &h->v[i - 2].st, true, &e) : -ENOMEM;
		free(path);
		if (r)
			break;
		used += fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
	tree_put(sb);
	node_put(d);
}

static void rws_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void rws_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void rws_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rdh *h = (struct rdh *)(uintptr_t)fi->fh;
	if (h) {
		ents_free(h->v, h->n);
		free(h->path);
		free(h);
	}
	fuse_reply_err(req, 0);
}

static void rws_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static void rws_statfs(fuse_req_t req, fuse_ino_t ino)
{
	/* the API has no statfs: report plenty rather than "full" */
	struct statvfs sv = {.f_bsize = 4096,
			     .f_frsize = 4096,
			     .f_blocks = 1ULL << 28,
			     .f_bfree = 1ULL << 27,
			     .f_bavail = 1ULL << 27,
			     .f_files = 1ULL << 24,
			     .f_ffree = 1ULL << 23,
			     .f_favail = 1ULL << 23,
			     .f_namemax = 255};
	fuse_reply_statfs(req, &sv);
}

/* No extended attributes through the file API; answered here so the kernel
 * never sees ENOSYS (which would switch xattrs off for every workspace). */
static void rws_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	fuse_reply_err(req, ENOTSUP);
}

static void rws_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	fuse_reply_err(req, ENODATA);
}

static void rws_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

static void rws_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, ENODATA);
}

static void rws_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	fuse_reply_err(req, EOPNOTSUPP);
}

static void rws_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			  struct fuse_file_info *fi)
{
	fuse_reply_err(req, EOPNOTSUPP);
}

static void rws_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
				struct fuse_file_info *fi_out, size_t len, int flags)
{
	fuse_reply_err(req, EOPNOTSUPP); /* callers fall back to read + write */
}

static void rws_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	off_t r = lseek(handle_node(fi)->cfd, off, whence);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, r);
}

const struct fuse_lowlevel_ops rws_ops = {
    .lookup = rws_lookup,
    .forget = rws_forget,
    .forget_multi = rws_forget_multi,
    .getattr = rws_getattr,
    .setattr = rws_setattr,
    .readlink = rws_readlink,
    .mknod = rws_mknod,
    .mkdir = rws_mkdir,
    .unlink = rws_unlink,
    .rmdir = rws_rmdir,
    .symlink = rws_symlink,
    .rename = rws_rename,
    .link = rws_link,
    .open = rws_open,
    .read = rws_read,
    .write_buf = rws_write_buf,
    .flush = rws_flush,
    .release = rws_release,
    .fsync = rws_fsync,
    .opendir = rws_opendir,
    .readdir = rws_readdir,
    .readdirplus = rws_readdirplus,
    .releasedir = rws_releasedir,
    .fsyncdir = rws_fsyncdir,
    .statfs = rws_statfs,
    .setxattr = rws_setxattr,
    .getxattr = rws_getxattr,
    .listxattr = rws_listxattr,
    .removexattr = rws_removexattr,
    .create = rws_create,
    .flock = rws_flock,
    .fallocate = rws_fallocate,
    .copy_file_range = rws_copy_file_range,
    .lseek = rws_lseek,
};

/* ---- invalidation, retries, lifetime ------------------------------------ */

void rws_invalidate_sandbox(uint32_t serial)
{
	fuse_ino_t *inos = NULL;
	size_t count = 0, cap = 0;
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rsb_find_locked(serial, false);
	if (!rs) {
		pthread_mutex_unlock(&R.mu);
		return;
	}
	rs->gen++;
	for (size_t b = 0; b < NBUCKETS; b++) {
		for (struct rnode *n = R.by_id[b]; n; n = n->id_next) {
			if (n->serial != serial)
				continue;
			n->attr_ok = false;
			drop_dir_locked(n);
			if (count == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				fuse_ino_t *grown = realloc(inos, ncap * sizeof(*grown));
				if (!grown)
					continue; /* the kernel's copy then lives out its TTL */
				inos = grown;
				cap = ncap;
			}
			inos[count++] = SFS_INO_RWS(n->id);
		}
	}
	pthread_mutex_unlock(&R.mu);
	/* clean contents are revalidated on the next open (the generation
	 * moved, so attributes are fetched again); the kernel drops its pages */
	for (size_t i = 0; i < count; i++)
		notify_inval_inode(inos[i]);
	free(inos);
}

void rws_sandbox_gone(uint32_t serial)
{
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rsb_find_locked(serial, false);
	if (rs) {
		rs->gone = true;
		rs->gen++;
		for (size_t b = 0; b < NBUCKETS; b++) {
			for (struct rnode *n = R.by_id[b], *next; n; n = next) {
				next = n->id_next;
				if (n->serial != serial)
					continue;
				if (n->dirty)
					sfs_log(SFS_LOG_WARN,
						"workspace: %s had unsaved changes when its "
						"sandbox went away",
						n->path[0] ? n->path : "/");
				n->dirty = false;
				drop_dir_locked(n);
				maybe_free_locked(n);
			}
		}
	}
	pthread_mutex_unlock(&R.mu);
}

unsigned long rws_calls(uint32_t serial)
{
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rsb_find_locked(serial, false);
	unsigned long n = rs ? __atomic_load_n(&rs->calls, __ATOMIC_RELAXED) : 0;
	pthread_mutex_unlock(&R.mu);
	return n;
}

/* Picks a dirty, closed node whose retry is due, pinned; NULL if none. */
static struct rnode *next_due_locked(double now, double *soonest)
{
	for (size_t b = 0; b < NBUCKETS; b++) {
		for (struct rnode *n = R.by_id[b]; n; n = n->id_next) {
			if (!n->dirty || n->rs->gone || n->nopen > 0)
				continue;
			if (n->retry_at <= now) {
				n->pins++;
				return n;
			}
			if (n->retry_at < *soonest)
				*soonest = n->retry_at;
		}
	}
	return NULL;
}

static void *retry_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&R.mu);
	while (!R.stop) {
		double soonest = now_s() + 5;
		struct rnode *n = next_due_locked(now_s(), &soonest);
		if (!n) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			double wait = soonest - now_s();
			if (wait < 0.05)
				wait = 0.05;
			until.tv_sec += (time_t)wait;
			until.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&R.cv, &R.mu, &until);
			continue;
		}
		/* a closed file that was never tried (close went fine) waits its turn */
		n->retry_at = now_s() + sfs_config_get_double("remote.retry_interval", 1.0);
		pthread_mutex_unlock(&R.mu);
		struct sfs_sandbox *sb = sandbox_of(n);
		if (sb) {
			pthread_mutex_lock(&n->io);
			write_back(n, sb);
			pthread_mutex_unlock(&n->io);
			tree_put(sb);
		}
		pthread_mutex_lock(&R.mu);
		n->pins--;
		maybe_free_locked(n);
	}
	pthread_mutex_unlock(&R.mu);
	return NULL;
}

/*
 * Unsaved files of an earlier daemon (a .pending file beside the data) get
 * nodes again and go to the retry thread; other leftovers are stale caches.
 * Runs before any node of the sandbox exists, so names cannot collide.
 */
static void recover_sandbox(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rsb_find_locked(sb->serial, true);
	pthread_mutex_unlock(&R.mu);
	const char *dir = rs ? cachedir_of(rs, sb) : NULL;
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return;
	char **pending = NULL;
	size_t npending = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		size_t nl = strlen(de->d_name);
		if (nl > 8 && !strcmp(de->d_name + nl - 8, ".pending")) {
			char **grown = realloc(pending, (npending + 1) * sizeof(*grown));
			char *stem = strndup(de->d_name, nl - 8);
			if (grown)
				pending = grown;
			if (grown && stem)
				pending[npending++] = stem;
			else
				free(stem);
			continue;
		}
		char pend[4300];
		snprintf(pend, sizeof(pend), "%s.pending", path);
		if (access(pend, F_OK) != 0)
			unlink(path); /* a clean copy from an earlier life */
	}
	closedir(d);
	/* first out of the way of the new names, then adopted */
	for (size_t i = 0; i < npending; i++) {
		char from[4200], to[4200];
		snprintf(from, sizeof(from), "%s/%s", dir, pending[i]);
		snprintf(to, sizeof(to), "%s/.recover-%s", dir, pending[i]);
		rename(from, to);
		snprintf(from, sizeof(from), "%s/%s.pending", dir, pending[i]);
		snprintf(to, sizeof(to), "%s/.recover-%s.pending", dir, pending[i]);
		rename(from, to);
	}
	for (size_t i = 0; i < npending; i++) {
		char data[4200], pend[4300], *text = NULL;
		snprintf(data, sizeof(data), "%s/.recover-%s", dir, pending[i]);
		snprintf(pend, sizeof(pend), "%s.pending", data);
		free(pending[i]);
		if (sfs_read_file(pend, &text, NULL) < 0)
			continue;
		text[strcspn(text, "\n")] = '\0';
		int fd = open(data, O_RDWR | O_CLOEXEC);
		pthread_mutex_lock(&R.mu);
		struct rnode *n = fd >= 0 ? new_node_locked(rs, text) : NULL;
		if (n) {
			n->cfd = fd;
			n->dirty = true;
			n->wseq++;
			n->retry_at = 0;
		}
		pthread_mutex_unlock(&R.mu);
		if (!n) {
			if (fd >= 0)
				close(fd);
			sfs_log(SFS_LOG_WARN, "%s: workspace: cannot recover %s (data kept in %s)",
				sb->name, text, data);
			free(text);
			continue;
		}
		char name[4200];
		cache_file_name(n, "", name, sizeof(name));
		rename(data, name);
		mark_pending(n, true, text);
		unlink(pend);
		sfs_log(SFS_LOG_INFO,
			"%s: workspace: %s has unsaved changes from before a restart; "
			"saving them",
			sb->name, text);
		free(text);
	}
	free(pending);
}

int rws_init(void)
{
	R.ttl = sfs_config_get_double("remote.attr_timeout", 1.0);
	if (R.ttl <= 0)
		R.ttl = 0.001; /* never exactly 0: the kernel would re-look-up everything */
	R.raw_links = !strcmp(sfs_config_get("symlinks", "safe"), "raw");
	R.stop = false;
	char(*names)[64] = calloc(4096, sizeof(*names));
	uint32_t *serials = calloc(4096, sizeof(*serials));
	size_t n = names && serials ? tree_list(names, serials, 4096) : 0;
	for (size_t i = 0; i < n; i++) {
		struct sfs_sandbox *sb = tree_get_serial(serials[i]);
		if (sb && sb->provider->ops->fs_stat)
			recover_sandbox(sb);
		tree_put(sb);
	}
	free(names);
	free(serials);
	int r = pthread_create(&R.retry_thread, NULL, retry_main, NULL);
	if (r)
		return -r;
	R.running = true;
	return 0;
}

void rws_shutdown(void)
{
	if (R.running) {
		pthread_mutex_lock(&R.mu);
		R.stop = true;
		pthread_cond_broadcast(&R.cv);
		pthread_mutex_unlock(&R.mu);
		pthread_join(R.retry_thread, NULL);
		R.running = false;
	}
	size_t kept = 0;
	pthread_mutex_lock(&R.mu);
	for (size_t b = 0; b < NBUCKETS; b++) {
		while (R.by_id[b]) {
			struct rnode *n = R.by_id[b];
			R.by_id[b] = n->id_next;
			if (n->cfd >= 0) {
				close(n->cfd);
				if (!n->dirty) {
					char name[4200];
					cache_file_name(n, "", name, sizeof(name));
					unlink(name);
				}
			}
			kept += n->dirty;
			rstat_free(&n->st);
			ents_free(n->ents, n->nents);
			pthread_mutex_destroy(&n->io);
			free(n->path);
			free(n);
		}
		R.by_path[b] = NULL;
	}
	while (R.sbs) {
		struct rsb *s = R.sbs;
		R.sbs = s->next;
		free(s->cachedir);
		free(s);
	}
	pthread_mutex_unlock(&R.mu);
	if (kept)
		sfs_log(SFS_LOG_WARN,
			"workspace: %zu remote file(s) with unsaved changes are kept in the "
			"sandboxes' rcache/ directories (see the .pending files)",
			kept);
}
