/*
 * The exec WebSocket (provider-apis.md §3.3): the upgrade URL with the
 * command as repeated cmd= values, and the non-TTY framing: each binary
 * message starts with a stream id (0 stdin, 1 stdout, 2 stderr, 3 exit with
 * the code as next byte, 4 stdin EOF); text messages are JSON
 * (session_info, exit, port notices; "control:" lines are ignored).
 */
#include "sprites.h"

#include "../config.h"
#include "../options.h"
#include "../strbuf.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int add_param(struct sfs_buf *b, const char *key, const char *value)
{
	char *v = sfs_http_escape_component(value);
	if (!v)
		return -ENOMEM;
	int r = sfs_buf_printf(b, "%c%s=%s", strchr(b->buf, '?') ? '&' : '?', key, v);
	free(v);
	return r;
}

int sp_exec_open(struct sfs_sandbox *sb, const struct sp_exec *e, struct sfs_ws **ws, long *session,
		 struct sfs_err *err)
{
	*ws = NULL;
	*session = 0;
	const char *tok = sp_token();
	if (!tok)
		return sfs_errf(err, -EACCES,
				"sprites: no token (set SPRITES_TOKEN or sprites.token)");
	char *base = sfs_http_base_url("sprites.api_url", "SPRITES_API_URL", SP_DEFAULT_API);
	struct sfs_buf url = {0};
	int r = base ? sfs_buf_printf(&url, "%s/v1/sprites/%s/exec", base, sb->id) : -ENOMEM;
	free(base);
	if (!r && e->session) {
		r = sfs_buf_printf(&url, "/%ld", e->session);
	} else if (!r) {
		for (size_t i = 0; !r && e->argv[i]; i++)
			r = add_param(&url, "cmd", e->argv[i]);
		if (!r && e->dir)
			r = add_param(&url, "dir", e->dir);
		if (!r)
			r = add_param(&url, "stdin", e->stdin_open ? "true" : "false");
		if (!r && e->keep)
			r = add_param(&url, "max_run_after_disconnect", e->keep);
	}
	if (r) {
		sfs_buf_free(&url);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	long status = 0;
	struct sfs_ws_opts o = {.url = url.buf,
				.bearer = tok,
				.timeout_ms = (long)(sfs_opt_get_double("sprites.timeout") * 1000),
				.what = "sprites"};
	r = sfs_ws_connect(&o, ws, &status, NULL, err);
	sfs_buf_free(&url);
	if (!r && e->session)
		*session = e->session;
	return r;
}

/* A text message's session id, exit code or nothing ("control:" lines
 * are the control channel's, not JSON). */
static void on_text(const uint8_t *d, size_t len, long *session, int *exit)
{
	if (len >= 8 && !memcmp(d, "control:", 8))
		return;
	json_t *j = json_loadb((const char *)d, len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	if (type && !strcmp(type, "session_info")) {
		json_t *id = json_object_get(j, "session_id");
		if (json_is_integer(id))
			*session = (long)json_integer_value(id);
		else if (json_is_string(id))
			*session = strtol(json_string_value(id), NULL, 10);
	} else if (type && !strcmp(type, "exit") && exit && *exit < 0) {
		*exit = (int)json_integer_value(json_object_get(j, "exit_code"));
	}
	json_decref(j);
}

long sp_session_info(const uint8_t *d, size_t len)
{
	long session = 0;
	on_text(d, len, &session, NULL);
	return session;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Reads until the command's exit: stdout to out (may be NULL), the session
 * id when it comes.  -ETIMEDOUT at the deadline, -EIO when the connection
 * ended without an exit.
 */
static int read_to_exit(struct sfs_ws *ws, int64_t deadline, struct sfs_buf *out, long *session,
			int *exit, struct sfs_err *err)
{
	*exit = -1;
	for (;;) {
		long left = deadline < 0 ? -1 : (long)(deadline - now_ms());
		if (deadline >= 0 && left <= 0)
			return sfs_errf(err, -ETIMEDOUT, "sprites: exec timed out");
		const uint8_t *d;
		size_t len;
		int op = sfs_ws_recv(ws, left, &d, &len, NULL, err);
		if (op == 0)
			continue;
		if (op == -ECONNRESET)
			return *exit >= 0 ? 0
					  : sfs_errf(err, -EIO,
						     "sprites: the exec connection ended without "
						     "an exit code");
		if (op < 0)
			return op;
		if (op == SFS_WS_TEXT) {
			on_text(d, len, session, exit);
			if (*exit >= 0)
				return 0;
			continue;
		}
		if (len == 0)
			continue;
		if (d[0] == 1 && out && sfs_buf_add(out, d + 1, len - 1) < 0)
			return sfs_errf(err, -ENOMEM, "out of memory");
		if (d[0] == 3) {
			*exit = len > 1 ? d[1] : 0;
			return 0;
		}
	}
}

int sp_exec_capture(struct sfs_sandbox *sb, const char *const *argv, long timeout_ms, int *exit,
		    char **out, size_t *outlen, struct sfs_err *err)
{
	struct sfs_ws *ws;
	long session;
	/* a short command is ended with its socket (no long keep-alive) */
	struct sp_exec e = {.argv = argv, .keep = "0s"};
	int r = sp_exec_open(sb, &e, &ws, &session, err);
	if (r)
		return r;
	struct sfs_buf b = {0};
	r = read_to_exit(ws, timeout_ms < 0 ? -1 : now_ms() + timeout_ms, &b, &session, exit, err);
	sfs_ws_close(ws, SFS_WS_CLOSE_NORMAL, 0);
	if (!r && out) {
		if (outlen)
			*outlen = b.len;
		*out = sfs_buf_take(&b);
		if (!*out)
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	sfs_buf_free(&b);
	return r;
}

struct kill_progress {
	int code;
	bool complete;
};

static int on_kill_line(json_t *v, void *arg)
{
	struct kill_progress *k = arg;
	const char *type = json_string_value(json_object_get(v, "type"));
	if (type && !strcmp(type, "complete")) {
		k->complete = true;
		k->code = (int)json_integer_value(json_object_get(v, "exit_code"));
	}
	return 0;
}

int sp_kill_session(struct sfs_sandbox *sb, long session, const char *signal, const char *timeout,
		    struct sfs_err *err)
{
	char rest[160], path[320];
	if (sfs_pathf(rest, sizeof rest, "/exec/%ld/kill?signal=%s&timeout=%s", session, signal,
		      timeout) < 0 ||
	    sp_path(path, sizeof path, sb->id, rest) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sprites: kill: name too long");
	struct kill_progress k = {0};
	int r = sp_api_ndjson("POST", path, NULL, on_kill_line, &k, err);
	if (r == -ENOENT)
		return 0; /* 410: it had ended; 404: it is unknown */
	if (!r && !k.complete)
		r = sfs_errf(err, -EIO, "sprites: the kill of session %ld did not complete",
			     session);
	return r;
}
