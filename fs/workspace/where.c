/* fs/workspace/where.c: which sandbox a workspace node belongs to and its
 * path below the workspace root, for SANDBOX/audit lines (fs/audit.c). */
#include "internal.h"
#include "fs/audit.h"
#include "fs/ino.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The host path of each sandbox's workspace root, read once (a leaf lock). */
static pthread_mutex_t roots_mu = PTHREAD_MUTEX_INITIALIZER;
static struct root {
	uint32_t serial;
	char *path;
} * roots;
static size_t nroots;

/* /proc/self/fd of the daemon's final process (opened by ws_where_start,
 * after daemonizing), or -1: a readlinkat of "N" in it does not walk
 * "/proc/self/fd" for every audited change (that walk was about 40% of
 * the readlink's cost). */
static int proc_fds = -1;

void ws_where_start(void)
{
	proc_fds = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void dir_paths_free(void);

void ws_where_stop(void)
{
	if (proc_fds >= 0)
		close(proc_fds);
	proc_fds = -1;
	dir_paths_free();
}

/* The host path of fd, by /proc/self/fd/N (the kernel's own name for it:
 * right even after a rename made outside the mount).  Not snprintf: this
 * runs for every audited change. */
static ssize_t fd_path(int fd, char *buf, size_t len)
{
	char proc[WS_PROC_PATH_MAX] = "/proc/self/fd/";
	char digits[16];
	size_t n = sizeof(digits) - 1, at = strlen(proc);
	unsigned v = (unsigned)fd;
	digits[n] = '\0';
	do
		digits[--n] = (char)('0' + v % 10);
	while ((v /= 10) && n);
	ssize_t r;
	if (proc_fds >= 0) {
		r = readlinkat(proc_fds, digits + n, buf, len - 1);
	} else {
		memcpy(proc + at, digits + n, sizeof(digits) - n);
		r = readlink(proc, buf, len - 1);
	}
	if (r < 0 || (size_t)r >= len - 1)
		return -1;
	buf[r] = '\0';
	return r;
}

/* Copies the cached root of serial into buf; its length, or -1 when not
 * cached yet (or longer than buf). */
static ssize_t cached_root(uint32_t serial, char *buf, size_t len)
{
	ssize_t found = -1;
	pthread_mutex_lock(&roots_mu);
	for (size_t i = 0; i < nroots && found < 0; i++)
		if (roots[i].serial == serial) {
			size_t l = strlen(roots[i].path);
			if (l < len) {
				memcpy(buf, roots[i].path, l + 1);
				found = (ssize_t)l;
			}
		}
	pthread_mutex_unlock(&roots_mu);
	return found;
}

static void cache_root(uint32_t serial, const char *path)
{
	char *copy = strdup(path);
	pthread_mutex_lock(&roots_mu);
	struct root *grown = copy ? realloc(roots, (nroots + 1) * sizeof(*grown)) : NULL;
	if (grown) {
		roots = grown;
		roots[nroots++] = (struct root){serial, copy};
		copy = NULL;
	}
	pthread_mutex_unlock(&roots_mu);
	free(copy);
}

/* "workspace" then rest into path (cut at len). */
static void put_path(char *path, size_t len, const char *prefix, const char *rest)
{
	size_t p = strlen(prefix), r = strlen(rest);
	if (p > len - 1)
		p = len - 1;
	if (r > len - 1 - p)
		r = len - 1 - p;
	memcpy(path, prefix, p);
	memcpy(path + p, rest, r);
	path[p + r] = '\0';
}

/*
 * Directory paths, reused: an editor's save (create in D, rename in D) or
 * a tree of creates asks for the same directory again and again, and each
 * readlinkat was a third of the audit's cost.  A directory's path changes
 * only when it or a directory above it moves; the epoch changes whenever
 * one may have: each rename or rmdir through the mount (at its start and
 * its end; none is used while one is going), and each directory moved or
 * removed outside it, as the workspace watcher sees it (the same moment
 * the mount's own caches learn of it).  Without the watcher (no inotify,
 * a directory it could not watch) nothing is reused.  Node ids are never
 * reused, so a slot can only be stale by its epoch.
 */
#define DIR_PATH_SLOTS 64
static struct {
	pthread_mutex_t mu; /* a leaf: taken under ws.lock, or alone */
	uint64_t epoch;
	unsigned moving; /* renames and rmdirs through the mount going now */
	struct dir_path {
		uint64_t id, epoch;
		char *path; /* "workspace/a/b" */
	} slot[DIR_PATH_SLOTS];
} dirs = {.mu = PTHREAD_MUTEX_INITIALIZER};

void ws_where_moves_begin(void)
{
	pthread_mutex_lock(&dirs.mu);
	dirs.moving++;
	dirs.epoch++;
	pthread_mutex_unlock(&dirs.mu);
}

void ws_where_moves_end(void)
{
	pthread_mutex_lock(&dirs.mu);
	dirs.moving--;
	dirs.epoch++;
	pthread_mutex_unlock(&dirs.mu);
}

void ws_where_moved(void)
{
	pthread_mutex_lock(&dirs.mu);
	dirs.epoch++;
	pthread_mutex_unlock(&dirs.mu);
}

/* Copies the path kept for directory id into path: true, or false with
 * *epoch the epoch a path found now may be kept under (*usable: at all). */
static bool dir_path_kept(uint64_t id, char *path, size_t len, uint64_t *epoch, bool *usable)
{
	bool hit = false;
	*usable = __atomic_load_n(&ws.coherent, __ATOMIC_RELAXED);
	pthread_mutex_lock(&dirs.mu);
	*usable = *usable && !dirs.moving;
	*epoch = dirs.epoch;
	struct dir_path *d = &dirs.slot[id % DIR_PATH_SLOTS];
	if (*usable && d->path && d->id == id && d->epoch == dirs.epoch) {
		size_t l = strlen(d->path);
		if (l < len) {
			memcpy(path, d->path, l + 1);
			hit = true;
		}
	}
	pthread_mutex_unlock(&dirs.mu);
	return hit;
}

/* Keeps path for directory id, if nothing may have moved since epoch. */
static void dir_path_keep(uint64_t id, uint64_t epoch, const char *path)
{
	char *copy = strdup(path), *old = NULL;
	pthread_mutex_lock(&dirs.mu);
	struct dir_path *d = &dirs.slot[id % DIR_PATH_SLOTS];
	if (copy && !dirs.moving && dirs.epoch == epoch) {
		old = d->path;
		*d = (struct dir_path){.id = id, .epoch = epoch, .path = copy};
		copy = NULL;
	}
	pthread_mutex_unlock(&dirs.mu);
	free(old);
	free(copy);
}

static void dir_paths_free(void)
{
	pthread_mutex_lock(&dirs.mu);
	for (size_t i = 0; i < DIR_PATH_SLOTS; i++) {
		free(dirs.slot[i].path);
		dirs.slot[i] = (struct dir_path){0};
	}
	pthread_mutex_unlock(&dirs.mu);
}

int ws_where(fuse_ino_t ino, unsigned *serial, char *path, size_t len)
{
	char host[4096], root[4096];
	struct ws_node *n, *r = NULL;
	uint64_t epoch = 0;
	bool usable = false, reopen_n, reopen_r = false;
	pthread_mutex_lock(&ws.lock);
	n = ws_find_id_locked(SFS_INO_WS_ID(ino));
	if (!n || n->gone) {
		pthread_mutex_unlock(&ws.lock);
		return -ENOENT;
	}
	*serial = n->serial;
	uint64_t id = n->id;
	bool dir = S_ISDIR(n->type);
	if (dir && dir_path_kept(id, path, len, &epoch, &usable)) {
		pthread_mutex_unlock(&ws.lock);
		return 0;
	}
	reopen_n = ws_hold_locked(n);
	ssize_t rl = cached_root(n->serial, root, sizeof(root));
	if (rl < 0) {
		struct ws_sandbox_info *info = ws_sandbox_info_locked(n->serial);
		r = info ? ws_find_key_locked(n->serial, info->root_dev, info->root_ino) : NULL;
		if (r && r->gone)
			r = NULL;
		if (r)
			reopen_r = ws_hold_locked(r);
	}
	pthread_mutex_unlock(&ws.lock);
	/* force: the audit's own work, two fds at most per thread */
	if (r && reopen_r && ws_node_reopen(r, true) != 0) {
		ws_put(r);
		r = NULL;
	}
	int err = reopen_n ? -ws_node_reopen(n, true) : 0;
	if (!err && fd_path(n->fd, host, sizeof(host)) < 0)
		err = -ENAMETOOLONG;
	if (rl < 0 && r && (rl = fd_path(r->fd, root, sizeof(root))) >= 0)
		cache_root(*serial, root);
	if (r)
		ws_put(r);
	ws_put(n);
	if (err)
		return err;
	if (rl >= 0 && !strcmp(host, root)) {
		put_path(path, len, "workspace", "");
	} else if (rl >= 0 && !strncmp(host, root, (size_t)rl) && host[rl] == '/') {
		put_path(path, len, "workspace", host + rl);
	} else { /* renamed away meanwhile: the host's name says where it went */
		put_path(path, len, "", host);
		return 0;
	}
	if (dir && usable)
		dir_path_keep(id, epoch, path);
	return 0;
}
