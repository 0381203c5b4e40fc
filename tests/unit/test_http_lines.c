/* Line, NDJSON and SSE parsing: bytes arrive in arbitrary pieces. */
#include "check.h"

#include "providers/http/http.h"

#include <errno.h>
#include <stdlib.h>

struct seen {
	char text[1024];
	int n;
};

static int on_line(const char *line, size_t len, void *arg)
{
	struct seen *s = arg;
	size_t used = strlen(s->text);
	snprintf(s->text + used, sizeof(s->text) - used, "[%.*s]", (int)len, line);
	s->n++;
	return 0;
}

static void test_lines_split_anywhere(void)
{
	const char *in = "one\ntwo\r\n\nthree";
	for (size_t step = 1; step <= strlen(in); step++) {
		struct sfs_linebuf lb = {0};
		struct seen s = {{0}, 0};
		for (size_t i = 0; i < strlen(in); i += step) {
			size_t n = strlen(in) - i < step ? strlen(in) - i : step;
			CHECK_INT(sfs_lines_feed(&lb, in + i, n, on_line, &s), 0);
		}
		CHECK_STREQ(s.text, "[one][two][]");
		CHECK_INT(sfs_lines_finish(&lb, on_line, &s), 0);
		CHECK_STREQ(s.text, "[one][two][][three]");
		sfs_linebuf_free(&lb);
	}
}

static int stop_at_two(const char *line, size_t len, void *arg)
{
	struct seen *s = arg;
	on_line(line, len, arg);
	return s->n == 2 ? -ECANCELED : 0;
}

static void test_lines_callback_stops(void)
{
	struct sfs_linebuf lb = {0};
	struct seen s = {{0}, 0};
	CHECK_INT(sfs_lines_feed(&lb, "a\nb\nc\n", 6, stop_at_two, &s), -ECANCELED);
	CHECK_STREQ(s.text, "[a][b]");
	sfs_linebuf_free(&lb);
}

static int on_value(json_t *v, void *arg)
{
	struct seen *s = arg;
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
	size_t used = strlen(s->text);
	snprintf(s->text + used, sizeof(s->text) - used, "%s;", text ? text : "?");
	free(text);
	s->n++;
	return 0;
}

static void test_ndjson(void)
{
	const char *in = "{\"a\":1}\n\n  \n{\"b\":[2,3]}\r\n\"x\"\n{\"c\":";
	struct seen s = {{0}, 0};
	struct sfs_ndjson p = {.on_value = on_value, .arg = &s};
	for (size_t i = 0; i < strlen(in); i++)
		CHECK_INT(sfs_ndjson_feed(&p, in + i, 1), 0);
	CHECK_STREQ(s.text, "{\"a\":1};{\"b\":[2,3]};\"x\";");
	CHECK_INT(sfs_ndjson_feed(&p, "4}", 2), 0);
	CHECK_INT(sfs_ndjson_finish(&p), 0);
	CHECK_STREQ(s.text, "{\"a\":1};{\"b\":[2,3]};\"x\";{\"c\":4};");
	CHECK_INT(s.n, 4);
	CHECK_INT(sfs_ndjson_feed(&p, "{oops\n", 6), -EPROTO);
	sfs_ndjson_free(&p);
}

static int on_event(const char *event, const char *data, size_t len, const char *id, void *arg)
{
	struct seen *s = arg;
	size_t used = strlen(s->text);
	snprintf(s->text + used, sizeof(s->text) - used, "<%s|%.*s|%s|%zu>", event, (int)len, data,
		 id ? id : "-", len);
	s->n++;
	return 0;
}

static void test_sse(void)
{
	const char *in = ": comment\n"
			 "data: hello\n\n"
			 "event: stdout\ndata:a\ndata: b\nid: 7\n\n"
			 "retry: 10\nevent: ignored-without-data\n\n"
			 "data\n\n"
			 "event: exit\r\ndata: {\"code\":0}\r\n\r\n"
			 "data: unterminated";
	for (size_t step = 1; step < 8; step++) {
		struct seen s = {{0}, 0};
		struct sfs_sse p = {.on_event = on_event, .arg = &s};
		for (size_t i = 0; i < strlen(in); i += step) {
			size_t n = strlen(in) - i < step ? strlen(in) - i : step;
			CHECK_INT(sfs_sse_feed(&p, in + i, n), 0);
		}
		CHECK_STREQ(s.text, "<message|hello|-|5><stdout|a\nb|7|3><message||7|0>"
				    "<exit|{\"code\":0}|7|10>");
		sfs_sse_free(&p);
	}
}

CHECK_MAIN(CHECK_CASE(test_lines_split_anywhere), CHECK_CASE(test_lines_callback_stops),
	   CHECK_CASE(test_ndjson), CHECK_CASE(test_sse))
