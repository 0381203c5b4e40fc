/*
 * ctl files: splitting a write into lines, words and key=value options, and
 * matching each line against a verb table (lib9p parsecmd/lookupcmd shape).
 * Everything here is pure: no I/O, no daemon state, unit-tested in
 * tests/unit/test_ctl.c.
 */
#ifndef SFS_CTL_H
#define SFS_CTL_H

#include <stdbool.h>
#include <stddef.h>

#include "../providers/err.h"
#include "../providers/kv.h"

enum ctl_verb_flags {
	CTL_REST = 1,	  /* the rest of the line, verbatim, is the single argument (exec) */
	CTL_OPTS = 2,	  /* key=value words are options, not positional arguments */
	CTL_ANY_KEYS = 4, /* with CTL_OPTS: keys outside `keys` are allowed (provider options) */
};

struct ctl_verb {
	int id; /* the dispatcher's own enum */
	const char *name;
	int min_args; /* positional words after the verb */
	int max_args; /* -1: no limit */
	int flags;
	const char *const *keys; /* allowed option keys, NULL-terminated; "env." = any key with
				    that prefix; "setup*" = a key that may repeat;
				    NULL with CTL_OPTS means none known */
	const char *usage;	 /* shown in errors and in help */
};

struct ctl_cmd {
	const struct ctl_verb *verb;
	char *line;  /* the line as written, without its newline */
	char **args; /* positional words (after the verb), NULL-terminated */
	int nargs;
	struct sfs_kvlist opts; /* key=value words in order; later duplicates replace earlier */
	char *rest;		/* CTL_REST: the rest of the line after the verb, verbatim */
};

/*
 * Splits one line into words like sh: blanks separate, '...' is literal,
 * "..." honours \\ \" \$ \` and \newline, a backslash outside quotes quotes
 * the next character.  Fills *words (NULL-terminated, caller frees with
 * ctl_words_free) and, if offsets is non-NULL, the byte offset in line where
 * each word starts.  Unterminated quotes: -EINVAL with a message.
 */
int ctl_tokenize(const char *line, char ***words, int *nwords, size_t **offsets,
		 struct sfs_err *err);
void ctl_words_free(char **words);

/*
 * Parses one line against a table (terminated by an entry whose name is
 * NULL).  Errors are -EINVAL with a lib9p-style message naming the command,
 * e.g. `unknown command "frob x"` or `kill: bad signal "FOO" (usage: ...)`,
 * followed by the line and a caret under the bad token (tracefs error_log).
 * An empty or blank line: -ENODATA (callers skip it).
 */
int ctl_parse_line(const struct ctl_verb *table, const char *line, struct ctl_cmd *cmd,
		   struct sfs_err *err);
void ctl_cmd_free(struct ctl_cmd *cmd);

/*
 * Calls fn for each line of buf (split on '\n'; a final line without '\n'
 * counts; blank lines are skipped).  Stops at the first nonzero return of fn
 * and returns it.
 */
int ctl_for_each_line(const char *buf, size_t len, int (*fn)(const char *line, void *arg),
		      void *arg);

/*
 * One ctl line is at most CTL_LINE_MAX bytes (its newline not counted).  The
 * bound keeps what a ctl file holds between writes small, and every exec
 * command below it fits one argument of execve(2) (MAX_ARG_STRLEN, 128 KiB)
 * in every provider's wrapper, so a long command is refused here, naming the
 * limit, rather than failing later in a provider-specific way.
 */
#define CTL_LINE_MAX 65536

/* The unfinished last line of a ctl file, held across writes (linebuf.c). */
struct ctl_linebuf {
	char *held; /* bytes after the last newline so far, NUL-terminated */
	size_t len;
	bool skipping;	      /* dropping the rest of a line that failed, up to its newline */
	unsigned long writes; /* feeds so far */
	bool had_newline;     /* any newline fed so far */
};

/*
 * Takes one write's bytes.  On success *lines (malloc'd, NUL-terminated) is
 * the text of the lines this write completes -- the held beginning, then the
 * write up to its last newline -- or NULL when it completes none; the bytes
 * after the last newline are held.  -EINVAL with a message, and nothing kept,
 * for a NUL byte, a line longer than CTL_LINE_MAX, or bytes that continue a
 * line that failed before (see ctl_linebuf_fail).
 */
int ctl_linebuf_feed(struct ctl_linebuf *lb, const char *data, size_t len, char **lines,
		     struct sfs_err *err);
/* The lines of the last feed failed: the held tail is dropped, and the rest
 * of its line, up to its newline, fails in the writes that bring it. */
void ctl_linebuf_fail(struct ctl_linebuf *lb);
/*
 * At the last close: the held line (malloc'd) if it is not blank, else NULL.
 * Only a file whose one and only write was that line (`echo -n CMD > ctl`)
 * gives it back: after several writes, or after a newline, the tail may be
 * a command cut short by a writer that died mid-stream, so it is dropped,
 * and *dropped (may be NULL) gets it instead (malloc'd) for the error.
 */
char *ctl_linebuf_take(struct ctl_linebuf *lb, char **dropped);
bool ctl_linebuf_pending(const struct ctl_linebuf *lb);
void ctl_linebuf_free(struct ctl_linebuf *lb);

/* Sandbox names: [A-Za-z0-9][A-Za-z0-9._-]{0,62}, not "ctl" or "providers". */
int ctl_check_sandbox_name(const char *name, struct sfs_err *err);

/* "TERM", "SIGTERM", "term", "15" -> 15; anything else -EINVAL. */
int ctl_parse_signal(const char *s);
/* 15 -> "TERM"; unknown numbers -> NULL. */
const char *ctl_signal_name(int sig);

/* A decimal in [min, max] -> 0 and *out; else -EINVAL. */
int ctl_parse_int(const char *s, long min, long max, long *out);

#endif
