/* umask= of a local sandbox (providers/local/isolated.c): octal, at most
 * 0777. */
#include "check.h"

#include "providers/local/local.h"

#include <errno.h>

static void test_umask_parse(void)
{
	mode_t m = 01;
	CHECK_INT(sfs_local_umask_parse("077", &m, NULL), 0);
	CHECK_INT((int)m, 077);
	CHECK_INT(sfs_local_umask_parse("0022", &m, NULL), 0);
	CHECK_INT((int)m, 022);
	CHECK_INT(sfs_local_umask_parse("0", &m, NULL), 0);
	CHECK_INT((int)m, 0);
	CHECK_INT(sfs_local_umask_parse("0777", &m, NULL), 0);
	CHECK_INT((int)m, 0777);
	const char *bad[] = {"",     "8",    "0999", "1777", "01777", "00777",
			     "0o77", "-022", " 022", "022 ", "0x1f",  "77777"};
	m = 0123;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(sfs_local_umask_parse(bad[i], &m, NULL), -EINVAL);
	CHECK_INT((int)m, 0123);
}

CHECK_MAIN(CHECK_CASE(test_umask_parse))
