/*
 * libFuzzer harness: the stream redaction of journal reads with
 * redact=journal (providers/redact_stream.c).  Input: a count of values,
 * each a length byte and its bytes, then the stream; the reading pattern
 * comes from the stream's bytes.  Read in pieces while it grows (the held
 * back tail hidden, a window of longest-1 bytes each side), the stream must
 * come out exactly as masking it whole gives it, the same length, with no
 * value left in it.
 */
#include "providers/redact.h"
#include "../unit/redact_piece.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXV 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t nv = data[0] % MAXV + 1, p = 1;
	char vbuf[MAXV][64];
	const char *v[MAXV];
	for (size_t i = 0; i < nv; i++) {
		size_t m = p < size ? 2 + data[p++] % 30 : 2;
		for (size_t k = 0; k < m; k++) {
			uint8_t c = p < size ? data[p++] : 'a';
			vbuf[i][k] = c ? (char)c : 'a';
		}
		vbuf[i][m] = '\0';
		v[i] = vbuf[i];
	}
	size_t n = size - p;
	const char *s = (const char *)data + p;
	char *whole = malloc(n + 1), *seen = malloc(n + 1);
	if (!whole || !seen)
		abort();
	memcpy(whole, s, n);
	if (sfs_redact_stream_mask(v, nv, whole, n))
		abort();
	size_t got = 0, have = 0, step = 0;
	while (got < n) {
		uint8_t r = s[step++ % n];
		if (have < n)
			have += 1 + r % (n - have);
		bool ended = have == n && (r & 1);
		size_t k = redact_piece(v, nv, s, have, ended, got, 1 + r % 7, seen + got);
		if (k == (size_t)-1)
			abort();
		got += k;
		if (have == n && step > 4 * n + 8) {
			k = redact_piece(v, nv, s, n, true, got, n, seen + got);
			if (k == (size_t)-1)
				abort();
			got += k;
		}
	}
	if (memcmp(seen, whole, n) != 0)
		abort(); /* a piece is not the whole stream's mask there */
	/* every byte of every occurrence in the raw stream is a mask byte (a
	 * value may be made of mask bytes, so searching the output for it
	 * would prove nothing) */
	for (size_t i = 0; i < nv; i++) {
		size_t m = strlen(v[i]);
		for (const char *h = s; (h = memmem(h, n - (size_t)(h - s), v[i], m)); h++)
			for (size_t b = (size_t)(h - s); b < (size_t)(h - s) + m; b++)
				if (seen[b] != '*' && !strchr(SFS_REDACTED, seen[b]))
					abort(); /* a value's byte is shown */
	}
	free(whole);
	free(seen);
	return 0;
}
