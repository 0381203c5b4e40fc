/* A depth-first walk over fds: openat + fdopendir, never following a
 * symlink and staying on one filesystem (a mount below is not entered). */
#include "walk.h"
#include "../util.h"

#include "../untrusted/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct walk {
	int rootfd;
	dev_t dev;
	bool need_stat;
	sfs_cow_visit visit, leave;
	void *arg;
	struct sfs_err *err;
	char path[PATH_MAX];
};

static int walk_dir(struct walk *w, int fd, size_t len)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return sfs_errf(w->err, -e, "walk %s: %s", w->path, strerror(e));
	}
	int r = 0;
	struct dirent *e;
	while (!r && (errno = 0, e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		size_t nl = strlen(e->d_name);
		if (len + nl + 2 >= sizeof(w->path)) {
			r = sfs_errf(w->err, -ENAMETOOLONG, "walk %s/%s: path too long", w->path,
				     e->d_name);
			break;
		}
		size_t at = len;
		if (len)
			w->path[at++] = '/';
		memcpy(w->path + at, e->d_name, nl + 1);
		struct stat st = {0};
		if (w->need_stat || e->d_type == DT_UNKNOWN) {
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno == ENOENT)
					goto next; /* gone meanwhile */
				r = sfs_errf(w->err, -errno, "walk %s: %s", w->path,
					     strerror(errno));
				break;
			}
		} else {
			static const mode_t types[] = {
			    [DT_FIFO] = S_IFIFO, [DT_CHR] = S_IFCHR, [DT_DIR] = S_IFDIR,
			    [DT_BLK] = S_IFBLK,	 [DT_REG] = S_IFREG, [DT_LNK] = S_IFLNK,
			    [DT_SOCK] = S_IFSOCK};
			st.st_mode =
			    e->d_type < sizeof(types) / sizeof(types[0]) ? types[e->d_type] : 0;
		}
		r = w->visit(w->arg, w->rootfd, w->path, &st);
		if (r == SFS_COW_WALK_SKIP) {
			r = 0;
		} else if (!r && S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			struct stat sst;
			if (sub < 0) {
				if (errno != ENOENT)
					r = sfs_errf(w->err, -errno, "walk %s: %s", w->path,
						     strerror(errno));
			} else if (fstat(sub, &sst) < 0 || sst.st_dev != w->dev) {
				close(sub); /* another filesystem mounted here */
			} else {
				r = walk_dir(w, sub, len + (len ? 1 : 0) + nl);
				if (!r && w->leave)
					r = w->leave(w->arg, w->rootfd, w->path, &st);
			}
		}
	next:
		w->path[len] = '\0';
	}
	if (!r && errno)
		r = sfs_errf(w->err, -errno, "walk %s: %s", w->path, strerror(errno));
	closedir(d);
	return r < 0 ? r : 0;
}

int sfs_cow_walk_under(const char *root, const char *sub, bool need_stat, sfs_cow_visit visit,
		       sfs_cow_visit leave, void *arg, struct sfs_err *err)
{
	struct walk *w = calloc(1, sizeof(*w));
	if (!w)
		return sfs_errf(err, -ENOMEM, "out of memory");
	*w = (struct walk){
	    .need_stat = need_stat, .visit = visit, .leave = leave, .arg = arg, .err = err};
	int r = 0;
	w->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (w->rootfd < 0 || fstat(w->rootfd, &st) < 0) {
		r = sfs_errf(err, -errno, "walk %s: %s", root, strerror(errno));
		goto out;
	}
	w->dev = st.st_dev;
	if (sfs_pathf(w->path, sizeof(w->path), "%s", sub) < 0) {
		r = sfs_errf(err, -ENAMETOOLONG, "walk %s/%s: path too long", root, sub);
		goto out;
	}
	int fd = *sub ? sfs_cow_open_beneath(w->rootfd, sub, O_RDONLY | O_DIRECTORY)
		      : openat(w->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		r = fd == -ENOENT || fd == -ENOTDIR
			? 0
			: sfs_errf(err, fd, "walk %s/%s: %s", root, sub, strerror(-fd));
		goto out;
	}
	r = walk_dir(w, fd, strlen(w->path));
out:
	if (w->rootfd >= 0)
		close(w->rootfd);
	free(w);
	return r;
}

int sfs_cow_open_beneath(int rootfd, const char *rel, int flags)
{
	return untrusted_open(rootfd, rel, flags);
}
