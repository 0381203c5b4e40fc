/* sfs_pathf: a path that does not fit is refused, never cut. */
#include "check.h"

#include "providers/util.h"

#include <errno.h>
#include <string.h>

static void test_fits(void)
{
	char buf[8];
	CHECK_INT(sfs_pathf(buf, sizeof(buf), "%s/%s", "ab", "cd"), 0);
	CHECK_STREQ(buf, "ab/cd");
	/* exactly size - 1 bytes: fits */
	CHECK_INT(sfs_pathf(buf, sizeof(buf), "%s", "1234567"), 0);
	CHECK_STREQ(buf, "1234567");
	CHECK_INT(sfs_pathf(buf, sizeof(buf), "%s", ""), 0);
	CHECK_STREQ(buf, "");
}

static void test_too_long_is_refused(void)
{
	char buf[8];
	/* one byte over: refused, and nothing of it is left to be used */
	CHECK_INT(sfs_pathf(buf, sizeof(buf), "%s", "12345678"), -ENAMETOOLONG);
	CHECK_STREQ(buf, "");
	/* "/state/x" cut to "/state/" would name the parent */
	CHECK_INT(sfs_pathf(buf, sizeof(buf), "%s/%s", "/state", "x"), -ENAMETOOLONG);
	CHECK_STREQ(buf, "");
	char big[5000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	char path[4096];
	CHECK_INT(sfs_pathf(path, sizeof(path), "/%s/pid", big), -ENAMETOOLONG);
	CHECK_STREQ(path, "");
	CHECK_INT(sfs_pathf(buf, 0, "%s", ""), -ENAMETOOLONG);
}

/* What a refused path leaves ("") names no file to the helpers that act. */
static void test_empty_names_no_file(void)
{
	CHECK_INT(sfs_mkdir_p("", 0755), -ENOENT);
	CHECK_INT(sfs_rm_rf(""), 0);
}

CHECK_MAIN(CHECK_CASE(test_fits), CHECK_CASE(test_too_long_is_refused),
	   CHECK_CASE(test_empty_names_no_file))
