#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sfs_buf_printf(struct sfs_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char tmp[4096];
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(tmp))
		n = sizeof(tmp) - 1;
	if (b->len + (size_t)n + 1 > b->cap) {
		size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
		char *grown = realloc(b->buf, cap);
		if (!grown)
			return;
		b->buf = grown;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, tmp, (size_t)n + 1);
	b->len += (size_t)n;
}
