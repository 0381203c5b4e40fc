/*
 * The one check of names from a sandbox's or a provider's listing
 * (providers/untrusted/name.c) and what a listing that left some out says.
 */
#include "check.h"

#include "providers/provider.h"
#include "providers/untrusted/name.h"

#include <jansson.h>
#include <stdlib.h>

#include <limits.h>
#include <string.h>

static void test_ok(void)
{
	CHECK(sfs_name_ok_str("a"));
	CHECK(sfs_name_ok_str("..."));
	CHECK(sfs_name_ok_str(".x"));
	CHECK(sfs_name_ok_str("..x"));
	CHECK(sfs_name_ok_str("a b\tc\n"));
	CHECK(sfs_name_ok_str("\xc3\xa9t\xc3\xa9"));
	CHECK(sfs_name_ok("a", 1));
	char max[NAME_MAX + 2];
	memset(max, 'x', sizeof(max));
	max[NAME_MAX] = '\0';
	CHECK(sfs_name_ok_str(max));
	CHECK(sfs_name_ok(max, NAME_MAX));
}

static void test_bad(void)
{
	CHECK(!sfs_name_ok_str(""));
	CHECK(!sfs_name_ok_str(NULL));
	CHECK(!sfs_name_ok_str("."));
	CHECK(!sfs_name_ok_str(".."));
	CHECK(!sfs_name_ok_str("/"));
	CHECK(!sfs_name_ok_str("a/b"));
	CHECK(!sfs_name_ok_str("../../../../../../tmp/x"));
	CHECK(!sfs_name_ok_str("/etc/passwd"));
	CHECK(!sfs_name_ok_str("x/"));
	CHECK(!sfs_name_ok("a\0b", 3));
	CHECK(!sfs_name_ok("ab\0", 3));
	CHECK(!sfs_name_ok("..", 2));
	CHECK(!sfs_name_ok(".", 1));
	CHECK(!sfs_name_ok("", 0));
	CHECK(!sfs_name_ok(NULL, 3));
	char big[NAME_MAX + 2];
	memset(big, 'x', sizeof(big));
	big[NAME_MAX + 1] = '\0';
	CHECK(!sfs_name_ok_str(big));
	CHECK(!sfs_name_ok(big, NAME_MAX + 1));
}

static void test_rel_path(void)
{
	CHECK(sfs_rel_path_ok("a"));
	CHECK(sfs_rel_path_ok("a/b/c.txt"));
	CHECK(sfs_rel_path_ok(".x/..y/..."));
	CHECK(!sfs_rel_path_ok(""));
	CHECK(!sfs_rel_path_ok(NULL));
	CHECK(!sfs_rel_path_ok("/etc/passwd"));
	CHECK(!sfs_rel_path_ok("a/"));
	CHECK(!sfs_rel_path_ok("a//b"));
	CHECK(!sfs_rel_path_ok("./a"));
	CHECK(!sfs_rel_path_ok("a/./b"));
	CHECK(!sfs_rel_path_ok("a/../../b"));
	CHECK(!sfs_rel_path_ok(".."));
	char big[NAME_MAX + 8];
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\0';
	CHECK(!sfs_rel_path_ok(big));
}

static int st_file(json_t *o, struct sfs_rstat *st)
{
	(void)o;
	st->mode = 0100644;
	return 0;
}

/* A JSON listing (daytona's array, e2b's and sprites' entries) from a
 * hostile sandbox: only the names a path may be joined with remain. */
static void test_json_listing(void)
{
	char big[300];
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	json_t *arr = json_array();
	const char *names[] = {
	    "../../../../../../tmp/x", "ok", "..", ".", "a/b", "", "/etc", big, ".ok"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		json_array_append_new(arr, json_pack("{s:s}", "name", names[i]));
	/* "a\0/../x": measured by its JSON length, not cut to "a" */
	json_array_append_new(arr, json_pack("{s:s%}", "name", "a\0/../x", (size_t)7));
	json_array_append_new(arr, json_pack("{s:i}", "name", 3)); /* not a name */
	struct sfs_rdirent *v;
	size_t n;
	struct sfs_name_drops d = {0};
	CHECK_INT(sfs_rdirents_from_json(arr, st_file, &v, &n, &d), 0);
	CHECK_INT(n, 2);
	CHECK_STREQ(n > 0 ? v[0].name : NULL, "ok");
	CHECK_STREQ(n > 1 ? v[1].name : NULL, ".ok");
	CHECK_INT(d.n, 8);
	CHECK_STREQ(d.first, "../../../../../../tmp/x");
	sfs_rdirents_free(v, n);
	json_decref(arr);
}

/* Object-store keys below a prefix (S3, GCS) as names. */
static void test_store_names(void)
{
	size_t len;
	CHECK_INT(sfs_store_entry("a.txt", false, &len), 1);
	CHECK_INT(sfs_store_entry("..", false, &len), -1);
	CHECK_INT(sfs_store_entry("../", true, &len), -1);
	CHECK_INT(sfs_store_entry("/", true, &len), -1);
	char big[300];
	memset(big, 'k', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(sfs_store_entry(big, false, &len), -1);
	big[sizeof(big) - 2] = '/';
	CHECK_INT(sfs_store_entry(big, true, &len), -1);
}

static void test_drops(void)
{
	struct sfs_name_drops d = {0};
	sfs_name_drop(&d, "../x\"\\\n\0y", 9);
	sfs_name_drop(&d, "second", 6);
	CHECK_INT(d.n, 2);
	CHECK_STREQ(d.first, "../x\\x22\\x5c\\x0a\\x00y");
	struct sfs_name_drops l = {0};
	char big[4000];
	memset(big, '\x01', sizeof(big));
	sfs_name_drop(&l, big, sizeof(big));
	CHECK(strlen(l.first) < sizeof(l.first));
	CHECK(strstr(l.first, "...") != NULL);
	sfs_name_drop(NULL, "x", 1);
	sfs_name_drops_log(&d, "sbx", "one", "dir");
	sfs_name_drops_log(NULL, "sbx", "one", "dir");
}

CHECK_MAIN(CHECK_CASE(test_ok), CHECK_CASE(test_bad), CHECK_CASE(test_rel_path),
	   CHECK_CASE(test_json_listing), CHECK_CASE(test_store_names), CHECK_CASE(test_drops))
