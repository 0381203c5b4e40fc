/*
 * libFuzzer harness: a stream of ctl writes cut into arbitrary pieces, fed to
 * the line buffer (ctl/linebuf.c) the way fs/ops.c feeds it, with some of the
 * completed lines failing as a bad command would.  The property that matters:
 * every line handed out to run is a whole line of the stream -- it starts
 * where the stream has a line start and ends at that line's newline -- so a
 * command cut by a write boundary never runs short.  Error messages and the
 * text escaper must produce terminated, valid UTF-8 without control bytes.
 *
 * Input: byte 0 repeats the body (1..8 times, to reach the 64 KiB bound),
 * byte 1 seeds the piece sizes, the rest is the body.
 */
#include "ctl/ctl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_text(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
			abort();
		size_t n = *p < 0x80 ? 1 : *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : 2;
		if (*p >= 0x80 && *p < 0xc2)
			abort();
		for (size_t i = 1; i < n; i++)
			if ((p[i] & 0xc0) != 0x80)
				abort();
		p += n;
	}
}

/* Each line of lines must sit at a line start of stream at or after *cursor. */
static void check_whole_lines(const char *stream, size_t len, size_t *cursor, const char *lines)
{
	while (*lines) {
		const char *nl = strchr(lines, '\n');
		size_t n = nl ? (size_t)(nl - lines) + 1 : strlen(lines);
		if (n - (nl ? 1 : 0) > CTL_LINE_MAX)
			abort();
		size_t p = *cursor;
		while (p + n <= len &&
		       !((p == 0 || stream[p - 1] == '\n') && memcmp(stream + p, lines, n) == 0))
			p++;
		if (p + n > len)
			abort(); /* not a whole line of the stream: a cut command */
		*cursor = p + n;
		lines += n;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t reps = (size_t)(data[0] % 8) + 1;
	unsigned seed = data[1];
	const char *body = (const char *)data + 2;
	size_t blen = size - 2, len = blen * reps;
	char *stream = malloc(len + 1);
	if (!stream)
		return 0;
	for (size_t i = 0; i < reps; i++)
		memcpy(stream + i * blen, body, blen);
	stream[len] = '\0';

	struct ctl_linebuf lb = {0};
	size_t off = 0, cursor = 0;
	while (off < len) {
		seed = seed * 1103515245u + 12345u;
		size_t piece = 1 + (seed >> 8) % 70000;
		if (piece > len - off)
			piece = len - off;
		char *lines = NULL;
		struct sfs_err err = {0};
		int r = ctl_linebuf_feed(&lb, stream + off, piece, &lines, &err);
		if (r) {
			if (lines || !err.msg[0] || !memchr(err.msg, '\0', sizeof(err.msg)))
				abort();
			check_text(err.msg);
		} else if (lines) {
			check_whole_lines(stream, len, &cursor, lines);
			/* a command that fails, as `frob` would */
			if (strstr(lines, "frob"))
				ctl_linebuf_fail(&lb);
		}
		free(lines);
		off += piece;
	}
	unsigned long writes = lb.writes;
	char *dropped = NULL;
	char *last = ctl_linebuf_take(&lb, &dropped);
	if (last && dropped)
		abort();
	if (last && (writes != 1 || memchr(stream, '\n', len)))
		abort(); /* only a single write without a newline runs at close */
	if (!last)
		last = dropped;
	if (last) {
		/* the unfinished last line: it must be the stream's own tail */
		size_t n = strlen(last);
		if (n > CTL_LINE_MAX || n > len || memcmp(stream + len - n, last, n) != 0 ||
		    (len > n && stream[len - n - 1] != '\n'))
			abort();
		free(last);
	}
	ctl_linebuf_free(&lb);

	char out[256];
	size_t w = sfs_escape_text(body, blen < 64 ? blen : 64, out, sizeof(out));
	if (w != strlen(out) || w >= sizeof(out))
		abort();
	check_text(out);
	free(stream);
	return 0;
}
