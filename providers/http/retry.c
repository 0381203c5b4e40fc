/* When and how long to wait before repeating a request. */
#include "http.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 5000
#define RETRY_AFTER_CAP_MS 30000

bool sfs_http_should_retry(bool idempotent, enum sfs_http_failure f, long status, int attempt,
			   int max_attempts)
{
	if (attempt >= max_attempts)
		return false;
	switch (f) {
	case SFS_HTTP_NO_CONNECT:
		return true; /* nothing reached the server: safe for any method */
	case SFS_HTTP_BROKEN:
	case SFS_HTTP_TIMEOUT:
		return idempotent;
	case SFS_HTTP_FATAL:
		return false;
	case SFS_HTTP_OK:
		break;
	}
	if (status == 429)
		return true; /* throttled: the request was refused, not run */
	if (status == 502 || status == 503 || status == 504 || status == 500)
		return idempotent;
	return false;
}

long sfs_http_backoff_ms(int attempt, long retry_after_ms, double rnd)
{
	if (attempt < 1)
		attempt = 1;
	long d = BACKOFF_BASE_MS;
	for (int i = 1; i < attempt && d < BACKOFF_CAP_MS; i++)
		d *= 2;
	if (d > BACKOFF_CAP_MS)
		d = BACKOFF_CAP_MS;
	if (rnd < 0)
		rnd = 0;
	if (rnd >= 1)
		rnd = 0.999;
	/* equal jitter: half fixed, half random, so clients spread out */
	long wait = d / 2 + (long)((double)(d - d / 2) * rnd);
	if (retry_after_ms > RETRY_AFTER_CAP_MS)
		retry_after_ms = RETRY_AFTER_CAP_MS;
	if (retry_after_ms > wait)
		wait = retry_after_ms;
	return wait;
}

long sfs_http_parse_retry_after(const char *v, int64_t now)
{
	if (!v)
		return -1;
	while (isspace((unsigned char)*v))
		v++;
	if (isdigit((unsigned char)*v)) {
		char *end;
		long s = strtol(v, &end, 10);
		while (isspace((unsigned char)*end))
			end++;
		if (*end || s < 0)
			return -1;
		return s > 86400 ? 86400L * 1000 : s * 1000;
	}
	struct tm tm = {0};
	const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end)
		return -1;
	int64_t at = (int64_t)timegm(&tm);
	return at <= now ? 0 : (long)((at - now) > 86400 ? 86400L * 1000 : (at - now) * 1000);
}
