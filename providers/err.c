#include "err.h"
#include "redact.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

size_t sfs_escape_redacted(const char *in, size_t n, size_t max_in, char *out, size_t outsz,
			   bool *cut)
{
	char *raw = strndup(in ? in : "", n);
	char *red = raw ? sfs_redact_dup(raw) : NULL;
	if (raw) {
		explicit_bzero(raw, strlen(raw));
		free(raw);
	}
	if (!red) { /* never show what could not be checked */
		if (cut)
			*cut = true;
		return sfs_escape_text(SFS_REDACTED, strlen(SFS_REDACTED), out, outsz);
	}
	size_t len = strlen(red);
	if (cut)
		*cut = len > max_in;
	size_t o = sfs_escape_text(red, len < max_in ? len : max_in, out, outsz);
	free(red);
	return o;
}

const char *sfs_escape_line(const char *in, size_t max_in, char *out, size_t outsz)
{
	if (!outsz)
		return out;
	char *red = sfs_redact_dup(in ? in : "");
	/* never show what could not be checked */
	const unsigned char *s = (const unsigned char *)(red ? red : SFS_REDACTED);
	size_t o = 0, i = 0;
	for (; s[i] && i < max_in; i++) {
		bool plain = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\';
		if (o + (plain ? 1 : 4) >= outsz)
			break;
		if (plain)
			out[o++] = (char)s[i];
		else
			o += (size_t)snprintf(out + o, 5, "\\x%02x", s[i]);
	}
	if (s[i] && o + 3 < outsz) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	free(red);
	return out;
}

/* The whole text, however long: redacted before it is cut or escaped (see
 * sfs_escape_redacted), into out. */
static void format_redacted(char *out, size_t outsz, const char *fmt, va_list ap)
{
	char *raw = NULL;
	int n = vasprintf(&raw, fmt, ap);
	if (n < 0) {
		snprintf(out, outsz, "%s", SFS_REDACTED); /* message: may be cut */
		return;
	}
	sfs_escape_redacted(raw, (size_t)n, (size_t)n, out, outsz, NULL);
	explicit_bzero(raw, (size_t)n);
	free(raw);
}

int sfs_errf(struct sfs_err *err, int code, const char *fmt, ...)
{
	if (!err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	/* names and lines from users may be any bytes: messages stay text */
	format_redacted(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
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
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	format_redacted(line, sizeof(line), fmt, ap);
	va_end(ap);
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
