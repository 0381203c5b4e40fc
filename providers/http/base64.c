/* Standard base64 (RFC 4648), as `base64` prints it. */
#include "http.h"

#include <errno.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long sfs_base64_decode(const char *in, size_t n, unsigned char *out)
{
	unsigned acc = 0;
	int bits = 0, quantum = 0, pad = 0;
	long len = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad++;
			quantum++;
			if (quantum == 4)
				quantum = 0;
			continue;
		}
		int v = value_of(c);
		if (v < 0 || pad)
			return -EINVAL;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		quantum = (quantum + 1) % 4;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (quantum != 0 || pad > 2)
		return -EINVAL;
	return len;
}

size_t sfs_base64_encode(const unsigned char *in, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

size_t sfs_base64url_encode(const unsigned char *in, size_t n, char *out)
{
	/* RFC 4648 §5 (JWTs): '-' and '_' for '+' and '/', no '=' padding */
	size_t o = sfs_base64_encode(in, n, out);
	while (o && out[o - 1] == '=')
		out[--o] = '\0';
	for (size_t i = 0; i < o; i++) {
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	return o;
}
