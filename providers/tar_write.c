/*
 * A host directory as a tar archive (the bulk upload of a checked-out tree to
 * a remote workspace: one archive PUT, not one call per file).  Regular files,
 * directories and symlinks; anything else is skipped.  Names longer than 99
 * bytes get a GNU 'L' entry; link targets must fit the header's 100 bytes.
 */
#include "tar.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int put_header(int out, const char *name, char type, uint64_t size, unsigned mode,
		      int64_t mtime, const char *link, struct sfs_err *err)
{
	unsigned char h[4 * SFS_TAR_BLOCK];
	long ln = sfs_tar_long_name(h, sizeof(h) - SFS_TAR_BLOCK, name);
	if (ln < 0)
		return sfs_errf(err, -ENAMETOOLONG, "tar: %s: name too long", name);
	unsigned char *hd = h + ln;
	sfs_tar_header(hd, name, type, size, mode, mtime);
	if (link) {
		if (strlen(link) > 100)
			return sfs_errf(err, -ENAMETOOLONG, "tar: %s: link target too long", name);
		memcpy(hd + 157, link, strlen(link));
		/* the checksum covers the link name too */
		memset(hd + 148, ' ', 8);
		unsigned sum = 0;
		for (int i = 0; i < SFS_TAR_BLOCK; i++)
			sum += hd[i];
		snprintf((char *)hd + 148, 8, "%06o", sum);
		hd[155] = ' ';
	}
	int r = write_all(out, h, (size_t)ln + SFS_TAR_BLOCK);
	return r ? sfs_errf(err, r, "tar: write: %s", strerror(-r)) : 0;
}

static int put_file(int out, const char *path, const char *name, const struct stat *st,
		    struct sfs_err *err)
{
	int in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return sfs_errf(err, -errno, "tar: %s: %s", path, strerror(errno));
	int r = put_header(out, name, '0', (uint64_t)st->st_size, st->st_mode & 07777, st->st_mtime,
			   NULL, err);
	char buf[65536];
	uint64_t left = (uint64_t)st->st_size;
	while (!r && left) {
		ssize_t n = read(in, buf, left < sizeof(buf) ? left : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = sfs_errf(err, n < 0 ? -errno : -EIO, "tar: %s: %s", path,
				     n < 0 ? strerror(errno) : "shorter than it was");
			break;
		}
		int w = write_all(out, buf, (size_t)n);
		if (w)
			r = sfs_errf(err, w, "tar: write: %s", strerror(-w));
		left -= (uint64_t)n;
	}
	close(in);
	size_t pad = (SFS_TAR_BLOCK - (size_t)(st->st_size % SFS_TAR_BLOCK)) % SFS_TAR_BLOCK;
	static const unsigned char zeros[SFS_TAR_BLOCK];
	if (!r && pad && (r = write_all(out, zeros, pad)))
		r = sfs_errf(err, r, "tar: write: %s", strerror(-r));
	return r;
}

/* dir's entries as name-prefixed tar entries ("" for the top). */
static int put_dir(int out, const char *dir, const char *prefix, struct sfs_err *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return sfs_errf(err, -errno, "tar: %s: %s", dir, strerror(errno));
	int r = 0;
	struct dirent *e;
	char path[4200], name[4200], link[4200];
	while (!r && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		struct stat st;
		if (sfs_pathf(path, sizeof(path), "%s/%s", dir, e->d_name) < 0 ||
		    /* with room for the "/" a directory gets below */
		    sfs_pathf(name, sizeof(name), "%s%s/", prefix, e->d_name) < 0) {
			r = sfs_errf(err, -ENAMETOOLONG, "tar: %s/%s: path too long", dir,
				     e->d_name);
		} else if ((name[strlen(name) - 1] = '\0', lstat(path, &st) < 0)) {
			r = sfs_errf(err, -errno, "tar: %s: %s", path, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			size_t n = strlen(name);
			snprintf(name + n, sizeof(name) - n, "/");
			r = put_header(out, name, '5', 0, st.st_mode & 07777, st.st_mtime, NULL,
				       err);
			if (!r)
				r = put_dir(out, path, name, err);
		} else if (S_ISREG(st.st_mode)) {
			r = put_file(out, path, name, &st, err);
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(path, link, sizeof(link) - 1);
			if (n < 0)
				r = sfs_errf(err, -errno, "tar: %s: %s", path, strerror(errno));
			else {
				link[n] = '\0';
				r = put_header(out, name, '2', 0, 0777, st.st_mtime, link, err);
			}
		}
	}
	closedir(d);
	return r;
}

int sfs_tar_write_dir(const char *dir, int out, struct sfs_err *err)
{
	int r = put_dir(out, dir, "", err);
	static const unsigned char end[2 * SFS_TAR_BLOCK];
	if (!r && (r = write_all(out, end, sizeof(end))))
		r = sfs_errf(err, r, "tar: write: %s", strerror(-r));
	return r;
}
