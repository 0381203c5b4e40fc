/* SPEC §5: what readlink shows for a sandbox whose filesystem is not the host's. */
#include "fs/symlink_rewrite.h"
#include "check.h"

#include <errno.h>

#define OUT SFS_SYMLINK_OUTSIDE_PREFIX

static const char *rw(const char *target, const char *root, int depth)
{
	static char buf[4096];
	int n = sfs_symlink_rewrite(target, root, depth, buf, sizeof(buf));

	return n < 0 ? "(error)" : buf;
}

static void test_relative_inside_is_verbatim(void)
{
	CHECK_STREQ(rw("b", "/workspace", 0), "b");
	CHECK_STREQ(rw("sub/dir/./file", "/workspace", 0), "sub/dir/./file");
	CHECK_STREQ(rw("../x", "/workspace", 1), "../x");
	CHECK_STREQ(rw("../../a/b", "/workspace", 2), "../../a/b");
	CHECK_STREQ(rw("a..b", "/workspace", 0), "a..b");
}

static void test_absolute_inside_becomes_relative(void)
{
	CHECK_STREQ(rw("/workspace/a/b", "/workspace", 0), "a/b");
	CHECK_STREQ(rw("/workspace/a/b", "/workspace", 2), "../../a/b");
	CHECK_STREQ(rw("/workspace", "/workspace", 0), ".");
	CHECK_STREQ(rw("/workspace/", "/workspace", 3), "../../..");
	CHECK_STREQ(rw("//workspace//./c", "/workspace/", 1), "../c");
	CHECK_STREQ(rw("/home/u/proj/src/x.c", "/home/u/proj", 1), "../src/x.c");
	CHECK_STREQ(rw("/workspace/../workspace/a", "/workspace", 0), "a");
}

static void test_outside_reaches_nothing(void)
{
	CHECK_STREQ(rw("/etc/passwd", "/workspace", 0), OUT "/etc/passwd");
	CHECK_STREQ(rw("/workspacex/y", "/workspace", 0), OUT "/workspacex/y");
	CHECK_STREQ(rw("/", "/workspace", 0), OUT "/");
	CHECK_STREQ(rw("/workspace/../etc/shadow", "/workspace", 1),
		    OUT "/workspace/../etc/shadow");
	CHECK_STREQ(rw("../etc/passwd", "/workspace", 0), OUT "/workspace/../etc/passwd");
	CHECK_STREQ(rw("../../../../x", "/workspace", 1), OUT "/x");
	CHECK_STREQ(rw("a/../../b", "/workspace", 0), OUT "/workspace/a/../../b");
}

/* Issue 10 item 12: a ".." target that leaves the workspace keeps its
 * original text, after the directory it is relative to (names unknown below
 * the root show as `*`), so a tool that resolves ".." lexically still ends
 * below PREFIX; one that climbs above the sandbox's "/" shows where it lands. */
static void test_dotdot_outside_keeps_the_original(void)
{
	CHECK_STREQ(rw("../../etc/x", "/workspace", 1), OUT "/workspace/*/../../etc/x");
	CHECK_STREQ(rw("../../../etc/x", "/home/u/proj", 2), OUT "/home/u/proj/*/*/../../../etc/x");
	CHECK_STREQ(rw("../../../../x", "/workspace", 1), OUT "/x");
	CHECK_STREQ(rw("..", "/workspace", 0), OUT "/workspace/..");
	CHECK_STREQ(rw("/../../etc/x", "/workspace", 0), OUT "/etc/x");
	CHECK_STREQ(rw("/etc//./passwd", "/workspace", 0), OUT "/etc//./passwd");
	CHECK_STREQ(rw("../../../a", NULL, -1), OUT "/*/*/*/../../../a");
}

static void test_climbing_out_and_back_is_normalised(void)
{
	/* Out of the root and back in: the host must not climb out, so the
	 * shown path has no ".." after a name. */
	CHECK_STREQ(rw("../workspace/x", "/workspace", 0), "x");
	CHECK_STREQ(rw("../../workspace/d/x", "/workspace", 1), "../d/x");
	CHECK_STREQ(rw("sub/../x", "/workspace", 0), "x");
	CHECK_STREQ(rw("sub/..", "/workspace", 2), ".");
	CHECK_STREQ(rw("../a/../b", "/workspace", 1), "../b");
}

static void test_unknown_root_or_depth(void)
{
	CHECK_STREQ(rw("/workspace/a", NULL, 0), OUT "/workspace/a");
	CHECK_STREQ(rw("/workspace/a", "/workspace", -1), OUT "/workspace/a");
	CHECK_STREQ(rw("a/b", "/workspace", -1), "a/b");
	CHECK_STREQ(rw("../a", "/workspace", -1), OUT "/*/../a");
	CHECK_STREQ(rw("a/../b", "", -1), OUT "/*/a/../b");
	CHECK_STREQ(rw("../a", NULL, 1), "../a");
	CHECK_STREQ(rw("../../a", NULL, 1), OUT "/*/*/../../a");
	CHECK_STREQ(rw("/", "/", 0), ".");
	CHECK_STREQ(rw("/etc", "/", 2), "../../etc");
}

static void test_too_long(void)
{
	char small[8];

	CHECK_INT(sfs_symlink_rewrite("/etc/passwd", "/workspace", 0, small, sizeof(small)),
		  -ENAMETOOLONG);
	CHECK_INT(sfs_symlink_rewrite("abcdefg", "/workspace", 0, small, sizeof(small)), 7);
	CHECK_INT(sfs_symlink_rewrite("abcdefgh", "/workspace", 0, small, sizeof(small)),
		  -ENAMETOOLONG);
	CHECK_INT(sfs_symlink_rewrite("x", "/w", 0, small, 0), -ENAMETOOLONG);
}

CHECK_MAIN(CHECK_CASE(test_relative_inside_is_verbatim),
	   CHECK_CASE(test_absolute_inside_becomes_relative),
	   CHECK_CASE(test_outside_reaches_nothing),
	   CHECK_CASE(test_dotdot_outside_keeps_the_original),
	   CHECK_CASE(test_climbing_out_and_back_is_normalised),
	   CHECK_CASE(test_unknown_root_or_depth), CHECK_CASE(test_too_long))
