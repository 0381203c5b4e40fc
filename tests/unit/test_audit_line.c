/* The text of SANDBOX/audit lines (ctl/audit_line.c): fields, escaping and
 * redaction, byte for byte. */
#include "check.h"
#include "ctl/audit.h"
#include "providers/redact.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct timespec t0 = {1796076843, 123456789}; /* 2026-11-30T22:14:03.123Z */

/* The line for these fields, or "ERROR". */
static char got[8192];
static const char *line(const struct timespec *ts, uid_t uid, const char *op, const char *path,
			int err, const char *to, const char *detail)
{
	struct sfs_buf b = {0};
	int r = audit_format(&b, ts, uid, op, path, err, to, detail);
	snprintf(got, sizeof(got), "%s", r || !b.buf ? "ERROR" : b.buf);
	sfs_buf_free(&b);
	return got;
}

static void test_fields(void)
{
	CHECK_STREQ(line(&t0, 1000, "create", "workspace/src/a.c", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 1000 create workspace/src/a.c 0\n");
	CHECK_STREQ(line(&t0, 0, "ctl", "ctl", 0, NULL, "exec make"),
		    "2026-11-30T22:14:03.123Z 0 ctl ctl 0 exec make\n");
	CHECK_STREQ(line(&t0, (uid_t)-1, "run.end", "runs/3", 0, NULL, "exited 2"),
		    "2026-11-30T22:14:03.123Z - run.end runs/3 0 exited 2\n");
	/* errno names, either sign; a number when it has none */
	CHECK_STREQ(line(&t0, 7, "rmdir", "workspace/d", -ENOTEMPTY, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 7 rmdir workspace/d ENOTEMPTY\n");
	CHECK_STREQ(line(&t0, 7, "ctl", "/ctl", EINVAL, NULL, ""),
		    "2026-11-30T22:14:03.123Z 7 ctl /ctl EINVAL\n");
	CHECK_STREQ(line(&t0, 7, "x", NULL, 4000, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 7 x - 4000\n");
	CHECK_STREQ(line(&t0, 4294967294u, "x", "", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 4294967294 x - 0\n");
}

static void test_time(void)
{
	/* the text of a second is kept per thread: a new second is a new text */
	struct timespec a = {1796076843, 999999999}, b = {1796076844, 0}, c = {0, 5000000};
	CHECK_STREQ(line(&a, 1, "x", "p", 0, NULL, NULL), "2026-11-30T22:14:03.999Z 1 x p 0\n");
	CHECK_STREQ(line(&b, 1, "x", "p", 0, NULL, NULL), "2026-11-30T22:14:04.000Z 1 x p 0\n");
	CHECK_STREQ(line(&c, 1, "x", "p", 0, NULL, NULL), "1970-01-01T00:00:00.005Z 1 x p 0\n");
	CHECK_STREQ(line(&b, 1, "x", "p", 0, NULL, NULL), "2026-11-30T22:14:04.000Z 1 x p 0\n");
}

static void test_path_escaped(void)
{
	/* blanks, controls, DEL and the backslash as \xNN; UTF-8 text kept */
	CHECK_STREQ(line(&t0, 1, "create", "workspace/b c\n\\\x7f\t.txt", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 1 create "
		    "workspace/b\\x20c\\x0a\\x5c\\x7f\\x09.txt 0\n");
	CHECK_STREQ(line(&t0, 1, "create", "workspace/caf\xc3\xa9", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 1 create workspace/caf\xc3\xa9 0\n");
	/* a name that is not UTF-8: every byte >= 0x80 escaped */
	CHECK_STREQ(line(&t0, 1, "create", "workspace/\xc3\xa9\xff", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 1 create workspace/\\xc3\\xa9\\xff 0\n");
	/* a long path: all of it */
	char longp[5000];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	longp[100] = ' ';
	const char *l = line(&t0, 1, "create", longp, 0, NULL, NULL);
	CHECK_INT(strlen(l), strlen("2026-11-30T22:14:03.123Z 1 create ") + 4999 + 3 + 3);
}

static void test_rename_destination(void)
{
	CHECK_STREQ(
	    line(&t0, 1, "rename", "workspace/a.txt", 0, "workspace/d/b c.txt", NULL),
	    "2026-11-30T22:14:03.123Z 1 rename workspace/a.txt 0 -> workspace/d/b\\x20c.txt\n");
	CHECK_STREQ(line(&t0, 1, "link", "workspace/a", -EXDEV, "?", NULL),
		    "2026-11-30T22:14:03.123Z 1 link workspace/a EXDEV -> ?\n");
	/* the destination goes through the detail's redactor, as before */
	CHECK_STREQ(
	    line(&t0, 1, "rename", "workspace/a", 0, "workspace/token=abc", NULL),
	    "2026-11-30T22:14:03.123Z 1 rename workspace/a 0 -> workspace/token=" SFS_REDACTED
	    "\n");
	/* UTF-8 text is kept, bytes that are not UTF-8 escaped */
	CHECK_STREQ(line(&t0, 1, "rename", "workspace/a", 0, "workspace/caf\xc3\xa9", NULL),
		    "2026-11-30T22:14:03.123Z 1 rename workspace/a 0 -> workspace/caf\xc3\xa9\n");
	CHECK_STREQ(line(&t0, 1, "rename", "workspace/a", 0, "workspace/\xff", NULL),
		    "2026-11-30T22:14:03.123Z 1 rename workspace/a 0 -> workspace/\\xff\n");
	/* a detail is cut at 2047 bytes */
	char longp[3000];
	memset(longp, 'b', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	const char *l = line(&t0, 1, "rename", "workspace/a", 0, longp, NULL);
	CHECK_INT(strlen(l), strlen("2026-11-30T22:14:03.123Z 1 rename workspace/a 0 ") + 2047 + 1);
}

static void test_detail(void)
{
	/* one line, escaped, the whole redactor */
	CHECK_STREQ(line(&t0, 1, "ctl", "ctl", 0, NULL, "exec a\nb\x01 c"),
		    "2026-11-30T22:14:03.123Z 1 ctl ctl 0 exec a b\\x01 c\n");
	CHECK_STREQ(line(&t0, 1, "ctl", "ctl", 0, NULL, "env API_TOKEN=hunter2"),
		    "2026-11-30T22:14:03.123Z 1 ctl ctl 0 env API_TOKEN=" SFS_REDACTED "\n");
	/* a path gets the values only (a key-like name is a name) */
	CHECK_STREQ(line(&t0, 1, "create", "workspace/token=abc", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 1 create workspace/token=abc 0\n");
}

static void test_registered_values(void)
{
	CHECK_INT(sfs_redact_add_secret("s3cr3t-v4lue"), 0);
	CHECK_STREQ(line(&t0, 1, "create", "workspace/x-s3cr3t-v4lue-y", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 1 create workspace/x-" SFS_REDACTED "-y 0\n");
	CHECK_STREQ(line(&t0, 1, "rename", "workspace/a", 0, "workspace/s3cr3t-v4lue", NULL),
		    "2026-11-30T22:14:03.123Z 1 rename workspace/a 0 -> workspace/" SFS_REDACTED
		    "\n");
	CHECK_STREQ(line(&t0, 1, "ctl", "ctl", 0, NULL, "echo s3cr3t-v4lue"),
		    "2026-11-30T22:14:03.123Z 1 ctl ctl 0 echo " SFS_REDACTED "\n");
	/* a value with a blank: hidden before the blank is escaped */
	CHECK_INT(sfs_redact_add_secret("two words"), 0);
	CHECK_STREQ(line(&t0, 1, "create", "workspace/two words", 0, NULL, NULL),
		    "2026-11-30T22:14:03.123Z 1 create workspace/" SFS_REDACTED " 0\n");
}

CHECK_MAIN(CHECK_CASE(test_fields), CHECK_CASE(test_time), CHECK_CASE(test_path_escaped),
	   CHECK_CASE(test_rename_destination), CHECK_CASE(test_detail),
	   CHECK_CASE(test_registered_values))
