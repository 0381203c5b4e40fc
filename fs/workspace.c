/*
 * workspace/: an fd-based passthrough over a host directory (see workspace.h).
 *
 * Node table.  Every workspace object the kernel knows about is a struct
 * ws_node holding an O_PATH|O_NOFOLLOW fd, found by id (the FUSE ino is
 * SFS_INO_WS(id)) and by (sandbox serial, st_dev, st_ino), so hard links
 * share a node.  A node lives while the kernel holds lookups on it (nlookup)
 * or a handler is using its fd (users); ids are never reused.
 *
 * Locking.  One mutex, ws.lock, guards both maps, next_id, the gone-serial
 * list and every node's nlookup, users, gone and (once gone) fd.  It is a leaf
 * lock: while it is held no other lock is taken, nothing is sent to the
 * kernel and nothing blocks, so callers of ws_* may hold locks of their own.
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
#include <sys/fsuid.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#define WS_ID_MAX ((1ULL << 48) - 1)
#define WS_MIN_TIMEOUT 0.001 /* a TTL of exactly 0 makes the kernel re-look-up every entry */
#define WS_PROC_PATH_MAX 32

enum { WS_BY_ID, WS_BY_KEY };

struct ws_node {
	struct ws_node *next[2]; /* hash chains: [WS_BY_ID], [WS_BY_KEY] */
	uint64_t id;
	uint32_t serial;
	int fd; /* O_PATH|O_NOFOLLOW; -1 once gone and unused */
	dev_t dev;
	ino_t ino;
	mode_t type;	  /* S_IFMT bits: an inode never changes type */
	uint64_t nlookup; /* the kernel's lookup count */
	unsigned users;	  /* handlers using fd right now */
	bool gone;	  /* sandbox destroyed: every op but forget/release fails */
	bool in_map[2];
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

static struct {
	pthread_mutex_t lock;
	struct ws_map map[2];
	uint64_t next_id;
	uint32_t *gone_serials;
	size_t ngone, gone_cap;

	struct ws_options opt;
	struct fuse_session *se;
	bool root; /* euid 0: creations take the caller's fsuid/fsgid */
	uid_t fsuid;
	gid_t fsgid;
} ws = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

static bool ws_serial_gone_locked(uint32_t serial)
{
	for (size_t i = 0; i < ws.ngone; i++)
		if (ws.gone_serials[i] == serial)
			return true;
	return false;
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
		ws_map_remove(WS_BY_ID, n);
		ws_map_remove(WS_BY_KEY, n);
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
		ws_map_remove(WS_BY_ID, n);
		ws_map_remove(WS_BY_KEY, n);
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
		ws_map_insert(WS_BY_ID, n);
		ws_map_insert(WS_BY_KEY, n);
		fd = -1;
	}
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

static void ws_entry_init(struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr_timeout = ws.opt.attr_timeout;
	e->entry_timeout = ws.opt.entry_timeout;
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
	fuse_reply_attr(req, &st, ws.opt.attr_timeout);
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
	ws_put(n);
	fuse_reply_attr(req, &st, ws.opt.attr_timeout);
	return;
fail:
	err = errno;
	ws_put(n);
	ws_reply_err(req, err);
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
	err = errno;
	ws_put(n);
	if (len == -1) {
		ws_reply_err(req, err);
		return;
	}
	if (len == (ssize_t)sizeof(buf)) {
		ws_reply_err(req, ENAMETOOLONG);
		return;
	}
	buf[len] = '\0';
	fuse_reply_readlink(req, buf);
}

/* mknod, mkdir and symlink: created as the caller, then looked up. */
static void ws_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		    const char *target)
{
	struct fuse_entry_param e;
	struct ws_node *p;
	bool switched;
	int err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	ws_thread_clear_umask();
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
	if (!err)
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
	int res, err;

	if (!ws_name_ok(name)) {
		ws_reply_err(req, EINVAL);
		return;
	}
	p = ws_get(req, parent);
	if (!p)
		return;
	res = unlinkat(p->fd, name, flags);
	err = errno;
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
		res = renameat2(p->fd, name, np->fd, newname, flags);
		err = res == -1 ? errno : 0;
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
	if (S_ISLNK(n->type)) {
		/* Links the symlink itself; needs CAP_DAC_READ_SEARCH. */
		res = linkat(n->fd, "", np->fd, newname, AT_EMPTY_PATH);
	} else {
		ws_proc_path(path, n->fd);
		res = linkat(AT_FDCWD, path, np->fd, newname, AT_SYMLINK_FOLLOW);
	}
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
	if (ws.opt.keep_cache)
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
	fd = open(path, flags);
	if (fd == -1 && errno == EACCES && (fi->flags & O_ACCMODE) == O_WRONLY)
		fd = open(path, (flags & ~O_ACCMODE) | O_WRONLY); /* unprivileged daemon */
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
	err = ws_creds_begin(req, &switched);
	if (!err) {
		/* Always O_EXCL, so the file is certainly new and ours. */
		fd = openat(p->fd, name, ws_open_flags(fi->flags) | O_CREAT | O_EXCL | O_NOFOLLOW,
			    mode & 07777);
		err = fd == -1 ? errno : 0;
	}
	ws_creds_end(switched);
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
	res = fuse_buf_copy(&out, in, 0);
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
		if (setxattr(path, name, value, size, flags) == -1)
			err = errno;
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
		if (removexattr(path, name) == -1)
			err = errno;
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

	if (ws_is_gone(h->node)) {
		ws_reply_err(req, ENOENT);
		return;
	}
	ws_reply_err(req, fallocate(h->fd, mode, off, len) == -1 ? errno : 0);
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
	res = copy_file_range(in->fd, &off_in, out->fd, &off_out, len, (unsigned)flags);
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
	int err;

	ws.opt = *opt;
	if (!(ws.opt.attr_timeout >= WS_MIN_TIMEOUT))
		ws.opt.attr_timeout = WS_MIN_TIMEOUT;
	if (!(ws.opt.entry_timeout >= WS_MIN_TIMEOUT))
		ws.opt.entry_timeout = WS_MIN_TIMEOUT;
	err = ws_map_init(&ws.map[WS_BY_ID]);
	if (!err)
		err = ws_map_init(&ws.map[WS_BY_KEY]);
	if (err) {
		free(ws.map[WS_BY_ID].buckets);
		ws.map[WS_BY_ID].buckets = NULL;
		return err;
	}
	ws.next_id = 1;
	ws.fsuid = geteuid();
	ws.fsgid = getegid();
	ws.root = ws.fsuid == 0;
	ws_raise_nofile();
	return 0;
}

void ws_set_session(struct fuse_session *se)
{
	ws.se = se;
}

void ws_shutdown(void)
{
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
	for (int w = WS_BY_ID; w <= WS_BY_KEY; w++) {
		free(ws.map[w].buckets);
		ws.map[w] = (struct ws_map){0};
	}
	free(ws.gone_serials);
	ws.gone_serials = NULL;
	ws.ngone = ws.gone_cap = 0;
	pthread_mutex_unlock(&ws.lock);
}

void ws_conn_init(struct fuse_conn_info *conn)
{
	unsigned want = FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE;

	if (ws.opt.writeback)
		want |= FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= want & conn->capable;
}

void ws_lookup_root(fuse_req_t req, uint32_t serial, int root_fd)
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

void ws_sandbox_gone(uint32_t serial)
{
	int *fds = NULL;
	size_t nfds = 0, cap = 0;

	pthread_mutex_lock(&ws.lock);
	if (!ws_serial_gone_locked(serial)) {
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

void ws_invalidate_sandbox(uint32_t serial)
{
	fuse_ino_t *inos = NULL;
	size_t count = 0, cap = 0;
	bool short_of_memory = false;

	pthread_mutex_lock(&ws.lock);
	for (size_t i = 0; i < ws.map[WS_BY_ID].nbuckets && !short_of_memory; i++) {
		for (struct ws_node *n = ws.map[WS_BY_ID].buckets[i]; n; n = n->next[WS_BY_ID]) {
			if (n->serial != serial || n->gone)
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
			"workspace: out of memory: only %zu of sandbox %" PRIu32
			"'s cached inodes invalidated",
			count, serial);
	/* -ENOENT: the kernel already forgot the inode; nothing to drop. */
	for (size_t i = 0; ws.se && i < count; i++)
		fuse_lowlevel_notify_inval_inode(ws.se, inos[i], 0, 0);
	free(inos);
}
