/* The redactor's shortcut for text with no secret-looking word in it
 * (providers/redact.c): the same words found as strcasestr finds them. */
#include "check.h"
#include "providers/redact.h"

#include <stdlib.h>
#include <string.h>

static void test_key_words(void)
{
	/* what strcasestr of each word finds, in any case, anywhere */
	const char *yes[] = {"token",	 "TOKEN",	 "a_Token_b",	  "SECRET", "monkey",
			     "Password", "xcredentialx", "AUTHORIZATION", "k.key",  "sKeY"};
	const char *no[] = {"",
			    "tok",
			    "secre",
			    "ke",
			    "passwor",
			    "credentia",
			    "authorizatio",
			    "workspace/tree/.document.txt",
			    "\xd4\xcf\xcb\xc5\xce"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		CHECK(sfs_redact_key_is_secret(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		CHECK(!sfs_redact_key_is_secret(no[i]));
	/* text with no such word is the values pass alone; with one, keys too */
	char *r = sfs_redact_dup("path/plain file");
	CHECK_STREQ(r, "path/plain file");
	free(r);
	r = sfs_redact_dup("a Token=1 b");
	CHECK_STREQ(r, "a Token=" SFS_REDACTED " b");
	free(r);
}

CHECK_MAIN(CHECK_CASE(test_key_words))
