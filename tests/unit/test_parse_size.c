/* sfs_parse_size: sizes as a person writes them, and nothing else. */
#include "check.h"

#include "providers/util.h"

#include <errno.h>
#include <stdint.h>

static uint64_t size_of(const char *s)
{
	uint64_t v = 0;
	CHECK_INT(sfs_parse_size(s, &v), 0);
	return v;
}

static void test_units(void)
{
	CHECK(size_of("0") == 0);
	CHECK(size_of("1048576") == 1048576);
	CHECK(size_of("16M") == 16ull << 20);
	CHECK(size_of("16m") == 16ull << 20);
	CHECK(size_of("2G") == 2ull << 30);
	CHECK(size_of("2GiB") == 2ull << 30);
	CHECK(size_of("2GB") == 2ull << 30);
	CHECK(size_of("3k") == 3072);
	CHECK(size_of("1T") == 1ull << 40);
	CHECK(size_of("512B") == 512);
	/* docker's memory= forms: a fraction of the unit, a lower-case b */
	CHECK(size_of("1.5G") == 3ull << 29);
	CHECK(size_of("1.5gb") == 3ull << 29);
	CHECK(size_of("512mb") == 512ull << 20);
	CHECK(size_of("0.5k") == 512);
	CHECK(size_of("1.9") == 1);
}

static void test_refused(void)
{
	uint64_t v = 7;
	const char *bad[] = {"",       "M",  "-1",    "+1",    " 1",  "1 ",   "1.G", ".5G",
			     "1.5.5G", "1X", "1Mi B", "1MiBB", "1iB", "0x10", "lots"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(sfs_parse_size(bad[i], &v), -EINVAL);
	CHECK_INT(sfs_parse_size(NULL, &v), -EINVAL);
	/* past 64 bits, with or without a unit */
	CHECK_INT(sfs_parse_size("99999999999999999999", &v), -ERANGE);
	CHECK_INT(sfs_parse_size("99999999999T", &v), -ERANGE);
	CHECK_INT(sfs_parse_size("16777216T", &v), -ERANGE);
	CHECK(v == 7); /* untouched on a refusal */
}

CHECK_MAIN(CHECK_CASE(test_units), CHECK_CASE(test_refused))
