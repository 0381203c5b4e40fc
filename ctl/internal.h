/*
 * Private to ctl/: the word reader shared by ctl_tokenize and ctl_parse_line,
 * and the error formatter that echoes the line with a caret (tracefs
 * error_log).
 */
#ifndef SFS_CTL_INTERNAL_H
#define SFS_CTL_INTERNAL_H

#include <stddef.h>

#include "../providers/err.h"

static inline int ctl_is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Reads the next word of line from *pos into out (capacity strlen(line) + 1)
 * with sh quoting.  Returns 1 with *start = the word's first byte and *pos
 * just past it, 0 at the end of the line, or -EINVAL for an unterminated
 * quote (the message is prefixed with "verb: " when verb is non-NULL).
 */
int ctl_next_word(const char *line, size_t *pos, char *out, size_t *start, const char *verb,
		  struct sfs_err *err);

/* ctl_tokenize with a verb to name in error messages. */
int ctl_split(const char *line, const char *verb, char ***words, int *nwords, size_t **offsets,
	      struct sfs_err *err);

/*
 * -EINVAL with "<fmt>\n  <line>\n  <pad>^", the caret under byte `caret` of
 * line (it may be past the end: where a missing word would go).
 */
int ctl_errf_at(struct sfs_err *err, const char *line, size_t caret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
