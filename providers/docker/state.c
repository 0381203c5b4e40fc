/* Runtime tables, and the host's view of a container's files. */
#include "docker.h"

#include "../config.h"
#include "../options.h"
#include "../util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define OVERLAYFS_MAGIC 0x794c7630

pthread_mutex_t dk_mu = PTHREAD_MUTEX_INITIALIZER;
static struct dk_sb *sandboxes;

int64_t dk_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool dk_fs_archive_only(void)
{
	return strcmp(sfs_opt_get("docker.fs"), "archive") == 0;
}

struct dk_sb *dk_sb_locked(struct sfs_sandbox *sb)
{
	for (struct dk_sb *d = sandboxes; d; d = d->next)
		if (d->sb == sb)
			return d;
	struct dk_sb *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->sb = sb;
	d->merged_fd = -1;
	d->next = sandboxes;
	sandboxes = d;
	return d;
}

struct dk_run *dk_run_locked(struct dk_sb *d, int n)
{
	for (struct dk_run *r = d->runs; r; r = r->next)
		if (r->n == n)
			return r;
	struct dk_run *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->n = n;
	r->jfd = -1;
	r->next = d->runs;
	d->runs = r;
	return r;
}

void dk_current(struct sfs_sandbox *sb, char *cid, size_t len)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	bool known = d && d->known;
	if (known)
		(void)!sfs_pathf(cid, len, "%s", d->cid); /* "" (none) if it does not fit */
	pthread_mutex_unlock(&dk_mu);
	if (known)
		return;
	/* a record made before any op ran (a sandbox whose resume failed
	 * still has runs to refresh): the saved container */
	dk_saved_container(sb, cid, len);
	pthread_mutex_lock(&dk_mu);
	d = dk_sb_locked(sb);
	if (d && !d->known) {
		d->known = sfs_pathf(d->cid, sizeof(d->cid), "%s", cid) == 0;
	}
	pthread_mutex_unlock(&dk_mu);
}

static void close_merged_locked(struct dk_sb *d)
{
	if (d->merged_fd >= 0)
		close(d->merged_fd);
	d->merged_fd = -1;
}

void dk_note_container(struct sfs_sandbox *sb, const struct dk_info *info)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	if (d) {
		if (strcmp(d->cid, info->id) != 0 || strcmp(d->merged, info->merged) != 0 ||
		    strcmp(d->started, info->started) != 0 || !info->running)
			close_merged_locked(d);
		if (strcmp(d->cid, info->id) != 0)
			d->gone = false;		  /* a new container (restore) */
		memcpy(d->cid, info->id, sizeof(d->cid)); /* the same sizes */
		memcpy(d->started, info->started, sizeof(d->started));
		memcpy(d->merged, info->running ? info->merged : "",
		       info->running ? sizeof(d->merged) : 1);
		d->running = info->running;
		d->root_user = !info->user[0] || strcmp(info->user, "root") == 0 ||
			       strcmp(info->user, "0") == 0 || strncmp(info->user, "0:", 2) == 0 ||
			       strncmp(info->user, "root:", 5) == 0;
		d->known = true;
	}
	pthread_mutex_unlock(&dk_mu);
}

bool dk_cid_owned(const char *cid)
{
	/* a forgotten sandbox keeps its entry here (records are never freed
	 * while mounted, and a key never changes), so the tree decides, asked
	 * after dk_mu is let go */
	char keys[8][40];
	const struct sfs_provider *p = NULL;
	int n = 0;
	pthread_mutex_lock(&dk_mu);
	for (struct dk_sb *d = sandboxes; d && n < 8; d = d->next)
		if (d->cid[0] && strcmp(d->cid, cid) == 0 && !d->gone) {
			p = d->sb->provider;
			memcpy(keys[n++], d->sb->key, sizeof(keys[0])); /* the same size */
		}
	pthread_mutex_unlock(&dk_mu);
	for (int i = 0; i < n; i++)
		if (sfs_sandbox_known(p, keys[i]))
			return true;
	return false;
}

struct sfs_sandbox *dk_mark_gone(const char *cid)
{
	struct sfs_sandbox *sb = NULL;
	pthread_mutex_lock(&dk_mu);
	for (struct dk_sb *d = sandboxes; d && !sb; d = d->next)
		if (d->known && d->cid[0] && strcmp(d->cid, cid) == 0 && !d->gone) {
			d->gone = true;
			d->running = false;
			d->merged[0] = '\0';
			close_merged_locked(d);
			sb = d->sb;
		}
	pthread_mutex_unlock(&dk_mu);
	return sb;
}

bool dk_is_gone(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	bool gone = d && d->gone;
	pthread_mutex_unlock(&dk_mu);
	return gone;
}

size_t dk_list(struct sfs_sandbox **sbs, char (*cids)[DK_ID_MAX], size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&dk_mu);
	for (struct dk_sb *d = sandboxes; d && n < max; d = d->next)
		if (d->known && d->cid[0]) {
			sbs[n] = d->sb;
			memcpy(cids[n], d->cid, DK_ID_MAX); /* the same size */
			n++;
		}
	pthread_mutex_unlock(&dk_mu);
	return n;
}

void dk_forget(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	if (d) {
		close_merged_locked(d);
		d->cid[0] = d->merged[0] = d->started[0] = '\0';
		d->running = false;
		d->gone = false;
		d->known = true;
		/* journal fds stay open: the engine may still name them in a
		 * path until the sandbox's journals are detached */
	}
	pthread_mutex_unlock(&dk_mu);
}

int dk_publish(struct sfs_sandbox *sb, const char *cid, const char *image,
	       const struct dk_spec *spec, const char *fork_image, struct sfs_err *err)
{
	/* the container first: publishing the id saves a sandbox being made,
	 * and that record must name what its destroy removes */
	if (dk_saved_set(sb, cid, spec, fork_image))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return sfs_sb_publish(sb, cid, image, spec->workdir, err);
}

void dk_progress(struct sfs_sandbox *sb, const char *fmt, ...)
{
	char *text = NULL;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		if (vasprintf(&text, fmt, ap) < 0)
			text = NULL;
		va_end(ap);
		if (!text)
			return; /* progress is only a courtesy */
	}
	sfs_sb_set_progress(sb, text);
	free(text);
}

static int dup_fd(int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return d < 0 ? -errno : d;
}

/* A still-valid O_PATH fd of the merged dir (dup'ed for the caller), or a
 * negative errno: -EAGAIN when the caller should inspect the container. */
static int merged_fd_locked(struct dk_sb *d)
{
	if (d->merged_fd >= 0) {
		/* the same mount as when we opened it?  a restarted container
		 * mounts a new overlay at the same path */
		struct stat now, held;
		if (stat(d->merged, &now) == 0 && fstat(d->merged_fd, &held) == 0 &&
		    now.st_dev == held.st_dev && now.st_ino == held.st_ino)
			return dup_fd(d->merged_fd);
		close_merged_locked(d);
		return -EAGAIN;
	}
	if (!d->merged[0] || !d->running)
		return -EAGAIN;
	int fd = open(d->merged, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? -EOPNOTSUPP : -EAGAIN;
	struct statfs sf;
	struct stat st;
	if (fstatfs(fd, &sf) < 0 || sf.f_type != OVERLAYFS_MAGIC || fstat(fd, &st) < 0) {
		close(fd);
		return -EOPNOTSUPP;
	}
	d->merged_fd = fd;
	d->merged_dev = st.st_dev;
	d->merged_ino = st.st_ino;
	return dup_fd(fd);
}

static int host_root(struct sfs_sandbox *sb, struct sfs_err *err)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		pthread_mutex_lock(&dk_mu);
		struct dk_sb *d = dk_sb_locked(sb);
		int fd = d ? merged_fd_locked(d) : -ENOMEM;
		pthread_mutex_unlock(&dk_mu);
		if (fd == -EAGAIN) {
			if (attempt == 1)
				break;
			char cid[DK_ID_MAX];
			dk_current(sb, cid, sizeof(cid));
			if (!cid[0])
				return sfs_errf(err, -ENOENT, "docker: sandbox has no container");
			struct dk_info info;
			int r = dk_inspect(cid, &info, err);
			if (r)
				return r;
			dk_note_container(sb, &info);
			dk_info_free(&info);
			continue;
		}
		if (fd < 0)
			return sfs_errf(err, fd == -EOPNOTSUPP ? -EOPNOTSUPP : fd,
					"docker: the container's files are not reachable from this "
					"host");
		return fd;
	}
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	bool running = d && d->running;
	pthread_mutex_unlock(&dk_mu);
	if (!running)
		return sfs_errf(err, -EIO, "docker: the container is not running");
	return sfs_errf(err, -EOPNOTSUPP,
			"docker: the container's files are not reachable from this host (no "
			"overlay merged dir)");
}

int dk_host_open(struct sfs_sandbox *sb, const char *path, int flags, mode_t mode, int *fd,
		 struct sfs_err *err)
{
	if (dk_fs_archive_only())
		return sfs_errf(err, -EOPNOTSUPP, "docker: host access is off (docker.fs=archive)");
	int cur = host_root(sb, err);
	if (cur < 0)
		return cur;
	char copy[4096];
	if (snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy)) {
		close(cur);
		return sfs_errf(err, -ENAMETOOLONG, "docker: %s: path too long", path);
	}
	/* one component at a time, never following a symlink or going up:
	 * whatever the container plants, we stay inside its filesystem */
	char *save = NULL, *comp = strtok_r(copy, "/", &save);
	while (comp) {
		char *next = strtok_r(NULL, "/", &save);
		if (strcmp(comp, ".") == 0) {
			comp = next;
			continue;
		}
		if (strcmp(comp, "..") == 0) {
			close(cur);
			return sfs_errf(err, -EINVAL, "docker: %s: \"..\" is not allowed", path);
		}
		int nfd;
		if (next || (flags & O_PATH))
			nfd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		else
			nfd = openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
		int e = errno;
		close(cur);
		if (nfd < 0)
			return sfs_errf(err, e == ELOOP ? -ENOENT : -e,
					"docker: %s in the container: %s", path,
					e == ELOOP ? "a symlink (not followed)" : strerror(e));
		cur = nfd;
		comp = next;
	}
	if (!(flags & O_PATH)) {
		struct stat st;
		if (fstat(cur, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(cur);
			return sfs_errf(err, -EINVAL, "docker: %s in the container: not a file",
					path);
		}
		fcntl(cur, F_SETFL, fcntl(cur, F_GETFL) & ~O_NONBLOCK);
	}
	*fd = cur;
	return 0;
}

void dk_state_shutdown(void)
{
	pthread_mutex_lock(&dk_mu);
	while (sandboxes) {
		struct dk_sb *d = sandboxes;
		sandboxes = d->next;
		close_merged_locked(d);
		while (d->runs) {
			struct dk_run *r = d->runs;
			d->runs = r->next;
			if (r->jfd >= 0)
				close(r->jfd);
			free(r);
		}
		free(d);
	}
	pthread_mutex_unlock(&dk_mu);
}
