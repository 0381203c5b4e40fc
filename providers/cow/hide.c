/*
 * hide= patterns of base workspaces: a gitignore subset (cow.h says which),
 * matched against paths relative to the base.  Pure: unit-tested in
 * tests/unit/test_cow_hide.c.
 */
#include "cow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct cow_pattern {
	char *glob;    /* without the leading and trailing slash */
	bool anchored; /* matched against the whole path, else the name */
	bool dir_only; /* written with a trailing slash */
};

struct sfs_cow_hide {
	struct cow_pattern *v;
	size_t n;
	bool nocase; /* hide.case=insensitive: ASCII letters match either case */
};

static char fold(char c, bool nocase)
{
	return nocase && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static char unfold(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* A [...] class at p (just after '['); *end gets the position after ']'.
 * -1 when the class is unterminated (then '[' is a literal). */
static int class_match(const char *p, char c, bool nocase, const char **end)
{
	bool neg = *p == '!' || *p == '^';
	if (neg)
		p++;
	bool hit = false;
	const char *q = p;
	do {
		char lo = *q;
		if (!lo || lo == '/')
			return -1;
		if (lo == '\\' && q[1])
			lo = *++q;
		char hi = lo;
		if (q[1] == '-' && q[2] && q[2] != ']' && q[2] != '/') {
			hi = q[2];
			q += 2;
			if (hi == '\\' && q[1])
				hi = *++q;
		}
		if ((c >= lo && c <= hi) ||
		    (nocase && ((fold(c, true) >= lo && fold(c, true) <= hi) ||
				(unfold(c) >= lo && unfold(c) <= hi))))
			hit = true;
		q++;
	} while (*q != ']');
	*end = q + 1;
	return hit != neg;
}

/* One pattern item at *p against c; *p moves past it.  Stars are not items. */
static bool item_match(const char **p, char c, bool nocase)
{
	const char *q = *p, *end;
	switch (*q) {
	case '?':
		*p = q + 1;
		return true;
	case '[': {
		int m = class_match(q + 1, c, nocase, &end);
		if (m >= 0) {
			*p = end;
			return m;
		}
		*p = q + 1; /* no closing bracket: a literal '[' */
		return c == '[';
	}
	case '\\':
		if (q[1] && q[1] != '/')
			q++;
		/* fall through */
	default:
		*p = q + 1;
		return fold(*q, nocase) == fold(c, nocase);
	}
}

/* Where the pattern's component at p ends (its '/' or NUL). */
static const char *seg_end(const char *p)
{
	for (; *p && *p != '/'; p++)
		if (*p == '\\' && p[1] && p[1] != '/')
			p++;
	return p;
}

/* One component: the classic wildcard match, backtracking only to the last
 * star, so a miss costs at most len(p) * len(s) steps, whatever the pattern. */
static bool seg_match(const char *p, const char *pe, const char *s, const char *se, bool nocase)
{
	const char *star_p = NULL, *star_s = NULL;
	while (s < se) {
		if (p < pe && *p == '*') {
			while (p < pe && *p == '*')
				p++;
			star_p = p;
			star_s = s;
			continue;
		}
		const char *np = p;
		if (p < pe && item_match(&np, *s, nocase) && np <= pe) {
			p = np;
			s++;
			continue;
		}
		if (!star_p)
			return false;
		p = star_p;
		s = ++star_s;
	}
	while (p < pe && *p == '*')
		p++;
	return p == pe;
}

static bool glob_from(const char *p, const char *s, bool nocase)
{
	for (;;) {
		const char *pe = seg_end(p);
		if (pe - p == 2 && p[0] == '*' && p[1] == '*') {
			if (!*pe)
				return true; /* a trailing ** matches everything */
			/* zero or more whole directories */
			for (const char *t = s;; t = strchr(t, '/') + 1) {
				if (glob_from(pe + 1, t, nocase))
					return true;
				if (!strchr(t, '/'))
					return false;
			}
		}
		const char *se = strchrnul(s, '/');
		if (!seg_match(p, pe, s, se, nocase))
			return false;
		if (!*pe || !*se)
			return !*pe && !*se;
		p = pe + 1;
		s = se + 1;
	}
}

bool sfs_cow_glob(const char *p, const char *s)
{
	return glob_from(p, s, false);
}

bool sfs_cow_glob_nocase(const char *p, const char *s)
{
	return glob_from(p, s, true);
}

int sfs_cow_hide_case(const char *value, bool *nocase, struct sfs_err *err)
{
	*nocase = value && strcmp(value, "insensitive") == 0;
	if (!value || *nocase || strcmp(value, "sensitive") == 0)
		return 0;
	return sfs_errf(err, -EINVAL, "new: hide.case=%s: sensitive or insensitive", value);
}

/* ** components a pattern may have: each tries every directory level */
#define MAX_DOUBLE_STARS 3

static int add_pattern(struct sfs_cow_hide *h, const char *text, size_t len, struct sfs_err *err)
{
	char *g = strndup(text, len);
	if (!g)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct cow_pattern pat = {.glob = g};
	size_t l = strlen(g);
	if (l && g[l - 1] == '/') {
		pat.dir_only = true;
		g[--l] = '\0';
	}
	if (g[0] == '/') {
		pat.anchored = true;
		memmove(g, g + 1, l--);
	}
	if (strchr(g, '/'))
		pat.anchored = true;
	const char *bad = NULL;
	int stars2 = 0;
	for (const char *c = g; *c; c = *seg_end(c) ? seg_end(c) + 1 : seg_end(c))
		stars2 += seg_end(c) - c == 2 && c[0] == '*' && c[1] == '*';
	if (!*g)
		bad = "an empty pattern";
	else if (stars2 > MAX_DOUBLE_STARS)
		bad = "at most 3 ** components";
	else if (text[0] == '!')
		bad = "negation (!) is not supported";
	for (const char *c = g; !bad && *c;) {
		const char *e = strchrnul(c, '/');
		if ((e - c == 1 && c[0] == '.') || (e - c == 2 && c[0] == '.' && c[1] == '.'))
			bad = "no . or .. components";
		else if (e == c)
			bad = "no empty components (//)";
		c = *e ? e + 1 : e;
	}
	if (bad) {
		int r = sfs_errf(err, -EINVAL, "new: hide=%.*s: %s", (int)len, text, bad);
		free(g);
		return r;
	}
	struct cow_pattern *v = realloc(h->v, (h->n + 1) * sizeof(*v));
	if (!v) {
		free(g);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	h->v = v;
	h->v[h->n++] = pat;
	return 0;
}

int sfs_cow_hide_parse(const char *list, bool nocase, struct sfs_cow_hide **out,
		       struct sfs_err *err)
{
	*out = NULL;
	if (!list || !*list)
		return 0;
	struct sfs_cow_hide *h = calloc(1, sizeof(*h));
	if (!h)
		return sfs_errf(err, -ENOMEM, "out of memory");
	h->nocase = nocase;
	int r = 0;
	for (const char *c = list; !r;) {
		const char *e = strchrnul(c, ',');
		r = add_pattern(h, c, (size_t)(e - c), err);
		if (!*e)
			break;
		c = e + 1;
	}
	if (r) {
		sfs_cow_hide_free(h);
		return r;
	}
	*out = h;
	return 0;
}

static bool pattern_hits(const struct cow_pattern *p, const char *path, const char *name,
			 bool is_dir, bool nocase)
{
	if (p->dir_only && !is_dir)
		return false;
	const char *s = p->anchored ? path : name;
	/* insensitive hides what either reading matches: a negated class
	 * ([!L]) read without case matches less, and turning the option on
	 * must never show a file it hid */
	return glob_from(p->glob, s, false) || (nocase && glob_from(p->glob, s, true));
}

bool sfs_cow_hide_match(const struct sfs_cow_hide *h, const char *relpath, bool is_dir)
{
	if (!h)
		return false;
	size_t len = strlen(relpath);
	char *path = strdup(relpath);
	if (!path)
		return false;
	bool hit = false;
	/* each parent directory, then the path itself */
	for (size_t end = 0; !hit && end <= len; end++) {
		if (end < len && path[end] != '/')
			continue;
		char saved = path[end];
		path[end] = '\0';
		const char *slash = strrchr(path, '/');
		const char *name = slash ? slash + 1 : path;
		bool dir = end < len || is_dir;
		for (size_t i = 0; *name && !hit && i < h->n; i++)
			hit = pattern_hits(&h->v[i], path, name, dir, h->nocase);
		path[end] = saved;
	}
	free(path);
	return hit;
}

void sfs_cow_hide_free(struct sfs_cow_hide *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i].glob);
	free(h->v);
	free(h);
}
