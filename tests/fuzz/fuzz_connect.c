/*
 * libFuzzer harness: the Connect-RPC envelope decoder (providers/http/
 * connect.c).  The first byte chooses where the stream is cut into pieces
 * and the second the largest message accepted; the messages seen and the
 * verdict must be the same whatever the cuts, every message must be within
 * the limit, and nothing follows an end-of-stream message.
 */
#include "providers/http/http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	unsigned long count, hash;
	size_t max;
	bool ended;
};

static int on_msg(unsigned flags, const char *json, size_t len, void *arg)
{
	struct seen *s = arg;
	if (len > s->max || json[len] != '\0' || s->ended)
		abort();
	if (flags & SFS_CONNECT_END)
		s->ended = true;
	s->hash = s->hash * 1099511628211ul ^ flags;
	for (size_t i = 0; i < len; i++)
		s->hash = s->hash * 1099511628211ul ^ (unsigned char)json[i];
	s->count++;
	/* what the provider does with an end message: no crash on any bytes */
	if (flags & SFS_CONNECT_END) {
		json_t *o = json_loadb(json, len, 0, NULL);
		struct sfs_err err = {0};
		sfs_connect_error(o, "fuzz", &err);
		json_decref(o);
	}
	return 0;
}

static int run(const char *d, size_t n, size_t step, struct seen *s)
{
	struct sfs_connect_dec dec = {.max = s->max, .on_msg = on_msg, .arg = s};
	int r = 0;
	for (size_t o = 0; o < n && !r;) {
		size_t k = step ? 1 + (o * 7 + step) % step : n - o;
		if (k > n - o)
			k = n - o;
		r = sfs_connect_feed(&dec, d + o, k);
		o += k;
	}
	if (!r)
		r = sfs_connect_finish(&dec);
	sfs_connect_dec_free(&dec);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t step = data[0] % 16;
	size_t max = 1 + (size_t)data[1] * 64;
	struct seen whole = {.max = max}, cut = {.max = max};
	int a = run((const char *)data + 2, size - 2, 0, &whole);
	int b = run((const char *)data + 2, size - 2, step, &cut);
	if (a != b || whole.count != cut.count || whole.hash != cut.hash)
		abort();
	return 0;
}
