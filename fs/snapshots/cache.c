/*
 * The stat cache: what git's index does for `git add`.  One file per
 * sandbox; each record is
 *
 *	OID SIZE INO MTIME_S MTIME_NS CTIME_S CTIME_NS MODE PATH\0
 *
 * after a first line naming the store it was made for (st_identity: a
 * cache whose blobs are not in this store is not used).  A file whose
 * size, times, inode and mode all match its record is taken to hold that
 * blob without being read.  Like git's "racily clean" rule, a
 * file changed in the second the cache is made (or later) is not recorded:
 * a write within the same timestamp could go unseen.  A cache that cannot
 * be read is an empty cache (every file is hashed), never an error.
 */
#include "internal.h"

#include "../../providers/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SC_MAGIC "sandboxfs-statcache 2 "

static int add(struct scache *c, const char *path, const struct sc_entry *e)
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
	if (!(c->paths[c->n] = strdup(path)))
		return -ENOMEM;
	if (pmap_put(&c->index, path, c->n)) {
		free(c->paths[c->n]);
		return -ENOMEM;
	}
	c->v[c->n++] = *e;
	return 0;
}

int scache_load(struct scache *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	c->now = (int64_t)time(NULL);
	char *data;
	size_t len;
	if (!path || sfs_read_file(path, &data, &len) < 0)
		return 0;
	char head[64];
	snprintf(head, sizeof(head), SC_MAGIC "%016" PRIx64 "\n", st_identity());
	size_t hlen = strlen(head);
	if (len < hlen || memcmp(data, head, hlen) != 0) {
		free(data);
		return 0;
	}
	for (char *p = data + hlen, *end = data + len; p < end;) {
		char *z = memchr(p, '\0', (size_t)(end - p));
		if (!z)
			break;
		/* parsed by hand: sscanf was a tenth of a second snapshot */
		struct sc_entry e;
		char *q = p + 41;
		bool ok = z - p > 41 && p[40] == ' ' && git_oid_fromstrn(&e.oid, p, 40) == 0;
		uint64_t f[7];
		for (int i = 0; ok && i < 7; i++) {
			char *next;
			f[i] = strtoull(q, &next, i == 6 ? 8 : 10);
			ok = next != q && *next == ' ';
			q = next + 1;
		}
		if (ok) {
			e.size = f[0];
			e.ino = f[1];
			e.mtime_s = (int64_t)f[2];
			e.mtime_ns = (int64_t)f[3];
			e.ctime_s = (int64_t)f[4];
			e.ctime_ns = (int64_t)f[5];
			e.mode = (uint32_t)f[6];
			if (add(c, q, &e))
				break; /* out of memory: a smaller cache */
		}
		p = z + 1;
	}
	free(data);
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

bool scache_hit(const struct scache *c, const char *path, const struct stat *st, git_oid *oid)
{
	uint64_t at;
	if (!pmap_get(&c->index, path, &at))
		return false;
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
	return add(c, path, &e);
}

int scache_save(struct scache *c, const char *path)
{
	if (!path || !c->dirty)
		return 0;
	struct sfs_buf b = {0};
	int r = sfs_buf_printf(&b, SC_MAGIC "%016" PRIx64 "\n", st_identity());
	char hex[41];
	for (size_t i = 0; !r && i < c->n; i++) {
		const struct sc_entry *e = &c->v[i];
		git_oid_tostr(hex, sizeof(hex), &e->oid);
		r = sfs_buf_printf(&b,
				   "%s %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64
				   " %" PRId64 " %o %s",
				   hex, e->size, e->ino, e->mtime_s, e->mtime_ns, e->ctime_s,
				   e->ctime_ns, (unsigned)e->mode, c->paths[i]);
		if (!r)
			r = sfs_buf_addc(&b, '\0');
	}
	/* a cache is only a speed-up: a failed write is forgotten */
	if (!r)
		r = sfs_write_file_atomic(path, b.buf, b.len, NULL);
	sfs_buf_free(&b);
	return r;
}

void scache_free(struct scache *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->paths[i]);
	free(c->paths);
	free(c->v);
	pmap_free(&c->index);
	memset(c, 0, sizeof(*c));
}
