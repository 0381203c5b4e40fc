/*
 * WebSocket (RFC 6455) for the HTTP kit, in two parts:
 *
 *   ws_frame.c   the codec: frames encoded (client frames masked) and a push
 *                decoder that reassembles messages and checks everything the
 *                RFC says a client must check.  No I/O, no FUSE, no curl:
 *                unit-tested (tests/unit/test_ws.c) and fuzzed
 *                (tests/fuzz/fuzz_ws.c).
 *   ws_shake.c   the opening handshake as text: the request, the key and
 *                the Sec-WebSocket-Accept check (SHA-1 of sha1.c).
 *   ws_client.c  a client over libcurl's CONNECT_ONLY mode (curl_easy_send
 *                and curl_easy_recv), so TLS, proxies and timeouts are
 *                libcurl's (docs/websocket.md says why not libwebsockets).
 */
#ifndef SFS_HTTP_WS_H
#define SFS_HTTP_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "../strbuf.h"

enum sfs_ws_opcode {
	SFS_WS_CONT = 0x0,
	SFS_WS_TEXT = 0x1,
	SFS_WS_BINARY = 0x2,
	SFS_WS_CLOSE = 0x8,
	SFS_WS_PING = 0x9,
	SFS_WS_PONG = 0xA,
};

/* Close codes the decoder reports (RFC 6455 §7.4.1). */
enum {
	SFS_WS_CLOSE_NORMAL = 1000,
	SFS_WS_CLOSE_PROTOCOL = 1002,
	SFS_WS_CLOSE_NO_STATUS = 1005, /* a close frame without a code (never sent) */
	SFS_WS_CLOSE_BAD_DATA = 1007,  /* text that is not UTF-8 */
	SFS_WS_CLOSE_TOO_BIG = 1009,
};

/* A frame header is at most 14 bytes (2 + 8 length + 4 mask). */
#define SFS_WS_HEADER_MAX 14

/*
 * Writes one frame's header for a payload of len bytes into hdr and returns
 * its length.  With mask (a client's frame, 4 random bytes) the mask bit and
 * key are set and the caller masks the payload with sfs_ws_mask; without
 * (a server's frame) the payload goes as it is.
 */
size_t sfs_ws_header(uint8_t hdr[SFS_WS_HEADER_MAX], bool fin, int opcode, uint64_t len,
		     const uint8_t *mask);
/* XORs data with the key, starting at payload offset `at` (so a payload can
 * be masked in pieces). */
void sfs_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t at);
/* A whole frame (header + masked payload) appended to out. */
int sfs_ws_frame(struct sfs_buf *out, bool fin, int opcode, const void *payload, size_t len,
		 const uint8_t *mask);

/*
 * The decoder, fed bytes as they arrive in pieces of any size.  It delivers
 * whole messages (a text or binary message's fragments joined; text checked
 * as UTF-8 across fragments, so a character may span two) and every control
 * frame (ping, pong, close), which may arrive between fragments.  What it
 * refuses, with the close code the peer is to be sent:
 *   1002  reserved bits (no extension is negotiated), an unknown opcode, a
 *         control frame fragmented or over 125 bytes, a continuation with no
 *         message begun or a new message inside one, a length not in its
 *         shortest form or with the top bit set, a mask on a server's frame
 *         (or none on a client's), a close payload of one byte or with a
 *         code no endpoint may send
 *   1007  a text message (or close reason) that is not UTF-8
 *   1009  a message longer than max_message (checked from the length
 *         fields, before anything is buffered)
 * After an error the decoder refuses everything (the connection is over).
 */
struct sfs_ws_decoder {
	/* Set before the first feed. */
	size_t max_message; /* 0: 16 MiB */
	bool server;	    /* decode a client's frames (masked) */

	/* Private. */
	uint8_t hdr[SFS_WS_HEADER_MAX];
	size_t hdr_len;
	bool in_payload;
	bool fin;
	int opcode;
	bool masked;
	uint8_t mask[4];
	uint64_t frame_len, frame_done;
	int msg_opcode;	     /* 0: no fragmented message in progress */
	struct sfs_buf msg;  /* the data message being assembled */
	uint8_t ctl[125];    /* the control frame being read */
	uint32_t utf8_state; /* sfs_ws_utf8 state across fragments */
	int close_code;	     /* after an error: the code to close with */
	bool failed;
};

/* A delivered message: opcode TEXT, BINARY, PING, PONG or CLOSE.  For a
 * close, code is its status (1005 when it had none) and data/len its
 * reason.  data is valid until the callback returns. */
struct sfs_ws_msg {
	int opcode;
	const uint8_t *data;
	size_t len;
	int code;
};

/* Feeds n bytes.  on_msg's non-zero return stops the feed and is returned;
 * a protocol error is -EPROTO (-EMSGSIZE for 1009) with a message, and
 * d->close_code says how to close. */
int sfs_ws_feed(struct sfs_ws_decoder *d, const void *data, size_t n,
		int (*on_msg)(const struct sfs_ws_msg *m, void *arg), void *arg,
		struct sfs_err *err);
void sfs_ws_decoder_free(struct sfs_ws_decoder *d);

/*
 * Incremental UTF-8 check (no overlongs, surrogates or code points past
 * U+10FFFF).  *state starts at 0; returns false at the first bad byte.  A
 * text is whole and valid when every byte passed and *state is 0 again.
 */
bool sfs_ws_utf8(uint32_t *state, const uint8_t *s, size_t n);

/* Whether an endpoint may send close code `code` (§7.4). */
bool sfs_ws_close_code_ok(int code);

/* ---- the opening handshake (ws_shake.c) ------------------------------- */

/* SHA-1 (FIPS 180-4), only for Sec-WebSocket-Accept. */
void sfs_sha1(const void *data, size_t len, uint8_t out[20]);

/* Sec-WebSocket-Key: 16 random bytes, base64 (24 chars + NUL). */
int sfs_ws_make_key(char key[25], struct sfs_err *err);
/* Sec-WebSocket-Accept for key: base64(SHA-1(key + GUID)), 28 chars + NUL. */
void sfs_ws_accept(const char *key, char out[29]);
/*
 * Checks a response head (status line and headers, up to the blank line):
 * 101, Upgrade: websocket, Connection containing the token upgrade, the
 * right Sec-WebSocket-Accept and no extension or subprotocol we did not
 * ask for.  *status gets the HTTP status.  -EPROTO with a message otherwise;
 * for a status other than 101 the caller reads the body for the error.
 */
int sfs_ws_check_response(const char *head, size_t len, const char *key, long *status,
			  struct sfs_err *err);

/* ---- the client (ws_client.c) ----------------------------------------- */

struct sfs_ws;

struct sfs_ws_opts {
	const char *url;	    /* http(s) or ws(s) URL, with its query */
	const char *bearer;	    /* Authorization: Bearer, or NULL */
	const char *const *headers; /* more "Name: value" lines, or NULL */
	long timeout_ms;	    /* connect + handshake; 0: config http.timeout */
	size_t max_message;	    /* 0: 16 MiB */
	const char *what;	    /* message prefix ("sprites") */
	/* Response headers: the value of this one goes to *header_out. */
	const char *capture_header;
};

/*
 * Connects and upgrades.  On a refusal (a status other than 101) returns
 * the status's errno with the server's message (sfs_http_error_text) and
 * *status set.  *header_out (may be NULL) gets the captured header.
 */
int sfs_ws_connect(const struct sfs_ws_opts *o, struct sfs_ws **out, long *status,
		   char **header_out, struct sfs_err *err);
/* Sends one whole message (TEXT or BINARY), masked, unfragmented. */
int sfs_ws_send(struct sfs_ws *ws, int opcode, const void *data, size_t len, struct sfs_err *err);
/*
 * Waits up to timeout_ms (-1: forever) for the next text or binary message
 * and returns its opcode with *data and *len valid until the next call; pings
 * are answered, pongs dropped.  0 when the time ran out, -ECONNRESET once
 * the peer closed (*close_code, may be NULL, gets its code) or the
 * connection ended, another negative errno on a protocol error (after a
 * close frame with the right code was sent).
 */
int sfs_ws_recv(struct sfs_ws *ws, long timeout_ms, const uint8_t **data, size_t *len,
		int *close_code, struct sfs_err *err);
/* The socket, for poll(): readable means sfs_ws_recv has something to do
 * (TLS may also hold bytes already read: call recv with timeout 0 first). */
int sfs_ws_fd(const struct sfs_ws *ws);
/* Sends a close frame with code (0: none), waits up to linger_ms for the
 * peer's close, and frees everything.  ws may be NULL. */
void sfs_ws_close(struct sfs_ws *ws, int code, long linger_ms);

#endif
