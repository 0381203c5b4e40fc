/* cf_exec_dec: the bridge's exec event stream (base64 stdout/stderr chunks,
 * then exit or error), fed in pieces split anywhere, even mid-line and
 * mid-"\r\n". */
#include "check.h"

#include "providers/cloudflare/cloudflare.h"

#include <errno.h>
#include <string.h>

struct got {
	char out[256], err[256];
	size_t nout, nerr;
	int chunks;
};

static int on_data(int stream, const void *data, size_t len, void *arg)
{
	struct got *g = arg;
	char *dst = stream == 1 ? g->out : g->err;
	size_t *n = stream == 1 ? &g->nout : &g->nerr;
	if (*n + len >= sizeof(g->out))
		return -ENOSPC;
	memcpy(dst + *n, data, len);
	*n += len;
	g->chunks++;
	return 0;
}

/* Feeds in with every piece size 1..9; checks each run ends the same. */
static void feed_split(const char *in, int want_r, int want_exit, const char *want_out,
		       size_t want_nout, const char *want_err, const char *want_failure)
{
	size_t len = strlen(in);
	for (size_t step = 1; step < 10; step++) {
		struct got g = {0};
		struct cf_exec_dec d;
		cf_exec_dec_init(&d, on_data, &g);
		int r = 0;
		for (size_t i = 0; i < len && !r; i += step)
			r = cf_exec_dec_feed(&d, in + i, len - i < step ? len - i : step);
		CHECK_INT(r, want_r);
		CHECK_INT(d.exit, want_exit);
		CHECK_INT((int)g.nout, (int)want_nout);
		CHECK(memcmp(g.out, want_out, want_nout) == 0);
		g.err[g.nerr] = '\0';
		CHECK_STREQ(g.err, want_err);
		CHECK_STREQ(d.failure, want_failure);
		cf_exec_dec_free(&d);
	}
}

static void test_output_and_exit(void)
{
	/* "hello " + "world\n" on stdout, "oops" on stderr, a binary chunk
	 * (00 ff 0a), a keep-alive comment and an unknown event, CRLF lines */
	feed_split(": keep-alive\n"
		   "event: stdout\ndata: aGVsbG8g\n\n"
		   "event: stderr\r\ndata: b29wcw==\r\n\r\n"
		   "event: stdout\ndata: d29ybGQK\n\n"
		   "event: progress\ndata: {}\n\n"
		   "event: stdout\ndata: AP8K\n\n"
		   "event: exit\ndata: {\"exit_code\": 3}\n\n",
		   0, 3, "hello world\n\0\xff\n", 15, "oops", "");
}

static void test_error_event(void)
{
	feed_split("event: stdout\ndata: eA==\n\n"
		   "event: error\ndata: {\"error\":\"container "
		   "gone\",\"code\":\"exec_transport_error\"}\n\n",
		   0, -1, "x", 1, "", "container gone (exec_transport_error)");
}

static void test_bad_streams(void)
{
	/* not base64 */
	feed_split("event: stdout\ndata: !!!!\n\n", -EPROTO, -1, "", 0, "", "");
	/* an exit code that is no number */
	feed_split("event: exit\ndata: {\"exit_code\":\"x\"}\n\n", -EPROTO, -1, "", 0, "", "");
	/* anything after the exit */
	feed_split("event: exit\ndata: {\"exit_code\":0}\n\nevent: stdout\ndata: eA==\n\n", -EPROTO,
		   0, "", 0, "", "");
	/* a stream cut before its exit: no exit code (cf_exec_cmd says so) */
	feed_split("event: stdout\ndata: eA==\n\nevent: exit\ndata: {\"exit", 0, -1, "x", 1, "",
		   "");
}

CHECK_MAIN(CHECK_CASE(test_output_and_exit), CHECK_CASE(test_error_event),
	   CHECK_CASE(test_bad_streams))
