/* providers/untrusted/tree.c: the door to a sandbox's tree, on a scratch
 * directory with the shapes a hostile sandbox leaves: symlinks on the way
 * and at the end, a FIFO, a file shorter than its stat said. */
#include "check.h"

#include "providers/untrusted/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static int rootfd = -1;

static void put(const char *rel, const char *data, mode_t mode)
{
	int fd = openat(rootfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, data, strlen(data)) == (ssize_t)strlen(data));
	CHECK(fchmod(fd, mode) == 0);
	close(fd);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sfs-untrusted-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(rootfd >= 0);
	CHECK(mkdirat(rootfd, "d", 0755) == 0);
	put("d/f", "hello\n", 0644);
	put("outside", "target\n", 0750);
	CHECK(symlinkat("d", rootfd, "dlink") == 0);
	CHECK(symlinkat("../outside", rootfd, "d/flink") == 0);
	CHECK(mkfifoat(rootfd, "fifo", 0600) == 0);
}

static void test_open(void)
{
	struct stat st;
	int fd = untrusted_open_file(rootfd, "d/f", &st);
	CHECK(fd >= 0);
	CHECK(S_ISREG(st.st_mode) && st.st_size == 6);
	if (fd >= 0)
		close(fd);
	/* a symlink on the way, at the end, an absolute path, a way out */
	CHECK_INT(untrusted_open(rootfd, "dlink/f", O_RDONLY), -ELOOP);
	CHECK_INT(untrusted_open_file(rootfd, "d/flink", &st), -EAGAIN);
	CHECK_INT(untrusted_open(rootfd, "/etc/passwd", O_RDONLY), -EXDEV);
	CHECK_INT(untrusted_open(rootfd, "../etc/passwd", O_RDONLY), -EXDEV);
	CHECK(untrusted_open_dir(rootfd, "dlink") < 0); /* ENOTDIR: O_DIRECTORY, a link */
	CHECK_INT(untrusted_open_dir(rootfd, "d/f"), -ENOTDIR);
	/* a FIFO no one writes: refused at once, not waited on */
	CHECK_INT(untrusted_open_file(rootfd, "fifo", &st), -EAGAIN);
	/* the link itself, with O_PATH */
	CHECK(untrusted_lstat(rootfd, "d/flink", &st) == 0 && S_ISLNK(st.st_mode));
	CHECK_INT(untrusted_lstat(rootfd, "dlink/f", &st), -ELOOP);
	fd = untrusted_open_dir(rootfd, "");
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

static int count(void *ctx, const void *data, size_t len)
{
	(void)data;
	*(size_t *)ctx += len;
	return 0;
}

static void test_read(void)
{
	struct stat st;
	int fd = untrusted_open_file(rootfd, "d/f", &st);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	unsigned char raw[20];
	CHECK_INT(untrusted_blob_sha1(fd, (uint64_t)st.st_size, raw), 0);
	git_oid have, want;
	git_oid_fromraw(&have, raw);
	CHECK(git_odb_hash(&want, "hello\n", 6, GIT_OBJECT_BLOB) == 0);
	CHECK(git_oid_equal(&have, &want));
	/* shorter than the size asked for: truncated meanwhile */
	size_t n = 0;
	CHECK_INT(untrusted_read_each(fd, 100, count, &n), -EAGAIN);
	CHECK_INT(untrusted_blob_sha1(fd, 100, raw), -EAGAIN);
	/* bytes past the size are not read */
	n = 0;
	CHECK_INT(untrusted_read_each(fd, 3, count, &n), 0);
	CHECK_INT((int)n, 3);
	close(fd);
}

static void test_modes(void)
{
	struct stat st;
	/* through a link: refused, the target keeps its mode */
	CHECK_INT(untrusted_chmod(rootfd, "d/flink", 0, 04755), -EAGAIN);
	CHECK_INT(untrusted_chmod(rootfd, "dlink/f", 0, 04755), -ELOOP);
	CHECK(fstatat(rootfd, "outside", &st, 0) == 0 && (st.st_mode & 07777) == 0750);
	/* the type asked for */
	CHECK_INT(untrusted_chmod(rootfd, "d", S_IFREG, 0700), -EAGAIN);
	/* set-user-ID and set-group-ID never written; sticky kept */
	CHECK_INT(untrusted_chmod(rootfd, "d/f", S_IFREG, 06755), 0);
	CHECK(fstatat(rootfd, "d/f", &st, 0) == 0 && (st.st_mode & 07777) == 0755);
	CHECK_INT(untrusted_chmod(rootfd, "d", S_IFDIR, 03775), 0);
	CHECK(fstatat(rootfd, "d", &st, 0) == 0 && (st.st_mode & 07777) == 01775);
	int fd = untrusted_open(rootfd, "d/flink", O_PATH);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_INT(untrusted_fchmod(fd, 0755), -ELOOP);
		close(fd);
	}
	/* clearing what is there already */
	CHECK(fchmodat(rootfd, "d/f", 04755, 0) == 0);
	CHECK(mkdirat(rootfd, "d/sg", 02775) == 0 && fchmodat(rootfd, "d/sg", 02775, 0) == 0);
	CHECK_INT(untrusted_strip_setid(rootfd), 0);
	CHECK(fstatat(rootfd, "d/f", &st, 0) == 0 && (st.st_mode & 07777) == 0755);
	CHECK(fstatat(rootfd, "d/sg", &st, 0) == 0 && (st.st_mode & 07777) == 0775);
	CHECK(fstatat(rootfd, "outside", &st, 0) == 0 && (st.st_mode & 07777) == 0750);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
	close(rootfd);
}

static void test_all(void)
{
	git_libgit2_init();
	setup();
	test_open();
	test_read();
	test_modes();
	teardown();
	git_libgit2_shutdown();
}

CHECK_MAIN(CHECK_CASE(test_all))
