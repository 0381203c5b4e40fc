/*
 * A snapshot's tree flattened into arrays and kept in memory, so that a
 * diff reads the snapshot's trees once per daemon, not once per `cat
 * snapshots/ID/diff` (reading them back from loose objects, inflating and
 * checking each one's hash was a quarter of a diff's time).  A commit never
 * changes, so a manifest needs no invalidation: it is keyed by the commit's
 * id, shared read-only between threads by reference count, and the least
 * recently used are dropped beyond MF_BUDGET entries in all.
 *
 * Each directory's entries are contiguous and sorted by strcmp of the name
 * (git's own order sorts a directory as if named "NAME/"), so a name read
 * from the live directory is found by binary search; each directory has a
 * hash of its names, which a stat cache notes for a live directory found
 * holding exactly those (compare.c).
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MF_BUDGET (1u << 20) /* entries in all cached manifests: ~64 MiB */
#define MF_SLOTS 8

struct mf_build {
	struct manifest *m;
	size_t capents, capdirs, capnames;
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t cap2 = *cap ? *cap : 64;
	while (cap2 < need)
		cap2 *= 2;
	void *n = realloc(*v, cap2 * size);
	if (!n)
		return -ENOMEM;
	*v = n;
	*cap = cap2;
	return 0;
}

static int by_name(const void *a, const void *b, void *names)
{
	const struct mf_ent *x = a, *y = b;
	return strcmp((const char *)names + x->name, (const char *)names + y->name);
}

/* The id a directory holding exactly these names has in a stat cache: the
 * hash of the names, each with its NUL, in strcmp order. */
static int names_id(const struct manifest *m, size_t first, size_t n, git_oid *out)
{
	size_t len = 0;
	for (size_t i = first; i < first + n; i++)
		len += strlen(m->names + m->ents[i].name) + 1;
	char *buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	char *p = buf;
	for (size_t i = first; i < first + n; i++) {
		size_t l = strlen(m->names + m->ents[i].name) + 1;
		memcpy(p, m->names + m->ents[i].name, l);
		p += l;
	}
	int rc = git_odb_hash(out, buf, len, GIT_OBJECT_BLOB);
	free(buf);
	return rc < 0 ? -ENOMEM : 0;
}

/* Adds the directory of tree t and, depth first, those below it; its index
 * in *dir. */
static int add_dir(struct mf_build *b, git_repository *repo, const git_tree *t, uint32_t *dir)
{
	struct manifest *m = b->m;
	size_t n = git_tree_entrycount(t), first = m->nents;
	if (grow((void **)&m->dirs, &b->capdirs, m->ndirs + 1, sizeof(*m->dirs)) ||
	    grow((void **)&m->ents, &b->capents, first + n, sizeof(*m->ents)))
		return -ENOMEM;
	*dir = (uint32_t)m->ndirs++;
	m->dirs[*dir] = (struct mf_dir){.first = (uint32_t)first, .n = (uint32_t)n};
	m->nents += n;
	for (size_t i = 0; i < n; i++) {
		const git_tree_entry *e = git_tree_entry_byindex(t, i);
		const char *name = git_tree_entry_name(e);
		size_t len = strlen(name) + 1;
		if (grow((void **)&m->names, &b->capnames, m->namelen + len, 1))
			return -ENOMEM;
		memcpy(m->names + m->namelen, name, len);
		m->ents[first + i] = (struct mf_ent){
		    .name = (uint32_t)m->namelen, .mode = git_tree_entry_filemode(e), .sub = -1};
		git_oid_cpy(&m->ents[first + i].oid, git_tree_entry_id(e));
		m->namelen += len;
	}
	qsort_r(m->ents + first, n, sizeof(*m->ents), by_name, m->names);
	if (names_id(m, first, n, &m->dirs[*dir].names))
		return -ENOMEM;
	for (size_t i = first; i < first + n; i++) {
		if (m->ents[i].mode != GIT_FILEMODE_TREE)
			continue;
		git_tree *sub = NULL;
		git_oid id = m->ents[i].oid;
		if (git_tree_lookup(&sub, repo, &id) < 0)
			continue; /* sub stays -1: the walk lists the path */
		uint32_t d;
		int r = add_dir(b, repo, sub, &d);
		git_tree_free(sub);
		if (r)
			return r;
		m->ents[i].sub = (int32_t)d; /* m->ents may have moved: by index */
	}
	return 0;
}

static void mf_free(struct manifest *m)
{
	if (!m)
		return;
	free(m->ents);
	free(m->dirs);
	free(m->names);
	free(m);
}

static int build(git_repository *repo, const git_oid *cid, struct manifest **out,
		 struct sfs_err *err)
{
	git_commit *c = NULL;
	git_tree *t = NULL;
	if (git_commit_lookup(&c, repo, cid) < 0) {
		char hex[41];
		git_oid_tostr(hex, sizeof(hex), cid);
		return sfs_errf(err, -ENOENT, "diff: commit %s is not in the store", hex);
	}
	int rc = git_commit_tree(&t, c);
	git_commit_free(c);
	if (rc < 0)
		return st_error(err, rc, "diff: the snapshot's tree");
	struct mf_build b = {.m = calloc(1, sizeof(struct manifest))};
	uint32_t root;
	int r = b.m ? add_dir(&b, repo, t, &root) : -ENOMEM;
	git_tree_free(t);
	if (r) {
		mf_free(b.m);
		return sfs_errf(err, r, "out of memory");
	}
	git_oid_cpy(&b.m->commit, cid);
	b.m->refs = 1;
	*out = b.m;
	return 0;
}

/* The cache: MF_SLOTS manifests at most, by last use. */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct manifest *slots[MF_SLOTS];
static uint64_t clock_now;

static void unref_locked(struct manifest *m)
{
	if (m && --m->refs == 0)
		mf_free(m);
}

/* Keeps m (one more reference) unless it alone is over the budget; drops
 * the least recently used until the rest fit. */
static void keep_locked(struct manifest *m)
{
	if (m->nents > MF_BUDGET)
		return;
	for (;;) {
		size_t total = m->nents, lru = MF_SLOTS, free_slot = MF_SLOTS;
		for (size_t i = 0; i < MF_SLOTS; i++) {
			if (!slots[i]) {
				free_slot = i;
				continue;
			}
			total += slots[i]->nents;
			if (lru == MF_SLOTS || slots[i]->used < slots[lru]->used)
				lru = i;
		}
		if (total <= MF_BUDGET && free_slot < MF_SLOTS) {
			m->refs++;
			m->used = ++clock_now;
			slots[free_slot] = m;
			return;
		}
		unref_locked(slots[lru]);
		slots[lru] = NULL;
	}
}

static struct manifest *find_locked(const git_oid *cid)
{
	for (size_t i = 0; i < MF_SLOTS; i++)
		if (slots[i] && git_oid_equal(&slots[i]->commit, cid)) {
			slots[i]->refs++;
			slots[i]->used = ++clock_now;
			return slots[i];
		}
	return NULL;
}

int mf_get(git_repository **repo, const git_oid *cid, struct manifest **out, struct sfs_err *err)
{
	pthread_mutex_lock(&cache_mu);
	*out = find_locked(cid);
	pthread_mutex_unlock(&cache_mu);
	if (*out)
		return 0;
	int r = *repo ? 0 : st_open(repo, err);
	struct manifest *m = NULL;
	if (!r)
		r = build(*repo, cid, &m, err);
	if (r)
		return r;
	pthread_mutex_lock(&cache_mu);
	struct manifest *other = find_locked(cid); /* built beside us */
	if (other) {
		mf_free(m);
		m = other;
	} else {
		keep_locked(m);
	}
	pthread_mutex_unlock(&cache_mu);
	*out = m;
	return 0;
}

void mf_put(struct manifest *m)
{
	pthread_mutex_lock(&cache_mu);
	unref_locked(m);
	pthread_mutex_unlock(&cache_mu);
}

void mf_cache_clear(void)
{
	pthread_mutex_lock(&cache_mu);
	for (size_t i = 0; i < MF_SLOTS; i++) {
		unref_locked(slots[i]);
		slots[i] = NULL;
	}
	pthread_mutex_unlock(&cache_mu);
}

const struct mf_ent *mf_find(const struct manifest *m, uint32_t dir, const char *name)
{
	const struct mf_dir *d = &m->dirs[dir];
	size_t lo = d->first, hi = (size_t)d->first + d->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, m->names + m->ents[mid].name);
		if (c == 0)
			return &m->ents[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const struct mf_ent *mf_bypath(const struct manifest *m, const char *path)
{
	uint32_t dir = 0;
	char comp[256];
	for (const char *p = path;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || n >= sizeof(comp))
			return NULL;
		memcpy(comp, p, n);
		comp[n] = '\0';
		const struct mf_ent *e = mf_find(m, dir, comp);
		if (!e || !slash)
			return e;
		if (e->sub < 0)
			return NULL;
		dir = (uint32_t)e->sub;
		p = slash + 1;
	}
}
