/* SPEC §5 symlink rewriting (see symlink_rewrite.h). */
#include "fs/symlink_rewrite.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SR_MAX_DEPTH 4096

/* A path component; name NULL is a directory below the root whose name we
 * do not know (the link's own directory and its ancestors up to the root). */
struct sr_comp {
	const char *name;
	size_t len;
};

struct sr_out {
	char *buf;
	size_t size, len;
	bool overflow;
};

static void sr_put(struct sr_out *o, const char *s, size_t n)
{
	if (o->overflow || o->len + n >= o->size) {
		o->overflow = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

/* Splits p at '/' into s, skipping empty and "." components; ".." pops
 * (never below floor, which it reports through *climbed).  Returns whether a
 * ".." came after a name. */
static bool sr_walk(const char *p, struct sr_comp *s, size_t *n, size_t floor, bool *climbed)
{
	bool seen_name = false, dotdot_after_name = false;

	while (*p) {
		const char *c = p;
		size_t len;

		while (*p && *p != '/')
			p++;
		len = (size_t)(p - c);
		while (*p == '/')
			p++;
		if (len == 0 || (len == 1 && c[0] == '.'))
			continue;
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			if (seen_name)
				dotdot_after_name = true;
			if (*n <= floor && climbed)
				*climbed = true;
			if (*n > 0)
				(*n)--;
			continue;
		}
		seen_name = true;
		s[*n].name = c;
		s[*n].len = len;
		(*n)++;
	}
	return dotdot_after_name;
}

static size_t sr_count(const char *p)
{
	size_t n = 1;

	for (; *p; p++)
		n += *p == '/';
	return n;
}

/* How many ".." components p has. */
static size_t sr_dotdots(const char *p)
{
	size_t n = 0;

	while (*p) {
		const char *c = p;

		while (*p && *p != '/')
			p++;
		n += p - c == 2 && c[0] == '.' && c[1] == '.';
		while (*p == '/')
			p++;
	}
	return n;
}

/* Where it lands: PREFIX and the absolute path in the sandbox. */
static void sr_put_outside(struct sr_out *o, const struct sr_comp *s, size_t n)
{
	sr_put(o, SFS_SYMLINK_OUTSIDE_PREFIX, strlen(SFS_SYMLINK_OUTSIDE_PREFIX));
	if (n == 0)
		sr_put(o, "/", 1);
	for (size_t i = 0; i < n; i++) {
		sr_put(o, "/", 1);
		sr_put(o, s[i].name, s[i].len);
	}
}

/* As written (SPEC §5: recognisable), below PREFIX and the pad components
 * it is relative to (a NULL name shows as `*`: a directory whose name we do
 * not know).  Callers make sure the target's ".." never climb above PREFIX,
 * not even for a tool that resolves them lexically. */
static void sr_put_as_written(struct sr_out *o, const struct sr_comp *pad, size_t npad,
			      const char *target)
{
	sr_put(o, SFS_SYMLINK_OUTSIDE_PREFIX, strlen(SFS_SYMLINK_OUTSIDE_PREFIX));
	for (size_t i = 0; i < npad; i++) {
		sr_put(o, "/", 1);
		if (pad[i].name)
			sr_put(o, pad[i].name, pad[i].len);
		else
			sr_put(o, "*", 1);
	}
	if (target[0] != '/')
		sr_put(o, "/", 1);
	sr_put(o, target, strlen(target));
}

int sfs_symlink_rewrite(const char *target, const char *root, int depth, char *out, size_t outsz)
{
	struct sr_out o = {.buf = out, .size = outsz};
	bool absolute = target[0] == '/', root_known = root && root[0] == '/';
	bool climbed = false, above = false, dotdot_after_name, inside;
	size_t rootn = 0, n = 0, k = 0, rcap, cap, npad, m;
	struct sr_comp *s, *r, *pad;
	int ret;

	if (outsz == 0)
		return -ENAMETOOLONG;
	out[0] = '\0';
	if (depth > SR_MAX_DEPTH)
		depth = -1;
	rcap = root_known ? sr_count(root) : 0;
	cap = rcap + (depth > 0 ? (size_t)depth : 0) + sr_count(target);
	/* s: where the target lands; pad: the link's directory (the base of
	 * a relative target), then scratch for checking its climb; r: the
	 * root's own components, kept for comparing */
	s = calloc(4 * cap + rcap + 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pad = s + cap; /* 2 * cap: the directory, then the scratch walk */
	r = s + 3 * cap;
	if (root_known)
		sr_walk(root, r, &rootn, 0, NULL);

	if (absolute) {
		sr_walk(target, s, &n, 0, &above);
		inside = root_known && depth >= 0 && n >= rootn;
		npad = 0;
	} else {
		npad = 0;
		if (depth >= 0) {
			memcpy(pad, r, rootn * sizeof(*s));
			npad = rootn;
			for (int i = 0; i < depth; i++)
				pad[npad++] = (struct sr_comp){NULL, 0};
		}
		memcpy(s, pad, npad * sizeof(*s));
		n = npad;
		dotdot_after_name = sr_walk(target, s, &n, rootn, &climbed);
		if (!climbed && !dotdot_after_name) {
			/* No ".." at all, or only leading ones that stay inside: as is. */
			sr_put(&o, target, strlen(target));
			goto done;
		}
		if (depth < 0 || (climbed && !root_known)) {
			/* Where it lands is unknown: as written, below one
			 * unknown directory per "..". */
			npad = sr_dotdots(target);
			for (size_t i = 0; i < npad; i++)
				pad[i] = (struct sr_comp){NULL, 0};
			sr_put_as_written(&o, pad, npad, target);
			goto done;
		}
		inside = n >= rootn;
		m = npad;
		memcpy(pad + npad, pad, npad * sizeof(*s));
		sr_walk(target, pad + npad, &m, 0, &above);
	}
	for (size_t i = 0; inside && i < rootn; i++)
		inside =
		    s[i].name && s[i].len == r[i].len && !memcmp(s[i].name, r[i].name, r[i].len);
	if (!inside) {
		/* As written from its base, unless it climbs above the
		 * sandbox's "/" (where ".." stays put, but a lexical resolver
		 * would leave PREFIX): then only where it lands. */
		if (above)
			sr_put_outside(&o, s, n);
		else
			sr_put_as_written(&o, pad, npad, target);
		goto done;
	}
	while (rootn + k < n && s[rootn + k].name == NULL)
		k++;
	for (size_t up = (size_t)depth - k, i = 0; i < up; i++) {
		bool more = i + 1 < up || rootn + k < n;

		sr_put(&o, more ? "../" : "..", more ? 3 : 2);
	}
	for (size_t i = rootn + k; i < n; i++) {
		sr_put(&o, s[i].name, s[i].len);
		if (i + 1 < n)
			sr_put(&o, "/", 1);
	}
	if (o.len == 0 && !o.overflow)
		sr_put(&o, ".", 1);
done:
	ret = o.overflow ? -ENAMETOOLONG : (int)o.len;
	free(s);
	return ret;
}
