#include "strbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sfs_buf_reserve(struct sfs_buf *b, size_t n)
{
	if (n >= SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	size_t need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *grown = realloc(b->buf, cap);
	if (!grown)
		return -ENOMEM;
	b->buf = grown;
	b->cap = cap;
	b->buf[b->len] = '\0'; /* a C string even before anything is added */
	return 0;
}

int sfs_buf_add(struct sfs_buf *b, const void *data, size_t n)
{
	if (sfs_buf_reserve(b, n))
		return -ENOMEM;
	if (n)
		memcpy(b->buf + b->len, data, n);
	b->len += n;
	b->buf[b->len] = '\0';
	return 0;
}

int sfs_buf_add_fd(struct sfs_buf *b, int fd)
{
	char chunk[65536];
	for (off_t pos = 0;;) {
		ssize_t k = pread(fd, chunk, sizeof(chunk), pos);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return 0;
		if (sfs_buf_add(b, chunk, (size_t)k))
			return -ENOMEM;
		pos += k;
	}
}

int sfs_buf_adds(struct sfs_buf *b, const char *s)
{
	return sfs_buf_add(b, s, strlen(s));
}

int sfs_buf_addc(struct sfs_buf *b, char c)
{
	return sfs_buf_add(b, &c, 1);
}

int sfs_buf_vprintf(struct sfs_buf *b, const char *fmt, va_list ap)
{
	va_list again;
	va_copy(again, ap);
	char tmp[256];
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	int r = 0;
	if (n < 0) {
		r = -EINVAL;
	} else if ((size_t)n < sizeof(tmp)) {
		r = sfs_buf_add(b, tmp, (size_t)n);
	} else if (!(r = sfs_buf_reserve(b, (size_t)n))) {
		vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, again);
		b->len += (size_t)n;
	}
	va_end(again);
	return r;
}

int sfs_buf_printf(struct sfs_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = sfs_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

void sfs_buf_reset(struct sfs_buf *b)
{
	b->len = 0;
	if (b->buf)
		b->buf[0] = '\0';
}

char *sfs_buf_take(struct sfs_buf *b)
{
	char *s = b->buf ? b->buf : strdup("");
	b->buf = NULL;
	b->len = b->cap = 0;
	return s;
}

void sfs_buf_free(struct sfs_buf *b)
{
	free(b->buf);
	b->buf = NULL;
	b->len = b->cap = 0;
}
