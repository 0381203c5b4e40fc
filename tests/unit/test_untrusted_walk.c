/* providers/untrusted/remove.c: names removed from a sandbox's tree, on a
 * scratch directory with what a hostile sandbox leaves there: symlinks out
 * of the tree, read-only directories, a tree too deep to walk. */
#include "check.h"

#include "providers/untrusted/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Deeper than UNTRUSTED_DEPTH_MAX: refused, not a crash or the daemon's
 * fds used up; short of it, a deep tree goes. */
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

CHECK_MAIN(CHECK_CASE(test_remove), CHECK_CASE(test_remove_deep))
