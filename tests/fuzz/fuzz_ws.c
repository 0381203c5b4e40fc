/*
 * libFuzzer harness: the WebSocket frame decoder (providers/http/ws_frame.c)
 * as a client reads a server's bytes.  The first two bytes choose where the
 * stream is cut; the messages and the verdict must be the same whatever the
 * cuts (a network cuts anywhere).  Every delivered text is UTF-8, every
 * control payload at most 125 bytes, every message within the limit; and
 * the input, framed by the encoder with a mask, decodes to itself on the
 * server side.
 */
#include "providers/http/ws.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT 4096

struct seen {
	unsigned long count, hash;
};

static int on_msg(const struct sfs_ws_msg *m, void *arg)
{
	struct seen *s = arg;
	uint32_t st = 0;
	if (m->opcode == SFS_WS_TEXT && (!sfs_ws_utf8(&st, m->data, m->len) || st))
		abort();
	if ((m->opcode & 8) && m->len > 125)
		abort();
	if (m->len > LIMIT)
		abort();
	s->hash = s->hash * 1099511628211ul ^ (unsigned)m->opcode ^ (unsigned)m->code << 8;
	for (size_t i = 0; i < m->len; i++)
		s->hash = s->hash * 1099511628211ul ^ m->data[i];
	s->count++;
	return 0;
}

static int run(const uint8_t *p, size_t n, size_t cut1, size_t cut2, struct seen *s)
{
	struct sfs_ws_decoder d = {.max_message = LIMIT};
	size_t cuts[3] = {cut1 < n ? cut1 : n, 0, n};
	cuts[1] = cut2 < n ? cut2 : n;
	if (cuts[1] < cuts[0])
		cuts[1] = cuts[0];
	size_t at = 0;
	int rc = 0;
	for (int i = 0; i < 3 && rc == 0; i++) {
		rc = sfs_ws_feed(&d, p + at, cuts[i] - at, on_msg, s, NULL);
		at = cuts[i];
	}
	int code = d.close_code;
	sfs_ws_decoder_free(&d);
	return rc ? rc * 10000 - code : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t c1 = data[0] % (size - 1), c2 = data[1] % (size - 1);
	const uint8_t *p = data + 2;
	size_t n = size - 2;
	struct seen whole = {0, 1469598103934665603ul}, cut = whole;
	int a = run(p, n, n, n, &whole);
	int b = run(p, n, c1, c2, &cut);
	if (a != b || whole.count != cut.count || whole.hash != cut.hash)
		abort();

	/* encoder -> server decoder: the payload comes back */
	const uint8_t mask[4] = {data[0], data[1], 0x5a, 0xa5};
	struct sfs_buf f = {0};
	if (n <= LIMIT && sfs_ws_frame(&f, true, SFS_WS_BINARY, p, n, mask) == 0) {
		struct sfs_ws_decoder d = {.server = true, .max_message = 1 << 20};
		struct seen s = {0, 1469598103934665603ul}, want = s;
		if (sfs_ws_feed(&d, f.buf, f.len, on_msg, &s, NULL) != 0 || s.count != 1)
			abort();
		struct sfs_ws_msg m = {.opcode = SFS_WS_BINARY, .data = p, .len = n};
		on_msg(&m, &want);
		if (want.hash != s.hash)
			abort();
		sfs_ws_decoder_free(&d);
	}
	sfs_buf_free(&f);
	return 0;
}
