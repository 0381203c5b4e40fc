#include "err.h"
#include "redact.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int sfs_log_level = SFS_LOG_WARN;

int sfs_errf(struct sfs_err *err, int code, const char *fmt, ...)
{
	if (!err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
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
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
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
