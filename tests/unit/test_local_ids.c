/* local.isolation_ids=FIRST:COUNT (providers/local/ids.c): what the range
 * may hold. */
#include "check.h"

#include <errno.h>

#include "providers/local/local.h"

static int parse(const char *text, unsigned long long *first, unsigned long long *count)
{
	return sfs_local_ids_parse(text, first, count, NULL);
}

static void test_good_ranges(void)
{
	unsigned long long f = 0, c = 0;
	CHECK_INT(parse("2147000000:65536", &f, &c), 0);
	CHECK(f == 2147000000ULL && c == 65536);
	CHECK_INT(parse("100000:65536", &f, &c), 0);
	CHECK(f == 100000 && c == 65536);
	/* up to the last uid before (uid_t)-1 */
	CHECK_INT(parse("4294967290:5", &f, &c), 0);
	/* just below nobody */
	CHECK_INT(parse("1000:64534", &f, &c), 0);
}

static void test_bad_ranges(void)
{
	unsigned long long f = 7, c = 7;
	const char *bad[] = {"",
			     ":",
			     "0:10",
			     "10:0",
			     "60000:10000",
			     "65534:1",
			     "4294967290:6",
			     "4294967295:1",
			     "x:1",
			     "5:",
			     ":5",
			     "5:5x",
			     "-5:10",
			     "5:-1",
			     "1 :2",
			     "99999999999999999999:1",
			     "1:99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &f, &c) != -EINVAL)
			fprintf(stderr, "    accepted: \"%s\"\n", bad[i]);
		CHECK_INT(parse(bad[i], &f, &c), -EINVAL);
	}
	/* nothing written on failure */
	CHECK(f == 7 && c == 7);
}

CHECK_MAIN(CHECK_CASE(test_good_ranges), CHECK_CASE(test_bad_ranges))
