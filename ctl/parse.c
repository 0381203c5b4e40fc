/*
 * Matching ctl lines against a verb table (lib9p parsecmd/lookupcmd), and
 * error messages that echo the line with a caret under the bad token
 * (tracefs error_log).
 */
#include "ctl.h"
#include "internal.h"
#include "../providers/redact.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOW_MAX 160  /* bytes of a long line shown around the caret */
#define SHOW_AFTER 40 /* of which at most this many follow the caret */
#define QUOTE_MAX 100 /* bytes of the line quoted in "unknown command" */

static int is_utf8_continuation(char c)
{
	return ((unsigned char)c & 0xc0) == 0x80;
}

/*
 * Copies line (escaped) after the two-blank indent it gets in the message, redacts it
 * there (so sfs_redact sees the same context as in the final message) and
 * returns it without the indent.
 */
static char *redacted_copy(const char *line, size_t n, size_t cap)
{
	char *buf = malloc(cap), *raw = malloc(n + 3);
	if (!buf || !raw) {
		free(buf);
		free(raw);
		return NULL;
	}
	memcpy(raw, "  ", 2);
	memcpy(raw + 2, line, n);
	raw[n + 2] = '\0';
	/* bytes that are not text are shown as \xNN, before the caret's
	 * column is measured; redacted before they are (a secret holding such
	 * a byte would not match once escaped) */
	sfs_escape_redacted(raw, n + 2, n + 2 + cap, buf, cap, NULL);
	free(raw);
	memmove(buf, buf + 2, strlen(buf + 2) + 1);
	return buf;
}

/*
 * The line as the message will show it, redacted, and the caret's column in
 * it.  Redacting here rather than only in sfs_errf keeps the caret under its
 * token when a secret value before it is replaced by "[redacted]".
 */
static int redact_line(const char *line, size_t caret, char **shown, size_t *col)
{
	size_t len = strlen(line);
	/* a byte escaped as \xNN is 4; "k=v" -> "k=[redacted]" at most triples */
	size_t cap = 12 * len + 64;
	size_t k = caret < len ? caret : len;
	char *full = redacted_copy(line, len, cap);
	char *prefix = redacted_copy(line, k, cap);
	if (!full || !prefix) {
		free(full);
		free(prefix);
		return -ENOMEM;
	}
	*col = strlen(prefix) + (caret - k);
	free(prefix);
	*shown = full;
	return 0;
}

/* Cuts a long line to a window around col, marking the cuts with "...". */
static void window(const char *s, size_t col, char *out, size_t outsz, size_t *outcol)
{
	size_t len = strlen(s), begin = 0, end = len;
	if (len > SHOW_MAX) {
		size_t c = col < len ? col : len;
		begin = c > SHOW_MAX - SHOW_AFTER ? c - (SHOW_MAX - SHOW_AFTER) : 0;
		while (begin < len && is_utf8_continuation(s[begin]))
			begin++;
		end = begin + SHOW_MAX < len ? begin + SHOW_MAX : len;
		while (end > begin && end < len && is_utf8_continuation(s[end]))
			end--;
	}
	const char *pre = begin ? "..." : "", *post = end < len ? "..." : "";
	snprintf(out, outsz, "%s%.*s%s", pre, (int)(end - begin), s + begin,
		 post); /* message: may be cut */
	*outcol = col - begin + strlen(pre);
}

/* Blanks up to the caret: tabs stay tabs, a multibyte character is one column. */
static void caret_pad(const char *shown, size_t col, char *pad, size_t padsz)
{
	size_t n = 0, len = strlen(shown);
	for (size_t i = 0; i < col && n + 1 < padsz; i++) {
		char c = i < len ? shown[i] : ' ';
		if (is_utf8_continuation(c))
			continue;
		pad[n++] = c == '\t' ? '\t' : ' ';
	}
	pad[n] = '\0';
}

int ctl_errf_at(struct sfs_err *err, const char *line, size_t caret, const char *fmt, ...)
{
	char head[SFS_ERR_MAX], shown[SHOW_MAX + 8], pad[SHOW_MAX + 8];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	char *redacted;
	size_t col;
	if (redact_line(line, caret, &redacted, &col))
		return sfs_errf(err, -EINVAL, "%s", head);
	window(redacted, col, shown, sizeof(shown), &col);
	free(redacted);
	caret_pad(shown, col, pad, sizeof(pad));
	return sfs_errf(err, -EINVAL, "%s\n  %s\n  %s^", head, shown, pad);
}

static const struct ctl_verb *lookup_verb(const struct ctl_verb *table, const char *name)
{
	for (const struct ctl_verb *v = table; v && v->name; v++)
		if (strcmp(v->name, name) == 0)
			return v;
	return NULL;
}

static void usage_text(const struct ctl_verb *verb, char *buf, size_t size)
{
	if (verb->usage)
		snprintf(buf, size, " (usage: %s)", verb->usage); /* message: may be cut */
	else
		buf[0] = '\0';
}

/* One past the last non-blank byte: where a missing word would go. */
static size_t end_caret(const char *line)
{
	size_t n = strlen(line);
	while (n > 0 && ctl_is_blank(line[n - 1]))
		n--;
	return n + 1;
}

static int unknown_command(const char *line, size_t start, struct sfs_err *err)
{
	size_t n = end_caret(line) - 1 - start;
	const char *more = n > QUOTE_MAX ? "..." : "";
	return ctl_errf_at(err, line, start, "unknown command \"%.*s%s\"",
			   (int)(n > QUOTE_MAX ? QUOTE_MAX : n), line + start, more);
}

static int arg_count_error(const struct ctl_verb *verb, const char *line, size_t caret,
			   const char *what, struct sfs_err *err)
{
	char usage[SFS_ERR_MAX / 2];
	usage_text(verb, usage, sizeof(usage));
	return ctl_errf_at(err, line, caret, "%s: %s%s", verb->name, what, usage);
}

/* key=value, with a key of [A-Za-z0-9._-]+; anything else is positional. */
static char *option_equals(char *word)
{
	char *eq = strchr(word, '=');
	if (!eq || eq == word)
		return NULL;
	for (char *p = word; p < eq; p++) {
		char c = *p;
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		if (!ok)
			return NULL;
	}
	return eq;
}

/* A key entry ending in '.' ("env.") admits any longer key with that prefix. */
static bool key_allowed(const struct ctl_verb *verb, const char *key)
{
	if (verb->flags & CTL_ANY_KEYS)
		return true;
	for (const char *const *k = verb->keys; k && *k; k++) {
		size_t n = strlen(*k);
		if (n && (*k)[n - 1] == '.') {
			if (strncmp(key, *k, n) == 0 && key[n])
				return true;
		} else {
			size_t m = n && (*k)[n - 1] == '*' ? n - 1 : n; /* "setup*": repeatable */
			if (strncmp(key, *k, m) == 0 && !key[m])
				return true;
		}
	}
	return false;
}

/* A key entry ending in '*' ("setup*") may be given more than once: each
 * value is kept, in order.  Any other key given twice is refused: which of
 * `isolation=bwrap ... isolation=none` was meant is not ours to guess. */
static bool key_repeatable(const struct ctl_verb *verb, const char *key)
{
	for (const char *const *k = verb->keys; k && *k; k++) {
		size_t n = strlen(*k);
		if (n > 1 && (*k)[n - 1] == '*' && strncmp(key, *k, n - 1) == 0 && !key[n - 1])
			return true;
	}
	return false;
}

static int parse_rest(struct ctl_cmd *cmd, const char *line, size_t pos, struct sfs_err *err)
{
	while (ctl_is_blank(line[pos]))
		pos++;
	if (!line[pos])
		return arg_count_error(cmd->verb, line, end_caret(line), "missing command", err);
	cmd->rest = strdup(line + pos);
	cmd->args = calloc(1, sizeof(*cmd->args));
	if (!cmd->rest || !cmd->args)
		return sfs_errf(err, -ENOMEM, "%s: out of memory", cmd->verb->name);
	return 0;
}

/* Files word i (consumed from words[]) as an option or a positional argument. */
static int take_word(struct ctl_cmd *cmd, const char *line, char **words, size_t *offsets, int i,
		     struct sfs_err *err)
{
	const struct ctl_verb *verb = cmd->verb;
	char *eq = (verb->flags & CTL_OPTS) ? option_equals(words[i]) : NULL;
	if (eq) {
		*eq = '\0';
		if (!key_allowed(verb, words[i])) {
			char usage[SFS_ERR_MAX / 2];
			usage_text(verb, usage, sizeof(usage));
			return ctl_errf_at(err, line, offsets[i], "%s: unknown option \"%s\"%s",
					   verb->name, words[i], usage);
		}
		bool repeatable = key_repeatable(verb, words[i]);
		if (!repeatable && sfs_kv_get(&cmd->opts, words[i]))
			return ctl_errf_at(err, line, offsets[i],
					   "%s: option \"%s\" given twice (give it once)",
					   verb->name, words[i]);
		if ((repeatable ? sfs_kv_add : sfs_kv_set)(&cmd->opts, words[i], eq + 1))
			return sfs_errf(err, -ENOMEM, "%s: out of memory", verb->name);
		free(words[i]);
		words[i] = NULL;
		return 0;
	}
	if (verb->max_args >= 0 && cmd->nargs >= verb->max_args)
		return arg_count_error(verb, line, offsets[i], "too many arguments", err);
	cmd->args[cmd->nargs++] = words[i];
	cmd->args[cmd->nargs] = NULL;
	words[i] = NULL;
	return 0;
}

static int parse_words(struct ctl_cmd *cmd, const char *line, struct sfs_err *err)
{
	char **words;
	size_t *offsets;
	int n;
	int r = ctl_split(line, cmd->verb->name, &words, &n, &offsets, err);
	if (r)
		return r;
	cmd->args = calloc((size_t)n, sizeof(*cmd->args)); /* n - 1 words after the verb + NULL */
	if (!cmd->args)
		r = sfs_errf(err, -ENOMEM, "%s: out of memory", cmd->verb->name);
	for (int i = 1; i < n && !r; i++)
		r = take_word(cmd, line, words, offsets, i, err);
	if (!r && cmd->nargs < cmd->verb->min_args)
		r = arg_count_error(cmd->verb, line, end_caret(line), "too few arguments", err);
	for (int i = 0; i < n; i++)
		free(words[i]); /* taken words were set to NULL */
	free(words);
	free(offsets);
	return r;
}

int ctl_parse_line(const struct ctl_verb *table, const char *line, struct ctl_cmd *cmd,
		   struct sfs_err *err)
{
	memset(cmd, 0, sizeof(*cmd));
	char *name = malloc(strlen(line) + 1);
	if (!name)
		return sfs_errf(err, -ENOMEM, "out of memory parsing a ctl line");
	size_t pos = 0, start = 0;
	int r = ctl_next_word(line, &pos, name, &start, NULL, err);
	if (r <= 0) {
		free(name);
		return r == 0 ? -ENODATA : r;
	}
	cmd->verb = lookup_verb(table, name);
	free(name);
	if (!cmd->verb)
		return unknown_command(line, start, err);
	cmd->line = strdup(line);
	if (!cmd->line)
		r = sfs_errf(err, -ENOMEM, "%s: out of memory", cmd->verb->name);
	else if (cmd->verb->flags & CTL_REST)
		r = parse_rest(cmd, line, pos, err);
	else
		r = parse_words(cmd, line, err);
	if (r)
		ctl_cmd_free(cmd);
	return r;
}

void ctl_cmd_free(struct ctl_cmd *cmd)
{
	if (!cmd)
		return;
	free(cmd->line);
	for (int i = 0; cmd->args && i < cmd->nargs; i++)
		free(cmd->args[i]);
	free(cmd->args);
	sfs_kv_free(&cmd->opts);
	free(cmd->rest);
	memset(cmd, 0, sizeof(*cmd));
}

static bool is_blank_line(const char *s)
{
	while (ctl_is_blank(*s))
		s++;
	return *s == '\0';
}

int ctl_for_each_line(const char *buf, size_t len, int (*fn)(const char *line, void *arg),
		      void *arg)
{
	if (len == 0)
		return 0;
	/* A NUL would silently cut a word short: refuse the whole write. */
	if (memchr(buf, '\0', len))
		return -EINVAL;
	char *copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, buf, len);
	copy[len] = '\0';
	int r = 0;
	char *line = copy;
	while (!r && line) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!is_blank_line(line))
			r = fn(line, arg);
		line = nl ? nl + 1 : NULL;
	}
	free(copy);
	return r;
}
