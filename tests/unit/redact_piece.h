/*
 * A reader's read of [off, off+size) of the first `have` bytes of a stream
 * that grows, as journal/journal.c makes it with redact=journal: only the
 * `visible` bytes (the held-back tail left out while the stream goes on),
 * through a window of longest-1 bytes on each side.  Shared by
 * tests/unit/test_redact_stream.c and tests/fuzz/fuzz_redact_stream.c.
 */
#ifndef SFS_TEST_REDACT_PIECE_H
#define SFS_TEST_REDACT_PIECE_H

#include "providers/redact.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Bytes copied to out, or (size_t)-1 when masking failed. */
static inline size_t redact_piece(const char *const *vals, size_t nv, const char *stream,
				  size_t have, bool ended, size_t off, size_t size, char *out)
{
	size_t vis = ended ? have : have - sfs_redact_stream_holdback(vals, nv, stream, have);
	if (off >= vis)
		return 0;
	size_t want = size < vis - off ? size : vis - off;
	size_t l = sfs_redact_stream_longest(vals, nv), reach = l > 1 ? l - 1 : 0;
	size_t from = off > reach ? off - reach : 0;
	size_t span = off - from + want + reach;
	if (from + span > have)
		span = have - from;
	char *win = malloc(span ? span : 1);
	if (!win)
		return (size_t)-1;
	memcpy(win, stream + from, span);
	int r = sfs_redact_stream_mask(vals, nv, win, span);
	if (!r)
		memcpy(out, win + (off - from), want);
	free(win);
	return r ? (size_t)-1 : want;
}

#endif
