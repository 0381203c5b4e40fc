#include "err.h"
#include "redact.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int sfs_log_level = SFS_LOG_WARN;

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range (no overlongs,
					       no surrogates, nothing past U+10FFFF) */
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		lo = c == 0xe0 ? 0xa0 : 0x80;
		hi = c == 0xed ? 0x9f : 0xbf;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		lo = c == 0xf0 ? 0x90 : 0x80;
		hi = c == 0xf4 ? 0x8f : 0xbf;
	} else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

bool sfs_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		size_t seq = p[i] >= 0x80 ? utf8_seq(p + i, n - i) : 1;
		if (!seq)
			return false;
		i += seq;
	}
	return true;
}

size_t sfs_escape_text(const char *in, size_t n, char *out, size_t outsz)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;
	if (outsz == 0)
		return 0;
	for (size_t i = 0; i < n && s[i];) {
		size_t seq = s[i] >= 0x80 ? utf8_seq(s + i, n - i) : 1;
		bool control = s[i] < 0x20 ? s[i] != '\n' && s[i] != '\t' : s[i] == 0x7f;
		if (seq && !control) {
			if (o + seq >= outsz)
				break;
			memcpy(out + o, s + i, seq);
			o += seq;
			i += seq;
		} else {
			if (o + 4 >= outsz)
				break;
			snprintf(out + o, 5, "\\x%02x", s[i]);
			o += 4;
			i++;
		}
	}
	out[o] = '\0';
	return o;
}

int sfs_errf(struct sfs_err *err, int code, const char *fmt, ...)
{
	if (!err)
		return code;
	char raw[SFS_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* names and lines from users may be any bytes: messages stay text */
	sfs_escape_text(raw, sizeof(raw), err->msg, sizeof(err->msg));
	sfs_redact(err->msg, sizeof(err->msg));
	err->code = code;
	return code;
}

void sfs_err_clear(struct sfs_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}

void sfs_log(int level, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	if (level > sfs_log_level)
		return;
	char raw[2048], line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	sfs_escape_text(raw, sizeof(raw), line, sizeof(line));
	sfs_redact(line, sizeof(line));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	fprintf(stderr, "sandboxfs %02d:%02d:%02d.%03ld %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
		ts.tv_nsec / 1000000,
		names[level < 0	  ? 0
		      : level > 3 ? 3
				  : level],
		line);
}
