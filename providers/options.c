/* Option tables: lookup, value checks, "did you mean", defaults and --help. */
#include "options.h"
#include "config.h"
#include "provider.h"
#include "redact.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const struct sfs_opt_table *sfs_opt_tables(size_t *n)
{
	/* Built once, at startup (option parsing is single-threaded). */
	static struct sfs_opt_table tables[16];
	static size_t count;
	if (!count) {
		tables[count++] = (struct sfs_opt_table){"core", sfs_core_options};
		for (size_t i = 0; i < sfs_nproviders && count < sizeof(tables) / sizeof(*tables);
		     i++)
			if (sfs_providers[i]->options)
				tables[count++] = (struct sfs_opt_table){sfs_providers[i]->name,
									 sfs_providers[i]->options};
	}
	*n = count;
	return tables;
}

const struct sfs_opt *sfs_opt_find(const struct sfs_opt_table *t, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		for (const struct sfs_opt *o = t[i].opts; o->key; o++)
			if (!strcmp(o->key, key))
				return o;
	return NULL;
}

/* libfuse's own mount options (lib/mount.c, lib/fuse_lowlevel.c of libfuse
 * 3.x), given on the command line and handed on to libfuse unchanged.  A
 * trailing '=' marks an option that takes a value. */
static const char *const fuse_opts[] = {"allow_other",
					"allow_root",
					"auto_unmount",
					"blkdev",
					"blksize=",
					"default_permissions",
					"context=",
					"fscontext=",
					"defcontext=",
					"rootcontext=",
					"fsname=",
					"subtype=",
					"max_read=",
					"user=",
					"ro",
					"rw",
					"suid",
					"nosuid",
					"dev",
					"nodev",
					"exec",
					"noexec",
					"async",
					"sync",
					"dirsync",
					"atime",
					"noatime",
					"diratime",
					"nodiratime",
					"relatime",
					"norelatime",
					"strictatime",
					"nostrictatime",
					"lazytime",
					"nolazytime",
					"debug",
					NULL};

bool sfs_opt_is_fuse(const char *key)
{
	for (const char *const *f = fuse_opts; *f; f++) {
		size_t len = strlen(*f);
		if ((*f)[len - 1] == '=' ? !strncmp(*f, key, len - 1) && !key[len - 1]
					 : !strcmp(*f, key))
			return true;
	}
	return false;
}

/* Edit distance with adjacent transpositions (optimal string alignment):
 * a swapped pair of letters is one typo, not two. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return (size_t)-1;
	size_t d[65][65];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

/* A typo, not a different word: at most a third of the word, and at least 1. */
static size_t near_enough(const char *word)
{
	size_t len = strlen(word);
	return len < 6 ? 1 : len / 3;
}

struct nearest {
	const char *best;
	size_t dist;
	size_t limit;
};

static void consider(struct nearest *nb, const char *want, const char *cand, size_t len)
{
	char buf[128];
	if (len >= sizeof(buf))
		return;
	memcpy(buf, cand, len);
	buf[len] = '\0';
	size_t d = distance(want, buf);
	if (d <= nb->limit && d < nb->dist) {
		nb->best = cand;
		nb->dist = d;
	}
}

const char *sfs_opt_nearest(const struct sfs_opt_table *t, size_t n, const char *key)
{
	/* A provider's key given without its prefix ("kill_grace") names the
	 * first table's row that ends in it. */
	if (!strchr(key, '.'))
		for (size_t i = 0; i < n; i++)
			for (const struct sfs_opt *o = t[i].opts; o->key; o++) {
				const char *dot = strchr(o->key, '.');
				if (dot && !strcmp(dot + 1, key))
					return o->key;
			}
	struct nearest nb = {NULL, (size_t)-1, near_enough(key)};
	for (size_t i = 0; i < n; i++)
		for (const struct sfs_opt *o = t[i].opts; o->key; o++)
			consider(&nb, key, o->key, strlen(o->key));
	for (const char *const *f = fuse_opts; *f; f++) {
		size_t len = strlen(*f);
		consider(&nb, key, *f, (*f)[len - 1] == '=' ? len - 1 : len);
	}
	return nb.best;
}

/* The choice in "a|b|c" nearest to val, copied to out. */
static bool nearest_choice(const char *choices, const char *val, char *out, size_t len)
{
	struct nearest nb = {NULL, (size_t)-1, near_enough(val)};
	size_t blen = 0;
	for (const char *c = choices; *c;) {
		size_t l = strcspn(c, "|");
		const char *before = nb.best;
		consider(&nb, val, c, l);
		if (nb.best != before)
			blen = l;
		c += l + (c[l] == '|');
	}
	if (!nb.best || blen >= len)
		return false;
	memcpy(out, nb.best, blen);
	out[blen] = '\0';
	return true;
}

static bool is_choice(const char *choices, const char *val)
{
	size_t vl = strlen(val);
	for (const char *c = choices; *c;) {
		size_t l = strcspn(c, "|");
		if (l == vl && !strncmp(c, val, l))
			return true;
		c += l + (c[l] == '|');
	}
	return false;
}

static const char *type_arg(const struct sfs_opt *o)
{
	if (o->arg)
		return o->arg;
	switch (o->type) {
	case SFS_OPT_INT:
		return "N";
	case SFS_OPT_DOUBLE:
		return "SECONDS";
	case SFS_OPT_ENUM:
		return o->choices;
	case SFS_OPT_MODE:
		return "MODE";
	case SFS_OPT_PROVIDER:
		return "NAME";
	default:
		return "VALUE";
	}
}

static int bad_number(const struct sfs_opt *o, const char *val, double d, bool integer,
		      struct sfs_err *err)
{
	if (!integer && !isfinite(d))
		return sfs_errf(err, -EINVAL, "option %s: \"%s\" is not a number", o->key, val);
	if (d < o->min || d > o->max)
		return sfs_errf(err, -EINVAL, "option %s: %s is out of range (%g .. %g)", o->key,
				val, o->min, o->max);
	return 0;
}

static int check_value(const struct sfs_opt *o, const char *val, const char **canon,
		       struct sfs_err *err)
{
	char *end;
	*canon = val;
	switch (o->type) {
	case SFS_OPT_STRING:
		return 0;
	case SFS_OPT_BOOL: {
		static const char *const yes[] = {"true", "yes", "on", "1", NULL};
		static const char *const no[] = {"false", "no", "off", "0", NULL};
		for (size_t i = 0; yes[i]; i++) {
			if (!strcasecmp(val, yes[i])) {
				*canon = "true";
				return 0;
			}
			if (!strcasecmp(val, no[i])) {
				*canon = "false";
				return 0;
			}
		}
		return sfs_errf(err, -EINVAL, "option %s: \"%s\" is not a boolean (true or false)",
				o->key, val);
	}
	case SFS_OPT_INT: {
		errno = 0;
		long v = strtol(val, &end, 10);
		if (end == val || *end || errno)
			return sfs_errf(err, -EINVAL, "option %s: \"%s\" is not an integer", o->key,
					val);
		return bad_number(o, val, (double)v, true, err);
	}
	case SFS_OPT_DOUBLE: {
		double v = strtod(val, &end);
		if (end == val || *end)
			return sfs_errf(err, -EINVAL, "option %s: \"%s\" is not a number", o->key,
					val);
		return bad_number(o, val, v, false, err);
	}
	case SFS_OPT_MODE: {
		errno = 0;
		long v = strtol(val, &end, 8);
		if (end == val || *end || errno || v < 0 || v > 07777)
			return sfs_errf(err, -EINVAL,
					"option %s: \"%s\" is not an octal mode (0 .. 7777)",
					o->key, val);
		/* max, when set, is the mask of bits the key uses: a bit outside
		 * it would otherwise be dropped without a word (runs_mode=0777) */
		long mask = o->max > 0 ? (long)o->max : 07777;
		if (v & ~mask)
			return sfs_errf(err, -EINVAL,
					"option %s: %s sets bits outside %04lo, the only ones it "
					"uses",
					o->key, val, mask);
		return 0;
	}
	case SFS_OPT_ENUM: {
		if (is_choice(o->choices, val))
			return 0;
		char near[64];
		if (nearest_choice(o->choices, val, near, sizeof(near)))
			return sfs_errf(err, -EINVAL,
					"option %s: \"%s\" is not one of %s (did you mean %s?)",
					o->key, val, o->choices, near);
		return sfs_errf(err, -EINVAL, "option %s: \"%s\" is not one of %s", o->key, val,
				o->choices);
	}
	case SFS_OPT_PROVIDER: {
		if (sfs_provider_find(val))
			return 0;
		char names[256] = "", near[64];
		for (size_t i = 0; i < sfs_nproviders; i++) {
			if (i)
				strncat(names, "|", sizeof(names) - strlen(names) - 1);
			strncat(names, sfs_providers[i]->name, sizeof(names) - strlen(names) - 1);
		}
		if (nearest_choice(names, val, near, sizeof(near)))
			return sfs_errf(err, -EINVAL,
					"option %s: no provider \"%s\" (did you mean %s?)", o->key,
					val, near);
		return sfs_errf(err, -EINVAL, "option %s: no provider \"%s\" (there are %s)",
				o->key, val, names);
	}
	}
	return 0;
}

int sfs_opt_check(const struct sfs_opt_table *t, size_t n, const char *key, const char *val,
		  const char **canon, struct sfs_err *err)
{
	const struct sfs_opt *o = sfs_opt_find(t, n, key);
	if (!o) {
		const char *near = sfs_opt_nearest(t, n, key);
		if (near)
			return sfs_errf(err, -EINVAL, "unknown option \"%s\" (did you mean %.*s?)",
					key, (int)strcspn(near, "="), near);
		return sfs_errf(err, -EINVAL,
				"unknown option \"%s\" (sandboxfs --help lists every option)", key);
	}
	if (!val) {
		if (o->type == SFS_OPT_BOOL) {
			*canon = "true";
			return 0;
		}
		return sfs_errf(err, -EINVAL, "option %s needs a value: %s=%s", key, key,
				type_arg(o));
	}
	/* A message never repeats a credential. */
	if (sfs_redact_key_is_secret(key)) {
		struct sfs_err quiet = {0};
		int r = check_value(o, val, canon, &quiet);
		if (r)
			return sfs_errf(err, r, "option %s: the value is not valid", key);
		return 0;
	}
	return check_value(o, val, canon, err);
}

const char *sfs_opt_get(const char *key)
{
	const char *v = sfs_config_get(key, NULL);
	if (v)
		return v;
	size_t n;
	const struct sfs_opt_table *t = sfs_opt_tables(&n);
	const struct sfs_opt *o = sfs_opt_find(t, n, key);
	return o ? o->def : NULL;
}

double sfs_opt_get_double(const char *key)
{
	const char *v = sfs_opt_get(key);
	return v ? strtod(v, NULL) : 0;
}

bool sfs_opt_get_bool(const char *key)
{
	const char *v = sfs_opt_get(key);
	return v && !strcmp(v, "true");
}

int sfs_opt_apply_defaults(const struct sfs_opt_table *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (const struct sfs_opt *o = t[i].opts; o->key; o++)
			if (o->def && !sfs_config_get(o->key, NULL) &&
			    sfs_config_set(o->key, o->def))
				return -ENOMEM;
	return 0;
}

/* Writes text word-wrapped to lines of at most `width` columns, each after
 * the first indented by `indent` spaces. */
static void wrap(FILE *out, const char *text, int indent, int width)
{
	int col = 0;
	for (const char *w = text; *w;) {
		while (*w == ' ')
			w++;
		int l = (int)strcspn(w, " ");
		if (!l)
			break;
		if (col && col + 1 + l > width) {
			fprintf(out, "\n%*s", indent, "");
			col = 0;
		}
		fprintf(out, "%s%.*s", col ? " " : "", l, w);
		col += (col ? 1 : 0) + l;
		w += l;
	}
	fputc('\n', out);
}

void sfs_opt_print_help(FILE *out, const struct sfs_opt_table *t, size_t n)
{
	enum { COL = 30, WIDTH = 79 };
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "\n%s options:\n", t[i].title);
		for (const struct sfs_opt *o = t[i].opts; o->key; o++) {
			char head[96], text[1024];
			if (o->type == SFS_OPT_BOOL)
				snprintf(head, sizeof(head), "  -o %s",
					 o->key); /* message: may be cut */
			else
				snprintf(head, sizeof(head), "  -o %s=%s", o->key,
					 type_arg(o)); /* message: may be cut */
			fprintf(out, "%-*s", COL, head);
			if (strlen(head) >= COL)
				fprintf(out, "\n%-*s", COL, "");
			if (o->def && *o->def)
				snprintf(text, sizeof(text), "%s (default %s)", o->help,
					 o->def); /* message: may be cut */
			else
				snprintf(text, sizeof(text), "%s",
					 o->help); /* message: may be cut */
			wrap(out, text, COL, WIDTH - COL);
		}
	}
}
