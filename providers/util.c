#include "util.h"
#include "strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char sfs_self_exe[4096];

int sfs_write_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	while (len) {
		ssize_t w = write(fd, c, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		c += w;
		len -= (size_t)w;
	}
	return 0;
}

int sfs_write_file_atomic(const char *path, const void *data, size_t len, struct sfs_err *err)
{
	return sfs_write_file_replace(path, data, len, true, err);
}

int sfs_write_file_replace(const char *path, const void *data, size_t len, bool durable,
			   struct sfs_err *err)
{
	char tmp[4200];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)gettid()) >= (int)sizeof(tmp))
		return sfs_errf(err, -ENAMETOOLONG, "%s: path too long", path);
	/* a name planted where the temp file goes is never followed */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sfs_errf(err, -errno, "%s: %s", tmp, strerror(errno));
	const char *p = data;
	size_t left = len;
	while (left) {
		ssize_t w = write(fd, p, left);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			unlink(tmp);
			return sfs_errf(err, -e, "write %s: %s", tmp, strerror(e));
		}
		p += w;
		left -= (size_t)w;
	}
	if ((durable && fsync(fd) < 0) || close(fd) < 0) {
		int e = errno;
		unlink(tmp);
		return sfs_errf(err, -e, "fsync %s: %s", tmp, strerror(e));
	}
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return sfs_errf(err, -e, "rename %s: %s", path, strerror(e));
	}
	return 0;
}

int sfs_read_file(const char *path, char **out, size_t *lenp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct sfs_buf b = {0};
	for (;;) {
		if (sfs_buf_reserve(&b, 4096)) {
			sfs_buf_free(&b);
			close(fd);
			return -ENOMEM;
		}
		ssize_t r = read(fd, b.buf + b.len, b.cap - b.len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			sfs_buf_free(&b);
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		b.len += (size_t)r;
		b.buf[b.len] = '\0';
	}
	close(fd);
	b.buf[b.len] = '\0'; /* an empty file never reached the loop's own NUL */
	if (lenp)
		*lenp = b.len;
	*out = b.buf; /* reserved above, so never NULL */
	return 0;
}

int sfs_mkdir_p(const char *path, unsigned mode)
{
	char buf[4096];
	if (!path[0]) /* what a path refused by sfs_pathf leaves */
		return -ENOENT;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int r = flag == FTW_DP ? rmdir(path) : unlink(path);
	return r < 0 && errno != ENOENT ? -errno : 0;
}

int sfs_rm_rf(const char *path)
{
	if (!path[0]) /* what a path refused by sfs_pathf leaves: no file */
		return 0;
	int r = nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (r < 0 && errno == ENOENT)
		return 0;
	return r < 0 ? -errno : r;
}

int sfs_parse_size(const char *s, uint64_t *out)
{
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	/* a fraction of the unit ("1.5G"): up to 9 digits, rounded down */
	unsigned long long frac = 0, scale = 1;
	if (*end == '.' && isdigit((unsigned char)end[1]))
		for (end++; isdigit((unsigned char)*end); end++)
			if (scale < 1000000000ull) {
				frac = frac * 10 + (unsigned long long)(*end - '0');
				scale *= 10;
			}
	unsigned shift = 0;
	const char *units = "KMGT", *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
	if (u) {
		shift = 10 * (unsigned)(u - units + 1);
		end++;
		if (*end == 'i')
			end++;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	/* frac < 10^9 < 2^30 and shift <= 40: the product fits 70 bits */
	unsigned __int128 part = ((unsigned __int128)frac << shift) / scale;
	uint64_t whole = (uint64_t)v << shift;
	if (part > UINT64_MAX - whole)
		return -ERANGE;
	*out = whole + (uint64_t)part;
	return 0;
}

void sfs_now_rfc3339(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int64_t sfs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sfs_pathf(char *buf, size_t size, const char *fmt, ...)
{
	if (size == 0)
		return -ENAMETOOLONG;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size) {
		buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

void sfs_msgf(char *buf, size_t size, const char *fmt, ...)
{
	if (size == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap); /* message: may be cut */
	va_end(ap);
}

int sfs_random_hex(char *buf, size_t n)
{
	unsigned char raw[64];
	if (n / 2 + 1 > sizeof(raw))
		return -EINVAL;
	if (getrandom(raw, n / 2 + 1, 0) < 0)
		return -errno;
	for (size_t i = 0; i < n; i++)
		buf[i] = "0123456789abcdef"[(raw[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	buf[n] = '\0';
	return 0;
}

/* "2024-05-01T10:20:30.123456Z" (or with an offset) to unix seconds. */
int64_t sfs_parse_time(const char *s)
{
	if (!s)
		return 0;
	struct tm tm = {0};
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		rest = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	if (!rest)
		return 0;
	int64_t t = (int64_t)timegm(&tm);
	while (*rest == '.' || (*rest >= '0' && *rest <= '9'))
		rest++;
	while (*rest == ' ')
		rest++;
	if ((*rest == '+' || *rest == '-') && strlen(rest) >= 5) {
		int hh = (rest[1] - '0') * 10 + (rest[2] - '0');
		int mm = rest[3] == ':' ? (rest[4] - '0') * 10 + (rest[5] - '0')
					: (rest[3] - '0') * 10 + (rest[4] - '0');
		int64_t off = (int64_t)(hh * 3600 + mm * 60);
		t += *rest == '+' ? -off : off;
	}
	return t;
}

bool sfs_word_in(const char *list, const char *w)
{
	size_t n = strlen(w);
	if (!n)
		return false;
	for (const char *p = list; (p = strstr(p, w)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return true;
	return false;
}

bool sfs_image_ref_ok(const char *s)
{
	if (!*s || *s == '-' || strlen(s) >= 256)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._/:@-", *s))
			return false;
	return true;
}
