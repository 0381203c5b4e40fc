/* The remote cache's attributes and listings: what is fresh (TTL, the
 * sandbox's generation and write counter), lookups, directory walks. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A busy spell is a series of operations on one sandbox's workspace with
 * no pause of opt.ttl between them (one `git status`, one build).  What was
 * fetched during the current spell is kept, past opt.ttl, while the spell
 * lasts and at most opt.busy_ttl after its fetch: a command that outlives
 * the TTL does not list again the directories it listed at its start (a
 * cold `git status` of a remote tree did that for root and .git).  What a
 * run or the mount changed is dropped as before (generation, change log);
 * a change made by something else is seen after the spell ends or after
 * opt.busy_ttl, instead of after opt.ttl.  The end of a provider call
 * counts as an operation, so a slow call does not end the spell. */
void rc_touch_locked(struct rsb *rs, double now)
{
	if (now - rs->last_op >= R.opt.ttl)
		rs->spell_start = now;
	rs->last_op = now;
}

void rc_touch(struct rsb *rs)
{
	pthread_mutex_lock(&R.mu);
	rc_touch_locked(rs, rc_now());
	pthread_mutex_unlock(&R.mu);
}

static bool spell_fresh_locked(const struct rsb *rs, double at, double now)
{
	return at >= 0 && at >= rs->spell_start && now - rs->last_op < R.opt.ttl &&
	       now < at + R.opt.busy_ttl;
}

bool rc_attr_fresh_locked(struct rc_node *n, double now)
{
	return n->attr_ok && n->attr_gen == n->rs->gen &&
	       (now < n->attr_until || spell_fresh_locked(n->rs, n->attr_at, now));
}

bool rc_dir_fresh_locked(struct rc_node *n, double now)
{
	return n->dir_ok && n->dir_gen == n->rs->gen &&
	       (now < n->dir_until || spell_fresh_locked(n->rs, n->dir_at, now));
}

/* The workspace root's own attributes (the mount point of the listing
 * below it) matter least and are asked for on every path walk: they live
 * longer, so a warm `ls -l dir` costs only the listings. */
double rc_ttl_of(const struct rc_node *n)
{
	return n->root ? R.opt.ttl * 10 : R.opt.ttl;
}

void rc_set_attr_locked(struct rc_node *n, const struct sfs_rstat *st, double now)
{
	if (rc_rstat_copy(&n->st, st) == 0) {
		n->attr_ok = true;
		n->attr_until = now + rc_ttl_of(n);
		n->attr_at = now;
		n->attr_gen = n->rs->gen;
	} else {
		n->attr_ok = false;
	}
}

/* Attributes a change made here set (chmod, a write-back): what a listing
 * or stat asked for before that change brings is older, and must not
 * replace them (`chmod 600 f; ls -l` showed 644 from a listing fetched
 * before the chmod, or in flight during it, until the TTL ran out).  A
 * fresh listing of the parent is kept in step. */
void rc_set_local_attr_locked(struct rc_node *n, const struct sfs_rstat *st)
{
	rc_set_attr_locked(n, st, rc_now());
	n->attr_wctr = n->rs->wctr;
	if (n->root)
		return;
	const char *slash = strrchr(n->path, '/');
	char *dir = strndup(n->path, slash ? (size_t)(slash - n->path) : 0);
	struct rc_node *d = dir ? rc_find_path_locked(n->serial, dir) : NULL;
	if (d) /* (without memory for dir, the stamp alone keeps them) */
		rc_dir_update_locked(d, slash ? slash + 1 : n->path, st);
	free(dir);
}

/* Whether n holds attributes a change made here set after rs->wctr was
 * `asked` (and no run started or ended since) */
bool rc_local_newer_locked(const struct rc_node *n, uint64_t asked)
{
	return n->attr_ok && n->attr_gen == n->rs->gen && n->attr_wctr > asked;
}

void rc_drop_dir_locked(struct rc_node *n)
{
	rc_ents_free(n->ents, n->nents);
	n->ents = NULL;
	n->nents = 0;
	n->dir_ok = false;
}

struct rent *rc_dir_find_locked(struct rc_node *d, const char *name)
{
	for (size_t i = 0; i < d->nents; i++)
		if (strcmp(d->ents[i].name, name) == 0)
			return &d->ents[i];
	return NULL;
}

/* Our own mutation changed parent/name: keep a fresh listing in step
 * (st NULL: the name is gone). */
void rc_dir_update_locked(struct rc_node *d, const char *name, const struct sfs_rstat *st)
{
	if (!d || !d->dir_ok)
		return;
	struct rent *e = rc_dir_find_locked(d, name);
	if (!st) {
		if (e) {
			free(e->name);
			free(e->st.link);
			*e = d->ents[--d->nents];
		}
		return;
	}
	if (e) {
		if (rc_rstat_copy(&e->st, st))
			rc_drop_dir_locked(d);
		return;
	}
	struct rent *grown = realloc(d->ents, (d->nents + 1) * sizeof(*grown));
	char *nm = strdup(name);
	if (!grown || !nm) {
		free(nm);
		if (grown)
			d->ents = grown;
		rc_drop_dir_locked(d);
		return;
	}
	d->ents = grown;
	memset(&d->ents[d->nents], 0, sizeof(d->ents[0]));
	d->ents[d->nents].name = nm;
	if (rc_rstat_copy(&d->ents[d->nents].st, st)) {
		free(nm);
		rc_drop_dir_locked(d);
		return;
	}
	d->nents++;
}

/* ---- listings ----------------------------------------------------------- */

/* Moves a provider listing's names and attributes into cache entries (v keeps
 * empty shells for sfs_rdirents_free); NULL on ENOMEM, v untouched. */
/* The entries of a provider's listing; *kept of them: a name that cannot be
 * a file name is left out here too, whatever the provider's parser let
 * through (its parser logged it). */
static struct rent *take_entries(struct sfs_rdirent *v, size_t n, size_t *kept)
{
	struct rent *ents = calloc(n ? n : 1, sizeof(*ents));
	if (!ents)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!rc_name_ok(v[i].name))
			continue; /* sfs_rdirents_free frees it */
		ents[k].name = v[i].name;
		ents[k].st = v[i].st;
		v[i].name = NULL;
		v[i].st.link = NULL;
		k++;
	}
	*kept = k;
	return ents;
}

/* Whether a file created here and not yet saved lies below dir ("" the root). */
bool rc_unborn_below_locked(struct rsb *rs, const char *dir)
{
	if (!rs->unborn)
		return false;
	size_t dl = strlen(dir);
	for (size_t b = 0; b < RC_NBUCKETS; b++)
		for (struct rc_node *n = R.by_id[b]; n; n = n->id_next)
			if (n->rs == rs && n->unborn && !n->unlinked &&
			    (!dl || (!strncmp(n->path, dir, dl) && n->path[dl] == '/')))
				return true;
	return false;
}

/* Files created here and not yet saved are in d's listing, as they are in
 * lookups (rc_create). */
static void add_unborn_locked(struct rc_node *d)
{
	if (!d->rs->unborn)
		return;
	size_t dl = strlen(d->path);
	for (size_t b = 0; b < RC_NBUCKETS; b++) {
		for (struct rc_node *n = R.by_id[b]; n && d->dir_ok; n = n->id_next) {
			if (n->rs != d->rs || !n->unborn || n->unlinked || !n->attr_ok)
				continue;
			const char *name = n->path + (dl ? dl + 1 : 0);
			if ((dl && (strncmp(n->path, d->path, dl) || n->path[dl] != '/')) ||
			    strchr(name, '/') || rc_dir_find_locked(d, name))
				continue;
			rc_dir_update_locked(d, name, &n->st);
		}
	}
}

/* Makes ents d's listing, asked for when rs->wctr was `asked`.  One fetched
 * while something changed (not cacheable) answers the caller that asked for
 * it and is stale at once. */
static void install_listing_locked(struct rc_node *d, struct rent *ents, size_t n, bool cacheable,
				   double now, uint64_t asked, uint64_t gen)
{
	rc_drop_dir_locked(d);
	d->ents = ents;
	d->nents = n;
	d->dir_ok = d->listed = true;
	d->dir_gen = gen; /* the generation it was asked in: older if a run came between */
	d->dir_wctr = asked;
	d->dir_until = cacheable ? now + R.opt.ttl : 0;
	d->dir_at = cacheable ? now : -1;
	/* children we know get the listing's attributes too, but one a change
	 * made here set after it was asked for keeps those, and so does the
	 * listing (a chmod while the listing was in flight) */
	for (size_t i = 0; i < n; i++) {
		char *p = rc_join_path(d->path, ents[i].name);
		struct rc_node *c = p ? rc_find_path_locked(d->serial, p) : NULL;
		free(p);
		if (c && rc_local_newer_locked(c, asked)) {
			/* (without memory, rc_entry_for still prefers c's) */
			(void)rc_rstat_copy(&ents[i].st, &c->st);
		} else if (c && cacheable && c->nopen == 0 && !c->dirty) {
			rc_set_attr_locked(c, &ents[i].st, now);
		}
	}
	add_unborn_locked(d); /* after: it may move d->ents */
}

/* Makes d's listing fresh: 0 or -errno.  R.mu is not held. */
static int ensure_listing(struct rc_node *d, struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	/* one listing of a directory at a time: lookups from several threads
	 * (git's preload-index) wait for the one in flight instead of each
	 * asking the provider; one that did not come back fresh is fetched
	 * again by the next */
	bool fresh;
	while (!(fresh = rc_dir_fresh_locked(d, rc_now())) && d->listing)
		pthread_cond_wait(&R.list_cv, &R.mu);
	uint64_t gen = d->rs->gen, wctr = d->rs->wctr;
	char *path = fresh ? NULL : strdup(d->path);
	d->listing = path != NULL;
	pthread_mutex_unlock(&R.mu);
	if (fresh)
		return 0;
	if (!path)
		return -ENOMEM;
	struct sfs_rdirent *v = NULL;
	size_t n = 0;
	int r = RC_CALL(d->rs, sb, "list", path, fs_list, path, &v, &n);
	free(path);
	size_t kept = 0;
	struct rent *ents = r ? NULL : take_entries(v, n, &kept);
	sfs_rdirents_free(v, n);
	if (!r && !ents)
		r = -ENOMEM;
	pthread_mutex_lock(&R.mu);
	if (!r)
		install_listing_locked(d, ents, kept,
				       d->rs->gen == gen &&
					   !rc_dir_touched_since_locked(d->rs, wctr, d->path),
				       rc_now(), wctr, gen);
	d->listing = false;
	pthread_cond_broadcast(&R.list_cv);
	pthread_mutex_unlock(&R.mu);
	return r;
}

/* ---- attributes --------------------------------------------------------- */

/* Fresh attributes of n into *st (caller frees st->link). */
int rc_node_attr(struct rc_node *n, struct sfs_sandbox *sb, struct sfs_rstat *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&R.mu);
	double now = rc_now();
	if (n->unlinked) {
		/* its path names something else now: what we knew is all there is */
		int r = n->attr_ok ? rc_rstat_copy(st, &n->st) : -ENOENT;
		pthread_mutex_unlock(&R.mu);
		return r;
	}
	/* unsaved local changes: the local copy answers, the remote may be away */
	if (rc_attr_fresh_locked(n, now) || (n->dirty && n->attr_ok)) {
		int r = rc_rstat_copy(st, &n->st);
		pthread_mutex_unlock(&R.mu);
		return r;
	}
	uint64_t gen = n->rs->gen, wctr = n->rs->wctr;
	char *path = strdup(n->path);
	struct rc_node *parent = NULL;
	const char *name = NULL;
	if (path && path[0]) {
		/* a sibling of listed files: one listing answers them all */
		char *slash = strrchr(path, '/');
		if (slash)
			*slash = '\0';
		parent = rc_find_path_locked(n->serial, slash ? path : "");
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
		rc_node_put(parent);
		return -ENOMEM;
	}
	int r;
	if (parent) {
		r = ensure_listing(parent, sb);
		if (!r) {
			pthread_mutex_lock(&R.mu);
			struct rent *e = rc_dir_find_locked(parent, name);
			if (e && rc_local_newer_locked(n, parent->dir_wctr))
				r = rc_rstat_copy(st, &n->st); /* ours is newer */
			else if (!e)
				r = -ENOENT;
			else if (!(r = rc_rstat_copy(st, &e->st)) &&
				 rc_dir_fresh_locked(parent, rc_now()))
				rc_set_attr_locked(n, st, parent->dir_at);
			pthread_mutex_unlock(&R.mu);
		}
		rc_node_put(parent);
		free(path);
		return r;
	}
	r = rc_p_stat(n->rs, sb, path, st);
	free(path);
	if (r)
		return r;
	pthread_mutex_lock(&R.mu);
	if (n->rs->gen == gen && n->rs->wctr == wctr)
		rc_set_attr_locked(n, st, rc_now());
	pthread_mutex_unlock(&R.mu);
	return 0;
}

/* An open or unsaved file: the local copy is the truth for size and mtime. */
void rc_present(struct rc_node *n, struct sfs_rstat *st)
{
	if (st->mode && !S_ISREG(st->mode))
		return;
	struct stat cst;
	pthread_mutex_lock(&R.mu);
	bool local = (n->nopen > 0 || n->dirty) && n->cfd >= 0 && fstat(n->cfd, &cst) == 0;
	pthread_mutex_unlock(&R.mu);
	if (!local)
		return;
	st->size = cst.st_size;
	if (cst.st_mtime > st->mtime)
		st->mtime = cst.st_mtime;
}

/* Finds or makes the node for path, counts one lookup, fills e. */
int rc_entry_for(struct rsb *rs, const char *path, const struct sfs_rstat *st, double fetched,
		 uint64_t asked, uint64_t gen, struct rc_entry *e)
{
	memset(e, 0, sizeof(*e));
	pthread_mutex_lock(&R.mu);
	struct rc_node *n = rc_find_path_locked(rs->serial, path);
	if (!n)
		n = rc_new_node_locked(rs, path);
	if (!n) {
		pthread_mutex_unlock(&R.mu);
		return -ENOMEM;
	}
	/* fetched before a run started or ended (a walk's listing, or a lookup
	 * the invalidation overtook): not what the node is now */
	bool old = gen != RC_GEN_NOW && gen != rs->gen;
	if (asked != RC_ASKED_NOW && rc_local_newer_locked(n, asked)) {
		st = &n->st; /* a change made here after st was asked for */
		fetched = -1;
		old = false;
	} else if (old && rc_attr_fresh_locked(n, rc_now())) {
		st = &n->st; /* asked for again since: newer */
		fetched = -1;
		old = false;
	}
	if (fetched >= 0 && !old && n->nopen == 0 && !n->dirty)
		rc_set_attr_locked(n, st, fetched);
	n->pins++;
	int r = rc_rstat_copy(&e->st, st);
	if (!r && S_ISLNK(st->mode) && !(e->path = strdup(path)))
		r = -ENOMEM;
	if (!r)
		n->nlookup++;
	pthread_mutex_unlock(&R.mu);
	if (!r) {
		e->id = n->id;
		e->ttl = old ? 0 : rc_ttl_of(n);
		rc_present(n, &e->st);
	}
	rc_node_put(n);
	if (r)
		rc_entry_free(e);
	return r;
}

int rc_getattr(struct rc_ref *ref, struct sfs_rstat *st)
{
	struct rc_node *n = ref->n;
	int r = rc_node_attr(n, ref->sb, st);
	if (r == -ENOENT) {
		/* gone remotely but open here: the local copy answers */
		pthread_mutex_lock(&R.mu);
		if (n->nopen > 0 && n->attr_ok)
			r = rc_rstat_copy(st, &n->st);
		pthread_mutex_unlock(&R.mu);
	}
	if (!r)
		rc_present(n, st);
	return r;
}

int rc_readlink(struct rc_ref *ref, char **target)
{
	struct sfs_rstat st;
	*target = NULL;
	int r = rc_node_attr(ref->n, ref->sb, &st);
	if (!r && S_ISLNK(st.mode) && !st.link) {
		/* listings may not carry targets: ask for this one */
		char *path = rc_node_path(ref->n);
		rc_rstat_free(&st);
		r = path ? rc_p_stat(ref->n->rs, ref->sb, path, &st) : -ENOMEM;
		free(path);
	}
	if (!r && (!S_ISLNK(st.mode) || !st.link))
		r = -EINVAL;
	if (!r) {
		*target = st.link;
		st.link = NULL;
	}
	rc_rstat_free(&st);
	return r;
}

/* ---- lookups ------------------------------------------------------------ */

/* A directory's size as filesystems report it: on ext4 about 40 bytes a
 * short name, so 64 KiB is some 1500 names, a listing of about 150 KiB of
 * JSON (providers that report 0 count as small too) */
#define SMALL_DIR_BYTES 65536

int rc_lookup_root(uint32_t serial, struct rc_entry *e)
{
	memset(e, 0, sizeof(*e));
	struct rc_ref ref = {.sb = R.hooks.sandbox_get(serial)};
	if (!ref.sb)
		return -ENOENT;
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rc_rsb_find_locked(serial, true);
	struct rc_node *n = rs ? rc_find_path_locked(serial, "") : NULL;
	if (rs && !n)
		n = rc_new_node_locked(rs, "");
	if (rs)
		rc_touch_locked(rs, rc_now());
	if (n)
		n->pins++;
	pthread_mutex_unlock(&R.mu);
	ref.n = n;
	if (!n) {
		rc_ref_put(&ref);
		return -ENOMEM;
	}
	struct sfs_rstat st;
	int r = rc_node_attr(n, ref.sb, &st);
	if (!r && !S_ISDIR(st.mode))
		r = -ENOTDIR;
	if (!r)
		r = rc_entry_for(rs, "", &st, -1, RC_ASKED_NOW, RC_GEN_NOW, e);
	rc_rstat_free(&st);
	rc_ref_put(&ref);
	return r;
}

int rc_lookup(struct rc_ref *dir, const char *name, struct rc_entry *e)
{
	struct rc_node *d = dir->n;
	memset(e, 0, sizeof(*e));
	if (strlen(name) > 255)
		return -ENAMETOOLONG;
	if (!rc_name_ok(name))
		return -ENOENT;
	int r = 0;
	struct sfs_rstat st = {0};
	pthread_mutex_lock(&R.mu);
	char *path = rc_join_path(d->path, name);
	double now = rc_now();
	rc_touch_locked(d->rs, now);
	struct rc_node *c = path ? rc_find_path_locked(d->serial, path) : NULL;
	bool have = false;
	/* when what answers was fetched (-1: c has it already, or it is not
	 * to be kept): a lookup answered from a cache does not make it newer */
	double fetched = -1;
	uint64_t asked = RC_ASKED_NOW; /* rs->wctr when what answers was asked for */
	uint64_t fgen = RC_GEN_NOW;    /* rs->gen it was fetched in */
	if (c && (rc_attr_fresh_locked(c, now) || (c->dirty && c->attr_ok))) {
		have = rc_rstat_copy(&st, &c->st) == 0;
		fgen = c->dirty ? RC_GEN_NOW : c->attr_gen; /* unsaved: ours, of no generation */
	} else if (rc_dir_fresh_locked(d, now)) {
		struct rent *ent = rc_dir_find_locked(d, name);
		if (!ent)
			r = -ENOENT;
		else
			have = rc_rstat_copy(&st, &ent->st) == 0;
		fetched = d->dir_at;
		asked = d->dir_wctr;
		fgen = d->dir_gen;
	}
	/* A directory listed before is listed again; one never listed is
	 * listed at its second lookup: a walk (git status, a build) looks up
	 * many names in a directory, and one listing answers all of them, the
	 * names that do not exist included.  A single lookup in a large
	 * directory stays one stat; in a small one (its size, as its parent's
	 * listing or a stat gave it, at most SMALL_DIR_BYTES: some 1500
	 * names) the listing costs the same one call and answers the lookups
	 * that follow, such as git's probes of .git/objects/info/alternates or
	 * .git/refs/heads/main alone in their directories. */
	bool small = d->attr_ok && S_ISDIR(d->st.mode) && d->st.size <= SMALL_DIR_BYTES;
	bool use_list = d->listed || d->stat_lookups >= 1 || small;
	if (!use_list && !have && !r)
		d->stat_lookups++;
	uint64_t gen = d->rs->gen, wctr = d->rs->wctr;
	pthread_mutex_unlock(&R.mu);
	if (!path) {
		r = -ENOMEM;
	} else if (!r && !have && use_list) {
		/* a listed directory: one listing answers this and its siblings */
		r = ensure_listing(d, dir->sb);
		if (!r) {
			pthread_mutex_lock(&R.mu);
			struct rent *ent = rc_dir_find_locked(d, name);
			r = !ent ? -ENOENT : rc_rstat_copy(&st, &ent->st);
			fetched = d->dir_at;
			asked = d->dir_wctr;
			fgen = d->dir_gen;
			pthread_mutex_unlock(&R.mu);
		}
	} else if (!r && !have) {
		r = rc_p_stat(d->rs, dir->sb, path, &st);
		asked = wctr;
		fgen = gen;
		pthread_mutex_lock(&R.mu);
		if (d->rs->gen == gen && d->rs->wctr == wctr)
			fetched = rc_now();
		pthread_mutex_unlock(&R.mu);
	}
	if (!r)
		r = rc_entry_for(d->rs, path, &st, fetched, asked, fgen, e);
	rc_rstat_free(&st);
	free(path);
	return r;
}

/* ---- directory walks ---------------------------------------------------- */

struct rc_listing {
	struct rent *v;
	size_t n;
	char *path;
	double fetched; /* the directory's listing's, or -1 */
	uint64_t asked; /* rs->wctr when the listing was asked for */
	uint64_t gen;	/* rs->gen it was asked in */
};

void rc_listing_free(struct rc_listing *l)
{
	if (!l)
		return;
	rc_ents_free(l->v, l->n);
	free(l->path);
	free(l);
}

int rc_opendir(struct rc_ref *dir, struct rc_listing **out)
{
	struct rc_node *d = dir->n;
	*out = NULL;
	int r = ensure_listing(d, dir->sb);
	if (r)
		return r;
	struct rc_listing *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	/* the listing as it is now, for the whole walk */
	pthread_mutex_lock(&R.mu);
	l->v = calloc(d->nents ? d->nents : 1, sizeof(*l->v));
	l->path = strdup(d->path);
	l->fetched = d->dir_at;
	l->asked = d->dir_wctr;
	l->gen = d->dir_gen;
	if (!l->v || !l->path)
		r = -ENOMEM;
	for (size_t i = 0; !r && i < d->nents; i++) {
		l->n = i + 1;
		l->v[i].name = strdup(d->ents[i].name);
		if (!l->v[i].name || rc_rstat_copy(&l->v[i].st, &d->ents[i].st))
			r = -ENOMEM;
	}
	pthread_mutex_unlock(&R.mu);
	if (r) {
		rc_listing_free(l);
		return r;
	}
	*out = l;
	return 0;
}

size_t rc_listing_count(const struct rc_listing *l)
{
	return l->n;
}

const char *rc_listing_name(const struct rc_listing *l, size_t i)
{
	return l->v[i].name;
}

mode_t rc_listing_mode(const struct rc_listing *l, size_t i)
{
	return l->v[i].st.mode;
}

int rc_listing_entry(struct rc_ref *dir, const struct rc_listing *l, size_t i, struct rc_entry *e)
{
	char *path = rc_join_path(l->path, l->v[i].name);
	int r = path ? rc_entry_for(dir->n->rs, path, &l->v[i].st, l->fetched, l->asked, l->gen, e)
		     : -ENOMEM;
	free(path);
	return r;
}
