/*
 * The gcp provider's pure parts: objects.list pages (items with their
 * mode/mtime metadata, symlink targets, prefixes, the next page's token, sizes past 32 bits,
 * malformed answers refused), proto3/GCS int64 strings and RFC 3339 times.
 */
#include "check.h"

#include "providers/gcp/gcp.h"
#include "providers/provider.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static json_t *parse(const char *text)
{
	json_t *o = json_loads(text, 0, NULL);
	CHECK(o != NULL);
	return o;
}

static void test_list_page(void)
{
	json_t *o = parse(
	    "{\"kind\":\"storage#objects\",\"prefixes\":[\"ws/a/d/\"],"
	    "\"items\":[{\"name\":\"ws/a/"
	    "\",\"size\":\"0\",\"updated\":\"2026-12-01T01:02:03.456Z\"},"
	    "{\"name\":\"ws/a/f\",\"size\":\"5000000000\",\"updated\":\"2026-12-01T01:02:03Z\","
	    "\"metadata\":{\"goog-reserved-posix-mode\":\"750\",\"goog-reserved-file-mtime\":"
	    "\"1700000000\"}},"
	    "{\"name\":\"ws/a/"
	    "bad\",\"size\":\"7\",\"metadata\":{\"goog-reserved-posix-mode\":\"9z\","
	    "\"goog-reserved-file-mtime\":\"-3\"}}],"
	    "\"nextPageToken\":\"tok/1\"}");
	struct gcs_list l = {0};
	char *next = NULL;
	CHECK_INT(gcs_parse_list(o, &l, &next), 0);
	CHECK_INT((int)l.nobjs, 3);
	CHECK_INT((int)l.nprefixes, 1);
	CHECK_STREQ(l.prefixes[0], "ws/a/d/");
	CHECK_STREQ(l.objs[1].name, "ws/a/f");
	CHECK(l.objs[1].size == 5000000000LL);
	CHECK_INT((int)l.objs[1].mode, 0750);
	CHECK(l.objs[1].mtime == 1700000000);
	/* no metadata: no mode, "updated" as the time */
	CHECK_INT((int)l.objs[0].mode, 0);
	CHECK(l.objs[0].mtime == gcp_time("2026-12-01T01:02:03Z"));
	/* unreadable metadata is ignored, not trusted */
	CHECK_INT((int)l.objs[2].mode, 0);
	CHECK(l.objs[2].mtime == 0);
	CHECK_STREQ(next, "tok/1");
	free(next);
	CHECK(l.objs[1].link == NULL);
	/* a symlink: gcsfuse's metadata key holds the target */
	json_t *o3 = parse("{\"items\":[{\"name\":\"ws/a/l\",\"size\":\"0\",\"metadata\":"
			   "{\"gcsfuse_symlink_target\":\"sub/t\"}}]}");
	CHECK_INT(gcs_parse_list(o3, &l, &next), 0);
	CHECK_STREQ(l.objs[3].link, "sub/t");
	json_decref(o3);
	/* a second page appends */
	json_t *o2 = parse("{\"items\":[{\"name\":\"ws/a/g\",\"size\":3}]}");
	CHECK_INT(gcs_parse_list(o2, &l, &next), 0);
	CHECK_INT((int)l.nobjs, 5);
	CHECK(l.objs[4].size == 3);
	CHECK(next == NULL);
	gcs_list_free(&l);
	json_decref(o);
	json_decref(o2);
}

static void test_list_malformed(void)
{
	const char *bad[] = {
	    "{\"items\":{}}",
	    "{\"prefixes\":\"x\"}",
	    "{\"items\":[{\"size\":\"1\"}]}",
	    "{\"prefixes\":[3]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		json_t *o = parse(bad[i]);
		struct gcs_list l = {0};
		char *next = NULL;
		CHECK_INT(gcs_parse_list(o, &l, &next), -EPROTO);
		gcs_list_free(&l);
		free(next);
		json_decref(o);
	}
	/* an empty directory is an empty answer */
	json_t *o = parse("{\"kind\":\"storage#objects\"}");
	struct gcs_list l = {0};
	char *next = NULL;
	CHECK_INT(gcs_parse_list(o, &l, &next), 0);
	CHECK_INT((int)(l.nobjs + l.nprefixes), 0);
	json_decref(o);
}

static void test_int64_and_time(void)
{
	json_t *s = json_string("9007199254740993"), *n = json_integer(42), *x = json_string("4x");
	CHECK(gcp_int64(s) == 9007199254740993LL);
	CHECK(gcp_int64(n) == 42);
	CHECK(gcp_int64(x) == -1);
	CHECK(gcp_int64(NULL) == -1);
	json_decref(s);
	json_decref(n);
	json_decref(x);
	CHECK(gcp_time("1970-01-01T00:00:10Z") == 10);
	CHECK(gcp_time("2023-11-14T22:13:20.123456789Z") == 1700000000);
	CHECK(gcp_time("yesterday") == 0);
	CHECK(gcp_time(NULL) == 0);
}

/* What a listing of prefix P shows for P+rest (GCS and S3 alike): names,
 * nothing, or a name that is no file name, left out (providers/provider.c) */
static void test_store_entry_names(void)
{
	size_t len = 99;
	CHECK_INT(sfs_store_entry("a.txt", false, &len), 1);
	CHECK_INT(len, 5);
	CHECK_INT(sfs_store_entry("...", false, &len), 1);
	CHECK_INT(sfs_store_entry(".x", false, &len), 1);
	CHECK_INT(sfs_store_entry("sub/", true, &len), 1);
	CHECK_INT(len, 3);
	CHECK_INT(sfs_store_entry("..a/", true, &len), 1);
	CHECK_INT(sfs_store_entry("", false, &len), 0);	    /* the directory's marker */
	CHECK_INT(sfs_store_entry("sub/", false, &len), 0); /* a sub-directory's */
	CHECK_INT(sfs_store_entry("a/b/", true, &len), 0);  /* not one level down */
	CHECK_INT(sfs_store_entry("sub", true, &len), 0);
	CHECK_INT(sfs_store_entry(".", false, &len), -1);
	CHECK_INT(sfs_store_entry("..", false, &len), -1);
	CHECK_INT(sfs_store_entry("./", true, &len), -1);
	CHECK_INT(sfs_store_entry("../", true, &len), -1);
	CHECK_INT(sfs_store_entry("/", true, &len), -1); /* a key holding "//" */
}

CHECK_MAIN(CHECK_CASE(test_list_page), CHECK_CASE(test_list_malformed),
	   CHECK_CASE(test_int64_and_time), CHECK_CASE(test_store_entry_names))
