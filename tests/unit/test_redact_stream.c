/* providers/redact_stream.c: same-length masking of a stream read in pieces,
 * and the tail held back while the stream grows. */
#include "check.h"
#include "providers/redact.h"
#include "redact_piece.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static char *masked(const char *const *vals, size_t n, const char *in)
{
	char *b = strdup(in);
	CHECK(sfs_redact_stream_mask(vals, n, b, strlen(b)) == 0);
	return b;
}

static void test_mask_same_length(void)
{
	const char *v[] = {"hunter2-long-secret", "abcd"};
	char *b = masked(v, 2, "pw=hunter2-long-secret; x abcd y abcdabcd");
	CHECK_STREQ(b, "pw=[redacted]*********; x **** y ********");
	free(b);
	/* overlapping occurrences: every byte of each is hidden, the earliest
	 * occurrence's mask wins where they overlap */
	const char *o[] = {"abcabcabcabc"};
	b = masked(o, 1, "-abcabcabcabcabc-");
	CHECK_STREQ(b, "-[redacted]**]**-");
	free(b);
	const char *none[] = {"zzzz"};
	b = masked(none, 1, "nothing here");
	CHECK_STREQ(b, "nothing here");
	free(b);
}

static void test_holdback(void)
{
	const char *v[] = {"secretvalue", "tok-9"};
	CHECK_INT((int)sfs_redact_stream_holdback(v, 2, "out: secr", 9), 4);
	CHECK_INT((int)sfs_redact_stream_holdback(v, 2, "out: tok-", 9), 4);
	CHECK_INT((int)sfs_redact_stream_holdback(v, 2, "out: done", 9), 0);
	/* a whole value at the end is masked, not held back */
	CHECK_INT((int)sfs_redact_stream_holdback(v, 2, "x tok-9", 7), 0);
	/* never more than the longest value less one */
	const char *a[] = {"aaaa"};
	CHECK_INT((int)sfs_redact_stream_holdback(a, 1, "aaaaaaaaa", 9), 3);
	CHECK_INT((int)sfs_redact_stream_holdback(a, 1, "a", 1), 1);
	CHECK_INT((int)sfs_redact_stream_longest(v, 2), 11);
}

/* Random streams over a small alphabet, values that overlap themselves and
 * each other, read in random pieces while they grow: every piece is the
 * whole stream's mask at those offsets, and no value is ever shown. */
static void test_pieces_match_whole(void)
{
	const char *vals[] = {"abab", "babba", "aabaabab", "bbbbbbbbbbbbb"};
	size_t nv = 4;
	srand(12345);
	for (int round = 0; round < 3000; round++) {
		size_t n = (size_t)(rand() % 80);
		char stream[81];
		for (size_t i = 0; i < n; i++)
			stream[i] = "abbc"[rand() % 4];
		stream[n] = '\0';
		char whole[81];
		memcpy(whole, stream, n + 1);
		CHECK(sfs_redact_stream_mask(vals, nv, whole, n) == 0);
		/* a sequential reader with tiny reads while the stream grows */
		char seen[81];
		size_t got = 0, have = 0;
		while (got < n) {
			if (have < n && rand() % 2)
				have += 1 + (size_t)rand() % (n - have);
			bool ended = have == n && rand() % 3 == 0;
			size_t k = redact_piece(vals, nv, stream, have, ended, got,
						1 + (size_t)(rand() % 5), seen + got);
			if (k == 0 && have == n)
				k = redact_piece(vals, nv, stream, n, true, got, 5, seen + got);
			got += k;
		}
		seen[n] = '\0';
		if (memcmp(seen, whole, n) != 0) {
			CHECK(!"a piece differs from the whole stream's mask");
			fprintf(stderr, "    stream %s\n    whole  %s\n    pieces %s\n", stream,
				whole, seen);
			return;
		}
		for (size_t i = 0; i < nv; i++)
			CHECK(strstr(seen, vals[i]) == NULL);
		/* a reader that seeks back gets the same bytes */
		size_t off = n ? (size_t)rand() % n : 0;
		char again[81];
		size_t k = redact_piece(vals, nv, stream, n, true, off, n - off, again);
		CHECK(k == n - off && memcmp(again, whole + off, k) == 0);
	}
}

CHECK_MAIN(CHECK_CASE(test_mask_same_length), CHECK_CASE(test_holdback),
	   CHECK_CASE(test_pieces_match_whole))
