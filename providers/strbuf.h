/* A growing NUL-terminated text buffer for status files and ctl results. */
#ifndef SFS_STRBUF_H
#define SFS_STRBUF_H

#include <stddef.h>

struct sfs_buf {
	char *buf; /* NULL until something is written */
	size_t len, cap;
};

/* Appends; on allocation failure the text is cut short, never corrupted. */
void sfs_buf_printf(struct sfs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
