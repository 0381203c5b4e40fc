/* Messages, log lines and quoted ctl lines are redacted before they are
 * escaped or cut (providers/err.c sfs_escape_redacted): a secret holding a
 * byte the escape rewrites, or cut by a message's bound, must not show. */
#include "check.h"
#include "providers/err.h"
#include "providers/redact.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a binary key file read with file: (control and non-UTF-8 bytes) */
static const char binary[] = "k3y\x01\x1b\xff\xfe-binary-part";
static const char spaced[] = "correct horse battery staple";

static void test_errf_escaped_secret(void)
{
	struct sfs_err err = {0};
	sfs_errf(&err, -EINVAL, "the API said: bad value %s", binary);
	CHECK(strstr(err.msg, "binary-part") == NULL);
	CHECK(strstr(err.msg, "k3y") == NULL);
	CHECK(strstr(err.msg, SFS_REDACTED) != NULL);
}

static void test_errf_cut_secret(void)
{
	/* the secret straddles the message's bound */
	char pad[SFS_ERR_MAX];
	memset(pad, 'x', sizeof(pad));
	pad[SFS_ERR_MAX - 8] = '\0';
	struct sfs_err err = {0};
	sfs_errf(&err, -EINVAL, "%s%s", pad, spaced);
	CHECK(strstr(err.msg, "corr") == NULL);
	CHECK(strlen(err.msg) < SFS_ERR_MAX);
}

static void test_escape_redacted_quote(void)
{
	char line[128], out[200];
	snprintf(line, sizeof(line), "bogus-verb aaaaaaaaaaaaaaaaaaaaaaaaaa %s", spaced);
	bool cut = false;
	/* 40 bytes of the raw line end inside the secret */
	sfs_escape_redacted(line, strlen(line), 40, out, sizeof(out), &cut);
	CHECK(cut);
	CHECK(strstr(out, "corr") == NULL);
	CHECK(strncmp(out, "bogus-verb", 10) == 0);
	sfs_escape_redacted(binary, strlen(binary), 100, out, sizeof(out), &cut);
	CHECK(!cut);
	CHECK_STREQ(out, SFS_REDACTED);
}

static void test_log_escaped_secret(void)
{
	char path[] = "/tmp/sfs-redact-escape-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	int saved = dup(2);
	dup2(fd, 2);
	sfs_log(SFS_LOG_ERR, "provider error: %s", binary);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char got[4096] = "";
	ssize_t n = pread(fd, got, sizeof(got) - 1, 0);
	CHECK(n > 0);
	close(fd);
	unlink(path);
	CHECK(strstr(got, "provider error: " SFS_REDACTED) != NULL);
	CHECK(strstr(got, "binary-part") == NULL);
}

static void test_escape_line(void)
{
	char out[200];
	/* a planted value's newline never starts a line; a backslash is escaped
	 * too, so "\\x0a" in the output always means the byte */
	CHECK_STREQ(sfs_escape_line("img\nstate running", 48, out, sizeof(out)),
		    "img\\x0astate running");
	CHECK_STREQ(sfs_escape_line("a\\x0a\tb", 48, out, sizeof(out)), "a\\x5cx0a\\x09b");
	CHECK_STREQ(sfs_escape_line("abcdef", 3, out, sizeof(out)), "abc...");
	CHECK_STREQ(sfs_escape_line("abc", 3, out, sizeof(out)), "abc");
	/* out's bound: cut, terminated */
	char small[6];
	sfs_escape_line("\n\n\n", 48, small, sizeof(small));
	CHECK_STREQ(small, "\\x0a");
	/* redacted before the cut: a secret cut short still does not show */
	char v[100];
	snprintf(v, sizeof(v), "x %s", spaced);
	sfs_escape_line(v, 8, out, sizeof(out));
	CHECK(strstr(out, "corr") == NULL);
}

static void setup(void)
{
	CHECK_INT(sfs_redact_add_secret(binary), 0);
	CHECK_INT(sfs_redact_add_secret(spaced), 0);
}

CHECK_MAIN(CHECK_CASE(setup), CHECK_CASE(test_errf_escaped_secret),
	   CHECK_CASE(test_errf_cut_secret), CHECK_CASE(test_escape_redacted_quote),
	   CHECK_CASE(test_log_escaped_secret), CHECK_CASE(test_escape_line))
