/* The git kit's pure rules: source URL kinds, ref names and lookup order, progress text. */
#include "check.h"

#include "providers/git/git.h"

#include <errno.h>

static void test_url_kinds(void)
{
	struct sfs_err e = {0};
	CHECK_INT(sfs_git_url_classify("https://example.org/a/b.git", &e), SFS_GIT_URL_HTTPS);
	CHECK_INT(sfs_git_url_classify("HTTP://example.org/a", &e), SFS_GIT_URL_HTTP);
	CHECK_INT(sfs_git_url_classify("git://127.0.0.1:9418/r", &e), SFS_GIT_URL_GIT);
	CHECK_INT(sfs_git_url_classify("ssh://git@host:22/r.git", &e), SFS_GIT_URL_SSH);
	CHECK_INT(sfs_git_url_classify("git+ssh://host/r", &e), SFS_GIT_URL_SSH);
	CHECK_INT(sfs_git_url_classify("git@github.com:o/r.git", &e), SFS_GIT_URL_SSH);
	CHECK_INT(sfs_git_url_classify("host:r", &e), SFS_GIT_URL_SSH);
	CHECK_INT(sfs_git_url_classify("file:///srv/r", &e), SFS_GIT_URL_FILE);
	CHECK_INT(sfs_git_url_classify("/srv/r", &e), SFS_GIT_URL_PATH);
	CHECK_INT(sfs_git_url_classify("/srv/a:b", &e), SFS_GIT_URL_PATH);
	CHECK_INT(sfs_git_url_classify("https://user:pw@h/r", &e), SFS_GIT_URL_HTTPS);
	CHECK_STREQ(sfs_git_url_kind_name(SFS_GIT_URL_SSH), "ssh");
}

static void test_url_port(void)
{
	CHECK_INT(sfs_git_url_port("ssh://git@127.0.0.1:2222/srv/r.git"), 2222);
	CHECK_INT(sfs_git_url_port("ssh://127.0.0.1:40001/r"), 40001);
	CHECK_INT(sfs_git_url_port("ssh://u:pw@[::1]:2200/r"), 2200);
	CHECK_INT(sfs_git_url_port("ssh://[::1]/r"), 22);
	CHECK_INT(sfs_git_url_port("ssh://example.org/r"), 22);
	CHECK_INT(sfs_git_url_port("git@example.org:r.git"), 22);
	CHECK_INT(sfs_git_url_port("ssh://h:99999/r"), 22);
	CHECK_INT(sfs_git_url_port("ssh://h:12x/r"), 22);
}

static void test_url_bad(void)
{
	struct sfs_err e = {0};
	CHECK_INT(sfs_git_url_classify("", &e), -EINVAL);
	CHECK(strstr(e.msg, "empty") != NULL);
	CHECK_INT(sfs_git_url_classify("ftp://h/r", &e), -EINVAL);
	CHECK(strstr(e.msg, "unknown scheme \"ftp\"") != NULL);
	CHECK_INT(sfs_git_url_classify("https:///r", &e), -EINVAL);
	CHECK(strstr(e.msg, "no host") != NULL);
	CHECK_INT(sfs_git_url_classify("https://u@/r", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("https://:80/r", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("https://h", &e), -EINVAL);
	CHECK(strstr(e.msg, "no repository path") != NULL);
	CHECK_INT(sfs_git_url_classify("https://h/", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("file://relative/x", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("file://", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("relative/dir", &e), -EINVAL);
	CHECK(strstr(e.msg, "absolute") != NULL);
	CHECK_INT(sfs_git_url_classify("repo", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("/a b", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("/a\nb", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("host:", &e), -EINVAL);
	CHECK_INT(sfs_git_url_classify("u@:r", &e), -EINVAL);
}

static void test_ref_check(void)
{
	struct sfs_err e = {0};
	const char *good[] = {"main", "feature/x", "v1.0", "refs/heads/main", "deadbeef", "a-b_c"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK_INT(sfs_git_ref_check(good[i], &e), 0);
	const char *bad[] = {"",      "-x",  "/a",   "a/",     "a.",	     "@",   "a..b", "a//b",
			     "a@{1}", "a b", "a~1",  "a^",     "a:b",	     "a?",  "a*",   "a[",
			     "a\\b",  ".a",  "x/.a", "a.lock", "x/a.lock/y", "a\tb"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e.msg[0] = 0;
		CHECK_INT(sfs_git_ref_check(bad[i], &e), -EINVAL);
		CHECK(strstr(e.msg, "not a valid ref name") != NULL);
	}
}

static void test_ref_candidates(void)
{
	char names[4][256];
	bool sha;
	CHECK_INT(sfs_git_ref_candidates("main", names, 4, &sha), 2);
	CHECK_STREQ(names[0], "refs/heads/main"); /* a branch wins over a tag of that name */
	CHECK_STREQ(names[1], "refs/tags/main");
	CHECK(!sha);
	CHECK_INT(sfs_git_ref_candidates("refs/tags/v1", names, 4, &sha), 1);
	CHECK_STREQ(names[0], "refs/tags/v1");
	CHECK_INT(sfs_git_ref_candidates("beef", names, 4, &sha), 2);
	CHECK(sha); /* a branch called beef still comes first */
	CHECK_INT(sfs_git_ref_candidates("bee", names, 4, &sha), 2);
	CHECK(!sha); /* too short to be an abbreviated id */
	CHECK_INT(
	    sfs_git_ref_candidates("0123456789abcdef0123456789ABCDEF01234567", names, 4, &sha), 2);
	CHECK(sha);
	CHECK_INT(
	    sfs_git_ref_candidates("0123456789abcdef0123456789abcdef012345678", names, 4, &sha), 2);
	CHECK(!sha); /* 41 digits */
	CHECK_INT(sfs_git_ref_candidates("v1.0", names, 1, &sha), 1);
}

static void test_progress_text(void)
{
	char b[128];
	sfs_git_progress_text(b, sizeof(b), "clone", 1021, 2741, 3250585);
	CHECK_STREQ(b, "clone 37% 1021/2741 objects 3.1 MiB");
	sfs_git_progress_text(b, sizeof(b), "clone", 0, 0, 0);
	CHECK_STREQ(b, "clone 0% 0/0 objects");
	sfs_git_progress_text(b, sizeof(b), "clone", 5, 5, 900);
	CHECK_STREQ(b, "clone 100% 5/5 objects 900 B");
	sfs_git_progress_text(b, sizeof(b), "checkout", 3, 4, 0);
	CHECK_STREQ(b, "checkout 75% 3/4 files");
	sfs_git_progress_text(b, sizeof(b), "clone", 2, 1, 2048);
	CHECK_STREQ(b, "clone 100% 2/1 objects 2.0 KiB");
	sfs_git_progress_text(b, 12, "clone", 1021, 2741, 3250585);
	CHECK_STREQ(b, "clone 37% 1"); /* cut, still a string */
}

CHECK_MAIN(CHECK_CASE(test_url_kinds), CHECK_CASE(test_url_port), CHECK_CASE(test_url_bad),
	   CHECK_CASE(test_ref_check), CHECK_CASE(test_ref_candidates),
	   CHECK_CASE(test_progress_text))
