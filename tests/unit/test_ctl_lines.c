/*
 * ctl/linebuf.c: lines held across writes, whatever pieces a write is cut
 * into; and the text escaping and redaction that ctl errors go through.
 */
#include "ctl/ctl.h"
#include "providers/redact.h"
#include "check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Feeds s (as a C string) and returns the completed lines ("" for none). */
static char got[1 << 20];
static int feed(struct ctl_linebuf *lb, const char *s, struct sfs_err *err)
{
	char *lines = NULL;
	sfs_err_clear(err);
	int r = ctl_linebuf_feed(lb, s, strlen(s), &lines, err);
	snprintf(got, sizeof(got), "%s", lines ? lines : "");
	if (r)
		CHECK(lines == NULL);
	free(lines);
	return r;
}

static void test_whole_lines_pass_through(void)
{
	struct ctl_linebuf lb = {0};
	struct sfs_err err;
	CHECK_INT(feed(&lb, "exec a\nkill 1\n", &err), 0);
	CHECK_STREQ(got, "exec a\nkill 1\n");
	CHECK(!ctl_linebuf_pending(&lb));
	CHECK(ctl_linebuf_take(&lb, NULL) == NULL);
	ctl_linebuf_free(&lb);
}

static void test_cut_line_waits_for_newline(void)
{
	struct ctl_linebuf lb = {0};
	struct sfs_err err;
	/* `exec touch /tmp/x/marker_file` cut at every possible byte */
	const char *line = "exec touch /tmp/x/marker_file\n";
	for (size_t cut = 1; cut < strlen(line); cut++) {
		char a[64];
		snprintf(a, sizeof(a), "%.*s", (int)cut, line);
		CHECK_INT(feed(&lb, a, &err), 0);
		CHECK_STREQ(got, ""); /* nothing completes, nothing runs */
		CHECK(ctl_linebuf_pending(&lb));
		CHECK_INT(feed(&lb, line + cut, &err), 0);
		CHECK_STREQ(got, line);
		CHECK(!ctl_linebuf_pending(&lb));
	}
	/* a piece that completes one line and starts the next */
	CHECK_INT(feed(&lb, "exec one\nexec tw", &err), 0);
	CHECK_STREQ(got, "exec one\n");
	CHECK_INT(feed(&lb, "o\nexec three\n", &err), 0);
	CHECK_STREQ(got, "exec two\nexec three\n");
	/* a piece with no newline at all just grows the held line */
	CHECK_INT(feed(&lb, "exec ", &err), 0);
	CHECK_INT(feed(&lb, "fo", &err), 0);
	CHECK_INT(feed(&lb, "ur", &err), 0);
	CHECK_STREQ(got, "");
	CHECK_INT(feed(&lb, "\n", &err), 0);
	CHECK_STREQ(got, "exec four\n");
	ctl_linebuf_free(&lb);
}

static void test_take_at_close(void)
{
	struct ctl_linebuf lb = {0};
	struct sfs_err err;
	CHECK_INT(feed(&lb, "exec touch x", &err), 0);
	char *dropped = (char *)"unset";
	char *line = ctl_linebuf_take(&lb, &dropped);
	CHECK_STREQ(line, "exec touch x"); /* the file's one write: echo -n */
	CHECK(dropped == NULL);
	free(line);
	CHECK(ctl_linebuf_take(&lb, NULL) == NULL); /* once */
	ctl_linebuf_free(&lb);

	/* a blank tail is nothing to run, nor an error */
	CHECK_INT(feed(&lb, "exec a\n  \t", &err), 0);
	CHECK(ctl_linebuf_take(&lb, &dropped) == NULL);
	CHECK(dropped == NULL);
	ctl_linebuf_free(&lb);

	/* a tail after a newline, or after several writes, may be a command cut
	 * by a writer that died: never run, given back as dropped */
	CHECK_INT(feed(&lb, "exec true\nexec rm -rf /a/", &err), 0);
	CHECK(ctl_linebuf_take(&lb, &dropped) == NULL);
	CHECK_STREQ(dropped, "exec rm -rf /a/");
	free(dropped);
	ctl_linebuf_free(&lb);
	CHECK_INT(feed(&lb, "exec rm -rf ", &err), 0);
	CHECK_INT(feed(&lb, "/a/", &err), 0);
	CHECK(ctl_linebuf_take(&lb, &dropped) == NULL);
	CHECK_STREQ(dropped, "exec rm -rf /a/");
	free(dropped);
	ctl_linebuf_free(&lb);
}

static void test_bound(void)
{
	struct ctl_linebuf lb = {0};
	struct sfs_err err;
	char *big = malloc(CTL_LINE_MAX + 16);
	CHECK(big != NULL);
	if (!big)
		return;
	/* exactly CTL_LINE_MAX bytes before the newline: one line */
	memset(big, 'a', CTL_LINE_MAX);
	big[CTL_LINE_MAX] = '\n';
	big[CTL_LINE_MAX + 1] = '\0';
	CHECK_INT(feed(&lb, big, &err), 0);
	CHECK_INT((long)strlen(got), CTL_LINE_MAX + 1);
	/* one more byte, in one write: refused, nothing kept */
	memset(big, 'a', CTL_LINE_MAX + 1);
	big[CTL_LINE_MAX + 1] = '\n';
	big[CTL_LINE_MAX + 2] = '\0';
	CHECK_INT(feed(&lb, "exec ok\n", &err), 0);
	CHECK_INT(feed(&lb, big, &err), -EINVAL);
	CHECK(strstr(err.msg, "longer than 65536 bytes") != NULL);
	CHECK(strstr(err.msg, "\"aaaa") != NULL);
	CHECK(strlen(err.msg) < 300);
	CHECK(!ctl_linebuf_pending(&lb));
	/* it ended with its newline: the next write is a fresh line */
	CHECK_INT(feed(&lb, "exec next\n", &err), 0);
	CHECK_STREQ(got, "exec next\n");

	/* over the bound across writes: the held beginning counts */
	big[CTL_LINE_MAX - 10] = '\0';
	CHECK_INT(feed(&lb, big, &err), 0);
	CHECK_INT(feed(&lb, "0123456789", &err), 0); /* exactly the bound, held */
	CHECK_INT(feed(&lb, "X", &err), -EINVAL);
	/* ... and the rest of that line, whatever it looks like, never runs */
	CHECK_INT(feed(&lb, "exec rm -rf /a/", &err), -EINVAL);
	CHECK(strstr(err.msg, "discarded") != NULL);
	CHECK_INT(feed(&lb, "b/c\nexec after\n", &err), -EINVAL);
	/* that write ended at a newline: in step again */
	CHECK_INT(feed(&lb, "exec fresh\n", &err), 0);
	CHECK_STREQ(got, "exec fresh\n");
	free(big);
	ctl_linebuf_free(&lb);
}

static void test_failed_lines_drop_their_tail(void)
{
	struct ctl_linebuf lb = {0};
	struct sfs_err err;
	/* the caller ran the lines and they failed: the held tail belongs to
	 * a write that failed, so it and the rest of its line go */
	CHECK_INT(feed(&lb, "bad line\nexec rm -rf /a/", &err), 0);
	CHECK_STREQ(got, "bad line\n");
	ctl_linebuf_fail(&lb);
	CHECK(!ctl_linebuf_pending(&lb));
	CHECK_INT(feed(&lb, "b/c\n", &err), -EINVAL);
	CHECK(ctl_linebuf_take(&lb, NULL) == NULL);
	/* a failed write that ended at a newline leaves nothing to skip */
	CHECK_INT(feed(&lb, "bad\n", &err), 0);
	ctl_linebuf_fail(&lb);
	CHECK_INT(feed(&lb, "exec ok\n", &err), 0);
	CHECK_STREQ(got, "exec ok\n");
	/* nothing runs at close while skipping */
	CHECK_INT(feed(&lb, "bad\nexec half", &err), 0);
	ctl_linebuf_fail(&lb);
	CHECK(ctl_linebuf_take(&lb, NULL) == NULL);
	ctl_linebuf_free(&lb);
}

static void test_nul(void)
{
	struct ctl_linebuf lb = {0};
	struct sfs_err err;
	const char buf[] = "exec a\nexec b\0c\n";
	char *lines = NULL;
	CHECK_INT(ctl_linebuf_feed(&lb, buf, sizeof(buf) - 1, &lines, &err), -EINVAL);
	CHECK(lines == NULL);
	CHECK(strstr(err.msg, "NUL byte at byte 14") != NULL);
	CHECK(!ctl_linebuf_pending(&lb));
	ctl_linebuf_free(&lb);
}

static void test_escape_text(void)
{
	char out[64];
	sfs_escape_text("plain\ttext\n", 11, out, sizeof(out));
	CHECK_STREQ(out, "plain\ttext\n");
	sfs_escape_text("na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80", 15, out, sizeof(out));
	CHECK_STREQ(out, "na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80");
	sfs_escape_text("a\xff"
			"b\x1b[0m\x7f",
			9, out, sizeof(out));
	CHECK_STREQ(out, "a\\xffb\\x1b[0m\\x7f");
	/* a lone lead byte, an overlong, a surrogate, a cut sequence */
	sfs_escape_text("\xc3(", 2, out, sizeof(out));
	CHECK_STREQ(out, "\\xc3(");
	sfs_escape_text("\xc0\xaf", 2, out, sizeof(out));
	CHECK_STREQ(out, "\\xc0\\xaf");
	sfs_escape_text("\xed\xa0\x80", 3, out, sizeof(out));
	CHECK_STREQ(out, "\\xed\\xa0\\x80");
	sfs_escape_text("\xe2\x82", 2, out, sizeof(out));
	CHECK_STREQ(out, "\\xe2\\x82");
	/* never past outsz, never half an escape */
	CHECK_INT((long)sfs_escape_text("\xff\xff\xff", 3, out, 10), 8);
	CHECK_STREQ(out, "\\xff\\xff");
}

static void test_errors_escape_names(void)
{
	struct sfs_err err = {0};
	CHECK_INT(ctl_check_sandbox_name("bad\xff\x1bname", &err), -EINVAL);
	CHECK(strstr(err.msg, "\"bad\\xff\\x1bname\"") != NULL);
	CHECK(strchr(err.msg, '\xff') == NULL && strchr(err.msg, '\x1b') == NULL);
}

static void test_redact_unterminated_quote(void)
{
	char msg[256] = "env: unterminated double quote\n  env API_TOKEN=\"hunter2\n"
			"                ^";
	sfs_redact(msg, sizeof(msg));
	CHECK(strstr(msg, "hunter2") == NULL);
	CHECK(strstr(msg, "API_TOKEN=\"[redacted]\n") != NULL);
	CHECK(strstr(msg, "\n                ^") != NULL);
}

CHECK_MAIN(CHECK_CASE(test_whole_lines_pass_through), CHECK_CASE(test_cut_line_waits_for_newline),
	   CHECK_CASE(test_take_at_close), CHECK_CASE(test_bound),
	   CHECK_CASE(test_failed_lines_drop_their_tail), CHECK_CASE(test_nul),
	   CHECK_CASE(test_escape_text), CHECK_CASE(test_errors_escape_names),
	   CHECK_CASE(test_redact_unterminated_quote))
