/* Errors travel as a negative errno plus a human sentence. */
#ifndef SFS_ERR_H
#define SFS_ERR_H

#include <stdbool.h>
#include <stddef.h>

#define SFS_ERR_MAX 1024

struct sfs_err {
	int code; /* negative errno, 0 when no error */
	char msg[SFS_ERR_MAX];
};

/* Records code and a printf-style message; returns code so callers can
 * `return sfs_errf(err, -EINVAL, "...")`. err may be NULL. */
int sfs_errf(struct sfs_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void sfs_err_clear(struct sfs_err *err);

/*
 * Copies in[0..n) to out as text fit for a message or a log line: valid
 * UTF-8, tabs and newlines stay; other control bytes and bytes that are not
 * UTF-8 become \xNN.  out is always NUL-terminated (cut on a whole
 * character).  Returns strlen(out).
 */
size_t sfs_escape_text(const char *in, size_t n, char *out, size_t outsz);
/*
 * in[0..n) redacted as a whole (sfs_redact_dup), then at most max_in bytes
 * of that escaped into out as sfs_escape_text does; *cut (may be NULL) tells
 * whether the redacted text was longer than max_in.  Redaction comes first:
 * a secret with a byte the escape rewrites, or cut by a bound, would no
 * longer match its registered value afterwards.  Returns strlen(out).
 */
size_t sfs_escape_redacted(const char *in, size_t n, size_t max_in, char *out, size_t outsz,
			   bool *cut);
/*
 * in, an untrusted value, for a one-line message: redacted as a whole (as
 * sfs_escape_redacted), then at most max_in of its bytes, each byte other
 * than printable ASCII (and the backslash) as \xNN, "..." after a cut.  No
 * newline or tab survives, so the value never starts a line of its own.
 * out is always NUL-terminated; returns out.
 */
const char *sfs_escape_line(const char *in, size_t max_in, char *out, size_t outsz);
/* Whether s is valid UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF). */
bool sfs_utf8_valid(const char *s);

/* Logging: level 0 error, 1 warning, 2 info, 3 debug. Every line is redacted. */
enum { SFS_LOG_ERR, SFS_LOG_WARN, SFS_LOG_INFO, SFS_LOG_DEBUG };
extern int sfs_log_level;
void sfs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
