/*
 * The one door to a tree a sandbox controls: see tree.h.  Beside runc's
 * securejoin and virtiofsd: openat2 beneath a root fd, the type checked on
 * the fd that was opened, pread, and metadata changed through that fd.
 */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6, the same number on every architecture */
#endif

/* One pread: large enough to hash at disk speed, small enough for a stack
 * that is not a worker's whole budget. */
#define CHUNK ((size_t)256 * 1024)

int untrusted_open(int rootfd, const char *rel, int flags)
{
	if (!rel || !*rel)
		rel = ".";
	if (rel[0] == '/')
		return -EXDEV; /* never an absolute path: beneath rootfd only */
	unsigned f = (unsigned)(flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (!(flags & O_PATH))
		f |= O_NONBLOCK; /* a FIFO swapped in opens at once, then fails fstat */
	else
		f &= ~(unsigned)O_NOCTTY;
	struct open_how how = {.flags = f,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	long fd;
	/* a rename anywhere raced the lookup: again, a few times only (a
	 * sandbox renaming in a loop must not spin a worker) */
	int tries = 0;
	do
		fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN && ++tries < 16);
	return fd < 0 ? -errno : (int)fd;
}

int untrusted_open_file(int rootfd, const char *rel, struct stat *st)
{
	int fd = untrusted_open(rootfd, rel, O_RDONLY);
	if (fd < 0)
		return fd == -ELOOP || fd == -ENXIO || fd == -EISDIR ? -EAGAIN : fd;
	struct stat now;
	if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode)) {
		close(fd);
		return -EAGAIN; /* replaced by something else meanwhile */
	}
	if (st)
		*st = now;
	return fd;
}

int untrusted_lstat(int rootfd, const char *rel, struct stat *st)
{
	int fd = untrusted_open(rootfd, rel, O_PATH);
	if (fd < 0)
		return fd;
	int r = fstat(fd, st) < 0 ? -errno : 0;
	close(fd);
	return r;
}

int untrusted_open_dir(int rootfd, const char *rel)
{
	int fd = untrusted_open(rootfd, rel, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		close(fd);
		return -ENOTDIR;
	}
	return fd;
}

int untrusted_read_each(int fd, uint64_t size, untrusted_chunk_fn fn, void *ctx)
{
	if (size == 0)
		return 0;
	char *buf = malloc(size < CHUNK ? (size_t)size : CHUNK);
	if (!buf)
		return -ENOMEM;
	uint64_t off = 0;
	int r = 0;
	while (!r && off < size) {
		size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = -errno;
		else if (n == 0)
			r = -EAGAIN; /* shorter than its fstat said: truncated meanwhile */
		else {
			r = fn(ctx, buf, (size_t)n);
			off += (uint64_t)n;
		}
	}
	free(buf);
	return r;
}

static int sha1_chunk(void *ctx, const void *data, size_t len)
{
	return EVP_DigestUpdate(ctx, data, len) == 1 ? 0 : -EIO;
}

int untrusted_blob_sha1(int fd, uint64_t size, unsigned char out[20])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md)
		return -ENOMEM;
	char head[32];
	int hl = snprintf(head, sizeof(head), "blob %llu", (unsigned long long)size);
	int r = EVP_DigestInit_ex(md, EVP_sha1(), NULL) == 1 &&
			EVP_DigestUpdate(md, head, (size_t)hl + 1) == 1
		    ? 0
		    : -EIO;
	if (!r)
		r = untrusted_read_each(fd, size, sha1_chunk, md);
	unsigned len = 0;
	if (!r && (EVP_DigestFinal_ex(md, out, &len) != 1 || len != 20))
		r = -EIO;
	EVP_MD_CTX_free(md);
	return r;
}

int untrusted_fchmod(int fd, mode_t mode)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -ELOOP; /* a link has no mode of its own; its target is not ours */
	mode_t perm = untrusted_perm(mode);
	if (fchmod(fd, perm) == 0)
		return 0;
	if (errno != EBADF)
		return -errno;
	/* an O_PATH fd: fchmodat2 changes what it is, not a name */
	if (syscall(SYS_fchmodat2, fd, "", perm, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	/* before Linux 6.6: the fd's /proc link, which reopens the same inode
	 * (checked above not to be a symlink) */
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	return chmod(p, perm) < 0 ? -errno : 0;
}

int untrusted_fchown(int fd, uid_t uid, gid_t gid)
{
	return fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

int untrusted_chmod(int rootfd, const char *rel, mode_t type, mode_t mode)
{
	int fd = untrusted_open(rootfd, rel, O_PATH);
	if (fd < 0)
		return fd;
	struct stat st;
	int r = fstat(fd, &st) < 0 ? -errno : 0;
	if (!r && (S_ISLNK(st.st_mode) || (type && (st.st_mode & S_IFMT) != type)))
		r = -EAGAIN;
	if (!r)
		r = untrusted_fchmod(fd, mode);
	close(fd);
	return r;
}

/* One directory (open as fd, which it closes) and all below it. */
static int strip_dir(int fd, dev_t dev)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (st.st_dev != dev) {
		close(fd);
		return 0; /* another filesystem: not the copy's */
	}
	int r = st.st_mode & 06000 ? untrusted_fchmod(fd, st.st_mode) : 0;
	DIR *d = r ? NULL : fdopendir(fd);
	if (!d) {
		close(fd);
		return r ? r : -errno;
	}
	struct dirent *e;
	while (!r && (errno = 0, e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat es;
		if (fstatat(dirfd(d), e->d_name, &es, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		if (S_ISDIR(es.st_mode)) {
			int sub = untrusted_open_dir(dirfd(d), e->d_name);
			r = sub < 0 ? sub : strip_dir(sub, dev);
		} else if (S_ISREG(es.st_mode) && (es.st_mode & 06000)) {
			r = untrusted_chmod(dirfd(d), e->d_name, S_IFREG, es.st_mode);
		}
		if (r == -ENOENT || r == -EXDEV)
			r = 0;
	}
	if (!r && errno)
		r = -errno;
	closedir(d);
	return r;
}

int untrusted_strip_setid(int rootfd)
{
	int fd = untrusted_open_dir(rootfd, "");
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return strip_dir(fd, st.st_dev);
}
