/*
 * A ctl file's unfinished line, held across writes.  The kernel hands a
 * write(2) to us in pieces (`cat` writes 128 KiB at a time, and one write
 * above FUSE's max_write arrives as several requests), so a piece may end in
 * the middle of a command.  A line runs only once its newline has arrived;
 * whatever follows the last newline waits here for the next write, or for
 * the last close (`echo -n` users).
 *
 * Failure is sticky to the end of its line: when a write fails, the
 * unfinished line it ends with is dropped, and so are the bytes of that
 * line that later writes bring, up to its newline.  Those writes fail too.
 * That way a line whose beginning was refused never runs as a shorter
 * command made of its tail.
 */
#include "ctl.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an error quotes of a refused line: enough to recognise it. */
#define QUOTE_BYTES 40

/* err gets "<what>: "<first bytes of line>..."" with the quote escaped. */
static int refuse(struct sfs_err *err, const char *what, const char *line, size_t n)
{
	char shown[QUOTE_BYTES * 4 + 8];
	bool cut;
	sfs_escape_redacted(line, n, QUOTE_BYTES, shown, sizeof(shown), &cut);
	return sfs_errf(err, -EINVAL, "%s: \"%s%s\"", what, shown, cut ? "..." : "");
}

/* The failure path of a feed: drop what is held and skip the rest of the
 * line the write ended in (if it ended mid-line). */
static void fail_write(struct ctl_linebuf *lb, const char *data, size_t len)
{
	free(lb->held);
	lb->held = NULL;
	lb->len = 0;
	lb->skipping = len > 0 && data[len - 1] != '\n';
}

int ctl_linebuf_feed(struct ctl_linebuf *lb, const char *data, size_t len, char **lines,
		     struct sfs_err *err)
{
	*lines = NULL;
	lb->writes++;
	if (len && memchr(data, '\n', len))
		lb->had_newline = true;
	const char *nul = len ? memchr(data, '\0', len) : NULL;
	if (nul) {
		fail_write(lb, data, len);
		return sfs_errf(err, -EINVAL,
				"a NUL byte at byte %zu of the write: ctl takes lines of text, and "
				"nothing of this write ran",
				(size_t)(nul - data) + 1);
	}
	if (lb->skipping) {
		fail_write(lb, data, len);
		return sfs_errf(err, -EINVAL,
				"discarded: these bytes continue a line that failed in an earlier "
				"write (the rest of it, up to its newline, is dropped)");
	}
	/* the unfinished line so far plus this write: each line's length is
	 * checked before anything is kept or run */
	size_t start = 0, linelen = lb->len;
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			linelen = 0;
			start = i + 1;
			continue;
		}
		if (++linelen > CTL_LINE_MAX) {
			const char *head = start == 0 && lb->len ? lb->held : data + start;
			size_t headlen = start == 0 && lb->len ? lb->len : len - start;
			char what[160];
			snprintf(what, sizeof(what),
				 "a command longer than %d bytes (the limit of one ctl line) is "
				 "refused whole",
				 CTL_LINE_MAX);
			int r = refuse(err, what, head, headlen);
			fail_write(lb, data, len);
			return r;
		}
	}
	const char *last_nl = NULL;
	for (size_t i = len; i > 0; i--) {
		if (data[i - 1] == '\n') {
			last_nl = data + i - 1;
			break;
		}
	}
	size_t done = last_nl ? (size_t)(last_nl - data) + 1 : 0; /* bytes of complete lines */
	size_t tail = len - done;
	if (done) {
		char *out = malloc(lb->len + done + 1);
		if (!out)
			return sfs_errf(err, -ENOMEM, "out of memory");
		if (lb->len)
			memcpy(out, lb->held, lb->len);
		memcpy(out + lb->len, data, done);
		out[lb->len + done] = '\0';
		free(lb->held);
		lb->held = NULL;
		lb->len = 0;
		*lines = out;
	}
	if (tail) {
		char *grown = realloc(lb->held, lb->len + tail + 1);
		if (!grown) {
			free(*lines);
			*lines = NULL;
			fail_write(lb, data, len);
			return sfs_errf(err, -ENOMEM, "out of memory");
		}
		memcpy(grown + lb->len, data + done, tail);
		lb->held = grown;
		lb->len += tail;
		lb->held[lb->len] = '\0';
	}
	return 0;
}

void ctl_linebuf_fail(struct ctl_linebuf *lb)
{
	lb->skipping = lb->len > 0;
	free(lb->held);
	lb->held = NULL;
	lb->len = 0;
}

char *ctl_linebuf_take(struct ctl_linebuf *lb, char **dropped)
{
	char *line = lb->held;
	size_t len = lb->len;
	bool whole = lb->writes == 1 && !lb->had_newline;
	lb->held = NULL;
	lb->len = 0;
	lb->skipping = false;
	if (dropped)
		*dropped = NULL;
	if (!line)
		return NULL;
	bool blank = true;
	for (size_t i = 0; i < len && blank; i++)
		blank = ctl_is_blank(line[i]);
	if (blank) {
		free(line);
		return NULL;
	}
	if (whole)
		return line;
	if (dropped)
		*dropped = line;
	else
		free(line);
	return NULL;
}

bool ctl_linebuf_pending(const struct ctl_linebuf *lb)
{
	return lb->len > 0;
}

void ctl_linebuf_free(struct ctl_linebuf *lb)
{
	free(lb->held);
	memset(lb, 0, sizeof(*lb));
}
