/*
 * The stat cache: what git's index does for `git add`.  One file per
 * sandbox, read whole and used in place (like git's index, not parsed into
 * copies): a first line naming the format, the record size and the store it
 * was made for (st_identity: a cache whose blobs are not in this store is
 * not used), then records of struct sc_entry's bytes (this host's layout:
 * the cache never leaves it), a 16-bit path length and the path with its
 * NUL.  A file whose size, times, inode and mode all match its record is
 * taken to hold that blob without being read.  A directory's record (mode
 * S_IFDIR) says instead that it held the names whose hash is its id
 * (manifest.c), so a diff need not read it again while its mtime and ctime
 * stand (creating, removing or renaming an entry sets both), like git's
 * untracked cache.  Like git's "racily clean"
 * rule, a file changed in the second the cache is made (or later) is not
 * recorded: a write within the same timestamp could go unseen.  A cache that
 * cannot be read is an empty cache (every file is hashed), never an error.
 */
#include "internal.h"

#include "../../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SC_MAGIC "sandboxfs-statcache 4 "

/* Adds or updates path's record; a new path's string is kept (not copied). */
static int add(struct scache *c, char *path, const struct sc_entry *e)
{
	uint64_t at;
	if (pmap_get(&c->index, path, &at)) {
		c->v[at] = *e;
		return 0;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		struct sc_entry *v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->v = v;
		char **p = realloc(c->paths, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		c->paths = p;
		c->cap = cap;
	}
	c->paths[c->n] = path;
	if (pmap_put(&c->index, path, c->n))
		return -ENOMEM;
	c->v[c->n++] = *e;
	return 0;
}

static bool in_blob(const struct scache *c, const char *p)
{
	return c->blob && p >= c->blob && p < c->blob + c->bloblen;
}

static void head(char *buf, size_t len)
{
	snprintf(buf, len, SC_MAGIC "%zu %016" PRIx64 "\n", sizeof(struct sc_entry), st_identity());
}

int scache_load(struct scache *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	c->index.borrow = true;
	c->now = (int64_t)time(NULL);
	char *data;
	size_t len;
	if (!path || sfs_read_file(path, &data, &len) < 0)
		return 0;
	char h[80];
	head(h, sizeof(h));
	size_t hlen = strlen(h);
	if (len < hlen || memcmp(data, h, hlen) != 0) {
		free(data);
		return 0;
	}
	c->blob = data;
	c->bloblen = len;
	const size_t rec = sizeof(struct sc_entry) + 2;
	for (char *p = data + hlen, *end = data + len; (size_t)(end - p) > rec;) {
		struct sc_entry e;
		uint16_t plen;
		memcpy(&e, p, sizeof(e));
		memcpy(&plen, p + sizeof(e), 2);
		char *name = p + rec;
		if ((size_t)(end - name) < (size_t)plen + 1 || name[plen] != '\0')
			break; /* cut short: the rest is hashed again */
		if (add(c, name, &e))
			break; /* out of memory: a smaller cache */
		p = name + plen + 1;
	}
	return 0;
}

static void fill(struct sc_entry *e, const struct stat *st)
{
	e->size = (uint64_t)st->st_size;
	e->ino = (uint64_t)st->st_ino;
	e->mtime_s = st->st_mtim.tv_sec;
	e->mtime_ns = st->st_mtim.tv_nsec;
	e->ctime_s = st->st_ctim.tv_sec;
	e->ctime_ns = st->st_ctim.tv_nsec;
	e->mode = st->st_mode;
}

bool scache_hit(struct scache *c, const char *path, const struct stat *st, git_oid *oid)
{
	return scache_hit_at(c, path, st, oid, &c->next);
}

bool scache_hit_at(const struct scache *c, const char *path, const struct stat *st, git_oid *oid,
		   size_t *next)
{
	uint64_t at;
	/* records are in the order a walk noted them, and walks of one tree
	 * go the same way: the record after the last hit is tried first */
	if (*next < c->n && strcmp(c->paths[*next], path) == 0)
		at = *next;
	else if (!pmap_get(&c->index, path, &at))
		return false;
	*next = at + 1;
	struct sc_entry now;
	fill(&now, st);
	const struct sc_entry *e = &c->v[at];
	if (e->size != now.size || e->ino != now.ino || e->mtime_s != now.mtime_s ||
	    e->mtime_ns != now.mtime_ns || e->ctime_s != now.ctime_s ||
	    e->ctime_ns != now.ctime_ns || e->mode != now.mode)
		return false;
	*oid = e->oid;
	return true;
}

int scache_note(struct scache *c, const char *path, const struct stat *st, const git_oid *oid)
{
	if (st->st_mtim.tv_sec >= c->now || st->st_ctim.tv_sec >= c->now)
		return 0; /* racily clean: hashed again next time */
	struct sc_entry e;
	fill(&e, st);
	e.oid = *oid;
	c->dirty = true;
	uint64_t at;
	if (pmap_get(&c->index, path, &at)) {
		c->v[at] = e;
		return 0;
	}
	char *copy = strdup(path);
	if (!copy || add(c, copy, &e)) {
		free(copy);
		return -ENOMEM;
	}
	return 0;
}

/* path replaced by temp file and rename: readers see the old or the new. */
static int write_unsynced(const char *path, const void *data, size_t len)
{
	char tmp[4200];
	if (sfs_pathf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)gettid()) < 0) /* one per thread */
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = st_write_all(fd, data, len);
	if (close(fd) < 0 && !r)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

int scache_save(struct scache *c, const char *path)
{
	if (!path || !c->dirty)
		return 0;
	struct sfs_buf b = {0};
	char h[80];
	head(h, sizeof(h));
	int r = sfs_buf_adds(&b, h);
	for (size_t i = 0; !r && i < c->n; i++) {
		size_t plen = strlen(c->paths[i]);
		uint16_t l16 = (uint16_t)plen;
		if (plen > UINT16_MAX)
			continue;
		r = sfs_buf_add(&b, &c->v[i], sizeof(c->v[i]));
		if (!r)
			r = sfs_buf_add(&b, &l16, 2);
		if (!r)
			r = sfs_buf_add(&b, c->paths[i], plen + 1);
	}
	/* a cache is only a speed-up: a failed write is forgotten, and it is
	 * not fsync'd (git's index is not either): after a crash a file that
	 * lost its contents fails the header check and every file is hashed */
	if (!r)
		r = write_unsynced(path, b.buf, b.len);
	sfs_buf_free(&b);
	return r;
}

void scache_free(struct scache *c)
{
	for (size_t i = 0; i < c->n; i++)
		if (!in_blob(c, c->paths[i]))
			free(c->paths[i]);
	free(c->paths);
	free(c->blob);
	free(c->v);
	pmap_free(&c->index);
	memset(c, 0, sizeof(*c));
}
