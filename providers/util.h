/* Small file helpers shared by the registry and the providers. */
#ifndef SFS_UTIL_H
#define SFS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Whether w is one of the blank-separated words of list ("a b c"). */
bool sfs_word_in(const char *list, const char *w);
/* Whether s is a container image reference as `new` takes one (docker's
 * image=, gcp's): letters, digits and . _ / : @ -, not starting with '-',
 * under 256 bytes.  Not a registry's whole grammar: enough that the value
 * holds no space, newline or quote and is no option to a command. */
bool sfs_image_ref_ok(const char *s);

/* Writes data to path via a temp file, fsync and rename: readers see the old
 * or the new contents, never a mix. */
int sfs_write_file_atomic(const char *path, const void *data, size_t len, struct sfs_err *err);
/* The same without the fsync: survives the daemon's death (the page cache
 * keeps it), not a power cut. */
int sfs_write_file_replace(const char *path, const void *data, size_t len, bool durable,
			   struct sfs_err *err);
/* Reads a whole (small) file into a NUL-terminated malloc'd buffer. */
int sfs_read_file(const char *path, char **out, size_t *len);
/* Writes all of p to fd (retrying short writes and EINTR); 0 or -EIO. */
int sfs_write_all(int fd, const void *p, size_t len);
int sfs_mkdir_p(const char *path, unsigned mode);
/* Removes a tree without following symlinks. */
int sfs_rm_rf(const char *path);
/* Current time as RFC 3339 UTC. */
void sfs_now_rfc3339(char *buf, size_t len);
/* CLOCK_MONOTONIC in milliseconds (for deadlines). */
int64_t sfs_now_ms(void);
/* "2024-05-01T10:20:30.123456Z" (or with an offset, or a space for the T)
 * to unix seconds; 0 when NULL or unparseable. */
int64_t sfs_parse_time(const char *s);
/* A byte count written as a person would: digits, maybe a fraction, then
 * nothing or one of K M G T in either case (powers of 1024), optionally
 * followed by "i", "B" or "iB" ("512M", "1.5g", "1GiB", "1048576"; a
 * fraction of a byte is dropped).  0, or -EINVAL (bad text) or -ERANGE. */
int sfs_parse_size(const char *s, uint64_t *out);
/* A random lowercase hex string of n chars (n < len). */
int sfs_random_hex(char *buf, size_t n);
/*
 * Formats a path, URL, command or lookup key into buf[size]: 0, or
 * -ENAMETOOLONG when it does not fit (buf then holds "", never a cut text
 * that would name something else).  Paths grow, they are never cut.
 */
int sfs_pathf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), warn_unused_result));
/* Formats a human-readable message into buf[size], cut to fit: only for
 * text that is read, never for a path or a key (those use sfs_pathf). */
void sfs_msgf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Path of the running executable (resolved at startup). */
extern char sfs_self_exe[4096];

#endif
