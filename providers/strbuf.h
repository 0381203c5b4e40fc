/*
 * The one growable byte buffer: status files, ctl results, HTTP bodies,
 * exec output, shell command lines.  Always NUL-terminated once anything was
 * added (so text can be used as a C string), but it holds any bytes.
 * Capacity doubles, so n appends cost O(n) copies, not O(n^2).
 */
#ifndef SFS_STRBUF_H
#define SFS_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

struct sfs_buf {
	char *buf; /* NULL until something is written */
	size_t len, cap;
};

/* Makes room for n more bytes (plus the NUL, which it writes); 0 or -ENOMEM. */
int sfs_buf_reserve(struct sfs_buf *b, size_t n);
/* Appends n bytes; 0 or -ENOMEM (the buffer is then unchanged). */
int sfs_buf_add(struct sfs_buf *b, const void *data, size_t n);
int sfs_buf_adds(struct sfs_buf *b, const char *s);
int sfs_buf_addc(struct sfs_buf *b, char c);
/* Appends the whole of file fd, read from offset 0 (its offset is left
 * alone); 0, -ENOMEM or the read's -errno. */
int sfs_buf_add_fd(struct sfs_buf *b, int fd);
/* Appends formatted text of any length; 0 or -ENOMEM (then the text is
 * left as it was before the call: cut short, never corrupted). */
int sfs_buf_printf(struct sfs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sfs_buf_vprintf(struct sfs_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Empties the buffer, keeping its memory. */
void sfs_buf_reset(struct sfs_buf *b);
/* Hands the text over to the caller (an empty string when nothing was
 * added) and empties b; NULL on ENOMEM. */
char *sfs_buf_take(struct sfs_buf *b);
void sfs_buf_free(struct sfs_buf *b);

#endif
