/*
 * The node table: nodes by id, by (sandbox, st_dev, st_ino) and by inotify
 * watch, their lifetime, and the per-sandbox facts (see internal.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"
#include "fs/audit.h"
#include "fs/ino.h"
#include "providers/err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

struct ws_state ws = {.lock = PTHREAD_MUTEX_INITIALIZER, .ifd = -1, .evfd = -1};

#define WS_ID_MAX ((1ULL << 48) - 1)

void ws_bug(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sfs_log(SFS_LOG_ERR, "workspace: internal error: %s", msg);
	fprintf(stderr, "sandboxfs: workspace: internal error: %s\n", msg);
	abort();
}

/* ENOSYS would make the kernel stop sending this request type for the whole
 * mount (synthetic files included), so a host ENOSYS is reported as
 * EOPNOTSUPP. */
void ws_reply_err(fuse_req_t req, int err)
{
	fs_audit_note_reply(err == ENOSYS ? EOPNOTSUPP : err);
	fuse_reply_err(req, err == ENOSYS ? EOPNOTSUPP : err);
}

bool ws_name_ok(const char *name)
{
	return name[0] != '\0' && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
	       strchr(name, '/') == NULL;
}

void ws_proc_path(char buf[WS_PROC_PATH_MAX], int fd)
{
	snprintf(buf, WS_PROC_PATH_MAX, "/proc/self/fd/%d", fd);
}

/* ---- hash maps ---------------------------------------------------------- */

uint64_t ws_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t ws_hash_key(uint32_t serial, dev_t dev, ino_t ino)
{
	return ws_mix((uint64_t)ino ^ ws_mix((uint64_t)dev ^ ((uint64_t)serial << 40)));
}

static uint64_t ws_node_hash(const struct ws_node *n, int which)
{
	if (which == WS_BY_WD)
		return ws_mix((uint64_t)(unsigned)n->wd);
	return which == WS_BY_ID ? ws_mix(n->id) : ws_hash_key(n->serial, n->dev, n->ino);
}

int ws_map_init(struct ws_map *m)
{
	m->nbuckets = 1024;
	m->count = 0;
	m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
	return m->buckets ? 0 : -ENOMEM;
}

/* Doubles the bucket array; on allocation failure the map just stays denser. */
static void ws_map_grow(int which)
{
	struct ws_map *m = &ws.map[which];
	size_t nb = m->nbuckets * 2;
	struct ws_node **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct ws_node *n = m->buckets[i], *next;

		for (; n; n = next) {
			size_t slot = ws_node_hash(n, which) & (nb - 1);

			next = n->next[which];
			n->next[which] = b[slot];
			b[slot] = n;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->nbuckets = nb;
}

static void ws_map_insert(int which, struct ws_node *n)
{
	struct ws_map *m = &ws.map[which];

	if (m->count >= m->nbuckets)
		ws_map_grow(which);
	size_t slot = ws_node_hash(n, which) & (m->nbuckets - 1);
	n->next[which] = m->buckets[slot];
	m->buckets[slot] = n;
	n->in_map[which] = true;
	m->count++;
}

void ws_map_remove(int which, struct ws_node *n)
{
	struct ws_map *m = &ws.map[which];
	struct ws_node **pp;

	if (!n->in_map[which])
		return;
	pp = &m->buckets[ws_node_hash(n, which) & (m->nbuckets - 1)];
	while (*pp != n)
		pp = &(*pp)->next[which];
	*pp = n->next[which];
	n->in_map[which] = false;
	m->count--;
}

struct ws_node *ws_find_key_locked(uint32_t serial, dev_t dev, ino_t ino)
{
	struct ws_map *m = &ws.map[WS_BY_KEY];
	struct ws_node *n = m->buckets[ws_hash_key(serial, dev, ino) & (m->nbuckets - 1)];

	for (; n; n = n->next[WS_BY_KEY])
		if (n->serial == serial && n->dev == dev && n->ino == ino)
			return n;
	return NULL;
}

/* An ino the kernel sent us that is not in the table is a bug, not an errno. */
static struct ws_node *ws_find_locked(fuse_ino_t ino)
{
	struct ws_map *m = &ws.map[WS_BY_ID];
	uint64_t id = SFS_INO_WS_ID(ino);

	if (SFS_INO_KIND(ino) != SFS_K_WS)
		ws_bug("inode %#" PRIx64 " is not a workspace node", (uint64_t)ino);
	for (struct ws_node *n = m->buckets[ws_mix(id) & (m->nbuckets - 1)]; n;
	     n = n->next[WS_BY_ID])
		if (n->id == id)
			return n;
	ws_bug("unknown workspace inode %#" PRIx64, (uint64_t)ino);
}

/* Like ws_find_locked, for ids we remember ourselves (they may be gone). */
struct ws_node *ws_find_id_locked(uint64_t id)
{
	struct ws_map *m = &ws.map[WS_BY_ID];

	for (struct ws_node *n = m->buckets[ws_mix(id) & (m->nbuckets - 1)]; n;
	     n = n->next[WS_BY_ID])
		if (n->id == id)
			return n;
	return NULL;
}

struct ws_node *ws_find_wd_locked(int wd)
{
	struct ws_map *m = &ws.map[WS_BY_WD];

	for (struct ws_node *n = m->buckets[ws_mix((uint64_t)(unsigned)wd) & (m->nbuckets - 1)]; n;
	     n = n->next[WS_BY_WD])
		if (n->wd == wd)
			return n;
	return NULL;
}

struct ws_sandbox_info *ws_sandbox_info_locked(uint32_t serial)
{
	for (size_t i = 0; i < ws.nsandboxes; i++)
		if (ws.sandboxes[i].serial == serial)
			return &ws.sandboxes[i];
	return NULL;
}

uint64_t ws_ctime_ns(const struct stat *st)
{
	return (uint64_t)st->st_ctim.tv_sec * 1000000000ULL + (uint64_t)st->st_ctim.tv_nsec;
}

static bool ws_serial_gone_locked(uint32_t serial)
{
	for (size_t i = 0; i < ws.ngone; i++)
		if (ws.gone_serials[i] == serial)
			return true;
	return false;
}

/* ---- inotify watches (see "Coherence" in watcher.c) --------------------------------- */

#define WS_WATCH_MASK                                                                              \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB |             \
	 IN_CLOSE_WRITE | IN_ONLYDIR)

/* Watches directory node n (new, under ws.lock).  A directory that cannot be
 * watched makes the whole mount fall back to short TTLs. */
static void ws_watch_add_locked(struct ws_node *n)
{
	char path[WS_PROC_PATH_MAX];
	int wd;

	__atomic_store_n(&n->wd, -1, __ATOMIC_RELAXED);
	if (!ws.watching || !S_ISDIR(n->type))
		return;
	ws_proc_path(path, n->fd);
	wd = inotify_add_watch(ws.ifd, path, WS_WATCH_MASK);
	if (wd == -1) {
		if (ws.coherent)
			sfs_log(
			    SFS_LOG_WARN,
			    "workspace: inotify_add_watch: %s (see fs.inotify.max_user_watches); "
			    "workspace caches now expire after at most %g s",
			    strerror(errno), WS_FALLBACK_TIMEOUT);
		__atomic_store_n(&ws.coherent, false, __ATOMIC_RELAXED);
		return;
	}
	if (ws_find_wd_locked(wd))
		return; /* the same directory seen as two nodes: the first one owns the watch */
	__atomic_store_n(&n->wd, wd, __ATOMIC_RELAXED);
	ws_map_insert(WS_BY_WD, n);
}

static void ws_watch_rm_locked(struct ws_node *n)
{
	if (n->wd < 0)
		return;
	ws_map_remove(WS_BY_WD, n);
	if (ws.watching)
		inotify_rm_watch(ws.ifd, n->wd);
	__atomic_store_n(&n->wd, -1, __ATOMIC_RELAXED);
}

/* Makes n unfindable: no new lookup, event or op will reach it. */
static void ws_node_unlink_locked(struct ws_node *n)
{
	ws_map_remove(WS_BY_ID, n);
	ws_map_remove(WS_BY_KEY, n);
	ws_watch_rm_locked(n);
	ws_lru_remove_locked(n);
}

/* ---- node lifetime ------------------------------------------------------ */

/* Frees n if nobody needs it any more; returns the fd the caller must close
 * (outside the lock), or -1. */
static int ws_reap_locked(struct ws_node *n, bool *freed)
{
	int fd = -1;

	*freed = false;
	if (n->users > 0)
		return -1;
	if (n->nlookup == 0) {
		ws_node_unlink_locked(n);
		fd = n->fd;
		*freed = true;
	} else if (n->gone && n->fd >= 0) {
		fd = n->fd;
		n->fd = -1;
	}
	return fd;
}

static void ws_finish_reap(struct ws_node *n, int fd, bool freed)
{
	if (fd >= 0) {
		close(fd);
		ws_fd_unreserve();
	}
	if (freed) {
		free(n->fh);
		free(n);
	}
}

/* Pins the node for ino with an open fd that stays open until ws_put.
 * Replies ENOENT and returns NULL if its sandbox is gone, and an errno if
 * an evicted fd cannot be reopened (the inode was deleted meanwhile, or
 * every fd of the budget is in use). */
struct ws_node *ws_get(fuse_req_t req, fuse_ino_t ino)
{
	struct ws_node *n;
	bool reopen;
	int err;

	pthread_mutex_lock(&ws.lock);
	n = ws_find_locked(ino);
	if (n->gone) {
		pthread_mutex_unlock(&ws.lock);
		fs_audit_note_reply(ENOENT);
		fuse_reply_err(req, ENOENT);
		return NULL;
	}
	reopen = ws_hold_locked(n);
	pthread_mutex_unlock(&ws.lock);
	if (reopen && (err = ws_node_reopen(n, false))) {
		ws_put(n);
		ws_reply_err(req, err);
		return NULL;
	}
	return n;
}

void ws_put(struct ws_node *n)
{
	bool freed;
	int fd;

	pthread_mutex_lock(&ws.lock);
	if (n->users == 0)
		ws_bug("node %" PRIu64 " released more often than pinned", n->id);
	n->users--;
	fd = ws_reap_locked(n, &freed);
	pthread_mutex_unlock(&ws.lock);
	ws_finish_reap(n, fd, freed);
}

void ws_unref(fuse_ino_t ino, uint64_t count)
{
	struct ws_node *n;
	bool freed;
	int fd;

	pthread_mutex_lock(&ws.lock);
	n = ws_find_locked(ino);
	if (count > n->nlookup)
		ws_bug("forget %" PRIu64 " of node %" PRIu64 " with nlookup %" PRIu64, count, n->id,
		       n->nlookup);
	n->nlookup -= count;
	if (n->nlookup == 0) {
		/* Nobody can find it any more; freed now or by the last ws_put. */
		ws_node_unlink_locked(n);
	}
	fd = ws_reap_locked(n, &freed);
	pthread_mutex_unlock(&ws.lock);
	ws_finish_reap(n, fd, freed);
}

/*
 * Finds or creates the node for the object fd (an O_PATH fd counted with
 * ws_fd_reserve, kept by the node and closed otherwise) with attributes st,
 * and counts one kernel lookup.  parent is the pinned directory it was found
 * in, or NULL for a workspace root.  Returns 0 with *ino and (if wanted)
 * *node set, or an errno.
 */
int ws_adopt(uint32_t serial, const struct ws_node *parent, int fd, const struct stat *st,
	     fuse_ino_t *ino, struct ws_node **node)
{
	struct ws_node *fresh = calloc(1, sizeof(*fresh));
	struct file_handle *fh = NULL;
	bool handle_taken = false;
	struct ws_node *n;
	int mnt_id = 0, err;

	if (!fresh) {
		close(fd);
		ws_fd_unreserve();
		return ENOMEM;
	}
	for (;;) {
		err = 0;
		pthread_mutex_lock(&ws.lock);
		n = NULL;
		if (parent ? parent->gone : ws_serial_gone_locked(serial)) {
			err = ENOENT;
			break;
		}
		n = ws_find_key_locked(serial, st->st_dev, st->st_ino);
		if (n && n->fd >= 0) {
			/* its open fd holds the inode, whose number therefore
			 * names no other: the same object (the hot path) */
			n->nlookup++;
			ws_lru_touch_locked(n);
			break;
		}
		if (!handle_taken) {
			/* a new node, or one whose fd was evicted: its handle is
			 * taken outside the lock, then the table searched again */
			pthread_mutex_unlock(&ws.lock);
			fh = ws_handle_take(serial, fd, st, &mnt_id);
			handle_taken = true;
			continue;
		}
		if (n && ws_handle_same(n->fh, fh)) {
			/* evicted: the fd just opened saves the next op a reopen */
			n->nlookup++;
			n->fd = fd;
			fd = -1;
			ws_lru_add_locked(n);
			break;
		}
		if (n) {
			/* The inode n was held by is deleted and its number now names
			 * another object (possible once its fd was closed).  n stays
			 * until the kernel forgets it, failing with ENOENT; this
			 * object gets a node of its own. */
			ws_map_remove(WS_BY_KEY, n);
			ws_watch_rm_locked(n);
			n = NULL;
		}
		if (ws.next_id > WS_ID_MAX) {
			err = ENOSPC;
			break;
		}
		n = fresh;
		fresh = NULL;
		n->id = ws.next_id++;
		n->serial = serial;
		n->fd = fd;
		n->fh = fh;
		n->mnt_id = mnt_id;
		fh = NULL;
		n->dev = st->st_dev;
		n->ino = st->st_ino;
		n->type = st->st_mode & S_IFMT;
		n->nlookup = 1;
		n->known_ctime = ws_ctime_ns(st);
		ws_map_insert(WS_BY_ID, n);
		ws_map_insert(WS_BY_KEY, n);
		ws_watch_add_locked(n);
		ws_lru_add_locked(n);
		fd = -1;
		break;
	}
	if (n && parent)
		n->parent_id = parent->id;
	if (n) {
		*ino = SFS_INO_WS(n->id);
		if (node)
			*node = n;
	}
	pthread_mutex_unlock(&ws.lock);
	if (fd >= 0) {
		close(fd);
		ws_fd_unreserve();
	}
	free(fresh);
	free(fh);
	return err;
}

/* Long TTLs only while every change reaches the kernel (see "Coherence"). */
static double ws_ttl(double configured)
{
	if (__atomic_load_n(&ws.coherent, __ATOMIC_RELAXED) || configured <= WS_FALLBACK_TIMEOUT)
		return configured;
	return WS_FALLBACK_TIMEOUT;
}

double ws_attr_ttl(void)
{
	return ws_ttl(ws.opt.attr_timeout);
}

void ws_entry_init(struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr_timeout = ws_ttl(ws.opt.attr_timeout);
	e->entry_timeout = ws_ttl(ws.opt.entry_timeout);
}

/* Looks name up in the pinned directory parent: fills e and counts a lookup. */
int ws_do_lookup(struct ws_node *parent, const char *name, struct fuse_entry_param *e,
		 struct ws_node **node)
{
	int fd, err;

	ws_entry_init(e);
	err = ws_fd_reserve(false);
	if (err)
		return err;
	fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		err = errno;
		ws_fd_unreserve();
		return err;
	}
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		err = errno;
		close(fd);
		ws_fd_unreserve();
		return err;
	}
	ws_link_size(parent->serial, parent->id, fd, &e->attr);
	return ws_adopt(parent->serial, parent, fd, &e->attr, &e->ino, node);
}

/* If the kernel never got the entry (request interrupted), it never counted
 * the lookup either. */
void ws_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) == -ENOENT)
		ws_unref(e->ino, 1);
}

/* Remembers what readlink needs to know about a sandbox (first lookup wins
 * for root_path, which readers use without the lock). */
int ws_note_sandbox(uint32_t serial, const struct stat *root, bool rewrite, const char *root_path)
{
	struct ws_sandbox_info *info;
	char *copy = NULL;

	if (rewrite && root_path && !(copy = strdup(root_path)))
		return ENOMEM;
	pthread_mutex_lock(&ws.lock);
	info = ws_sandbox_info_locked(serial);
	if (!info && ws.nsandboxes == ws.sandboxes_cap) {
		size_t ncap = ws.sandboxes_cap ? ws.sandboxes_cap * 2 : 16;
		struct ws_sandbox_info *p = realloc(ws.sandboxes, ncap * sizeof(*p));

		if (!p) {
			pthread_mutex_unlock(&ws.lock);
			free(copy);
			return ENOMEM;
		}
		ws.sandboxes = p;
		ws.sandboxes_cap = ncap;
	}
	if (!info) {
		info = &ws.sandboxes[ws.nsandboxes++];
		*info = (struct ws_sandbox_info){.serial = serial};
	}
	if (!info->root_path) {
		info->root_path = copy;
		copy = NULL;
	}
	info->rewrite_symlinks = rewrite && !ws.symlinks_raw;
	info->root_dev = root->st_dev;
	info->root_ino = root->st_ino;
	pthread_mutex_unlock(&ws.lock);
	free(copy);
	return 0;
}

/* Retires every node of a sandbox (later ops on them get ENOENT); with
 * dead, the serial itself is gone and no new node is made for it. */
static void ws_retire_sandbox(uint32_t serial, bool dead)
{
	struct ws_mount *mounts;
	int *fds = NULL;
	size_t nfds = 0, cap = 0;

	pthread_mutex_lock(&ws.lock);
	if (dead && !ws_serial_gone_locked(serial)) {
		if (ws.ngone == ws.gone_cap) {
			size_t ncap = ws.gone_cap ? ws.gone_cap * 2 : 16;
			uint32_t *g = realloc(ws.gone_serials, ncap * sizeof(*g));

			if (g) {
				ws.gone_serials = g;
				ws.gone_cap = ncap;
			}
		}
		if (ws.ngone < ws.gone_cap)
			ws.gone_serials[ws.ngone++] = serial;
	}
	for (size_t i = 0; i < ws.map[WS_BY_ID].nbuckets; i++) {
		for (struct ws_node *n = ws.map[WS_BY_ID].buckets[i]; n; n = n->next[WS_BY_ID]) {
			if (n->serial != serial || n->gone)
				continue;
			__atomic_store_n(&n->gone, true, __ATOMIC_RELEASE);
			ws_map_remove(WS_BY_KEY, n);
			ws_watch_rm_locked(n);
			ws_lru_remove_locked(n);
			if (n->users > 0 || n->fd < 0)
				continue; /* the last ws_put closes it */
			if (nfds == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				int *f = realloc(fds, ncap * sizeof(*f));

				if (!f) {
					close(n->fd); /* O_PATH: close cannot block */
					ws_fd_unreserve();
					n->fd = -1;
					continue;
				}
				fds = f;
				cap = ncap;
			}
			fds[nfds++] = n->fd;
			n->fd = -1;
		}
	}
	mounts = ws_mounts_retire_locked(serial);
	pthread_mutex_unlock(&ws.lock);
	for (size_t i = 0; i < nfds; i++) {
		close(fds[i]);
		ws_fd_unreserve();
	}
	free(fds);
	ws_mounts_free(mounts);
}

void ws_sandbox_gone(uint32_t serial)
{
	ws_retire_sandbox(serial, true);
}

void ws_sandbox_reset(uint32_t serial)
{
	ws_retire_sandbox(serial, false);
}
