/* The coherence watcher: inotify events become the kernel cache invalidations. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"
#include "fs/audit.h"
#include "fs/ino.h"
#include "providers/err.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

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

struct ws_expect {
	struct ws_expect *next;
	uint64_t seq;
	uint64_t parent;
	enum ws_event_class cls;
	time_t when;
	char name[];
};

/* An invalidation the watcher thread must send for a FUSE worker: an entry
 * (name not empty: parent is its directory) or a range of an inode's pages
 * (name empty). */
struct ws_pending {
	struct ws_pending *next;
	fuse_ino_t parent;
	off_t off, len;
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
uint64_t ws_expect(const struct ws_node *parent, const char *name, enum ws_event_class cls)
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
	/* a copy: once the lock is let go the watcher may consume and free e */
	uint64_t seq = e->seq = ++wx.next_seq;
	size_t slot = ws_expect_slot(e->parent, name);
	/* Appended, so the oldest matching expectation is consumed first. */
	struct ws_expect **pp = &wx.buckets[slot];
	while (*pp)
		pp = &(*pp)->next;
	e->next = NULL;
	*pp = e;
	wx.count++;
	pthread_mutex_unlock(&wx.lock);
	return seq;
}

static void ws_pending_push(fuse_ino_t parent, const char *name, off_t off, off_t len)
{
	size_t nlen = strlen(name);
	struct ws_pending *p = malloc(sizeof(*p) + nlen + 1);
	uint64_t one = 1;

	if (!p)
		return; /* then the entry lives out its TTL */
	p->parent = parent;
	p->off = off;
	p->len = len;
	memcpy(p->name, name, nlen + 1);
	pthread_mutex_lock(&wx.lock);
	p->next = wx.pending;
	wx.pending = p;
	pthread_mutex_unlock(&wx.lock);
	if (write(ws.evfd, &one, sizeof(one)) == -1 && errno != EAGAIN)
		sfs_log(SFS_LOG_WARN, "workspace: waking the watcher: %s", strerror(errno));
}

/* The operation that recorded seq failed: no event of ours will come.  If a
 * foreign event already consumed the expectation, its invalidation is owed. */
void ws_expect_withdraw(uint64_t seq, const struct ws_node *parent, const char *name)
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
		ws_pending_push(SFS_INO_WS(parent->id), name, 0, 0);
}

/*
 * A direct (O_DIRECT) write of [off, off+len) to n went through the mount.
 * The kernel drops the cached range before such a write, and after it only
 * when the write was synchronous; an asynchronous one (AIO, io_uring)
 * completes without that, so a buffered read that filled a page from the
 * old data meanwhile would keep it.  Every such page was in the cache, locked
 * or filled, before its read reached us, that is before our write reached
 * the host: dropping the range after the write leaves none of them.  Sent
 * by the watcher thread: a worker must not, as a direct write that falls
 * back to a buffered one holds the very pages locked while it waits for us.
 */
void ws_inval_range_later(const struct ws_node *n, off_t off, off_t len)
{
	if (!__atomic_load_n(&ws.watching, __ATOMIC_RELAXED))
		return; /* no watcher: the kernel's own mtime check drops the pages */
	ws_pending_push(SFS_INO_WS(n->id), "", off, len);
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
void ws_self_begin(struct ws_node *n)
{
	__atomic_add_fetch(&n->self_busy, 1, __ATOMIC_ACQ_REL);
}

/* ...and is done: the kernel's caches now match n's ctime (st, or fstat of
 * fd, an fd or O_PATH fd of n). */
void ws_self_end(struct ws_node *n, int fd, const struct stat *st)
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

/*
 * Invalidates the child's (or, name NULL, the directory's own) inode if its
 * ctime is not one the kernel already knows.
 *
 * With -o writeback the kernel owns a cached regular file's size and times
 * (it writes them itself) and ignores ours, even after inval_inode; only a
 * new kernel inode takes them from us.  So its entry is invalidated as well:
 * the kernel drops the dentry and, unless a process holds the file open (or
 * mapped), evicts the inode (FUSE inodes go with their last reference), and
 * the next lookup reads the size from the host.  A file held open through
 * the mount keeps the kernel's size until it is closed (docs/architecture.md).
 */
static void ws_watch_data_event(struct ws_node *dir, const char *name)
{
	struct ws_node *n;
	struct stat st;
	fuse_ino_t ino = 0;
	bool evict = false;

	if (fstatat(dir->fd, name ? name : "", &st,
		    AT_SYMLINK_NOFOLLOW | (name ? 0 : AT_EMPTY_PATH)) == -1)
		return; /* gone again: its entry event follows */
	pthread_mutex_lock(&ws.lock);
	n = name ? ws_find_key_locked(dir->serial, st.st_dev, st.st_ino) : dir;
	if (n && !n->gone && __atomic_load_n(&n->self_busy, __ATOMIC_ACQUIRE) == 0 &&
	    __atomic_load_n(&n->known_ctime, __ATOMIC_ACQUIRE) != ws_ctime_ns(&st)) {
		__atomic_store_n(&n->known_ctime, ws_ctime_ns(&st), __ATOMIC_RELEASE);
		ino = SFS_INO_WS(n->id);
		evict = ws.opt.writeback && name && S_ISREG(n->type);
	}
	pthread_mutex_unlock(&ws.lock);
	if (ino)
		ws_send_inval_inode(ino);
	if (evict)
		ws_send_inval_entry(SFS_INO_WS(dir->id), name);
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
	bool reopen;

	/* a directory moved or removed (or events lost): the audit's kept
	 * directory paths may be wrong now (fs/workspace/where.c) */
	if ((ev->mask & IN_Q_OVERFLOW) ||
	    ((ev->mask & IN_ISDIR) && (ev->mask & (IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE))))
		ws_where_moved();
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
	reopen = ws_hold_locked(dir); /* its fd is the base for fstatat */
	dir_id = dir->id;
	pthread_mutex_unlock(&ws.lock);
	/* force: the watcher is one thread, holding one fd at a time */
	if (reopen && ws_node_reopen(dir, true) != 0) {
		ws_put(dir); /* deleted: its IN_IGNORED follows */
		return;
	}

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
		if (p->name[0]) {
			ws_send_inval_entry(p->parent, p->name);
			ws_send_inval_inode(p->parent);
		} else if (ws.se) {
			fuse_lowlevel_notify_inval_inode(ws.se, p->parent, p->off, p->len);
		}
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
