/*
 * Node fds (see "Node fds" in internal.h): the budget and its reserve, the
 * file handles nodes are held by, the mounts those are reopened on, the LRU
 * list of node fds and their eviction, and the reopen of an evicted node.
 *
 * What virtiofsd does with --inode-file-handles=prefer, plus a bounded set
 * of open fds, so that the hot path (a node used again soon) costs no
 * syscall more than with one fd per node.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"
#include "providers/err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fds left to the daemon's own work when the workspace has used its budget:
 * runs (pipes, pidfds, the wrapper's), the registry, ctl and journal files,
 * and the short-lived fds of handlers (a flush's dup, a walk up "..").  Every
 * fd the workspace keeps (node fds, files and directories open through the
 * mount, mount fds) counts against the budget. */
#define WS_FD_RESERVE 512
/* Never more node fds than this, whatever the limit: each pins a host dentry
 * and inode in the kernel's caches. */
#define WS_FD_CAP 65536
/* Idle fds closed at once when the budget is reached, so that a stream of
 * lookups takes the lock for eviction once per batch, not per lookup. */
#define WS_EVICT_BATCH 32

void ws_fds_init(void)
{
	struct rlimit rl;
	size_t limit = 1024, budget;

	/* after ws_raise_nofile: the soft limit is what the daemon has */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		limit = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 4 * (rlim_t)WS_FD_CAP
			    ? 4 * (size_t)WS_FD_CAP
			    : (size_t)rl.rlim_cur;
	/* a small limit is shared half and half */
	budget = limit > 2 * WS_FD_RESERVE ? limit - WS_FD_RESERVE : limit / 2;
	ws.fd_budget = budget < WS_FD_CAP ? budget : WS_FD_CAP;
	ws.nfds = 0;
	ws.handles = true;
	sfs_log(SFS_LOG_DEBUG, "workspace: at most %zu fds for inodes and open files (limit %zu)",
		ws.fd_budget, limit);
}

/* ---- the LRU list (under ws.lock) ------------------------------------------------------ */

static void ws_lru_push_locked(struct ws_node *n)
{
	n->lru_prev = NULL;
	n->lru_next = ws.lru_head;
	if (ws.lru_head)
		ws.lru_head->lru_prev = n;
	else
		ws.lru_tail = n;
	ws.lru_head = n;
	n->in_lru = true;
}

void ws_lru_remove_locked(struct ws_node *n)
{
	if (!n->in_lru)
		return;
	if (n->lru_prev)
		n->lru_prev->lru_next = n->lru_next;
	else
		ws.lru_head = n->lru_next;
	if (n->lru_next)
		n->lru_next->lru_prev = n->lru_prev;
	else
		ws.lru_tail = n->lru_prev;
	n->lru_prev = n->lru_next = NULL;
	n->in_lru = false;
}

/* Enters n if its fd may be evicted: it has one, and a handle to reopen it. */
void ws_lru_add_locked(struct ws_node *n)
{
	if (!n->in_lru && n->fh && n->fd >= 0 && !n->gone)
		ws_lru_push_locked(n);
}

void ws_lru_touch_locked(struct ws_node *n)
{
	if (n->in_lru && ws.lru_head != n) {
		ws_lru_remove_locked(n);
		ws_lru_push_locked(n);
	}
}

/* Takes the fds of up to max idle nodes, least recently used first, into
 * fds (the caller closes them after the lock); returns how many.  A node
 * in use (a handler, or a file open through the mount) goes to the front
 * instead: each node is looked at once. */
static size_t ws_evict_locked(int *fds, size_t max)
{
	size_t k = 0;
	struct ws_node *first_busy = NULL;

	while (k < max && ws.lru_tail && ws.lru_tail != first_busy) {
		struct ws_node *n = ws.lru_tail;

		if (n->users > 0 || n->nopen > 0) {
			if (!first_busy)
				first_busy = n;
			ws_lru_touch_locked(n);
			continue;
		}
		ws_lru_remove_locked(n);
		fds[k++] = n->fd;
		n->fd = -1;
	}
	return k;
}

/* ---- the budget ------------------------------------------------------------------------ */

void ws_fd_unreserve(void)
{
	__atomic_sub_fetch(&ws.nfds, 1, __ATOMIC_RELAXED);
}

/* Closes idle node fds until the count is under the budget (or none is left). */
static void ws_fd_evict(void)
{
	int fds[WS_EVICT_BATCH];
	size_t k;

	do {
		pthread_mutex_lock(&ws.lock);
		k = ws_evict_locked(fds, WS_EVICT_BATCH);
		pthread_mutex_unlock(&ws.lock);
		/* O_PATH fds; closed outside the lock all the same, as the last
		 * reference to an unlinked inode frees it there */
		for (size_t i = 0; i < k; i++)
			close(fds[i]);
		/* counted down only once closed: the count never says less than is open */
		__atomic_sub_fetch(&ws.nfds, k, __ATOMIC_RELAXED);
	} while (k == WS_EVICT_BATCH && __atomic_load_n(&ws.nfds, __ATOMIC_RELAXED) > ws.fd_budget);
}

int ws_fd_reserve(bool force)
{
	/* the hot path: one atomic add, no lock */
	if (__atomic_add_fetch(&ws.nfds, 1, __ATOMIC_RELAXED) <= ws.fd_budget)
		return 0;
	ws_fd_evict();
	if (force || __atomic_load_n(&ws.nfds, __ATOMIC_RELAXED) <= ws.fd_budget)
		return 0;
	/* every fd the workspace holds is in use: this op fails, not the
	 * daemon's own work in the reserve */
	ws_fd_unreserve();
	return ENFILE;
}

/* ---- mounts ------------------------------------------------------------------------------ */

static struct ws_mount *ws_mount_find_locked(uint32_t serial, int mnt_id)
{
	for (struct ws_mount *m = ws.mounts; m; m = m->next)
		if (!m->dead && m->serial == serial && m->mnt_id == mnt_id)
			return m;
	return NULL;
}

static void ws_mount_unlink_locked(struct ws_mount *m)
{
	struct ws_mount **pp = &ws.mounts;

	while (*pp != m)
		pp = &(*pp)->next;
	*pp = m->next;
	m->next = NULL;
}

/* Closes and frees a list of mounts taken out of ws.mounts. */
void ws_mounts_free(struct ws_mount *list)
{
	while (list) {
		struct ws_mount *m = list;

		list = m->next;
		if (m->fd >= 0) {
			close(m->fd);
			ws_fd_unreserve();
		}
		free(m);
	}
}

/* The sandbox's mounts are no longer used for reopens (its nodes are gone):
 * returns those no reopen is using, for ws_mounts_free after the lock; the
 * others go with their last reopen. */
struct ws_mount *ws_mounts_retire_locked(uint32_t serial)
{
	struct ws_mount *list = NULL, **pp = &ws.mounts;

	while (*pp) {
		struct ws_mount *m = *pp;

		if (m->serial != serial) {
			pp = &m->next;
			continue;
		}
		m->dead = true;
		if (m->users > 0) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		m->next = list;
		list = m;
	}
	return list;
}

static bool ws_same_inode(int fd, dev_t dev, ino_t ino)
{
	struct stat st;

	return fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == dev &&
	       st.st_ino == ino;
}

/*
 * Whether handles on mount mnt_id can be reopened for sandbox serial.  The
 * first directory seen there (fd, st, its handle fh) gives the mount its fd,
 * kept until the sandbox goes, and proves that its own handle reopens: a
 * filesystem that hands out handles it cannot decode, or a daemon without
 * CAP_DAC_READ_SEARCH (EPERM, then no handle is taken again), leaves its
 * nodes with their fds.
 */
static bool ws_mount_ready(uint32_t serial, int mnt_id, int fd, const struct stat *st,
			   struct file_handle *fh)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_mount *m, *fresh;
	int mfd, probe, err = 0;
	bool ok;

	pthread_mutex_lock(&ws.lock);
	m = ws_mount_find_locked(serial, mnt_id);
	ok = m && m->fd >= 0;
	pthread_mutex_unlock(&ws.lock);
	if (m)
		return ok;
	/* open_by_handle_at wants an fd that is not O_PATH; only a directory
	 * can be opened for it without side effects (a FIFO would block, a
	 * device would act) */
	if (!S_ISDIR(st->st_mode))
		return false;
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh)
		return false;
	/* counted against the budget like every other fd of the workspace;
	 * a few per sandbox at most */
	if (ws_fd_reserve(false)) {
		free(fresh);
		return false;
	}
	ws_proc_path(path, fd);
	mfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd == -1) {
		/* maybe this directory only: the next one on the mount tries again */
		ws_fd_unreserve();
		free(fresh);
		return false;
	}
	probe = open_by_handle_at(mfd, fh, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (probe == -1) {
		err = errno;
	} else {
		if (!ws_same_inode(probe, st->st_dev, st->st_ino))
			err = ESTALE;
		close(probe);
	}
	if (err) {
		close(mfd);
		mfd = -1;
		ws_fd_unreserve();
		if (err == EPERM) {
			if (__atomic_exchange_n(&ws.handles, false, __ATOMIC_RELAXED))
				sfs_log(
				    SFS_LOG_WARN,
				    "workspace: open_by_handle_at: %s (no CAP_DAC_READ_SEARCH): "
				    "every workspace inode the kernel holds keeps an fd open",
				    strerror(err));
		} else {
			sfs_log(SFS_LOG_INFO,
				"workspace: sandbox %" PRIu32 ": file handles of mount %d do not "
				"reopen (%s): its inodes keep an fd open each",
				serial, mnt_id, strerror(err));
		}
	}
	*fresh = (struct ws_mount){.serial = serial, .mnt_id = mnt_id, .fd = mfd};
	pthread_mutex_lock(&ws.lock);
	m = ws_mount_find_locked(serial, mnt_id);
	if (!m) {
		fresh->next = ws.mounts;
		ws.mounts = m = fresh;
		fresh = NULL;
	}
	ok = m->fd >= 0;
	pthread_mutex_unlock(&ws.lock);
	ws_mounts_free(fresh); /* another thread was first */
	return ok;
}

/* ---- handles ----------------------------------------------------------------------------- */

struct file_handle *ws_handle_take(uint32_t serial, int fd, const struct stat *st, int *mnt_id)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} u;
	struct file_handle *fh;
	size_t size;

	if (!__atomic_load_n(&ws.handles, __ATOMIC_RELAXED))
		return NULL;
	u.fh.handle_bytes = MAX_HANDLE_SZ;
	/* EOPNOTSUPP (overlayfs without nfs_export, /proc), EOVERFLOW (no
	 * handle that fits) and any other error: the node keeps its fd */
	if (name_to_handle_at(fd, "", &u.fh, mnt_id, AT_EMPTY_PATH) == -1)
		return NULL;
	if (!ws_mount_ready(serial, *mnt_id, fd, st, &u.fh))
		return NULL;
	size = sizeof(struct file_handle) + u.fh.handle_bytes;
	fh = malloc(size);
	if (fh)
		memcpy(fh, &u.fh, size);
	return fh;
}

bool ws_handle_same(const struct file_handle *a, const struct file_handle *b)
{
	return a && b && a->handle_type == b->handle_type && a->handle_bytes == b->handle_bytes &&
	       memcmp(a->f_handle, b->f_handle, a->handle_bytes) == 0;
}

/* ---- pins and reopens -------------------------------------------------------------------- */

bool ws_hold_locked(struct ws_node *n)
{
	n->users++;
	ws_lru_touch_locked(n);
	return n->fd < 0;
}

int ws_node_reopen(struct ws_node *n, bool force)
{
	struct ws_mount *m, *done = NULL;
	bool kept = false;
	int fd, err;

	if (!n->fh)
		ws_bug("node %" PRIu64 " without a handle lost its fd", n->id);
	err = ws_fd_reserve(force);
	if (err)
		return err;
	pthread_mutex_lock(&ws.lock);
	m = n->gone ? NULL : ws_mount_find_locked(n->serial, n->mnt_id);
	if (m && m->fd < 0)
		m = NULL; /* cannot be: a node gets a handle only on a mount with an fd */
	if (m)
		m->users++; /* m and m->fd stay while it is used */
	pthread_mutex_unlock(&ws.lock);
	if (!m) {
		ws_fd_unreserve();
		return ENOENT;
	}
	/* O_NOFOLLOW is ignored here: a handle names the inode itself, and
	 * O_PATH opens a symlink as itself */
	fd = open_by_handle_at(m->fd, n->fh, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	err = fd == -1 ? errno : 0;
	if (fd >= 0 && !ws_same_inode(fd, n->dev, n->ino)) {
		close(fd);
		fd = -1;
		err = ESTALE;
	}
	pthread_mutex_lock(&ws.lock);
	if (--m->users == 0 && m->dead) {
		ws_mount_unlink_locked(m);
		done = m;
	}
	if (fd >= 0 && n->gone) {
		err = ENOENT;
	} else if (fd >= 0 && n->fd < 0) {
		n->fd = fd;
		kept = true;
		ws_lru_add_locked(n);
	} /* else another handler reopened it meanwhile: that fd serves */
	pthread_mutex_unlock(&ws.lock);
	ws_mounts_free(done);
	if (fd >= 0 && !kept)
		close(fd);
	if (!kept)
		ws_fd_unreserve();
	/* ESTALE: the inode is gone (deleted while its fd was closed); the
	 * node stays until the kernel forgets it, and says it is not there */
	return err == ESTALE ? ENOENT : err;
}

/* ---- open files ---------------------------------------------------------------------------- */

void ws_node_opened(struct ws_node *n)
{
	pthread_mutex_lock(&ws.lock);
	n->nopen++;
	pthread_mutex_unlock(&ws.lock);
}

void ws_node_closed(struct ws_node *n)
{
	pthread_mutex_lock(&ws.lock);
	if (n->nopen == 0)
		ws_bug("node %" PRIu64 " closed more often than opened", n->id);
	n->nopen--;
	pthread_mutex_unlock(&ws.lock);
}

void ws_fds_shutdown_locked(void)
{
	struct ws_mount *list = ws.mounts;

	ws.mounts = NULL;
	ws.lru_head = ws.lru_tail = NULL;
	ws_mounts_free(list);
}
