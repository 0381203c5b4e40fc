/* Splitting a ctl line into words the way sh does (SPEC §3). */
#include "ctl.h"
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A word ends at a blank, or at a newline when a caller passes one. */
static int ends_word(char c)
{
	return c == '\0' || ctl_is_blank(c) || c == '\n';
}

static size_t skip_separators(const char *line, size_t p)
{
	for (;;) {
		if (ctl_is_blank(line[p]) || line[p] == '\n')
			p++;
		else if (line[p] == '\\' && line[p + 1] == '\n')
			p += 2; /* line continuation, as in sh */
		else
			return p;
	}
}

static int unterminated(const char *line, size_t quote, const char *verb, struct sfs_err *err)
{
	const char *kind = line[quote] == '\'' ? "single" : "double";
	if (verb)
		return ctl_errf_at(err, line, quote, "%s: unterminated %s quote", verb, kind);
	return ctl_errf_at(err, line, quote, "unterminated %s quote", kind);
}

/* '...': everything literal up to the closing quote. */
static int read_single(const char *line, size_t *p, char *out, size_t *o)
{
	size_t q = (*p)++;
	while (line[*p] && line[*p] != '\'')
		out[(*o)++] = line[(*p)++];
	if (!line[*p]) {
		*p = q;
		return -EINVAL;
	}
	(*p)++;
	return 0;
}

/* "...": backslash quotes only \ " $ ` and newline (which it removes). */
static int read_double(const char *line, size_t *p, char *out, size_t *o)
{
	size_t q = (*p)++;
	for (;;) {
		char c = line[*p];
		if (!c) {
			*p = q;
			return -EINVAL;
		}
		if (c == '"') {
			(*p)++;
			return 0;
		}
		char n = line[*p + 1];
		if (c == '\\' && n && strchr("\\\"$`\n", n)) {
			if (n != '\n')
				out[(*o)++] = n;
			*p += 2;
			continue;
		}
		out[(*o)++] = c;
		(*p)++;
	}
}

int ctl_next_word(const char *line, size_t *pos, char *out, size_t *start, const char *verb,
		  struct sfs_err *err)
{
	size_t p = skip_separators(line, *pos);
	size_t o = 0;
	if (!line[p]) {
		*pos = p;
		return 0;
	}
	*start = p;
	while (!ends_word(line[p])) {
		char c = line[p];
		int r = 0;
		if (c == '\'') {
			r = read_single(line, &p, out, &o);
		} else if (c == '"') {
			r = read_double(line, &p, out, &o);
		} else if (c == '\\' && line[p + 1] == '\n') {
			p += 2;
		} else if (c == '\\' && line[p + 1]) {
			out[o++] = line[p + 1];
			p += 2;
		} else {
			out[o++] =
			    c; /* includes a backslash at the very end: kept, as sh -c does */
			p++;
		}
		if (r)
			return unterminated(line, p, verb, err);
	}
	out[o] = '\0';
	*pos = p;
	return 1;
}

struct wordvec {
	char **words;
	size_t *offsets;
	int n, cap;
};

/* Room for one more word and the terminating NULL. */
static int wordvec_reserve(struct wordvec *v)
{
	if (v->n + 1 < v->cap)
		return 0;
	int cap = v->cap ? v->cap * 2 : 8;
	char **w = realloc(v->words, (size_t)cap * sizeof(*w));
	if (!w)
		return -ENOMEM;
	v->words = w;
	size_t *off = realloc(v->offsets, (size_t)cap * sizeof(*off));
	if (!off)
		return -ENOMEM;
	v->offsets = off;
	v->cap = cap;
	return 0;
}

static int wordvec_push(struct wordvec *v, const char *word, size_t offset)
{
	int r = wordvec_reserve(v);
	if (r)
		return r;
	char *dup = strdup(word);
	if (!dup)
		return -ENOMEM;
	v->words[v->n] = dup;
	v->offsets[v->n] = offset;
	v->n++;
	v->words[v->n] = NULL;
	return 0;
}

static void wordvec_free(struct wordvec *v)
{
	if (v->words) {
		for (int i = 0; i < v->n; i++)
			free(v->words[i]);
	}
	free(v->words);
	free(v->offsets);
}

static int split_into(const char *line, const char *verb, struct wordvec *v, struct sfs_err *err)
{
	char *scratch = malloc(strlen(line) + 1);
	if (!scratch || wordvec_reserve(v)) {
		free(scratch);
		return sfs_errf(err, -ENOMEM, "out of memory splitting a ctl line");
	}
	v->words[0] = NULL; /* a blank line still gets a NULL-terminated array */
	size_t pos = 0, start = 0;
	int r;
	while ((r = ctl_next_word(line, &pos, scratch, &start, verb, err)) == 1) {
		r = wordvec_push(v, scratch, start);
		if (r) {
			sfs_errf(err, r, "out of memory splitting a ctl line");
			break;
		}
	}
	free(scratch);
	return r;
}

int ctl_split(const char *line, const char *verb, char ***words, int *nwords, size_t **offsets,
	      struct sfs_err *err)
{
	struct wordvec v = {0};
	*words = NULL;
	*nwords = 0;
	if (offsets)
		*offsets = NULL;
	int r = split_into(line, verb, &v, err);
	if (r) {
		wordvec_free(&v);
		return r;
	}
	*words = v.words;
	*nwords = v.n;
	if (offsets)
		*offsets = v.offsets;
	else
		free(v.offsets);
	return 0;
}

int ctl_tokenize(const char *line, char ***words, int *nwords, size_t **offsets,
		 struct sfs_err *err)
{
	return ctl_split(line, NULL, words, nwords, offsets, err);
}

void ctl_words_free(char **words)
{
	if (!words)
		return;
	for (char **w = words; *w; w++)
		free(*w);
	free(words);
}
