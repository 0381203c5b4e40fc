/* e2b's EntryInfo (proto3 JSON) to attributes: int64 sizes as strings,
 * file types as enum names, RFC 3339 times with offsets. */
#include "check.h"

#include "providers/e2b/e2b.h"

#include <stdlib.h>
#include <sys/stat.h>

static void entry(const char *text, struct sfs_rstat *st)
{
	json_t *o = json_loads(text, 0, NULL);
	CHECK(o != NULL);
	CHECK_INT(e2b_entry_from_json(o, st), 0);
	json_decref(o);
}

static void test_file_size_as_string(void)
{
	struct sfs_rstat st;
	entry("{\"name\":\"big\",\"type\":\"FILE_TYPE_FILE\",\"size\":\"5000000000\",\"mode\":420,"
	      "\"permissions\":\"-rw-r--r--\",\"modifiedTime\":\"2026-11-30T10:20:30.5Z\"}",
	      &st);
	CHECK_INT(st.mode, S_IFREG | 0644);
	CHECK_INT(st.size, 5000000000LL);
	CHECK_INT(st.mtime, 1796034030LL);
	CHECK(st.link == NULL);
}

static void test_dir_symlink_and_offsets(void)
{
	struct sfs_rstat st;
	entry("{\"type\":\"FILE_TYPE_DIRECTORY\",\"size\":\"4096\",\"mode\":493,"
	      "\"modifiedTime\":\"2026-11-30T11:20:30+01:00\"}",
	      &st);
	CHECK_INT(st.mode, S_IFDIR | 0755);
	CHECK_INT(st.mtime, 1796034030LL);
	entry("{\"type\":\"FILE_TYPE_SYMLINK\",\"size\":\"3\",\"mode\":511,\"symlinkTarget\":\"a/"
	      "b\"}",
	      &st);
	CHECK_INT(st.mode, S_IFLNK | 0777);
	CHECK_STREQ(st.link, "a/b");
	free(st.link);
	/* a target on something that is not a symlink is not one */
	entry("{\"type\":\"FILE_TYPE_FILE\",\"symlinkTarget\":\"x\"}", &st);
	CHECK(st.link == NULL);
	/* a FIFO is only told by its permissions string; a negative size is 0 */
	entry("{\"permissions\":\"prw-------\",\"mode\":384,\"size\":\"-5\"}", &st);
	CHECK_INT(st.mode, S_IFIFO | 0600);
	CHECK_INT(st.size, 0);
}

CHECK_MAIN(CHECK_CASE(test_file_size_as_string), CHECK_CASE(test_dir_symlink_and_offsets))
