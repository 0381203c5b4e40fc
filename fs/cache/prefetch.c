/*
 * Prefetch of small files in bulk.  When a file is fetched for an open and
 * the provider has a bulk download (fs_read_many), the small regular files
 * listed beside it that have no cached copy come in the same call, up to
 * PREF_BATCH files (or the provider's fs_read_many_max, at most
 * PREF_BATCH_MAX) and PREF_BATCH_BYTES, and wait in memory (at most
 * PREF_MAX_BYTES per sandbox) for their own open.  A cold `git status`
 * (which opens every file whose stat differs from the index) then costs a
 * call per a few hundred files instead of one per file.
 *
 * A prefetched copy is used only if nothing could have changed the file
 * since it was fetched: the sandbox's generation (bumped when a run starts
 * or ends) is that of the moment the listing it was chosen from was read,
 * no change made through the mount since then touched its path (a change
 * drops the copies of its path and below it at once, and one made while
 * the bulk call was in flight keeps its copy out: mutations.c), and its
 * size and mtime are what the open's attributes say.  Otherwise it is
 * dropped and the file is fetched on its own, as without prefetch.  A copy
 * is used once: the file's own cache file takes over from there.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREF_FILE_MAX (128 * 1024)	   /* larger files are fetched on their own */
#define PREF_BATCH 256			   /* files per bulk call, unless the provider says */
#define PREF_BATCH_MAX 1024		   /* what a provider may say */
#define PREF_BATCH_BYTES (4 * 1024 * 1024) /* bytes per bulk call */
/* and bytes of names per call: the shell kit passes them as arguments of one
 * command, which an API may carry in a bounded request */
#define PREF_BATCH_NAMES (64 * 1024)
#define PREF_MAX_BYTES (16 * 1024 * 1024) /* held per sandbox */
/* other listed directories of at most this many entries add their small
 * files too (rc_prefetch_fill) */
#define PREF_NEAR_ENTS 16

struct rc_pref {
	struct rc_pref *next;
	char *path;
	char *data;
	size_t len;
	int64_t mtime;
	uint64_t gen;
};

static void pref_free(struct rc_pref *p)
{
	free(p->path);
	free(p->data);
	free(p);
}

void rc_prefetch_drop_locked(struct rsb *rs)
{
	while (rs->pref) {
		struct rc_pref *p = rs->pref;
		rs->pref = p->next;
		pref_free(p);
	}
	rs->pref_bytes = 0;
}

/* Drops copies from an earlier generation (a run started or ended since):
 * never usable.  Changes through the mount drop theirs as they happen. */
static void drop_stale_locked(struct rsb *rs)
{
	for (struct rc_pref **pp = &rs->pref; *pp;) {
		struct rc_pref *p = *pp;
		if (p->gen == rs->gen) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		rs->pref_bytes -= p->len;
		pref_free(p);
	}
}

void rc_prefetch_drop_path_locked(struct rsb *rs, const char *path)
{
	size_t n = path ? strlen(path) : 0;
	for (struct rc_pref **pp = &rs->pref; *pp;) {
		struct rc_pref *p = *pp;
		/* a NULL path (no memory to name it): every copy goes */
		bool hit = !path || (strncmp(p->path, path, n) == 0 &&
				     (p->path[n] == '\0' || p->path[n] == '/'));
		if (!hit) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		rs->pref_bytes -= p->len;
		pref_free(p);
	}
}

static struct rc_pref *find_locked(struct rsb *rs, const char *path)
{
	for (struct rc_pref *p = rs->pref; p; p = p->next)
		if (strcmp(p->path, path) == 0)
			return p;
	return NULL;
}

static int write_all(int fd, const char *data, size_t len)
{
	for (off_t off = 0; len;) {
		ssize_t w = pwrite(fd, data, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		data += w;
		off += w;
		len -= (size_t)w;
	}
	return 0;
}

int rc_prefetch_take(struct rsb *rs, const char *path, const struct sfs_rstat *st, int fd)
{
	pthread_mutex_lock(&R.mu);
	drop_stale_locked(rs);
	struct rc_pref *p = find_locked(rs, path);
	if (p) {
		struct rc_pref **pp = &rs->pref;
		while (*pp != p)
			pp = &(*pp)->next;
		*pp = p->next;
		rs->pref_bytes -= p->len;
	}
	pthread_mutex_unlock(&R.mu);
	if (!p)
		return 0;
	bool same = p->mtime == st->mtime && (off_t)p->len == st->size;
	int r = same ? write_all(fd, p->data, p->len) : 0;
	pref_free(p);
	return r ? r : same;
}

struct fill {
	struct rsb *rs;
	const char *want; /* the file being opened */
	int fd;
	bool got;
	int err;
	char **paths;
	int64_t *mtime;
	off_t *size;
	size_t n;
	uint64_t gen, wctr;
};

static int on_file(const char *path, const void *data, size_t len, void *arg)
{
	struct fill *f = arg;
	if (strcmp(path, f->want) == 0) {
		int r = write_all(f->fd, data, len);
		if (r)
			f->err = r;
		else
			f->got = true;
		return 0;
	}
	size_t i = 0;
	while (i < f->n && strcmp(f->paths[i], path) != 0)
		i++;
	if (i == f->n || (off_t)len != f->size[i])
		return 0; /* changed since it was listed: fetched on its own later */
	struct rc_pref *p = calloc(1, sizeof(*p));
	if (!p || !(p->path = strdup(path)) || !(p->data = malloc(len ? len : 1))) {
		if (p)
			pref_free(p);
		return 0;
	}
	memcpy(p->data, data, len);
	p->len = len;
	p->mtime = f->mtime[i];
	p->gen = f->gen;
	pthread_mutex_lock(&R.mu);
	bool keep = f->rs->gen == f->gen && !rc_file_touched_since_locked(f->rs, f->wctr, path) &&
		    !find_locked(f->rs, path) && f->rs->pref_bytes + len <= PREF_MAX_BYTES;
	if (keep) {
		p->next = f->rs->pref;
		f->rs->pref = p;
		f->rs->pref_bytes += len;
	}
	pthread_mutex_unlock(&R.mu);
	if (!keep)
		pref_free(p);
	return 0;
}

/* Whether the node of path holds a cached copy already (R.mu held). */
static bool cached_locked(uint32_t serial, const char *path)
{
	struct rc_node *c = rc_find_path_locked(serial, path);
	return c && (c->cfd >= 0 || c->dirty);
}

/* What one bulk call asks for so far. */
struct pick {
	struct rsb *rs;
	struct fill *f;
	size_t batch, bytes, names;
	bool full;
};

/* Adds the small regular files of listed directory d (but `skip`) that
 * have no copy here; R.mu held. */
static void pick_from_locked(struct pick *pk, struct rc_node *d, const char *skip)
{
	struct fill *f = pk->f;
	struct rsb *rs = pk->rs;
	for (size_t i = 0; i < d->nents && f->n < pk->batch - 1; i++) {
		const struct rent *e = &d->ents[i];
		if (!S_ISREG(e->st.mode) || e->st.size > PREF_FILE_MAX ||
		    (skip && strcmp(e->name, skip) == 0) ||
		    pk->bytes + (size_t)e->st.size > PREF_BATCH_BYTES ||
		    rs->pref_bytes + pk->bytes + (size_t)e->st.size > PREF_MAX_BYTES)
			continue;
		char *p = rc_join_path(d->path, e->name);
		if (!p || pk->names + strlen(p) + 1 > PREF_BATCH_NAMES) {
			free(p);
			pk->full = true;
			return;
		}
		if (find_locked(rs, p) || cached_locked(rs->serial, p)) {
			free(p);
			continue;
		}
		f->paths[f->n] = p;
		f->mtime[f->n] = e->st.mtime;
		f->size[f->n] = e->st.size;
		pk->bytes += (size_t)e->st.size;
		pk->names += strlen(p) + 1;
		f->n++;
	}
	if (f->n >= pk->batch - 1)
		pk->full = true;
}

int rc_prefetch_fill(struct rsb *rs, struct sfs_sandbox *sb, const char *path,
		     const struct sfs_rstat *st, int fd)
{
	if (!sb->provider->ops->fs_read_many || st->size > PREF_FILE_MAX)
		return 0;
	struct fill f = {.rs = rs, .want = path, .fd = fd};
	size_t batch = sb->provider->ops->fs_read_many_max;
	batch = !batch ? PREF_BATCH : batch > PREF_BATCH_MAX ? PREF_BATCH_MAX : batch;
	f.paths = calloc(batch, sizeof(*f.paths));
	f.mtime = calloc(batch, sizeof(*f.mtime));
	f.size = calloc(batch, sizeof(*f.size));
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup("");
	int r = 0;
	if (!f.paths || !f.mtime || !f.size || !dir)
		goto out;
	size_t bytes = (size_t)st->size, names = strlen(path);
	pthread_mutex_lock(&R.mu);
	drop_stale_locked(rs);
	f.gen = rs->gen;
	f.wctr = rs->wctr;
	struct rc_node *d = rc_find_path_locked(rs->serial, dir);
	bool ok = d && d->listed && rc_dir_fresh_locked(d, rc_now());
	const char *name = slash ? slash + 1 : path;
	struct pick pk = {.rs = rs, .f = &f, .batch = batch, .bytes = bytes, .names = names};
	if (ok)
		pick_from_locked(&pk, d, name);
	/* and from the small directories listed near it (under the same
	 * top-level directory): a walk reads them soon (git's .git/info,
	 * refs/heads beside .git/objects/XX) */
	const char *top_end = strchr(path, '/');
	size_t tl = top_end ? (size_t)(top_end - path) : 0;
	for (size_t b = 0; tl && slash && b < RC_NBUCKETS && !pk.full; b++) {
		for (struct rc_node *o = R.by_id[b]; o && !pk.full; o = o->id_next) {
			if (o == d || o->rs != rs || !o->listed || o->nents > PREF_NEAR_ENTS ||
			    strncmp(o->path, path, tl) || (o->path[tl] && o->path[tl] != '/') ||
			    !rc_dir_fresh_locked(o, rc_now()))
				continue;
			pick_from_locked(&pk, o, NULL);
		}
	}
	pthread_mutex_unlock(&R.mu);
	if (f.n == 0)
		goto out; /* nothing beside it: one plain read is as good */
	const char **ask = malloc((f.n + 1) * sizeof(*ask));
	if (!ask)
		goto out;
	ask[0] = path;
	for (size_t i = 0; i < f.n; i++)
		ask[i + 1] = f.paths[i];
	if (ftruncate(fd, 0) < 0) {
		free(ask);
		goto out;
	}
	r = RC_CALL(rs, sb, "bulk read", path, fs_read_many, ask, f.n + 1, on_file, &f);
	free(ask);
	/* the file itself missing from the answer: the caller reads it alone */
	r = r ? 0 : f.err ? f.err : f.got;
out:
	for (size_t i = 0; f.paths && i < f.n; i++)
		free(f.paths[i]);
	free(f.paths);
	free(f.mtime);
	free(f.size);
	free(dir);
	return r;
}
