/* providers/untrusted/copy.c and remove.c: a sandbox's tree copied (what a
 * local fork does) and names removed from one, on a scratch directory with
 * what a hostile sandbox leaves there: set-user-ID bits, a FIFO, a device,
 * symlinks out of the tree, hard links, holes, read-only directories, a
 * tree too deep to walk. */
#include "check.h"

#include "providers/untrusted/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

static char dir[64];
static int top = -1, src = -1, dst = -1;
static bool root;

static void put(int at, const char *rel, const char *data, mode_t mode)
{
	int fd = openat(at, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, data, strlen(data)) == (ssize_t)strlen(data));
	CHECK(fchmod(fd, mode) == 0);
	close(fd);
}

/* The whole of rel beneath at, NUL-terminated, in buf. */
static const char *get(int at, const char *rel, char *buf, size_t len)
{
	int fd = openat(at, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);
	if (fd >= 0)
		close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static void settime(int at, const char *rel, time_t sec)
{
	struct timespec t[2] = {{sec, 0}, {sec, 0}};
	CHECK(utimensat(at, rel, t, AT_SYMLINK_NOFOLLOW) == 0);
}

static time_t mtime(int at, const char *rel)
{
	struct stat st;
	return fstatat(at, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mtime : -1;
}

static mode_t perm(int at, const char *rel)
{
	struct stat st;
	return fstatat(at, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mode & 07777 : 0;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sfs-walk-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	top = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(top >= 0);
	CHECK(mkdirat(top, "src", 0755) == 0 && mkdirat(top, "dst", 0700) == 0);
	src = openat(top, "src", O_PATH | O_DIRECTORY | O_CLOEXEC);
	dst = openat(top, "dst", O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(src >= 0 && dst >= 0);
	root = geteuid() == 0;
}

static void teardown(void)
{
	char cmd[256];
	close(src);
	close(dst);
	close(top);
	/* chmod first: a read-only directory of the test */
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' && rm -rf '%s'", dir, dir);
	CHECK(system(cmd) == 0);
}

/* A POSIX access ACL as the kernel stores it: user::rw- user:1234:r--
 * group::r-- mask::r-- other::--- */
static const unsigned char acl_xattr[] = {
    2,	  0, 0, 0,			   /* version */
    0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, /* USER_OBJ rw- */
    0x02, 0, 4, 0, 0xd2, 0x04, 0,    0,	   /* USER 1234 r-- */
    0x04, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, /* GROUP_OBJ r-- */
    0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, /* MASK r-- */
    0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, /* OTHER --- */
};

static void test_copy(void)
{
	setup();
	char buf[256];
	CHECK(mkdirat(src, "d", 0755) == 0);
	put(src, "d/f", "hello\n", 0644);
	put(src, "empty", "", 0600);
	put(src, "suid", "#!/bin/sh\n", 06755);
	CHECK(fchmodat(src, "suid", 06755, 0) == 0);
	CHECK(mkdirat(src, "sg", 0755) == 0 && fchmodat(src, "sg", 02775, 0) == 0);
	put(src, "sg/in", "x", 0644);
	put(top, "outside", "secret\n", 0600);
	CHECK(symlinkat("../outside", src, "rel") == 0);
	CHECK(symlinkat("/etc/passwd", src, "abs") == 0);
	CHECK(mkfifoat(src, "fifo", 0666) == 0);
	CHECK(linkat(src, "d/f", src, "hard", 0) == 0);
	/* read-only: still filled, then given its mode */
	CHECK(mkdirat(src, "ro", 0755) == 0);
	put(src, "ro/f", "ro\n", 0444);
	CHECK(fchmodat(src, "ro", 0555, 0) == 0);
	/* sparse: 8 MB with one byte at each end */
	int fd = openat(src, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0 && pwrite(fd, "a", 1, 0) == 1 && pwrite(fd, "z", 1, (8 << 20) - 1) == 1);
	/* and one whose last 4 MB are a hole */
	int fd2 = openat(src, "tailhole", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd2 >= 0 && pwrite(fd2, "b", 1, 0) == 1 && ftruncate(fd2, 4 << 20) == 0);
	close(fd);
	close(fd2);
	bool acl = fsetxattr(fd = openat(src, "d/f", O_RDONLY | O_CLOEXEC),
			     "system.posix_acl_access", acl_xattr, sizeof(acl_xattr), 0) == 0;
	close(fd);
	if (root) {
		CHECK(fchownat(src, "d/f", 1234, 5678, 0) == 0);
		CHECK(fchownat(src, "abs", 4321, 8765, AT_SYMLINK_NOFOLLOW) == 0);
		CHECK(mknodat(src, "null", S_IFCHR | 0666, makedev(1, 3)) == 0);
	}
	settime(src, "d/f", 1000000000);
	settime(src, "abs", 1100000000);
	settime(src, "sparse", 1200000000);
	settime(src, "d", 1300000000);
	CHECK(fchmodat(top, "src", 0751, 0) == 0);
	settime(top, "src", 1400000000);

	struct untrusted_copy_stats st;
	struct sfs_err err = {0};
	CHECK_INT(untrusted_copy_tree(src, dst, &st, &err), 0);
	if (err.code)
		fprintf(stderr, "    %s\n", err.msg);
	CHECK_STREQ(get(dst, "d/f", buf, sizeof(buf)), "hello\n");
	CHECK_STREQ(get(dst, "empty", buf, sizeof(buf)), "");
	CHECK_STREQ(get(dst, "ro/f", buf, sizeof(buf)), "ro\n");
	/* no set-user-ID or set-group-ID; the rest of the mode */
	CHECK_INT(perm(dst, "suid"), 0755);
	CHECK_INT(perm(dst, "sg"), 0775);
	CHECK_INT(perm(dst, "ro"), 0555);
	CHECK_INT(perm(dst, "ro/f"), 0444);
	CHECK_INT(perm(dst, "d/f"), acl ? 0640 : 0644);
	CHECK_INT(perm(top, "dst"), 0751); /* the root's, as cp -a SRC/. DST */
	/* symlinks: their text, never what they name */
	ssize_t n = readlinkat(dst, "rel", buf, sizeof(buf) - 1);
	CHECK(n == 10 && memcmp(buf, "../outside", 10) == 0);
	n = readlinkat(dst, "abs", buf, sizeof(buf) - 1);
	CHECK(n == 11 && memcmp(buf, "/etc/passwd", 11) == 0);
	/* not copied: the FIFO (never opened), the device */
	struct stat s, s2;
	CHECK(fstatat(dst, "fifo", &s, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
	CHECK(fstatat(dst, "null", &s, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
	CHECK_INT(st.special, root ? 2 : 1);
	CHECK_INT(st.mounts, 0);
	CHECK_INT(st.changed, 0);
	/* times */
	CHECK_INT(mtime(dst, "d/f"), 1000000000);
	CHECK_INT(mtime(dst, "abs"), 1100000000);
	CHECK_INT(mtime(dst, "sparse"), 1200000000);
	CHECK_INT(mtime(dst, "d"), 1300000000);
	CHECK_INT(mtime(top, "dst"), 1400000000);
	/* the holes stay holes; the bytes are the same */
	CHECK(fstatat(dst, "sparse", &s, 0) == 0 && s.st_size == 8 << 20);
	CHECK(fstatat(src, "sparse", &s2, 0) == 0 && s.st_blocks <= s2.st_blocks + 16);
	CHECK_STREQ(get(dst, "sparse", buf, 2), "a");
	fd = openat(dst, "sparse", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && pread(fd, buf, 1, (8 << 20) - 1) == 1 && buf[0] == 'z');
	close(fd);
	CHECK(fstatat(dst, "tailhole", &s, 0) == 0 && s.st_size == 4 << 20);
	/* "hard" is a link to d/f's copy, or a copy of its own where linkat
	 * AT_EMPTY_PATH is not allowed (not root, before Linux 6.10) */
	CHECK_INT(st.files + st.links, 8);
	CHECK_INT(st.dirs, 3);
	CHECK_INT(st.symlinks, 2);
	if (root) {
		/* owners kept (an isolated fork re-owns them afterwards) */
		CHECK(fstatat(dst, "d/f", &s, 0) == 0 && s.st_uid == 1234 && s.st_gid == 5678);
		CHECK(fstatat(dst, "abs", &s, AT_SYMLINK_NOFOLLOW) == 0 && s.st_uid == 4321 &&
		      s.st_gid == 8765);
		/* a hard link stays one (linkat AT_EMPTY_PATH needs root) */
		CHECK(fstatat(dst, "hard", &s, 0) == 0 && fstatat(dst, "d/f", &s2, 0) == 0);
		CHECK(s.st_ino == s2.st_ino && s.st_nlink == 2);
		CHECK_INT(st.links, 1);
	}
	CHECK_STREQ(get(dst, "hard", buf, sizeof(buf)), "hello\n");
	if (acl) {
		fd = openat(dst, "d/f", O_RDONLY | O_CLOEXEC);
		n = fgetxattr(fd, "system.posix_acl_access", buf, sizeof(buf));
		close(fd);
		CHECK(n == (ssize_t)sizeof(acl_xattr) &&
		      memcmp(buf, acl_xattr, sizeof(acl_xattr)) == 0);
	}
	/* nothing but ACLs: no file capability, no user attribute */
	fd = openat(src, "empty", O_RDONLY | O_CLOEXEC);
	bool uattr = fsetxattr(fd, "user.x", "1", 1, 0) == 0;
	close(fd);
	if (uattr) {
		CHECK(mkdirat(top, "dst2", 0700) == 0);
		int d2 = openat(top, "dst2", O_PATH | O_DIRECTORY | O_CLOEXEC);
		CHECK_INT(untrusted_copy_tree(src, d2, NULL, &err), 0);
		fd = openat(d2, "empty", O_RDONLY | O_CLOEXEC);
		CHECK(fgetxattr(fd, "user.x", buf, sizeof(buf)) < 0 && errno == ENODATA);
		close(fd);
		close(d2);
	}
	teardown();
}

/* An error of the destination (here: a directory the daemon may not write
 * to, when it is not root) fails the copy, naming the entry. */
static void test_copy_fails(void)
{
	setup();
	put(src, "f", "x", 0644);
	CHECK(fchmodat(top, "dst", 0500, 0) == 0);
	struct sfs_err err = {0};
	if (!root) {
		CHECK_INT(untrusted_copy_tree(src, dst, NULL, &err), -EACCES);
		CHECK(strstr(err.msg, "copying f:") != NULL);
	}
	/* not a directory: refused at once */
	int f = openat(src, "f", O_PATH | O_CLOEXEC);
	CHECK_INT(untrusted_copy_tree(f, dst, NULL, &err), -ENOTDIR);
	close(f);
	teardown();
}

/* A chain of n directories "a" below at, the last open (O_PATH) or -1. */
static int chain(int at, int n)
{
	at = dup(at);
	for (int i = 0; i < n && at >= 0; i++) {
		CHECK(mkdirat(at, "a", 0755) == 0);
		int next = openat(at, "a", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(at);
		at = next;
	}
	return at;
}

/* Deeper than UNTRUSTED_DEPTH_MAX: refused with a message, not a crash or
 * the daemon's fds used up; a deep tree short of that is copied. */
static void test_copy_deep(void)
{
	setup();
	close(chain(src, UNTRUSTED_DEPTH_MAX + 1));
	struct sfs_err err = {0};
	CHECK_INT(untrusted_copy_tree(src, dst, NULL, &err), -ENAMETOOLONG);
	CHECK(strstr(err.msg, "directories deep") != NULL);
	teardown();
	setup();
	int at = chain(src, 300);
	put(at, "leaf", "deep\n", 0644);
	close(at);
	struct untrusted_copy_stats st;
	CHECK_INT(untrusted_copy_tree(src, dst, &st, &err), 0);
	CHECK_INT(st.dirs, 300);
	CHECK_INT(st.files, 1);
	teardown();
}

/* The same bound for a removal; short of it, a deep tree goes. */
static void test_remove_deep(void)
{
	setup();
	close(chain(src, UNTRUSTED_DEPTH_MAX + 1));
	CHECK_INT(untrusted_remove(src, "a"), -ENAMETOOLONG);
	close(chain(dst, 300));
	CHECK_INT(untrusted_remove(dst, "a"), 0);
	CHECK(fstatat(dst, "a", &(struct stat){0}, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
	teardown();
}

static void test_remove(void)
{
	setup();
	char buf[64];
	/* a directory outside the tree, and links to it inside */
	CHECK(mkdirat(top, "out", 0755) == 0);
	put(top, "out/keep", "keep\n", 0644);
	CHECK(mkdirat(src, "d", 0755) == 0 && mkdirat(src, "d/e", 0755) == 0);
	put(src, "d/e/f", "x", 0644);
	CHECK(symlinkat("../../out", src, "d/e/link") == 0);
	CHECK(symlinkat("../out", src, "link") == 0);
	CHECK(mkfifoat(src, "d/fifo", 0600) == 0);
	/* a read-only directory in it (root removes beneath it anyway) */
	if (root) {
		CHECK(mkdirat(src, "d/ro", 0755) == 0);
		put(src, "d/ro/f", "x", 0644);
		CHECK(fchmodat(src, "d/ro", 0555, 0) == 0);
	}
	/* a symlink on the way: refused, the directory it names untouched */
	CHECK(untrusted_remove(src, "link/keep") < 0); /* ENOTDIR: O_DIRECTORY on a link */
	CHECK_STREQ(get(top, "out/keep", buf, sizeof(buf)), "keep\n");
	/* a symlink: itself */
	CHECK_INT(untrusted_remove(src, "link"), 0);
	CHECK(fstatat(src, "link", &(struct stat){0}, AT_SYMLINK_NOFOLLOW) < 0);
	CHECK_STREQ(get(top, "out/keep", buf, sizeof(buf)), "keep\n");
	/* a tree with a link out of it: the tree goes, not what it names */
	CHECK_INT(untrusted_remove(src, "d"), 0);
	CHECK(fstatat(src, "d", &(struct stat){0}, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
	CHECK_STREQ(get(top, "out/keep", buf, sizeof(buf)), "keep\n");
	/* not there: done; nothing named: refused */
	CHECK_INT(untrusted_remove(src, "d"), 0);
	CHECK_INT(untrusted_remove(src, "nope/x"), 0);
	CHECK_INT(untrusted_remove(src, ""), -EINVAL);
	CHECK_INT(untrusted_remove(src, "."), -EINVAL);
	CHECK_INT(untrusted_remove(src, "x/.."), -EINVAL);
	CHECK_INT(untrusted_remove(src, "../out"), -EXDEV);
	CHECK_INT(untrusted_remove(src, "../out/keep"), -EXDEV);
	CHECK_STREQ(get(top, "out/keep", buf, sizeof(buf)), "keep\n");
	/* a file, one level down */
	CHECK(mkdirat(src, "g", 0755) == 0);
	put(src, "g/h", "x", 0644);
	CHECK_INT(untrusted_remove(src, "g/h"), 0);
	CHECK(fstatat(src, "g", &(struct stat){0}, AT_SYMLINK_NOFOLLOW) == 0);
	teardown();
}

CHECK_MAIN(CHECK_CASE(test_remove), CHECK_CASE(test_remove_deep), CHECK_CASE(test_copy),
	   CHECK_CASE(test_copy_fails), CHECK_CASE(test_copy_deep))
