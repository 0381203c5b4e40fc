/*
 * Stat caches kept in memory between operations, so a diff or snapshot does
 * not read its sandbox's cache file and rebuild its index each time (a
 * tenth of a diff of 5200 files).  A pooled cache is the file's contents as
 * last read or written by this process; it is used only while the file is
 * still the one it came from (device, inode, size, mtime and ctime to the
 * nanosecond, as stat(2) tells) and the store is the same, so whatever
 * replaces or removes the file (gc dropping a cache, another writer, a
 * restart) sends the next operation back to the file.  An operation takes
 * its cache out of the pool (two at once on one sandbox: the second reads
 * the file) and puts it back after writing it, under one lock so that the
 * file's identity recorded is that of the bytes the memory holds.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define POOL_SLOTS 16

struct pooled {
	char *path; /* NULL: a free slot */
	struct scache c;
	struct stat id; /* of the file the cache is */
	uint64_t store; /* st_identity when it was put back */
	uint64_t used;
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pooled pool[POOL_SLOTS];
static uint64_t pool_clock;

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void drop_locked(struct pooled *p)
{
	scache_free(&p->c);
	free(p->path);
	memset(p, 0, sizeof(*p));
}

void scache_open(struct scache *c, const char *path)
{
	if (path) {
		struct stat now;
		bool found = false;
		pthread_mutex_lock(&pool_mu);
		for (size_t i = 0; i < POOL_SLOTS && !found; i++) {
			struct pooled *p = &pool[i];
			if (!p->path || strcmp(p->path, path) != 0)
				continue;
			if (stat(path, &now) == 0 && same_file(&now, &p->id) &&
			    p->store == st_identity()) {
				*c = p->c;
				memset(&p->c, 0, sizeof(p->c));
				found = true;
			}
			drop_locked(p); /* taken, or stale */
		}
		pthread_mutex_unlock(&pool_mu);
		if (found) {
			c->now = (int64_t)time(NULL); /* the racy-clean second is this one's */
			c->next = 0;
			return;
		}
	}
	scache_load(c, path);
}

void scache_close(struct scache *c, const char *path, bool save)
{
	if (!path || (!save && c->dirty)) {
		scache_free(c); /* its notes are not in the file */
		return;
	}
	pthread_mutex_lock(&pool_mu);
	struct stat id;
	if ((save && scache_save(c, path) < 0) || stat(path, &id) < 0) {
		pthread_mutex_unlock(&pool_mu);
		scache_free(c);
		return;
	}
	c->dirty = false;
	size_t slot = POOL_SLOTS;
	for (size_t i = 0; i < POOL_SLOTS; i++) {
		if (pool[i].path && strcmp(pool[i].path, path) == 0)
			drop_locked(&pool[i]); /* an older copy put back meanwhile */
		if (!pool[i].path && slot == POOL_SLOTS)
			slot = i;
	}
	if (slot == POOL_SLOTS) { /* full: the least recently put back goes */
		slot = 0;
		for (size_t i = 1; i < POOL_SLOTS; i++)
			if (pool[i].used < pool[slot].used)
				slot = i;
		drop_locked(&pool[slot]);
	}
	struct pooled *p = &pool[slot];
	p->path = strdup(path);
	if (p->path) {
		p->c = *c;
		p->id = id;
		p->store = st_identity();
		p->used = ++pool_clock;
	} else {
		scache_free(c);
	}
	pthread_mutex_unlock(&pool_mu);
	memset(c, 0, sizeof(*c));
}

void scache_pool_clear(void)
{
	pthread_mutex_lock(&pool_mu);
	for (size_t i = 0; i < POOL_SLOTS; i++)
		if (pool[i].path)
			drop_locked(&pool[i]);
	pthread_mutex_unlock(&pool_mu);
}
