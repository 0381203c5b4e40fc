/* The remote cache's node table: sandboxes, nodes by id and by path, pins,
 * and the accessor every operation starts with (rc_ref_get). */
#include "internal.h"

#include "../../providers/untrusted/name.h"
#include "../../providers/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct rc_state R = {.mu = PTHREAD_MUTEX_INITIALIZER,
		     .cv = PTHREAD_COND_INITIALIZER,
		     .list_cv = PTHREAD_COND_INITIALIZER,
		     .wb_cv = PTHREAD_COND_INITIALIZER};

/* ---- small helpers ------------------------------------------------------ */

double rc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t hash_id(uint64_t id)
{
	return (size_t)(id * 0x9E3779B97F4A7C15ULL >> 52) % RC_NBUCKETS;
}

static size_t hash_path(uint32_t serial, const char *path)
{
	uint64_t h = 1469598103934665603ULL ^ serial;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (size_t)(h % RC_NBUCKETS);
}

char *rc_join_path(const char *dir, const char *name)
{
	char *out;
	if (asprintf(&out, "%s%s%s", dir, dir[0] ? "/" : "", name) < 0)
		return NULL;
	return out;
}

void rc_rstat_free(struct sfs_rstat *st)
{
	free(st->link);
	st->link = NULL;
}

int rc_rstat_copy(struct sfs_rstat *dst, const struct sfs_rstat *src)
{
	char *link = src->link ? strdup(src->link) : NULL;
	if (src->link && !link)
		return -ENOMEM;
	free(dst->link);
	*dst = *src;
	dst->link = link;
	return 0;
}

void rc_ents_free(struct rent *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].st.link);
	}
	free(v);
}

bool rc_name_ok(const char *name)
{
	return sfs_name_ok_str(name);
}

void rc_entry_free(struct rc_entry *e)
{
	rc_rstat_free(&e->st);
	free(e->path);
	e->path = NULL;
}

/* ---- sandboxes ---------------------------------------------------------- */

struct rsb *rc_rsb_find_locked(uint32_t serial, bool create)
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
const char *rc_cachedir(struct rsb *rs, struct sfs_sandbox *sb)
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

struct sfs_sandbox *rc_sandbox_of(struct rc_node *n)
{
	return R.hooks.sandbox_get(n->serial);
}

void rc_sandbox_put(struct sfs_sandbox *sb)
{
	if (sb)
		R.hooks.sandbox_put(sb);
}

unsigned long rc_calls(uint32_t serial)
{
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rc_rsb_find_locked(serial, false);
	unsigned long n = rs ? __atomic_load_n(&rs->calls, __ATOMIC_RELAXED) : 0;
	pthread_mutex_unlock(&R.mu);
	return n;
}

size_t rc_dirty_count(uint32_t serial)
{
	size_t count = 0;
	pthread_mutex_lock(&R.mu);
	for (size_t b = 0; b < RC_NBUCKETS; b++)
		for (struct rc_node *n = R.by_id[b]; n; n = n->id_next)
			count += n->serial == serial && n->dirty;
	pthread_mutex_unlock(&R.mu);
	return count;
}

/* ---- the node table ----------------------------------------------------- */

struct rc_node *rc_find_id_locked(uint64_t id)
{
	for (struct rc_node *n = R.by_id[hash_id(id)]; n; n = n->id_next)
		if (n->id == id)
			return n;
	return NULL;
}

struct rc_node *rc_find_path_locked(uint32_t serial, const char *path)
{
	for (struct rc_node *n = R.by_path[hash_path(serial, path)]; n; n = n->path_next)
		if (n->serial == serial && !n->unlinked && strcmp(n->path, path) == 0)
			return n;
	return NULL;
}

void rc_unhash_path_locked(struct rc_node *n)
{
	struct rc_node **pp = &R.by_path[hash_path(n->serial, n->path)];
	for (; *pp; pp = &(*pp)->path_next) {
		if (*pp == n) {
			*pp = n->path_next;
			break;
		}
	}
	n->path_next = NULL;
}

void rc_hash_path_locked(struct rc_node *n)
{
	size_t b = hash_path(n->serial, n->path);
	n->path_next = R.by_path[b];
	R.by_path[b] = n;
}

void rc_cache_file_name(struct rc_node *n, const char *suffix, char *buf, size_t len)
{
	if (sfs_pathf(buf, len, "%s/%" PRIu64 "%s",
		      n->rs->cachedir ? n->rs->cachedir : "/nonexistent", n->id, suffix) < 0)
		sfs_log(SFS_LOG_ERR, "cache: %s: path too long", n->rs->cachedir); /* "": no file */
}

struct rc_node *rc_new_node_locked(struct rsb *rs, const char *path)
{
	struct rc_node *n = calloc(1, sizeof(*n));
	if (!n || !(n->path = strdup(path))) {
		free(n);
		return NULL;
	}
	n->id = ++R.next_id;
	n->serial = rs->serial;
	n->rs = rs;
	n->root = !path[0];
	n->cfd = -1;
	pthread_mutex_init(&n->io, NULL);
	size_t b = hash_id(n->id);
	n->id_next = R.by_id[b];
	R.by_id[b] = n;
	rc_hash_path_locked(n);
	return n;
}

/* Unlinks n from both tables and frees it; its cache file goes unless it
 * holds unsaved data that a later daemon must find (keep_dirty_data). */
void rc_free_node_locked(struct rc_node *n, bool keep_dirty_data)
{
	struct rc_node **pp = &R.by_id[hash_id(n->id)];
	for (; *pp; pp = &(*pp)->id_next) {
		if (*pp == n) {
			*pp = n->id_next;
			break;
		}
	}
	if (!n->unlinked)
		rc_unhash_path_locked(n);
	if (n->cfd >= 0) {
		close(n->cfd);
		if (!(keep_dirty_data && n->dirty)) {
			char name[4200];
			rc_cache_file_name(n, "", name, sizeof(name));
			unlink(name);
		}
	}
	if (n->unborn)
		n->rs->unborn--;
	rc_rstat_free(&n->st);
	rc_ents_free(n->ents, n->nents);
	pthread_mutex_destroy(&n->io);
	free(n->path);
	free(n);
}

/* Frees n when nothing needs it any more. */
void rc_maybe_free_locked(struct rc_node *n)
{
	if (n->nlookup || n->pins || n->dirty)
		return;
	rc_free_node_locked(n, false);
}

void rc_node_put(struct rc_node *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&R.mu);
	n->pins--;
	rc_maybe_free_locked(n);
	pthread_mutex_unlock(&R.mu);
}

char *rc_node_path(struct rc_node *n)
{
	pthread_mutex_lock(&R.mu);
	char *p = strdup(n->path);
	pthread_mutex_unlock(&R.mu);
	return p;
}

void rc_forget(uint64_t id, uint64_t nlookup)
{
	pthread_mutex_lock(&R.mu);
	struct rc_node *n = rc_find_id_locked(id);
	if (n) {
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		rc_maybe_free_locked(n);
	}
	pthread_mutex_unlock(&R.mu);
}

/* ---- the accessor ------------------------------------------------------- */

int rc_ref_get(uint64_t id, struct rc_ref *ref)
{
	ref->sb = NULL;
	pthread_mutex_lock(&R.mu);
	struct rc_node *n = rc_find_id_locked(id);
	if (n && n->rs->gone)
		n = NULL;
	if (n) {
		n->pins++;
		rc_touch_locked(n->rs, rc_now());
	}
	pthread_mutex_unlock(&R.mu);
	ref->n = n;
	if (n)
		ref->sb = rc_sandbox_of(n);
	if (!ref->sb) {
		rc_ref_put(ref);
		return -ENOENT;
	}
	return 0;
}

void rc_ref_put(struct rc_ref *ref)
{
	rc_sandbox_put(ref->sb);
	rc_node_put(ref->n);
	ref->sb = NULL;
	ref->n = NULL;
}

uint64_t rc_ref_id(const struct rc_ref *ref)
{
	return ref->n->id;
}

char *rc_ref_path(const struct rc_ref *ref)
{
	return rc_node_path(ref->n);
}

double rc_ref_ttl(const struct rc_ref *ref)
{
	return rc_ttl_of(ref->n);
}

/* ---- provider calls ----------------------------------------------------- */

int rc_log_err(struct sfs_sandbox *sb, const char *what, const char *path, int r,
	       const struct sfs_err *err)
{
	char nm[64];
	if (r && r != -ENOENT && r != -EEXIST && r != -ENOTEMPTY)
		sfs_log(SFS_LOG_WARN, "%s: workspace: %s %s: %s", sfs_sb_copy_name(sb, nm), what,
			path[0] ? path : "/", err->msg[0] ? err->msg : strerror(-r));
	return r;
}

int rc_p_stat(struct rsb *rs, struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st)
{
	memset(st, 0, sizeof(*st));
	return RC_CALL(rs, sb, "stat", path, fs_stat, path, st);
}
