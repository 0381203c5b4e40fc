/* Connect-RPC envelopes: split anywhere, oversized lengths, end-of-stream errors. */
#include "check.h"

#include "providers/http/http.h"

#include <errno.h>
#include <stdlib.h>

struct seen {
	char text[1024];
	int n, ends;
};

static int on_msg(unsigned flags, const char *json, size_t len, void *arg)
{
	struct seen *s = arg;
	size_t used = strlen(s->text);
	snprintf(s->text + used, sizeof(s->text) - used, "%s[%.*s]",
		 flags & SFS_CONNECT_END ? "end" : "", (int)len, json);
	s->n++;
	if (flags & SFS_CONNECT_END)
		s->ends++;
	return 0;
}

static void build(struct sfs_buf *b, unsigned flags, const char *json)
{
	CHECK_INT(sfs_connect_envelope(b, flags, json, strlen(json)), 0);
}

static void test_split_anywhere(void)
{
	struct sfs_buf in = {0};
	build(&in, 0, "{\"event\":{\"start\":{\"pid\":7}}}");
	build(&in, 0, "");
	build(&in, 0, "{\"event\":{\"data\":{\"stdout\":\"aGk=\"}}}");
	build(&in, SFS_CONNECT_END, "{}");
	const char *want =
	    "[{\"event\":{\"start\":{\"pid\":7}}}][][{\"event\":{\"data\":{\"stdout\":"
	    "\"aGk=\"}}}]end[{}]";
	for (size_t step = 1; step <= in.len; step++) {
		struct seen s = {{0}, 0, 0};
		struct sfs_connect_dec d = {.on_msg = on_msg, .arg = &s};
		for (size_t i = 0; i < in.len; i += step) {
			size_t n = in.len - i < step ? in.len - i : step;
			CHECK_INT(sfs_connect_feed(&d, in.buf + i, n), 0);
		}
		CHECK_STREQ(s.text, want);
		CHECK_INT(s.ends, 1);
		CHECK_INT(sfs_connect_finish(&d), 0);
		sfs_connect_dec_free(&d);
	}
	sfs_buf_free(&in);
}

static void test_cut_short(void)
{
	struct sfs_buf in = {0};
	build(&in, 0, "{\"a\":1}");
	struct seen s = {{0}, 0, 0};
	struct sfs_connect_dec d = {.on_msg = on_msg, .arg = &s};
	/* a stream without its end message, and one cut inside a header */
	CHECK_INT(sfs_connect_feed(&d, in.buf, in.len), 0);
	CHECK_INT(sfs_connect_finish(&d), -EPROTO);
	CHECK_INT(sfs_connect_feed(&d, in.buf, 3), 0);
	CHECK_INT(sfs_connect_finish(&d), -EPROTO);
	sfs_connect_dec_free(&d);
	sfs_buf_free(&in);
}

static void test_oversized_rejected(void)
{
	/* a length of 4 GiB - 1 must not be allocated */
	const unsigned char hdr[5] = {0, 0xff, 0xff, 0xff, 0xff};
	struct seen s = {{0}, 0, 0};
	struct sfs_connect_dec d = {.on_msg = on_msg, .arg = &s};
	CHECK_INT(sfs_connect_feed(&d, hdr, sizeof(hdr)), -EMSGSIZE);
	CHECK_INT(s.n, 0);
	sfs_connect_dec_free(&d);
	/* and a caller's own limit */
	struct sfs_buf in = {0};
	build(&in, 0, "0123456789");
	struct sfs_connect_dec small = {.max = 9, .on_msg = on_msg, .arg = &s};
	CHECK_INT(sfs_connect_feed(&small, in.buf, in.len), -EMSGSIZE);
	sfs_connect_dec_free(&small);
	sfs_buf_free(&in);
}

static void test_compressed_and_trailing_refused(void)
{
	struct sfs_buf in = {0};
	build(&in, 0x01, "xx");
	struct seen s = {{0}, 0, 0};
	struct sfs_connect_dec d = {.on_msg = on_msg, .arg = &s};
	CHECK_INT(sfs_connect_feed(&d, in.buf, in.len), -EPROTO);
	sfs_connect_dec_free(&d);
	sfs_buf_reset(&in);
	build(&in, SFS_CONNECT_END, "{}");
	build(&in, 0, "{}");
	struct sfs_connect_dec d2 = {.on_msg = on_msg, .arg = &s};
	CHECK_INT(sfs_connect_feed(&d2, in.buf, in.len), -EPROTO);
	sfs_connect_dec_free(&d2);
	sfs_buf_free(&in);
}

static int stop_on_first(unsigned flags, const char *json, size_t len, void *arg)
{
	(void)flags, (void)json, (void)len;
	++*(int *)arg;
	return 1;
}

static void test_callback_stops(void)
{
	struct sfs_buf in = {0};
	build(&in, 0, "{}");
	build(&in, 0, "{}");
	int calls = 0;
	struct sfs_connect_dec d = {.on_msg = stop_on_first, .arg = &calls};
	CHECK_INT(sfs_connect_feed(&d, in.buf, in.len), 1);
	CHECK_INT(calls, 1);
	sfs_connect_dec_free(&d);
	sfs_buf_free(&in);
}

static void test_end_stream_error(void)
{
	struct sfs_err err = {0};
	json_t *ok = json_loads("{}", 0, NULL);
	CHECK_INT(sfs_connect_error(ok, "e2b", &err), 0);
	json_decref(ok);
	json_t *e =
	    json_loads("{\"error\":{\"code\":\"not_found\",\"message\":\"process with pid 9 "
		       "not found\"}}",
		       0, NULL);
	CHECK_INT(sfs_connect_error(e, "e2b: run 1", &err), -ENOENT);
	CHECK_STREQ(err.msg, "e2b: run 1: process with pid 9 not found (not_found)");
	json_decref(e);
	/* a unary error body is the error object itself */
	json_t *u = json_loads("{\"code\":\"invalid_argument\",\"message\":\"bad path\"}", 0, NULL);
	CHECK_INT(sfs_connect_error(u, "e2b", &err), -EINVAL);
	json_decref(u);
	CHECK_INT(sfs_connect_code_errno("deadline_exceeded"), -ETIMEDOUT);
	CHECK_INT(sfs_connect_code_errno("no such code"), -EIO);
	CHECK_INT(sfs_connect_code_errno(NULL), -EIO);
}

CHECK_MAIN(CHECK_CASE(test_split_anywhere), CHECK_CASE(test_cut_short),
	   CHECK_CASE(test_oversized_rejected), CHECK_CASE(test_compressed_and_trailing_refused),
	   CHECK_CASE(test_callback_stops), CHECK_CASE(test_end_stream_error))
