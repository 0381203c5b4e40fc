/*
 * Redaction of a byte stream read in pieces (journal reads with
 * redact=journal): pure functions over an explicit list of values, so they
 * are unit-tested and fuzzed without the redactor's global list.
 *
 * Same length.  Each byte of an occurrence of a value is replaced, not the
 * occurrence by a marker, so the redacted stream has the raw stream's
 * offsets: st_size, seeks and a reader that comes back to an offset all see
 * the same bytes.  An occurrence of a value of 10 bytes or more reads
 * "[redacted]" then '*'s; a shorter one only '*'s.
 *
 * Stable across pieces.  A byte is masked when any occurrence of any value
 * covers it, and shows the mask of the earliest-starting such occurrence
 * (the longest of those starting there).  That occurrence starts at most
 * longest-1 bytes before the byte, so a window reaching that far on each
 * side of a piece decides every byte of the piece exactly as a pass over the
 * whole stream would.
 *
 * Held back.  While the stream may still grow, its last bytes can be the
 * beginning of a value whose end has not arrived; the longest such suffix
 * (a proper prefix of some value) is not shown until more bytes or the end
 * of the stream decide it (sfs_redact_stream_holdback).
 */
#include "redact.h"

#include <stdlib.h>
#include <string.h>

static const char marker[] = SFS_REDACTED;

size_t sfs_redact_stream_longest(const char *const *vals, size_t nvals)
{
	size_t l = 0;
	for (size_t i = 0; i < nvals; i++) {
		size_t m = strlen(vals[i]);
		if (m > l)
			l = m;
	}
	return l;
}

/* The longest suffix of buf[0..n) that is a proper prefix of v (length m):
 * the KMP automaton of v run over the last m-1 bytes (a proper prefix is
 * shorter than m, and a full match needs m bytes, so the state stays < m). */
static size_t suffix_prefix(const char *buf, size_t n, const char *v, size_t m, size_t *fail)
{
	if (m < 2 || n == 0)
		return 0;
	fail[0] = 0;
	for (size_t i = 1, k = 0; i < m; i++) {
		while (k && v[i] != v[k])
			k = fail[k - 1];
		if (v[i] == v[k])
			k++;
		fail[i] = k;
	}
	size_t take = n < m - 1 ? n : m - 1, k = 0;
	for (const char *p = buf + n - take; p < buf + n; p++) {
		while (k && *p != v[k])
			k = fail[k - 1];
		if (*p == v[k])
			k++;
	}
	return k;
}

size_t sfs_redact_stream_holdback(const char *const *vals, size_t nvals, const char *buf, size_t n)
{
	size_t best = 0, longest = sfs_redact_stream_longest(vals, nvals);
	size_t *fail = NULL, cap = 0;
	for (size_t i = 0; i < nvals; i++) {
		size_t m = strlen(vals[i]);
		if (m < 2 || m - 1 <= best)
			continue;
		if (m > cap) {
			size_t *grown = realloc(fail, m * sizeof(*fail));
			if (!grown) {
				/* cannot tell: hold back all that could be one */
				free(fail);
				return n < longest - 1 ? n : longest - 1;
			}
			fail = grown;
			cap = m;
		}
		size_t k = suffix_prefix(buf, n, vals[i], m, fail);
		if (k > best)
			best = k;
	}
	free(fail);
	return best;
}

struct hit {
	size_t start, len;
};

static int by_start(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->len > y->len ? -1 : x->len < y->len;
}

int sfs_redact_stream_mask(const char *const *vals, size_t nvals, char *buf, size_t n)
{
	struct hit *hits = NULL;
	size_t nh = 0, cap = 0;
	for (size_t i = 0; i < nvals; i++) {
		size_t m = strlen(vals[i]);
		if (m == 0)
			continue;
		for (const char *p = buf; (size_t)(p - buf) + m <= n;) {
			const char *h = memmem(p, n - (size_t)(p - buf), vals[i], m);
			if (!h)
				break;
			if (nh == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct hit *grown = realloc(hits, ncap * sizeof(*grown));
				if (!grown) {
					free(hits);
					return -1;
				}
				hits = grown;
				cap = ncap;
			}
			hits[nh++] = (struct hit){(size_t)(h - buf), m};
			p = h + 1; /* overlapping occurrences count too */
		}
	}
	if (nh)
		qsort(hits, nh, sizeof(*hits), by_start);
	/* in start order, [start, covered) is already masked by an earlier
	 * occurrence, which keeps its mask there */
	size_t covered = 0;
	for (size_t i = 0; i < nh; i++) {
		size_t s = hits[i].start, e = s + hits[i].len;
		for (size_t b = s > covered ? s : covered; b < e; b++) {
			size_t at = b - s;
			buf[b] = hits[i].len >= sizeof(marker) - 1 && at < sizeof(marker) - 1
				     ? marker[at]
				     : '*';
		}
		if (e > covered)
			covered = e;
	}
	free(hits);
	return 0;
}
