/*
 * Exec through the bridge: POST /v1/sandbox/ID/exec {argv, timeout_ms}
 * answers text/event-stream: `stdout`/`stderr` events whose data is a
 * base64 chunk, then `exit` {"exit_code": N}, or `error` {"error", "code"}.
 * The decoder below is pure (tests/unit/test_cloudflare_sse.c feeds it
 * split anywhere); cf_exec_cmd runs one kit command to its end with it.
 */
#include "cloudflare.h"

#include "../options.h"
#include "../sh/sh.h"
#include "../strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_event(const char *event, const char *data, size_t len, const char *id, void *arg)
{
	(void)id;
	struct cf_exec_dec *d = arg;
	if (d->exit >= 0 || d->failure[0])
		return -EPROTO; /* nothing may follow the end */
	int stream = !strcmp(event, "stdout") ? 1 : !strcmp(event, "stderr") ? 2 : 0;
	if (stream) {
		unsigned char *raw = malloc(len / 4 * 3 + 4);
		if (!raw)
			return -ENOMEM;
		long n = sfs_base64_decode(data, len, raw);
		int r = n < 0		  ? -EPROTO
			: n && d->on_data ? d->on_data(stream, raw, (size_t)n, d->arg)
					  : 0;
		free(raw);
		return r;
	}
	if (strcmp(event, "exit") && strcmp(event, "error"))
		return 0; /* an event we do not know (a keep-alive) */
	json_t *o = json_loadb(data, len, 0, NULL);
	int r = 0;
	if (!strcmp(event, "exit")) {
		json_t *code = json_object_get(o, "exit_code");
		if (json_is_integer(code) && json_integer_value(code) >= 0 &&
		    json_integer_value(code) < 256)
			d->exit = (int)json_integer_value(code);
		else
			r = -EPROTO;
	} else {
		const char *m = json_string_value(json_object_get(o, "error"));
		const char *c = json_string_value(json_object_get(o, "code"));
		snprintf(d->failure, sizeof(d->failure), "%s%s%s%s", m ? m : "exec failed",
			 c ? " (" : "", c ? c : "", c ? ")" : ""); /* message: may be cut */
	}
	json_decref(o);
	return r;
}

void cf_exec_dec_init(struct cf_exec_dec *d, int (*on_data)(int, const void *, size_t, void *),
		      void *arg)
{
	memset(d, 0, sizeof(*d));
	d->sse.on_event = on_event;
	d->sse.arg = d;
	d->on_data = on_data;
	d->arg = arg;
	d->exit = -1;
}

int cf_exec_dec_feed(struct cf_exec_dec *d, const void *data, size_t n)
{
	int r = sfs_sse_feed(&d->sse, data, n);
	if (r == -EPROTO)
		d->bad = true;
	return r;
}

void cf_exec_dec_free(struct cf_exec_dec *d)
{
	sfs_sse_free(&d->sse);
}

/* ---- one command to its end ------------------------------------------------ */

struct exec_out {
	struct cf_exec_dec dec;
	struct sfs_buf out, errtext;
};

static int collect(int stream, const void *data, size_t len, void *arg)
{
	struct exec_out *x = arg;
	if (stream == 1)
		return sfs_buf_add(&x->out, data, len) ? -ENOMEM : 0;
	if (x->errtext.len < 1024)
		return sfs_buf_add(&x->errtext, data, len) ? -ENOMEM : 0;
	return 0;
}

static int exec_sink(const void *data, size_t len, void *arg)
{
	struct exec_out *x = arg;
	return cf_exec_dec_feed(&x->dec, data, len) ? -1 : 0;
}

static int exec_reset(void *arg)
{
	struct exec_out *x = arg;
	cf_exec_dec_free(&x->dec);
	cf_exec_dec_init(&x->dec, collect, x);
	sfs_buf_reset(&x->out);
	sfs_buf_reset(&x->errtext);
	return 0;
}

int cf_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *cmd, long timeout, int *exit,
		char **out, size_t *outlen, struct sfs_err *err)
{
	char path[256];
	int r = cf_sb_begin(sb, "/exec", path, sizeof(path), err);
	if (r)
		return r;
	json_t *argv = json_array(), *body = NULL;
	for (size_t i = 0; argv && i < cmd->argc; i++)
		if (json_array_append_new(argv, json_string(cmd->argv[i]))) {
			json_decref(argv);
			argv = NULL;
		}
	if (argv)
		body = json_pack("{s:o}", "argv", argv);
	if (body && timeout > 0)
		json_object_set_new(body, "timeout_ms", json_integer(timeout));
	if (!body) {
		cf_sb_end(sb);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	struct exec_out x = {0};
	cf_exec_dec_init(&x.dec, collect, &x);
	/* the kit's scripts only read, or are written to be repeated */
	struct sfs_http_req req = {.method = "POST",
				   .json = body,
				   .sink = exec_sink,
				   .sink_reset = exec_reset,
				   .sink_arg = &x,
				   .retry_unsafe = true,
				   .timeout_ms = timeout};
	if (timeout)
		req.max_attempts = 2;
	struct sfs_http_resp resp;
	r = cf_req(path, &req, &resp, err);
	cf_sb_end(sb);
	json_decref(body);
	if (!r) {
		if (resp.status < 200 || resp.status >= 300)
			r = cf_status_err("exec in", sb->name, &resp, err);
		else if (x.dec.bad || resp.stopped)
			r = sfs_errf(err, -EPROTO,
				     "cloudflare: exec in %s: unreadable event stream", sb->name);
		else if (x.dec.failure[0])
			r = sfs_errf(err, -EIO, "cloudflare: exec in %s: %s", sb->name,
				     x.dec.failure);
		else if (x.dec.exit < 0)
			r = sfs_errf(err, -EIO,
				     "cloudflare: exec in %s: the stream ended without an exit "
				     "event",
				     sb->name);
		sfs_http_resp_free(&resp);
	}
	if (!r) {
		*exit = x.dec.exit;
		if (x.dec.exit && x.errtext.len) {
			size_t l = x.errtext.len;
			while (l && x.errtext.buf[l - 1] == '\n')
				l--;
			sfs_errf(err, -EIO, "%.*s", (int)l, x.errtext.buf);
		}
		if (outlen)
			*outlen = x.out.len;
		if (out && !(*out = sfs_buf_take(&x.out)))
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	cf_exec_dec_free(&x.dec);
	sfs_buf_free(&x.out);
	sfs_buf_free(&x.errtext);
	return r;
}
