/*
 * workspace/: an fd-based passthrough over a host directory (see workspace.h).
 *
 * Node table.  Every workspace object the kernel knows about is a struct
 * ws_node holding an O_PATH|O_NOFOLLOW fd, found by id (the FUSE ino is
 * SFS_INO_WS(id)) and by (sandbox serial, st_dev, st_ino), so hard links
 * share a node.  A node lives while the kernel holds lookups on it (nlookup)
 * or a handler is using its fd (users); ids are never reused.
 *
 * Locking.  One mutex, ws.lock, guards the maps, next_id, the gone-serial
 * list, the sandbox infos, the inotify watches and every node's nlookup,
 * users, gone and (once gone) fd.  It is a leaf lock: while it is held no
 * other lock is taken, nothing is sent to the kernel and nothing blocks, so
 * callers of ws_* may hold locks of their own.  The coherence watcher's
 * expectation table has a leaf lock of its own (wx.lock), never nested with
 * ws.lock.
 * A handler pins the nodes it uses (ws_get/ws_put) and unpins them before it
 * replies: after a reply the kernel may forget the node at once.
 *
 * Ownership.  When the daemon is root, objects are created with the calling
 * thread's fsuid/fsgid set to the caller's (setfsuid/setfsgid are per-thread),
 * so the host filesystem assigns owner and group atomically, set-gid parent
 * directories included.  setfsuid() to a non-root uid drops CAP_DAC_OVERRIDE
 * and friends from the thread; we raise them again with capset() (also
 * per-thread), because the kernel has already checked every permission with
 * the caller's full credentials (default_permissions, which also strips
 * S_ISGID in vfs_prepare_mode) and repeating the check as the caller would
 * need their supplementary groups.  So a mount that other users can reach
 * must use default_permissions (SPEC §1).  Create-then-fchown was rejected:
 * it races with sandbox processes renaming things into place, and chown
 * clears S_ISUID.
 *
 * The kernel already applied the caller's umask to create modes; each worker
 * thread unshares its fs_struct once and sets its own umask to 0 so that the
 * daemon's umask is not applied a second time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace.h"
#include "fs/ino.h"
#include "fs/symlink_rewrite.h"
#include "providers/config.h"
#include "providers/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/fsuid.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#define WS_ID_MAX ((1ULL << 48) - 1)
#define WS_MIN_TIMEOUT 0.001 /* a TTL of exactly 0 makes the kernel re-look-up every entry */
#define WS_PROC_PATH_MAX 32
#define WS_FALLBACK_TIMEOUT 1.0 /* TTL cap while changes might not be seen (no inotify) */

enum { WS_BY_ID, WS_BY_KEY, WS_BY_WD, WS_NMAPS };

struct ws_node {
	struct ws_node *next[WS_NMAPS]; /* hash chains: by id, by (serial, dev, ino), by wd */
	uint64_t id;
	uint32_t serial;
	int fd; /* O_PATH|O_NOFOLLOW; -1 once gone and unused */
	dev_t dev;
	ino_t ino;
	mode_t type;	  /* S_IFMT bits: an inode never changes type */
	uint64_t nlookup; /* the kernel's lookup count */
	unsigned users;	  /* handlers using fd right now */
	bool gone;	  /* sandbox destroyed: every op but forget/release fails */
	bool in_map[WS_NMAPS];
	int wd;		    /* inotify watch of a directory node, or -1 */
	uint64_t parent_id; /* the directory it was last looked up in (symlink depth) */
	/* Coherence (see "Coherence" below); atomics, not under ws.lock. */
	uint64_t known_ctime; /* ctime (ns) the kernel's caches are known to match */
	unsigned self_busy;   /* handlers changing it right now */
};

struct ws_map {
	struct ws_node **buckets;
	size_t nbuckets; /* a power of two */
	size_t count;
};

/* fi->fh of an open file / directory.  The node outlives the handle: the
 * kernel cannot forget an inode that has an open file. */
struct ws_file {
	int fd;
	struct ws_node *node;
};

struct ws_dir {
	DIR *dp;
	struct dirent *entry; /* read but not yet returned (did not fit) */
	off_t offset;
	struct ws_node *node;
};

/* Per-sandbox facts from ws_lookup_root, kept until shutdown. */
struct ws_sandbox_info {
	uint32_t serial;
	bool rewrite_symlinks;
	char *root_path; /* the workspace root inside the sandbox; never freed while mounted */
	dev_t root_dev;
	ino_t root_ino;
};

static struct {
	pthread_mutex_t lock;
	struct ws_map map[WS_NMAPS];
	uint64_t next_id;
	uint32_t *gone_serials;
	size_t ngone, gone_cap;

	struct ws_options opt;
	struct fuse_session *se;
	bool symlinks_raw; /* -o symlinks=raw: never rewrite */
	struct ws_sandbox_info *sandboxes;
	size_t nsandboxes, sandboxes_cap;

	/* Coherence: one inotify fd and the thread that reads it. */
	int ifd, evfd;
	bool watching, coherent, stop;
	bool explicit_inval; /* the kernel leaves page invalidation to us */
	pthread_t watcher;
	bool root; /* euid 0: creations take the caller's fsuid/fsgid */
	uid_t fsuid;
	gid_t fsgid;
} ws = {.lock = PTHREAD_MUTEX_INITIALIZER, .ifd = -1, .evfd = -1};

static _Thread_local bool ws_thread_umask_done;

static void ws_bug(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void ws_bug(const char *fmt, ...)
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
static void ws_reply_err(fuse_req_t req, int err)
{
	fuse_reply_err(req, err == ENOSYS ? EOPNOTSUPP : err);
}

static bool ws_name_ok(const char *name)
{
	return name[0] != '\0' && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
	       strchr(name, '/') == NULL;
}

static void ws_proc_path(char buf[WS_PROC_PATH_MAX], int fd)
{
	snprintf(buf, WS_PROC_PATH_MAX, "/proc/self/fd/%d", fd);
}

/* ---- hash maps ---------------------------------------------------------- */

static uint64_t ws_mix(uint64_t x)
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

static int ws_map_init(struct ws_map *m)
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

static void ws_map_remove(int which, struct ws_node *n)
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

static struct ws_node *ws_find_key_locked(uint32_t serial, dev_t dev, ino_t ino)
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
static struct ws_node *ws_find_id_locked(uint64_t id)
{
	struct ws_map *m = &ws.map[WS_BY_ID];

	for (struct ws_node *n = m->buckets[ws_mix(id) & (m->nbuckets - 1)]; n;
	     n = n->next[WS_BY_ID])
		if (n->id == id)
			return n;
	return NULL;
}

static struct ws_node *ws_find_wd_locked(int wd)
{
	struct ws_map *m = &ws.map[WS_BY_WD];

	for (struct ws_node *n = m->buckets[ws_mix((uint64_t)(unsigned)wd) & (m->nbuckets - 1)]; n;
	     n = n->next[WS_BY_WD])
		if (n->wd == wd)
			return n;
	return NULL;
}

static struct ws_sandbox_info *ws_sandbox_info_locked(uint32_t serial)
{
	for (size_t i = 0; i < ws.nsandboxes; i++)
		if (ws.sandboxes[i].serial == serial)
			return &ws.sandboxes[i];
	return NULL;
}

static uint64_t ws_ctime_ns(const struct stat *st)
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

/* ---- inotify watches (see "Coherence") --------------------------------- */

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
	if (fd >= 0)
		close(fd);
	if (freed)
		free(n);
}

/* Pins the node for ino so its fd stays open.  Replies ENOENT and returns
 * NULL if its sandbox is gone. */
static struct ws_node *ws_get(fuse_req_t req, fuse_ino_t ino)
{
	struct ws_node *n;

	pthread_mutex_lock(&ws.lock);
	n = ws_find_locked(ino);
	if (n->gone) {
		pthread_mutex_unlock(&ws.lock);
		fuse_reply_err(req, ENOENT);
		return NULL;
	}
	n->users++;
	pthread_mutex_unlock(&ws.lock);
	return n;
}

static void ws_put(struct ws_node *n)
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

static void ws_unref(fuse_ino_t ino, uint64_t count)
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

static bool ws_is_gone(const struct ws_node *n)
{
	return __atomic_load_n(&n->gone, __ATOMIC_ACQUIRE);
}

/*
 * Finds or creates the node for the object fd (an O_PATH fd, kept by a new
 * node and closed otherwise) with attributes st, and counts one kernel
 * lookup.  parent is the pinned directory it was found in, or NULL for a
 * workspace root.  Returns 0 with *ino and (if wanted) *node set, or an errno.
 */
static int ws_adopt(uint32_t serial, const struct ws_node *parent, int fd, const struct stat *st,
		    fuse_ino_t *ino, struct ws_node **node)
{
	struct ws_node *fresh = calloc(1, sizeof(*fresh));
	struct ws_node *n = NULL;
	int err = 0;

	if (!fresh) {
		close(fd);
		return ENOMEM;
	}
	pthread_mutex_lock(&ws.lock);
	if (parent ? parent->gone : ws_serial_gone_locked(serial)) {
		err = ENOENT;
	} else if ((n = ws_find_key_locked(serial, st->st_dev, st->st_ino))) {
		n->nlookup++;
	} else if (ws.next_id > WS_ID_MAX) {
		err = ENOSPC;
	} else {
		n = fresh;
		fresh = NULL;
		n->id = ws.next_id++;
		n->serial = serial;
		n->fd = fd;
		n->dev = st->st_dev;
		n->ino = st->st_ino;
		n->type = st->st_mode & S_IFMT;
		n->nlookup = 1;
		n->known_ctime = ws_ctime_ns(st);
		ws_map_insert(WS_BY_ID, n);
		ws_map_insert(WS_BY_KEY, n);
		ws_watch_add_locked(n);
		fd = -1;
	}
	if (n && parent)
		n->parent_id = parent->id;
	if (n) {
		*ino = SFS_INO_WS(n->id);
		if (node)
			*node = n;
	}
	pthread_mutex_unlock(&ws.lock);
	if (fd >= 0)
		close(fd);
	free(fresh);
	return err;
}

/* Long TTLs only while every change reaches the kernel (see "Coherence"). */
static double ws_ttl(double configured)
{
	if (__atomic_load_n(&ws.coherent, __ATOMIC_RELAXED) || configured <= WS_FALLBACK_TIMEOUT)
		return configured;
	return WS_FALLBACK_TIMEOUT;
}

static double ws_attr_ttl(void)
{
	return ws_ttl(ws.opt.attr_timeout);
}

static void ws_entry_init(struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr_timeout = ws_ttl(ws.opt.attr_timeout);
	e->entry_timeout = ws_ttl(ws.opt.entry_timeout);
}

/* Looks name up in the pinned directory parent: fills e and counts a lookup. */
static int ws_do_lookup(struct ws_node *parent, const char *name, struct fuse_entry_param *e,
			struct ws_node **node)
{
	int fd, err;

	ws_entry_init(e);
	fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		err = errno;
		close(fd);
		return err;
	}
	return ws_adopt(parent->serial, parent, fd, &e->attr, &e->ino, node);
}

/* If the kernel never got the entry (request interrupted), it never counted
 * the lookup either. */
static void ws_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) == -ENOENT)
		ws_unref(e->ino, 1);
}

/* ---- coherence ----------------------------------------------------------- */

/*
 * Coherence.  The kernel caches names, attributes and pages of the workspace
 * for long TTLs with keep_cache; sandbox processes and host programs change
 * the same files behind its back.  One inotify watch per directory node the
 * kernel holds (added when the node is created, removed when it is
 * forgotten) reports those changes; the watcher thread maps (wd, name) to
 * fuse_lowlevel_notify_inval_entry(parent, name) plus inval_inode(parent)
 * (its attributes and cached listing) for name changes, and to
 * inval_inode(child) for data and attribute changes.  Notifications go out
 * from the watcher thread only, never from a FUSE worker, and never under
 * ws.lock: the kernel may hold the parent's lock for a request that needs a
 * worker.  Ordering makes it race-free: a lookup holds the parent's i_rwsem
 * shared until its dentry is in place and inval_entry takes it exclusively,
 * so an invalidation either precedes the lookup's openat (which then sees the
 * change) or follows the dentry.
 *
 * Changes made through the mount are already in the kernel's caches;
 * invalidating them would throw away keep_cache's benefit (a write followed
 * by a read would refetch every page), so they are recognised and skipped:
 *  - name changes: before a create/mkdir/unlink/rename/link the handler
 *    records an expectation (parent node id, name, event class); the watcher
 *    consumes the first matching one instead of invalidating.  A failed
 *    operation withdraws its expectation; if a foreign event consumed it
 *    meanwhile, the invalidation is queued instead.  Expectations that no
 *    event consumed (a rename onto itself) are dropped after WS_EXPECT_TTL_S.
 *  - data and attribute changes: a handler that changes a node marks it busy
 *    and afterwards records its ctime as known_ctime; the watcher invalidates
 *    a node only if it is not busy and its ctime differs from known_ctime
 *    (then adopts the new ctime).  This compares state, not time: Linux's
 *    multigrain ctime (6.13+) makes every change after our fstat visible as a
 *    new ctime.  A sandbox write that lands between our write and our fstat
 *    of the same file is the one change this can miss.
 * An inotify queue overflow invalidates every inode.  Without inotify (or
 * when a watch cannot be added) TTLs are capped at WS_FALLBACK_TIMEOUT.
 * Run start/end still drops a sandbox's caches (ws_invalidate_sandbox), a
 * safety net for changes inotify cannot see (a hard link written from
 * outside the workspace).
 */

#define WS_EXPECT_TTL_S 5
#define WS_WATCH_BATCH_US 2000
#define WS_EXPECT_BUCKETS 256

enum ws_event_class { WS_EV_CREATE = 1, WS_EV_DELETE, WS_EV_MOVED_FROM, WS_EV_MOVED_TO };

struct ws_expect {
	struct ws_expect *next;
	uint64_t seq;
	uint64_t parent;
	enum ws_event_class cls;
	time_t when;
	char name[];
};

/* An invalidation the watcher thread must send for a FUSE worker. */
struct ws_pending {
	struct ws_pending *next;
	fuse_ino_t parent;
	char name[];
};

static struct {
	pthread_mutex_t lock; /* leaf; never held with ws.lock */
	struct ws_expect *buckets[WS_EXPECT_BUCKETS];
	uint64_t next_seq;
	size_t count;
	struct ws_pending *pending;
} wx = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t ws_expect_slot(uint64_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return ws_mix(h ^ parent) & (WS_EXPECT_BUCKETS - 1);
}

/* Records that this mount is about to cause event cls for name in parent.
 * Returns a token for ws_expect_withdraw, 0 if nothing was recorded (then
 * the event just costs an invalidation). */
static uint64_t ws_expect(const struct ws_node *parent, const char *name, enum ws_event_class cls)
{
	size_t len = strlen(name);
	struct ws_expect *e;

	if (!__atomic_load_n(&ws.watching, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&parent->wd, __ATOMIC_RELAXED) < 0)
		return 0;
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return 0;
	memcpy(e->name, name, len + 1);
	e->parent = parent->id;
	e->cls = cls;
	e->when = time(NULL);
	pthread_mutex_lock(&wx.lock);
	e->seq = ++wx.next_seq;
	size_t slot = ws_expect_slot(e->parent, name);
	/* Appended, so the oldest matching expectation is consumed first. */
	struct ws_expect **pp = &wx.buckets[slot];
	while (*pp)
		pp = &(*pp)->next;
	e->next = NULL;
	*pp = e;
	wx.count++;
	pthread_mutex_unlock(&wx.lock);
	return e->seq;
}

static void ws_pending_push(fuse_ino_t parent, const char *name)
{
	size_t len = strlen(name);
	struct ws_pending *p = malloc(sizeof(*p) + len + 1);
	uint64_t one = 1;

	if (!p)
		return; /* then the entry lives out its TTL */
	p->parent = parent;
	memcpy(p->name, name, len + 1);
	pthread_mutex_lock(&wx.lock);
	p->next = wx.pending;
	wx.pending = p;
	pthread_mutex_unlock(&wx.lock);
	if (write(ws.evfd, &one, sizeof(one)) == -1 && errno != EAGAIN)
		sfs_log(SFS_LOG_WARN, "workspace: waking the watcher: %s", strerror(errno));
}

/* The operation that recorded seq failed: no event of ours will come.  If a
 * foreign event already consumed the expectation, its invalidation is owed. */
static void ws_expect_withdraw(uint64_t seq, const struct ws_node *parent, const char *name)
{
	bool found = false;

	if (seq == 0)
		return;
	pthread_mutex_lock(&wx.lock);
	for (struct ws_expect **pp = &wx.buckets[ws_expect_slot(parent->id, name)]; *pp;
	     pp = &(*pp)->next) {
		if ((*pp)->seq == seq) {
			struct ws_expect *e = *pp;

			*pp = e->next;
			wx.count--;
			free(e);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&wx.lock);
	if (!found)
		ws_pending_push(SFS_INO_WS(parent->id), name);
}

static bool ws_expect_consume(uint64_t parent, const char *name, enum ws_event_class cls)
{
	bool found = false;

	pthread_mutex_lock(&wx.lock);
	for (struct ws_expect **pp = &wx.buckets[ws_expect_slot(parent, name)]; *pp;
	     pp = &(*pp)->next) {
		struct ws_expect *e = *pp;

		if (e->parent == parent && e->cls == cls && strcmp(e->name, name) == 0) {
			*pp = e->next;
			wx.count--;
			free(e);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&wx.lock);
	return found;
}

static void ws_expect_prune(time_t now)
{
	pthread_mutex_lock(&wx.lock);
	for (size_t i = 0; i < WS_EXPECT_BUCKETS && wx.count; i++) {
		for (struct ws_expect **pp = &wx.buckets[i]; *pp;) {
			struct ws_expect *e = *pp;

			if (now - e->when > WS_EXPECT_TTL_S) {
				*pp = e->next;
				wx.count--;
				free(e);
			} else {
				pp = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&wx.lock);
}

static void ws_expect_clear(void)
{
	pthread_mutex_lock(&wx.lock);
	for (size_t i = 0; i < WS_EXPECT_BUCKETS; i++) {
		while (wx.buckets[i]) {
			struct ws_expect *e = wx.buckets[i];

			wx.buckets[i] = e->next;
			free(e);
		}
	}
	wx.count = 0;
	while (wx.pending) {
		struct ws_pending *p = wx.pending;

		wx.pending = p->next;
		free(p);
	}
	pthread_mutex_unlock(&wx.lock);
}

/* A handler is about to change n's data or attributes. */
static void ws_self_begin(struct ws_node *n)
{
	__atomic_add_fetch(&n->self_busy, 1, __ATOMIC_ACQ_REL);
}

/* ...and is done: the kernel's caches now match n's ctime (st, or fstat of
 * fd, an fd or O_PATH fd of n). */
static void ws_self_end(struct ws_node *n, int fd, const struct stat *st)
{
	struct stat buf;

	if (!st && fstatat(fd, "", &buf, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0)
		st = &buf;
	if (st)
		__atomic_store_n(&n->known_ctime, ws_ctime_ns(st), __ATOMIC_RELEASE);
	__atomic_sub_fetch(&n->self_busy, 1, __ATOMIC_ACQ_REL);
}

static void ws_send_inval_inode(fuse_ino_t ino)
{
	/* -ENOENT: the kernel has nothing cached for it. */
	if (ws.se)
		fuse_lowlevel_notify_inval_inode(ws.se, ino, 0, 0);
}

static void ws_send_inval_entry(fuse_ino_t parent, const char *name)
{
	if (ws.se)
		fuse_lowlevel_notify_inval_entry(ws.se, parent, name, strlen(name));
}

/* Invalidates the child's (or, name NULL, the directory's own) inode if its
 * ctime is not one the kernel already knows. */
static void ws_watch_data_event(struct ws_node *dir, const char *name)
{
	struct ws_node *n;
	struct stat st;
	fuse_ino_t ino = 0;

	if (fstatat(dir->fd, name ? name : "", &st,
		    AT_SYMLINK_NOFOLLOW | (name ? 0 : AT_EMPTY_PATH)) == -1)
		return; /* gone again: its entry event follows */
	pthread_mutex_lock(&ws.lock);
	n = name ? ws_find_key_locked(dir->serial, st.st_dev, st.st_ino) : dir;
	if (n && !n->gone && __atomic_load_n(&n->self_busy, __ATOMIC_ACQUIRE) == 0 &&
	    __atomic_load_n(&n->known_ctime, __ATOMIC_ACQUIRE) != ws_ctime_ns(&st)) {
		__atomic_store_n(&n->known_ctime, ws_ctime_ns(&st), __ATOMIC_RELEASE);
		ino = SFS_INO_WS(n->id);
	}
	pthread_mutex_unlock(&ws.lock);
	if (ino)
		ws_send_inval_inode(ino);
}

static void ws_invalidate_matching(bool all, uint32_t serial);

/* One inotify event.  *last_dir dedups the parent-inode invalidations of a
 * burst of name changes in one directory. */
static void ws_watch_event(const struct inotify_event *ev, fuse_ino_t *last_dir)
{
	const char *name = ev->len && ev->name[0] ? ev->name : NULL;
	enum ws_event_class cls = 0;
	struct ws_node *dir;
	uint64_t dir_id;

	if (ev->mask & IN_Q_OVERFLOW) {
		sfs_log(SFS_LOG_WARN, "workspace: inotify queue overflow: dropping every "
				      "cached workspace inode (fs.inotify.max_queued_events)");
		ws_invalidate_matching(true, 0);
		*last_dir = 0;
		return;
	}
	pthread_mutex_lock(&ws.lock);
	dir = ws_find_wd_locked(ev->wd);
	if (dir && (ev->mask & IN_IGNORED)) {
		/* The directory was deleted (or we removed the watch). */
		ws_map_remove(WS_BY_WD, dir);
		__atomic_store_n(&dir->wd, -1, __ATOMIC_RELAXED);
		dir = NULL;
	}
	if (!dir || dir->gone) {
		pthread_mutex_unlock(&ws.lock);
		return;
	}
	dir->users++; /* its fd is the base for fstatat */
	dir_id = dir->id;
	pthread_mutex_unlock(&ws.lock);

	if (ev->mask & IN_CREATE)
		cls = WS_EV_CREATE;
	else if (ev->mask & IN_DELETE)
		cls = WS_EV_DELETE;
	else if (ev->mask & IN_MOVED_FROM)
		cls = WS_EV_MOVED_FROM;
	else if (ev->mask & IN_MOVED_TO)
		cls = WS_EV_MOVED_TO;
	if (cls && name) {
		if (!ws_expect_consume(dir_id, name, cls)) {
			fuse_ino_t parent = SFS_INO_WS(dir_id);

			ws_send_inval_entry(parent, name);
			if (*last_dir != parent) {
				ws_send_inval_inode(parent); /* attributes and cached listing */
				*last_dir = parent;
			}
		}
	} else if (ev->mask & (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE)) {
		ws_watch_data_event(dir, name);
	}
	ws_put(dir);
}

static void ws_watch_pending(void)
{
	struct ws_pending *list;
	uint64_t count;

	if (read(ws.evfd, &count, sizeof(count)) == -1 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&wx.lock);
	list = wx.pending;
	wx.pending = NULL;
	pthread_mutex_unlock(&wx.lock);
	while (list) {
		struct ws_pending *p = list;

		list = p->next;
		ws_send_inval_entry(p->parent, p->name);
		ws_send_inval_inode(p->parent);
		free(p);
	}
}

static void *ws_watch_main(void *arg)
{
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd pfd[2] = {{.fd = ws.ifd, .events = POLLIN},
				{.fd = ws.evfd, .events = POLLIN}};
	time_t last_prune = time(NULL);

	(void)arg;
	while (!__atomic_load_n(&ws.stop, __ATOMIC_ACQUIRE)) {
		int r = poll(pfd, 2, 1000);

		if (r == -1 && errno != EINTR) {
			sfs_log(SFS_LOG_ERR, "workspace: watcher poll: %s", strerror(errno));
			__atomic_store_n(&ws.coherent, false, __ATOMIC_RELAXED);
			break;
		}
		if (__atomic_load_n(&ws.stop, __ATOMIC_ACQUIRE))
			break;
		if (r > 0 && (pfd[1].revents & POLLIN))
			ws_watch_pending();
		if (r > 0 && (pfd[0].revents & POLLIN)) {
			ssize_t len;

			/* Let a burst gather: one wakeup per burst instead of one per
			 * event keeps the watcher off a busy 2-CPU machine's back,
			 * at a cost of WS_WATCH_BATCH_US of latency. */
			usleep(WS_WATCH_BATCH_US);
			len = read(ws.ifd, buf, sizeof(buf));
			fuse_ino_t last_dir = 0;

			for (char *p = buf; len > 0 && p < buf + len;) {
				const struct inotify_event *ev = (const struct inotify_event *)p;

				ws_watch_event(ev, &last_dir);
				p += sizeof(*ev) + ev->len;
			}
		}
		time_t now = time(NULL);
		if (now - last_prune >= WS_EXPECT_TTL_S) {
			ws_expect_prune(now);
			last_prune = now;
		}
	}
	return NULL;
}

/* ---- caller credentials for creations ----------------------------------- */

static void ws_thread_clear_umask(void)
{
	static bool warned;

	if (ws_thread_umask_done)
		return;
	ws_thread_umask_done = true;
	if (unshare(CLONE_FS) == -1) {
		if (!__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
			sfs_log(SFS_LOG_WARN,
				"workspace: unshare(CLONE_FS): %s; new files get the daemon's "
				"umask on top of the caller's",
				strerror(errno));
		return;
	}
	umask(0);
}

/* Makes this thread create files as the request's caller; *switched tells
 * ws_creds_end whether there is anything to undo. */
static int ws_creds_begin(fuse_req_t req, bool *switched)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];

	*switched = false;
	if (!ws.root || (ctx->uid == ws.fsuid && ctx->gid == ws.fsgid))
		return 0;
	if (syscall(SYS_capget, &hdr, caps) == -1)
		return errno;
	*switched = true;
	setfsgid(ctx->gid);
	setfsuid(ctx->uid);
	/* setfsuid() reports the previous id, never an error: read back. */
	if ((uid_t)setfsuid((uid_t)-1) != ctx->uid || (gid_t)setfsgid((gid_t)-1) != ctx->gid)
		return EPERM;
	if (syscall(SYS_capset, &hdr, caps) == -1)
		return errno;
	return 0;
}

static void ws_creds_end(bool switched)
{
	if (!switched)
		return;
	setfsuid(ws.fsuid); /* back to root also raises the fs capabilities again */
	setfsgid(ws.fsgid);
	if ((uid_t)setfsuid((uid_t)-1) != ws.fsuid || (gid_t)setfsgid((gid_t)-1) != ws.fsgid)
		ws_bug("cannot restore the worker thread's fsuid/fsgid");
}

/* ---- handlers ----------------------------------------------------------- */

static void ws_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct ws_node *p;
	int err;

	/* "." and ".." are the kernel's business; looking them up here could
	 * walk out of the workspace root. */
	if (!ws_name_ok(name)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	err = ws_do_lookup(p, name, &e, NULL);
	ws_put(p);
	if (err == ENOENT) {
		ws_entry_init(&e); /* ino 0: a negative entry, cached for entry_timeout */
		fuse_reply_entry(req, &e);
	} else if (err) {
		ws_reply_err(req, err);
	} else {
		ws_reply_entry(req, &e);
	}
}

static void ws_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	/* Synthetic nodes keep no counts, so ops.c may hand us any ino. */
	if (SFS_INO_KIND(ino) == SFS_K_WS)
		ws_unref(ino, nlookup);
	fuse_reply_none(req);
}

static void ws_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		if (SFS_INO_KIND(forgets[i].ino) == SFS_K_WS)
			ws_unref(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void ws_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_node *n = ws_get(req, ino);
	struct stat st;
	int res, err;

	if (!n)
		return;
	res = fstatat(n->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	err = errno;
	ws_put(n);
	if (res == -1) {
		ws_reply_err(req, err);
		return;
	}
	fuse_reply_attr(req, &st, ws_attr_ttl());
}

static struct ws_file *ws_file(const struct fuse_file_info *fi)
{
	return (struct ws_file *)(uintptr_t)fi->fh;
}

static struct ws_dir *ws_dir(const struct fuse_file_info *fi)
{
	return (struct ws_dir *)(uintptr_t)fi->fh;
}

static int ws_setattr_times(struct ws_node *n, const struct stat *attr, int valid,
			    const struct ws_file *h)
{
	struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};

	if (valid & FUSE_SET_ATTR_ATIME_NOW)
		tv[0].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_ATIME)
		tv[0] = attr->st_atim;
	if (valid & FUSE_SET_ATTR_MTIME_NOW)
		tv[1].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_MTIME)
		tv[1] = attr->st_mtim;
	if (h)
		return futimens(h->fd, tv);
	/* AT_EMPTY_PATH on the O_PATH fd: works for symlinks too, follows nothing. */
	return utimensat(n->fd, "", tv, AT_EMPTY_PATH);
}

static int ws_setattr_size(struct ws_node *n, off_t size, const struct ws_file *h)
{
	char path[WS_PROC_PATH_MAX];

	if (h && ftruncate(h->fd, size) == 0)
		return 0;
	if (h && errno != EBADF && errno != EINVAL)
		return -1;
	if (n->type != S_IFREG) {
		errno = S_ISDIR(n->type) ? EISDIR : EINVAL;
		return -1;
	}
	ws_proc_path(path, n->fd);
	return truncate(path, size);
}

static void ws_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	struct ws_node *n = ws_get(req, ino);
	char path[WS_PROC_PATH_MAX];
	const struct ws_file *h;
	struct stat st;
	int err = 0;

	if (!n)
		return;
	/* The kernel passes a handle only for ftruncate-like calls on files. */
	h = fi && S_ISREG(n->type) ? ws_file(fi) : NULL;
	ws_self_begin(n);

	/* Owner before mode: chown clears S_ISUID, a chmod in the same request must win. */
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = valid & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t gid = valid & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;

		if (fchownat(n->fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
			goto fail;
	}
	if (valid & FUSE_SET_ATTR_MODE) {
		int res;

		if (S_ISLNK(n->type)) {
			errno = EOPNOTSUPP; /* Linux has no symlink modes */
			goto fail;
		}
		if (h) {
			res = fchmod(h->fd, attr->st_mode & 07777);
		} else {
			ws_proc_path(path, n->fd);
			res = chmod(path, attr->st_mode & 07777);
		}
		if (res == -1)
			goto fail;
	}
	if ((valid & FUSE_SET_ATTR_SIZE) && ws_setattr_size(n, attr->st_size, h) == -1)
		goto fail;
	/* Times last, so that a truncate in the same request does not overwrite them. */
	if ((valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) &&
	    ws_setattr_times(n, attr, valid, h) == -1)
		goto fail;
	if (fstatat(n->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
		goto fail;
	ws_self_end(n, n->fd, &st);
	ws_put(n);
	fuse_reply_attr(req, &st, ws_attr_ttl());
	return;
fail:
	err = errno;
	ws_self_end(n, n->fd, NULL);
	ws_put(n);
	ws_reply_err(req, err);
}

/* How many directories below its workspace root the pinned directory dir
 * is, walking ".." (O_PATH, no symlink followed); -1 if it is not below it
 * (moved out by the sandbox) or too deep. */
static int ws_dir_depth(const struct ws_node *dir, dev_t root_dev, ino_t root_ino)
{
	struct stat st, prev = {0};
	int fd = dir->fd;

	for (int depth = 0; depth <= 4096; depth++) {
		int up;

		if (fstatat(fd, "", &st, AT_EMPTY_PATH) == -1)
			break;
		if (st.st_dev == root_dev && st.st_ino == root_ino) {
			if (fd != dir->fd)
				close(fd);
			return depth;
		}
		/* ".." of the filesystem root is itself: no ancestor is the root. */
		if (depth > 0 && st.st_dev == prev.st_dev && st.st_ino == prev.st_ino)
			break;
		prev = st;
		up = openat(fd, "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd != dir->fd)
			close(fd);
		fd = up;
		if (fd == -1)
			return -1;
	}
	if (fd != dir->fd)
		close(fd);
	return -1;
}

/* SPEC §5: the target as the host should see it (rewritten for sandboxes
 * whose filesystem is not the host's).  Returns 0 or an errno. */
static int ws_symlink_show(const struct ws_node *n, char *buf, size_t size)
{
	const struct ws_sandbox_info *info;
	struct ws_node *dir = NULL;
	const char *root_path;
	dev_t root_dev;
	ino_t root_ino;
	bool rewrite;
	int depth = -1, len;
	char *raw;

	pthread_mutex_lock(&ws.lock);
	info = ws_sandbox_info_locked(n->serial);
	rewrite = info && info->rewrite_symlinks;
	root_path = info ? info->root_path : NULL;
	root_dev = info ? info->root_dev : 0;
	root_ino = info ? info->root_ino : 0;
	if (rewrite) {
		dir = ws_find_id_locked(n->parent_id);
		if (dir && !dir->gone)
			dir->users++;
		else
			dir = NULL;
	}
	pthread_mutex_unlock(&ws.lock);
	if (!rewrite)
		return 0;
	if (dir) {
		depth = ws_dir_depth(dir, root_dev, root_ino);
		ws_put(dir);
	}
	raw = strdup(buf);
	if (!raw)
		return ENOMEM;
	len = sfs_symlink_rewrite(raw, root_path, depth, buf, size);
	free(raw);
	return len < 0 ? -len : 0;
}

static void ws_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ws_node *n = ws_get(req, ino);
	char buf[PATH_MAX + 1];
	ssize_t len;
	int err;

	if (!n)
		return;
	len = readlinkat(n->fd, "", buf, sizeof(buf));
	if (len == -1)
		err = errno;
	else if (len == (ssize_t)sizeof(buf))
		err = ENAMETOOLONG;
	else {
		buf[len] = '\0';
		err = ws_symlink_show(n, buf, sizeof(buf));
	}
	ws_put(n);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	fuse_reply_readlink(req, buf);
}

/* mknod, mkdir and symlink: created as the caller, then looked up. */
static void ws_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		    const char *target)
{
	struct fuse_entry_param e;
	struct ws_node *p;
	bool switched;
	uint64_t seq;
	int err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	ws_thread_clear_umask();
	seq = ws_expect(p, name, WS_EV_CREATE);
	err = ws_creds_begin(req, &switched);
	if (!err) {
		int res;

		if (target)
			res = symlinkat(target, p->fd, name);
		else if (S_ISDIR(mode))
			res = mkdirat(p->fd, name, mode & 07777);
		else
			res = mknodat(p->fd, name, mode, rdev);
		err = res == -1 ? errno : 0;
	}
	ws_creds_end(switched);
	if (err)
		ws_expect_withdraw(seq, p, name);
	else
		err = ws_do_lookup(p, name, &e, NULL);
	ws_put(p);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	ws_reply_entry(req, &e);
}

static void ws_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	ws_make(req, parent, name, mode, rdev, NULL);
}

static void ws_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	ws_make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void ws_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	ws_make(req, parent, name, S_IFLNK | 0777, 0, target);
}

static void ws_remove(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	struct ws_node *p;
	uint64_t seq;
	int res, err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	seq = ws_expect(p, name, WS_EV_DELETE);
	res = unlinkat(p->fd, name, flags);
	err = errno;
	if (res == -1)
		ws_expect_withdraw(seq, p, name);
	ws_put(p);
	ws_reply_err(req, res == -1 ? err : 0);
}

static void ws_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ws_remove(req, parent, name, 0);
}

static void ws_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ws_remove(req, parent, name, AT_REMOVEDIR);
}

static void ws_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct ws_node *p, *np;
	int res, err;

	if (!ws_name_ok(name) || !ws_name_ok(newname)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	if (SFS_INO_KIND(newparent) != SFS_K_WS) {
		ws_reply_err(req, EXDEV);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	np = ws_get(req, newparent);
	if (!np) {
		ws_put(p);
		return;
	}
	if (p->serial != np->serial) {
		err = EXDEV; /* never move files between sandboxes */
	} else {
		uint64_t seq[4] = {ws_expect(p, name, WS_EV_MOVED_FROM),
				   ws_expect(np, newname, WS_EV_MOVED_TO), 0, 0};

		if (flags & RENAME_EXCHANGE) {
			seq[2] = ws_expect(np, newname, WS_EV_MOVED_FROM);
			seq[3] = ws_expect(p, name, WS_EV_MOVED_TO);
		}
		res = renameat2(p->fd, name, np->fd, newname, flags);
		err = res == -1 ? errno : 0;
		if (res == -1) {
			ws_expect_withdraw(seq[0], p, name);
			ws_expect_withdraw(seq[1], np, newname);
			ws_expect_withdraw(seq[2], np, newname);
			ws_expect_withdraw(seq[3], p, name);
		}
	}
	ws_put(np);
	ws_put(p);
	ws_reply_err(req, err);
}

static void ws_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n, *np;
	uint64_t seq;
	int res, err = 0;

	if (!ws_name_ok(newname)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	if (SFS_INO_KIND(newparent) != SFS_K_WS) {
		ws_reply_err(req, EXDEV);
		return;
	}
	n = ws_get(req, ino);
	if (!n)
		return;
	np = ws_get(req, newparent);
	if (!np) {
		ws_put(n);
		return;
	}
	ws_entry_init(&e);
	if (n->serial != np->serial) {
		err = EXDEV;
		goto out;
	}
	seq = ws_expect(np, newname, WS_EV_CREATE);
	if (S_ISLNK(n->type)) {
		/* Links the symlink itself; needs CAP_DAC_READ_SEARCH. */
		res = linkat(n->fd, "", np->fd, newname, AT_EMPTY_PATH);
	} else {
		ws_proc_path(path, n->fd);
		res = linkat(AT_FDCWD, path, np->fd, newname, AT_SYMLINK_FOLLOW);
	}
	if (res == -1)
		ws_expect_withdraw(seq, np, newname);
	if (res == -1 || fstatat(n->fd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		err = errno;
		goto out;
	}
	pthread_mutex_lock(&ws.lock);
	n->nlookup++; /* the new name is one more lookup of the same node */
	pthread_mutex_unlock(&ws.lock);
	e.ino = ino;
out:
	ws_put(np);
	ws_put(n);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	ws_reply_entry(req, &e);
}

/* Host open flags for a kernel open: never follow (the /proc path is a magic
 * link to the exact inode), close on exec (the daemon spawns sandbox
 * processes), and no O_DIRECT (its alignment rules would turn the kernel's
 * buffers into EINVAL). */
static int ws_open_flags(int flags)
{
	flags &= ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW | O_DIRECT);
	if (ws.opt.writeback) {
		/* The kernel reads pages even of write-only files, and does O_APPEND itself. */
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags | O_CLOEXEC;
}

static void ws_file_info(struct fuse_file_info *fi, struct ws_file *h)
{
	fi->fh = (uintptr_t)h;
	/* Without the watcher's invalidations (a watch failed), an open must
	 * drop the pages: nothing else would. */
	if (ws.opt.keep_cache &&
	    (!ws.explicit_inval || __atomic_load_n(&ws.coherent, __ATOMIC_RELAXED)))
		fi->keep_cache = 1;
	/* Nothing to flush for a read-only open (writeback still flushes). */
	if ((fi->flags & O_ACCMODE) == O_RDONLY)
		fi->noflush = 1;
}

static void ws_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	struct ws_file *h;
	int flags, fd, err = 0;

	if (!n)
		return;
	h = malloc(sizeof(*h));
	if (!h) {
		err = ENOMEM;
		goto out;
	}
	if (S_ISLNK(n->type)) {
		err = ELOOP;
		goto out;
	}
	flags = ws_open_flags(fi->flags);
	ws_proc_path(path, n->fd);
	if (flags & O_TRUNC)
		ws_self_begin(n);
	fd = open(path, flags);
	if (fd == -1 && errno == EACCES && (fi->flags & O_ACCMODE) == O_WRONLY)
		fd = open(path, (flags & ~O_ACCMODE) | O_WRONLY); /* unprivileged daemon */
	if (flags & O_TRUNC)
		ws_self_end(n, n->fd, NULL);
	if (fd == -1) {
		err = errno;
		goto out;
	}
	h->fd = fd;
	h->node = n;
	ws_file_info(fi, h);
out:
	ws_put(n);
	if (err) {
		free(h);
		ws_reply_err(req, err);
		return;
	}
	if (fuse_reply_open(req, fi) == -ENOENT) {
		close(h->fd); /* interrupted: no release will come */
		free(h);
	}
}

static void ws_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	char path[WS_PROC_PATH_MAX];
	struct fuse_entry_param e;
	struct ws_node *p, *n;
	struct ws_file *h;
	bool switched;
	uint64_t seq;
	int fd = -1, pfd, err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	h = malloc(sizeof(*h));
	if (!h) {
		err = ENOMEM;
		goto fail;
	}
	ws_thread_clear_umask();
	seq = ws_expect(p, name, WS_EV_CREATE);
	err = ws_creds_begin(req, &switched);
	if (!err) {
		/* Always O_EXCL, so the file is certainly new and ours. */
		fd = openat(p->fd, name, ws_open_flags(fi->flags) | O_CREAT | O_EXCL | O_NOFOLLOW,
			    mode & 07777);
		err = fd == -1 ? errno : 0;
	}
	ws_creds_end(switched);
	if (err)
		ws_expect_withdraw(seq, p, name);
	if (err == EEXIST && !(fi->flags & O_EXCL)) {
		/* The kernel had a stale negative entry (the sandbox created the
		 * file behind our back).  ESTALE makes it retry the open with a
		 * fresh lookup, which then takes the normal open path with its
		 * permission checks and symlink handling. */
		err = ESTALE;
	}
	if (err)
		goto fail;
	/* An O_PATH fd for the node from the exact inode, not the name, which may have changed. */
	ws_proc_path(path, fd);
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd == -1) {
		err = errno;
		goto fail;
	}
	ws_entry_init(&e);
	if (fstat(fd, &e.attr) == -1) {
		err = errno;
		close(pfd);
		goto fail;
	}
	err = ws_adopt(p->serial, p, pfd, &e.attr, &e.ino, &n);
	if (err)
		goto fail;
	h->fd = fd;
	h->node = n;
	ws_file_info(fi, h);
	ws_put(p);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		close(fd);
		free(h);
		ws_unref(e.ino, 1);
	}
	return;
fail:
	if (fd >= 0)
		close(fd);
	free(h);
	ws_put(p);
	ws_reply_err(req, err);
}

static void ws_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = h->fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void ws_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	ssize_t res;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = h->fd;
	out.buf[0].pos = off;
	ws_self_begin(h->node);
	res = fuse_buf_copy(&out, in, 0);
	ws_self_end(h->node, h->fd, NULL);
	if (res < 0) {
		ws_reply_err(req, (int)-res);
		return;
	}
	fuse_reply_write(req, (size_t)res);
}

static void ws_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close() of a duplicate reports write-back errors (NFS-style) without
	 * giving up the handle, which stays open until release. */
	int fd = dup(ws_file(fi)->fd);

	if (fd == -1) {
		ws_reply_err(req, errno);
		return;
	}
	ws_reply_err(req, close(fd) == -1 ? errno : 0);
}

static void ws_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);

	close(h->fd);
	free(h);
	fuse_reply_err(req, 0);
}

static void ws_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	int res;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	res = datasync ? fdatasync(h->fd) : fsync(h->fd);
	ws_reply_err(req, res == -1 ? errno : 0);
}

static void ws_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_node *n = ws_get(req, ino);
	struct ws_dir *d;
	int fd = -1, err = 0;

	if (!n)
		return;
	d = calloc(1, sizeof(*d));
	if (!d) {
		err = ENOMEM;
		goto out;
	}
	fd = openat(n->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1) {
		err = errno;
		goto out;
	}
	d->dp = fdopendir(fd);
	if (!d->dp) {
		err = errno;
		close(fd);
		goto out;
	}
	d->node = n;
	fi->fh = (uintptr_t)d;
	if (ws.opt.keep_cache) {
		fi->cache_readdir = 1;
		fi->keep_cache = 1;
	}
out:
	ws_put(n);
	if (err) {
		free(d);
		ws_reply_err(req, err);
		return;
	}
	if (fuse_reply_open(req, fi) == -ENOENT) {
		closedir(d->dp);
		free(d);
	}
}

/* A readdirplus entry: looked up (counted) unless it is "." or "..", or it
 * vanished; then the kernel gets the name without attributes (ino 0). */
static void ws_dirent_plus(struct ws_node *dir, const struct dirent *de, struct fuse_entry_param *e)
{
	if (ws_name_ok(de->d_name) && ws_do_lookup(dir, de->d_name, e, NULL) == 0)
		return;
	memset(e, 0, sizeof(*e));
	e->attr.st_ino = de->d_ino;
	e->attr.st_mode = (mode_t)de->d_type << 12;
}

static void ws_do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			  struct fuse_file_info *fi, bool plus)
{
	struct ws_dir *d = ws_dir(fi);
	struct ws_node *dir = NULL;
	size_t rem = size;
	char *buf, *p;
	int err = 0;

	if (plus) {
		dir = ws_get(req, ino); /* its fd is the base for the lookups */
		if (!dir)
			return;
	} else if (ws_is_gone(d->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	buf = calloc(1, size);
	if (!buf) {
		err = ENOMEM;
		goto out;
	}
	p = buf;
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		struct fuse_entry_param e;
		size_t entsize;
		off_t next;

		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				err = errno;
				break;
			}
		}
		next = d->entry->d_off;
		if (plus) {
			ws_dirent_plus(dir, d->entry, &e);
			entsize = fuse_add_direntry_plus(req, p, rem, d->entry->d_name, &e, next);
			if (entsize > rem) {
				if (e.ino)
					ws_unref(e.ino, 1);
				break;
			}
		} else {
			struct stat st = {.st_ino = d->entry->d_ino,
					  .st_mode = (mode_t)d->entry->d_type << 12};

			entsize = fuse_add_direntry(req, p, rem, d->entry->d_name, &st, next);
			if (entsize > rem)
				break;
		}
		p += entsize;
		rem -= entsize;
		d->entry = NULL;
		d->offset = next;
	}
out:
	if (dir)
		ws_put(dir);
	/* Once entries are in the buffer an error cannot be reported without
	 * losing their lookup counts: return what we have. */
	if (err && rem == size)
		ws_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void ws_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	ws_do_readdir(req, ino, size, off, fi, false);
}

static void ws_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	ws_do_readdir(req, ino, size, off, fi, true);
}

static void ws_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ws_dir *d = ws_dir(fi);

	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void ws_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ws_dir *d = ws_dir(fi);
	int fd = dirfd(d->dp), res;

	if (ws_is_gone(d->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	res = datasync ? fdatasync(fd) : fsync(fd);
	ws_reply_err(req, res == -1 ? errno : 0);
}

static void ws_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ws_node *n = ws_get(req, ino);
	struct statvfs sv;
	int res, err;

	if (!n)
		return;
	res = fstatvfs(n->fd, &sv);
	err = errno;
	ws_put(n);
	if (res == -1) {
		ws_reply_err(req, err);
		return;
	}
	fuse_reply_statfs(req, &sv);
}

/* xattrs go through the /proc path, which for a symlink node would be
 * ambiguous; Linux allows only trusted.* and security.* on symlinks anyway. */
static void ws_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	int err = 0;

	if (!n)
		return;
	if (S_ISLNK(n->type)) {
		err = ENOTSUP;
	} else {
		ws_proc_path(path, n->fd);
		ws_self_begin(n);
		if (setxattr(path, name, value, size, flags) == -1)
			err = errno;
		ws_self_end(n, n->fd, NULL);
	}
	ws_put(n);
	ws_reply_err(req, err);
}

static void ws_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	int err = 0;

	if (!n)
		return;
	if (S_ISLNK(n->type)) {
		err = ENOTSUP;
	} else {
		ws_proc_path(path, n->fd);
		ws_self_begin(n);
		if (removexattr(path, name) == -1)
			err = errno;
		ws_self_end(n, n->fd, NULL);
	}
	ws_put(n);
	ws_reply_err(req, err);
}

/* getxattr (name != NULL) and listxattr share the size-probe protocol. */
static void ws_xattr_read(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	char *value = NULL;
	ssize_t len = 0;
	int err = 0;

	if (!n)
		return;
	if (size) {
		value = malloc(size);
		if (!value) {
			err = ENOMEM;
			goto out;
		}
	}
	if (S_ISLNK(n->type)) {
		len = 0; /* no list; reading any name gives ENODATA */
		if (name)
			err = ENODATA;
		goto out;
	}
	ws_proc_path(path, n->fd);
	len = name ? getxattr(path, name, value, size) : listxattr(path, value, size);
	if (len == -1)
		err = errno;
out:
	ws_put(n);
	if (err)
		ws_reply_err(req, err);
	else if (size)
		fuse_reply_buf(req, value, (size_t)len);
	else
		fuse_reply_xattr(req, (size_t)len);
	free(value);
}

static void ws_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	ws_xattr_read(req, ino, name, size);
}

static void ws_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	ws_xattr_read(req, ino, NULL, size);
}

static void ws_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	struct ws_file *h = ws_file(fi);

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	ws_reply_err(req, flock(h->fd, op) == -1 ? errno : 0);
}

static void ws_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	int err;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	ws_self_begin(h->node);
	err = fallocate(h->fd, mode, off, len) == -1 ? errno : 0;
	ws_self_end(h->node, h->fd, NULL);
	ws_reply_err(req, err);
}

static void ws_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct ws_file *in, *out;
	ssize_t res;

	/* The other side may be a synthetic file whose fh is not ours. */
	if (SFS_INO_KIND(ino_in) != SFS_K_WS || SFS_INO_KIND(ino_out) != SFS_K_WS) {
		ws_reply_err(req, EXDEV);
		return;
	}
	in = ws_file(fi_in);
	out = ws_file(fi_out);
	if (ws_is_gone(in->node) || ws_is_gone(out->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	ws_self_begin(out->node);
	res = copy_file_range(in->fd, &off_in, out->fd, &off_out, len, (unsigned)flags);
	ws_self_end(out->node, out->fd, NULL);
	if (res == -1) {
		ws_reply_err(req, errno);
		return;
	}
	fuse_reply_write(req, (size_t)res);
}

static void ws_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct ws_file *h = ws_file(fi);
	off_t res;

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	res = lseek(h->fd, off, whence);
	if (res == -1) {
		ws_reply_err(req, errno);
		return;
	}
	fuse_reply_lseek(req, res);
}

const struct fuse_lowlevel_ops ws_ops = {
    .lookup = ws_lookup,
    .forget = ws_forget,
    .forget_multi = ws_forget_multi,
    .getattr = ws_getattr,
    .setattr = ws_setattr,
    .readlink = ws_readlink,
    .mknod = ws_mknod,
    .mkdir = ws_mkdir,
    .unlink = ws_unlink,
    .rmdir = ws_rmdir,
    .symlink = ws_symlink,
    .rename = ws_rename,
    .link = ws_link,
    .open = ws_open,
    .read = ws_read,
    .write_buf = ws_write_buf,
    .flush = ws_flush,
    .release = ws_release,
    .fsync = ws_fsync,
    .opendir = ws_opendir,
    .readdir = ws_readdir,
    .readdirplus = ws_readdirplus,
    .releasedir = ws_releasedir,
    .fsyncdir = ws_fsyncdir,
    .statfs = ws_statfs,
    .setxattr = ws_setxattr,
    .getxattr = ws_getxattr,
    .listxattr = ws_listxattr,
    .removexattr = ws_removexattr,
    .create = ws_create,
    .flock = ws_flock,
    .fallocate = ws_fallocate,
    .copy_file_range = ws_copy_file_range,
    .lseek = ws_lseek,
};

/* ---- module interface --------------------------------------------------- */

/* Every node holds an fd: allow as many as the system will. */
static void ws_raise_nofile(void)
{
	struct rlimit rl;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (ws.root && (f = fopen("/proc/sys/fs/nr_open", "re"))) {
		unsigned long long nr_open;

		if (fscanf(f, "%llu", &nr_open) == 1 && nr_open > rl.rlim_max) {
			struct rlimit big = {.rlim_cur = nr_open, .rlim_max = nr_open};

			if (setrlimit(RLIMIT_NOFILE, &big) == 0) {
				fclose(f);
				return;
			}
		}
		fclose(f);
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		sfs_log(SFS_LOG_WARN, "workspace: raising RLIMIT_NOFILE: %s", strerror(errno));
}

int ws_init(const struct ws_options *opt)
{
	int err = 0;

	ws.opt = *opt;
	if (!(ws.opt.attr_timeout >= WS_MIN_TIMEOUT))
		ws.opt.attr_timeout = WS_MIN_TIMEOUT;
	if (!(ws.opt.entry_timeout >= WS_MIN_TIMEOUT))
		ws.opt.entry_timeout = WS_MIN_TIMEOUT;
	for (int w = 0; w < WS_NMAPS && !err; w++)
		err = ws_map_init(&ws.map[w]);
	if (err) {
		for (int w = 0; w < WS_NMAPS; w++) {
			free(ws.map[w].buckets);
			ws.map[w].buckets = NULL;
		}
		return err;
	}
	ws.next_id = 1;
	ws.fsuid = geteuid();
	ws.fsgid = getegid();
	ws.root = ws.fsuid == 0;
	ws.symlinks_raw = strcmp(sfs_config_get("symlinks", "rewrite"), "raw") == 0;
	ws_raise_nofile();
	return 0;
}

int ws_start(void)
{
	int err;

	ws.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ws.ifd == -1) {
		err = errno;
		sfs_log(SFS_LOG_WARN,
			"workspace: inotify: %s; workspace caches expire after at most %g s",
			strerror(err), WS_FALLBACK_TIMEOUT);
		return 0; /* still works, with short TTLs */
	}
	ws.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ws.evfd == -1) {
		err = errno;
		goto fail;
	}
	ws.stop = false;
	__atomic_store_n(&ws.watching, true, __ATOMIC_RELAXED);
	__atomic_store_n(&ws.coherent, true, __ATOMIC_RELAXED);
	err = pthread_create(&ws.watcher, NULL, ws_watch_main, NULL);
	if (err) {
		__atomic_store_n(&ws.watching, false, __ATOMIC_RELAXED);
		__atomic_store_n(&ws.coherent, false, __ATOMIC_RELAXED);
		goto fail;
	}
	return 0;
fail:
	sfs_log(SFS_LOG_WARN, "workspace: watcher: %s; workspace caches expire after at most %g s",
		strerror(err), WS_FALLBACK_TIMEOUT);
	if (ws.evfd >= 0)
		close(ws.evfd);
	close(ws.ifd);
	ws.ifd = ws.evfd = -1;
	return 0;
}

void ws_stop(void)
{
	uint64_t one = 1;

	if (!ws.watching)
		return;
	__atomic_store_n(&ws.stop, true, __ATOMIC_RELEASE);
	if (write(ws.evfd, &one, sizeof(one)) == -1 && errno != EAGAIN)
		sfs_log(SFS_LOG_WARN, "workspace: stopping the watcher: %s", strerror(errno));
	pthread_join(ws.watcher, NULL);
	pthread_mutex_lock(&ws.lock);
	__atomic_store_n(&ws.watching, false, __ATOMIC_RELAXED);
	__atomic_store_n(&ws.coherent, false, __ATOMIC_RELAXED);
	close(ws.ifd); /* drops every watch */
	close(ws.evfd);
	ws.ifd = ws.evfd = -1;
	pthread_mutex_unlock(&ws.lock);
	ws_expect_clear();
}

void ws_set_session(struct fuse_session *se)
{
	ws.se = se;
}

void ws_shutdown(void)
{
	ws_stop();
	pthread_mutex_lock(&ws.lock);
	for (size_t i = 0; i < ws.map[WS_BY_ID].nbuckets; i++) {
		struct ws_node *n = ws.map[WS_BY_ID].buckets[i], *next;

		for (; n; n = next) {
			next = n->next[WS_BY_ID];
			if (n->fd >= 0)
				close(n->fd);
			free(n);
		}
	}
	for (int w = 0; w < WS_NMAPS; w++) {
		free(ws.map[w].buckets);
		ws.map[w] = (struct ws_map){0};
	}
	free(ws.gone_serials);
	ws.gone_serials = NULL;
	ws.ngone = ws.gone_cap = 0;
	for (size_t i = 0; i < ws.nsandboxes; i++)
		free(ws.sandboxes[i].root_path);
	free(ws.sandboxes);
	ws.sandboxes = NULL;
	ws.nsandboxes = ws.sandboxes_cap = 0;
	pthread_mutex_unlock(&ws.lock);
}

void ws_conn_init(struct fuse_conn_info *conn)
{
	unsigned want = FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE;

	if (ws.opt.writeback)
		want |= FUSE_CAP_WRITEBACK_CACHE;
	if (ws.watching) {
		/* The watcher invalidates pages of files changed behind our back.
		 * Left to itself the kernel would drop a file's pages whenever a
		 * fresh getattr shows a new mtime, that is after every write
		 * through the mount (it does not track mtime itself without
		 * writeback), and a read right after a write would go to the
		 * daemon again. */
		/* (Not FUSE_CAP_CACHE_SYMLINKS: a rewritten target depends on the
		 * link's depth below the root, which a move of a parent changes
		 * without any event on the link.) */
		want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
		ws.explicit_inval = (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA) != 0;
	}
	conn->want |= want & conn->capable;
}

/* Remembers what readlink needs to know about a sandbox (first lookup wins
 * for root_path, which readers use without the lock). */
static int ws_note_sandbox(uint32_t serial, const struct stat *root, bool rewrite,
			   const char *root_path)
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

void ws_lookup_root(fuse_req_t req, uint32_t serial, int root_fd, bool rewrite_symlinks,
		    const char *root_in_sandbox)
{
	struct fuse_entry_param e;
	int err;

	ws_entry_init(&e);
	if (fcntl(root_fd, F_SETFD, FD_CLOEXEC) == -1 ||
	    fstatat(root_fd, "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
		err = errno;
		close(root_fd);
		ws_reply_err(req, err);
		return;
	}
	if (!S_ISDIR(e.attr.st_mode)) {
		close(root_fd);
		ws_reply_err(req, ENOTDIR);
		return;
	}
	err = ws_note_sandbox(serial, &e.attr, rewrite_symlinks, root_in_sandbox);
	if (err) {
		close(root_fd);
		ws_reply_err(req, err);
		return;
	}
	err = ws_adopt(serial, NULL, root_fd, &e.attr, &e.ino, NULL);
	if (err) {
		ws_reply_err(req, err);
		return;
	}
	ws_reply_entry(req, &e);
}

int ws_root_stat(int root_fd, struct stat *st)
{
	return fstatat(root_fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1 ? -errno : 0;
}

/* Retires every node of a sandbox (later ops on them get ENOENT); with
 * dead, the serial itself is gone and no new node is made for it. */
static void ws_retire_sandbox(uint32_t serial, bool dead)
{
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
			if (n->users > 0 || n->fd < 0)
				continue; /* the last ws_put closes it */
			if (nfds == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				int *f = realloc(fds, ncap * sizeof(*f));

				if (!f) {
					close(n->fd); /* O_PATH: close cannot block */
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
	pthread_mutex_unlock(&ws.lock);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	free(fds);
}

void ws_sandbox_gone(uint32_t serial)
{
	ws_retire_sandbox(serial, true);
}

void ws_sandbox_reset(uint32_t serial)
{
	ws_retire_sandbox(serial, false);
}

/* Drops the kernel's cached attributes and pages of every node (all) or of
 * one sandbox's.  Sends notifications: never call it from a FUSE worker. */
static void ws_invalidate_matching(bool all, uint32_t serial)
{
	fuse_ino_t *inos = NULL;
	size_t count = 0, cap = 0;
	bool short_of_memory = false;

	pthread_mutex_lock(&ws.lock);
	for (size_t i = 0; i < ws.map[WS_BY_ID].nbuckets && !short_of_memory; i++) {
		for (struct ws_node *n = ws.map[WS_BY_ID].buckets[i]; n; n = n->next[WS_BY_ID]) {
			if ((!all && n->serial != serial) || n->gone)
				continue;
			if (count == cap) {
				size_t ncap = cap ? cap * 2 : 256;
				fuse_ino_t *p = realloc(inos, ncap * sizeof(*p));

				if (!p) {
					short_of_memory = true;
					break;
				}
				inos = p;
				cap = ncap;
			}
			inos[count++] = SFS_INO_WS(n->id);
		}
	}
	pthread_mutex_unlock(&ws.lock);
	if (short_of_memory)
		sfs_log(SFS_LOG_WARN,
			"workspace: out of memory: only %zu cached inodes invalidated", count);
	for (size_t i = 0; i < count; i++)
		ws_send_inval_inode(inos[i]);
	free(inos);
}

void ws_invalidate_sandbox(uint32_t serial)
{
	ws_invalidate_matching(false, serial);
}
