/* sfs_image_ref_ok: the image references new takes (docker's image=, gcp's,
 * and a gcp resume's marker): never a space, a newline, a quote or an option. */
#include "check.h"

#include "providers/util.h"

#include <string.h>

static void test_references(void)
{
	CHECK(sfs_image_ref_ok("busybox"));
	CHECK(sfs_image_ref_ok("sandboxfs-test:latest"));
	CHECK(sfs_image_ref_ok("us-docker.pkg.dev/cloudrun/container/job:latest"));
	CHECK(sfs_image_ref_ok("gcr.io/p/i@sha256:0123abcd"));
	CHECK(sfs_image_ref_ok("none"));
}

static void test_refused(void)
{
	CHECK(!sfs_image_ref_ok(""));
	CHECK(!sfs_image_ref_ok("-v"));		  /* an option to a command */
	CHECK(!sfs_image_ref_ok("img\nstate x")); /* a line of its own */
	CHECK(!sfs_image_ref_ok("a b"));
	CHECK(!sfs_image_ref_ok("a\"b"));
	CHECK(!sfs_image_ref_ok("a%2fb"));
	char big[300];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	CHECK(!sfs_image_ref_ok(big));
	big[255] = 0; /* 255 bytes: the most there is room for */
	CHECK(sfs_image_ref_ok(big));
}

CHECK_MAIN(CHECK_CASE(test_references), CHECK_CASE(test_refused))
