/* multipart/form-data bodies, as bulk downloads answer. */
#include "check.h"

#include "providers/http/http.h"

#include <errno.h>
#include <stdlib.h>

struct seen {
	char text[2048];
};

static int on_part(const char *name, const char *filename, const char *data, size_t len, void *arg)
{
	struct seen *s = arg;
	size_t used = strlen(s->text);
	snprintf(s->text + used, sizeof(s->text) - used, "<%s|%s|%.*s>", name, filename, (int)len,
		 data);
	return 0;
}

static int stop_at_second(const char *name, const char *filename, const char *data, size_t len,
			  void *arg)
{
	(void)name, (void)filename, (void)data, (void)len;
	return ++*(int *)arg == 2 ? -ECANCELED : 0;
}

static void test_parts(void)
{
	static const char body[] =
	    "preamble\r\n--XyZ\r\n"
	    "Content-Disposition: form-data; name=\"file\"; filename=\"/home/a \\\"q\\\" "
	    "\\\\b\"\r\n"
	    "Content-Type: application/octet-stream\r\n\r\n"
	    "line 1\r\nline 2 --XyZ not a delimiter\r\n"
	    "--XyZ\r\n"
	    "content-disposition: form-data; name=error; filename=\"/x\"\r\n\r\n"
	    "{\"statusCode\":404}\r\n"
	    "--XyZ\r\n"
	    "Content-Disposition: form-data; name=\"file\"; filename=\"empty\"\r\n\r\n"
	    "\r\n"
	    "--XyZ--\r\n";
	struct seen s = {{0}};
	CHECK_INT(sfs_multipart_parse("multipart/form-data; boundary=XyZ", body, sizeof(body) - 1,
				      on_part, &s),
		  0);
	CHECK_STREQ(s.text, "<file|/home/a \"q\" \\b|line 1\r\nline 2 --XyZ not a delimiter>"
			    "<error|/x|{\"statusCode\":404}><file|empty|>");
	/* quoted boundary, and binary data with NUL bytes */
	static const char bin[] = "--b 1\r\nContent-Disposition: form-data; name=\"file\"; "
				  "filename=\"z\"\r\n\r\n\0\1\2\r\n--b 1--";
	memset(&s, 0, sizeof(s));
	int parts = 0;
	CHECK_INT(sfs_multipart_parse("multipart/form-data; boundary=\"b 1\"", bin, sizeof(bin) - 1,
				      stop_at_second, &parts),
		  0);
	CHECK_INT(parts, 1);
}

static void test_malformed(void)
{
	struct seen s = {{0}};
	static const char ok[] =
	    "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n"
	    "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ny\r\n--B--";
	CHECK_INT(sfs_multipart_parse("text/plain", ok, sizeof(ok) - 1, on_part, &s), -EPROTO);
	CHECK_INT(
	    sfs_multipart_parse("multipart/form-data; boundary=", ok, sizeof(ok) - 1, on_part, &s),
	    -EPROTO);
	CHECK_INT(
	    sfs_multipart_parse("multipart/form-data; boundary=Q", ok, sizeof(ok) - 1, on_part, &s),
	    -EPROTO);
	/* cut anywhere before the closing delimiter: an error, never a short part */
	for (size_t cut = 0; cut < sizeof(ok) - 6; cut++) {
		memset(&s, 0, sizeof(s));
		CHECK_INT(
		    sfs_multipart_parse("multipart/form-data; boundary=B", ok, cut, on_part, &s),
		    -EPROTO);
	}
	int parts = 0;
	CHECK_INT(sfs_multipart_parse("multipart/form-data; boundary=B", ok, sizeof(ok) - 1,
				      stop_at_second, &parts),
		  -ECANCELED);
}

CHECK_MAIN(CHECK_CASE(test_parts), CHECK_CASE(test_malformed))
