/*
 * The text of one SANDBOX/audit line (ctl/audit.h gives its form), apart
 * from the writer so unit tests check it byte for byte.
 *
 * It is made on the FUSE thread for every change made through the mount
 * (two lines per editor save), so it is built without printf and without
 * a call per byte: the time's text up to the second is kept per thread, a
 * path is copied in runs between the bytes it escapes, and the line's
 * buffer is reserved once.  What is redacted is unchanged: a path gets the
 * registered values hidden, a detail the whole redactor.
 */
#include "audit.h"

#include "../providers/err.h"
#include "../providers/redact.h"
#include "../providers/util.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "YYYY-MM-DDTHH:MM:SS" of the last second this thread formatted: gmtime
 * and the digits once a second, not once a line. */
static __thread struct {
	time_t sec;
	bool valid;
	char text[32];
} second;

/* The line is written in place into room reserved for it at once: each
 * put copies n bytes at o and returns where the next one goes. */
static char *put(char *o, const char *s, size_t n)
{
	memcpy(o, s, n);
	return o + n;
}

static char *put_time(char *o, const struct timespec *ts)
{
	if (!second.valid || second.sec != ts->tv_sec) {
		struct tm tm;
		gmtime_r(&ts->tv_sec, &tm);
		/* not strftime: glibc's may look at the time zone on every call */
		sfs_msgf(second.text, sizeof(second.text), "%04d-%02d-%02dT%02d:%02d:%02d",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec);
		second.sec = ts->tv_sec;
		second.valid = true;
	}
	long ms = ts->tv_nsec / 1000000;
	char frac[6] = {
	    '.', (char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10), 'Z',
	    ' '};
	o = put(o, second.text, strlen(second.text));
	return put(o, frac, sizeof(frac));
}

/* v in decimal (the caller's uid, an unnamed errno). */
static char *put_uint(char *o, unsigned long v)
{
	char d[24];
	size_t n = sizeof(d);
	do
		d[--n] = (char)('0' + v % 10);
	while ((v /= 10) && n);
	return put(o, d + n, sizeof(d) - n);
}

/* What a byte of a word is: shown as it is, shown \xNN (blanks, controls,
 * DEL, the backslash, so an escape in a name cannot pass for one), or
 * >= 0x80 (shown as it is only when the whole word is UTF-8 text). */
enum { PLAIN, ESCAPED, HIGH };
static unsigned char byte_class(unsigned char c)
{
	return c <= ' ' || c == 0x7f || c == '\\' ? ESCAPED : c >= 0x80 ? HIGH : PLAIN;
}

/* s as one word into o, which has room for 4 bytes per byte of s and a
 * NUL; its length.  Plain runs are copied whole, and UTF-8 validity is
 * looked at only when a byte >= 0x80 is there. */
static size_t put_word(char *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *run = p;
	int utf8 = -1; /* not looked at yet */
	size_t n = 0;
	for (; *p; p++) {
		unsigned char k = byte_class(*p);
		if (k == PLAIN)
			continue;
		if (k == HIGH) {
			if (utf8 < 0)
				utf8 = sfs_utf8_valid(s);
			if (utf8)
				continue;
		}
		memcpy(o + n, run, (size_t)(p - run));
		n += (size_t)(p - run);
		o[n++] = '\\';
		o[n++] = 'x';
		o[n++] = hex[*p >> 4];
		o[n++] = hex[*p & 15];
		run = p + 1;
	}
	memcpy(o + n, run, (size_t)(p - run));
	n += (size_t)(p - run);
	o[n] = '\0';
	return n;
}

/* A path with the registered values hidden (values: some are registered):
 * NULL for "-" (nothing to show), *failed on ENOMEM.  Points at path
 * itself when no value is registered (the common case: no copy); else
 * *copy holds it. */
static const char *path_shown(const char *path, bool values, char **copy, bool *failed)
{
	*copy = NULL;
	if (!path || !*path)
		return NULL;
	if (!values)
		return path;
	*copy = sfs_redact_values_dup(path);
	*failed = !*copy;
	return *copy;
}

/* True when the redactor and the escape would hand s back unchanged and
 * whole: printable ASCII (no byte to escape, no line break), no
 * registered value, no secret-looking word (no key to hide a value of),
 * shorter than the detail's bound.  Editors' saves (a rename's "-> PATH",
 * setattr's "mode") take this way. */
static bool shown_as_is(const char *s, bool values, size_t bound)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (s[n] < 0x20 || s[n] > 0x7e)
			return false;
	return !values && n < bound && !sfs_redact_key_is_secret(s);
}

int audit_format(struct sfs_buf *out, const struct timespec *ts, uid_t uid, const char *op,
		 const char *path, int err, const char *to, const char *detail)
{
	bool failed = false, values = sfs_redact_longest() > 0;
	char *pcopy = NULL, *tcopy = NULL;
	const char *p = path_shown(path, values, &pcopy, &failed);
	const char *t = to ? path_shown(to, values, &tcopy, &failed) : NULL;
	if (to && !t)
		t = "?";
	if (failed) {
		free(pcopy);
		free(tcopy);
		return -ENOMEM;
	}
	/* a rename's or link's "-> PATH": a word, then through the detail's
	 * redactor like any detail (on the stack unless it is long) */
	char arrow_stack[1024], *arrow = NULL;
	if (to) {
		size_t need = 3 + 4 * strlen(t) + 1;
		arrow = need <= sizeof(arrow_stack) ? arrow_stack : malloc(need);
		if (arrow) {
			memcpy(arrow, "-> ", 3);
			put_word(arrow + 3, t);
		}
		detail = arrow;
	}
	char shown[2048];
	bool has_detail = detail && *detail;
	const char *d = detail;
	if (has_detail && !shown_as_is(detail, values, sizeof(shown))) {
		/* one line: a command's own newlines would forge lines.  The
		 * redacted text is shown whole (up to shown's size): a marker
		 * longer than the value it hides is not cut to the value's length */
		sfs_escape_redacted(detail, strlen(detail), SIZE_MAX, shown, sizeof(shown), NULL);
		for (char *c = shown; *c; c++)
			if (*c == '\n')
				*c = ' ';
		d = shown;
	}
	int e = err < 0 ? -err : err;
	const char *ename = e ? strerrorname_np(e) : "0";
	/* room for all of it: 4 bytes per byte of the path at most; the time,
	 * uid, errno name or number, blanks and newline fit in 64 */
	size_t oplen = strlen(op), dlen = has_detail ? strlen(d) : 0;
	int r = sfs_buf_reserve(out, 64 + oplen + (p ? 4 * strlen(p) : 1) + dlen);
	if (!r && to && !arrow)
		r = -ENOMEM;
	if (!r) {
		char *o = put_time(out->buf + out->len, ts);
		o = uid == (uid_t)-1 ? put(o, "-", 1) : put_uint(o, uid);
		o = put(o, " ", 1);
		o = put(o, op, oplen);
		o = put(o, " ", 1);
		o = p ? o + put_word(o, p) : put(o, "-", 1);
		o = put(o, " ", 1);
		o = ename ? put(o, ename, strlen(ename)) : put_uint(o, (unsigned)e);
		if (has_detail) {
			o = put(o, " ", 1);
			o = put(o, d, dlen);
		}
		o = put(o, "\n", 1);
		*o = '\0';
		out->len = (size_t)(o - out->buf);
	}
	if (arrow != arrow_stack)
		free(arrow);
	free(pcopy);
	free(tcopy);
	return r;
}
