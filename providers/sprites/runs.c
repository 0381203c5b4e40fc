/*
 * Runs.  Each is one exec session running the shell kit's journal wrapper,
 * with stdin open and max_run_after_disconnect long (sprites.keep), so the
 * daemon's socket closes right after session_info and the run goes on: its
 * journal and status live in ${TMPDIR:-/tmp}/sandboxfs-runs/KEY-N in the
 * sprite.  RUN/sprites (on this host) keeps the session id, through which
 * stdin is written later (attach, stream 0; EOF is stream 4).  Status,
 * journal reads and kill are short exec sessions of the kit's scripts; the
 * kit's kill signals the run's process group (the wrapper made it with
 * setsid, so the session's own kill route, which signals the session's
 * process, would reach only the wrapper) and checks it is gone.
 * Followers are attached sessions of the kit's `tail -f`, ended through
 * the kill route.
 */
#include "sprites.h"

#include "../config.h"
#include "../options.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_MAX (1024 * 1024)
#define STDIN_CHUNK (64 * 1024)

static long poll_timeout_ms(void)
{
	return (long)(sfs_opt_get_double("sprites.poll_timeout") * 1000);
}

/* Runs a kit command to its end: stdout and exit code. */
static int kit(struct sfs_sandbox *sb, struct sfs_sh_cmd *c, long timeout_ms, int *code, char **out,
	       size_t *len, struct sfs_err *err)
{
	int r = sp_exec_capture(sb, (const char *const *)c->argv, timeout_ms, code, out, len, err);
	sfs_sh_cmd_free(c);
	return r;
}

/* URLs past ~8 KiB are refused by many servers and proxies, and the API
 * takes a command only as cmd= query values: a longer run is staged. */
#define URL_ARGS_MAX 8000
#define STAGE_CHUNK 2000

/* The bytes argv takes in a URL, percent-encoded. */
static size_t url_bytes(char *const *argv)
{
	size_t n = 0;
	for (size_t i = 0; argv[i]; i++) {
		for (const unsigned char *p = (const unsigned char *)argv[i]; *p; p++) {
			bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
				     (*p >= '0' && *p <= '9') || strchr("-_.~", *p);
			n += plain ? 1 : 3;
		}
		n += 5; /* &cmd= */
	}
	return n;
}

/*
 * A run whose command line would not fit a URL: the kit's command, as one
 * quoted line, is appended in pieces to RUNDIR.sh (below ${TMPDIR:-/tmp}) by
 * short execs, and c becomes `sh RUNDIR.sh`, whose first words remove the
 * file and `exec` the line, so the session's process is still the wrapper.
 */
static int stage(struct sfs_sandbox *sb, const char *dir, struct sfs_sh_cmd *c, struct sfs_err *err)
{
	char *line = NULL;
	int r = sfs_sh_cmd_string(c, &line, err);
	size_t len = line ? strlen(line) : 0;
	for (size_t at = 0; !r && at < len; at += STAGE_CHUNK) {
		char *piece = strndup(line + at, STAGE_CHUNK);
		const char *argv[] = {"/bin/sh",
				      "-c",
				      "f=${TMPDIR:-/tmp}/$1.sh; mkdir -p \"${f%/*}\" || exit 1; "
				      "if [ \"$2\" = 0 ]; then printf 'rm -f -- \"$0\"; exec ' "
				      ">\"$f\" || exit 1; fi; printf '%s' \"$3\" >>\"$f\"",
				      "sandboxfs-stage",
				      dir,
				      at ? "1" : "0",
				      piece,
				      NULL};
		int code = -1;
		r = piece ? sp_exec_capture(sb, argv, poll_timeout_ms(), &code, NULL, NULL, err)
			  : sfs_errf(err, -ENOMEM, "out of memory");
		if (!r && code)
			r = sfs_errf(err, -EIO, "sprites: staging a long command failed (exit %d)",
				     code);
		free(piece);
	}
	free(line);
	if (r)
		return r;
	sfs_sh_cmd_free(c);
	const char *script = "exec /bin/sh \"${TMPDIR:-/tmp}/$1.sh\"";
	return sfs_sh_script(c, script, "sandboxfs-staged", (const char *const[]){dir, NULL}, err);
}

int sp_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char dir[256];
	sfs_sh_run_dir(sb, run, dir, sizeof dir);
	struct sfs_kvlist env; /* the sandbox's env and its secrets */
	int r = sfs_sb_run_env(sb, &env, err);
	if (r)
		return r;
	struct sfs_sh_run wrap = {.dir = dir,
				  .workspace = sb->workspace ? sb->workspace : "/",
				  .cmd = run->cmd,
				  .env = &env,
				  .keep_stdin = true};
	struct sfs_sh_cmd c;
	r = sfs_sh_wrapper(&c, &wrap, err);
	sfs_kv_free(&env);
	if (!r && url_bytes(c.argv) > URL_ARGS_MAX && (r = stage(sb, dir, &c, err)))
		sfs_sh_cmd_free(&c);
	if (r)
		return r;
	struct sp_exec e = {.argv = (const char *const *)c.argv,
			    .stdin_open = true,
			    .keep = sfs_opt_get("sprites.keep")};
	struct sfs_ws *ws;
	long session = 0;
	r = sp_exec_open(sb, &e, &ws, &session, err);
	sfs_sh_cmd_free(&c);
	if (r)
		return r;
	/* wait for session_info (or an early end); output goes to the journal */
	long t = poll_timeout_ms();
	while (!session) {
		const uint8_t *d;
		size_t len;
		int op = sfs_ws_recv(ws, t, &d, &len, NULL, err);
		if (op == SFS_WS_TEXT) {
			session = sp_session_info(d, len);
		} else if (op == SFS_WS_BINARY && len && d[0] == 3) {
			break; /* it ended already: nothing to attach to */
		} else if (op <= 0) {
			if (op == 0) /* upgraded, so started: only stdin needs the session */
				sfs_log(
				    SFS_LOG_WARN,
				    "sprites: run %d: no session_info came; its stdin cannot be "
				    "written",
				    run->n);
			else if (op == -ECONNRESET)
				r = 0; /* ended: the wrapper recorded its status */
			else
				r = op;
			break;
		}
	}
	/* a close frame: the session stays (max_run_after_disconnect) */
	sfs_ws_close(ws, SFS_WS_CLOSE_NORMAL, 0);
	if (r)
		return r;
	char file[4200], text[64];
	int tl = snprintf(text, sizeof text, "session %ld\n", session);
	if (sfs_pathf(file, sizeof file, "%s/sprites", run->dir) == 0)
		sfs_write_file_atomic(file, text, (size_t)tl, NULL);
	run->state = SFS_RUN_RUNNING;
	return 0;
}

static long run_session(struct sfs_run *run)
{
	char file[4200], *text = NULL;
	size_t len;
	if (sfs_pathf(file, sizeof file, "%s/sprites", run->dir) < 0 ||
	    sfs_read_file(file, &text, &len) < 0)
		return 0;
	long s = 0;
	sscanf(text, "session %ld", &s);
	free(text);
	return s;
}

/* The kit's run scripts through an exec that captures (stdout is its own
 * stream: journals need no base64). */
static int sh_run(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		  int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	(void)bytes;
	return sp_exec_capture(sb, (const char *const *)c->argv, timeout_ms, exit, out, outlen,
			       err);
}

static const struct sfs_sh_exec sp_sh = {.what = "sprites", .run = sh_run, .raw_stdout = true};

int sp_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return sfs_sh_xrun_refresh(&sp_sh, sb, run, poll_timeout_ms(), err);
}

ssize_t sp_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err)
{
	return sfs_sh_xjournal_read(&sp_sh, sb, run, off, buf, max > READ_MAX ? READ_MAX : max,
				    poll_timeout_ms(), err);
}

int sp_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		struct sfs_err *err)
{
	int grace = (int)(sfs_opt_get_double("sprites.kill_grace") * 1000);
	return sfs_sh_xrun_kill(&sp_sh, sb, run, sig, escalate, grace, poll_timeout_ms() + grace,
				err);
}

/* Attaches to the run's session and sends one binary message per chunk. */
static int stdin_send(struct sfs_sandbox *sb, struct sfs_run *run, uint8_t stream, const void *buf,
		      size_t len, struct sfs_err *err)
{
	long session = run_session(run);
	if (!session)
		return sfs_errf(err, -EPIPE, "sprites: run %d has no session to write to", run->n);
	struct sfs_ws *ws;
	long s;
	int r = sp_exec_open(sb, &(struct sp_exec){.session = session}, &ws, &s, err);
	if (r == -ENOENT)
		return sfs_errf(err, -EPIPE, "sprites: run %d's session is gone", run->n);
	if (r)
		return r;
	uint8_t *frame = malloc(1 + (len < STDIN_CHUNK ? len : STDIN_CHUNK));
	if (!frame) {
		sfs_ws_close(ws, SFS_WS_CLOSE_NORMAL, 0);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	const uint8_t *p = buf;
	frame[0] = stream;
	do {
		size_t n = len < STDIN_CHUNK ? len : STDIN_CHUNK;
		if (n) /* EOF (stream 4) has no payload, and buf is NULL */
			memcpy(frame + 1, p, n);
		r = sfs_ws_send(ws, SFS_WS_BINARY, frame, 1 + n, err);
		p += n;
		len -= n;
	} while (!r && len);
	free(frame);
	/* wait for the server's close so the bytes are in before we return */
	sfs_ws_close(ws, SFS_WS_CLOSE_NORMAL, 2000);
	return r;
}

int sp_stdin_write(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf, size_t len,
		   struct sfs_err *err)
{
	return len ? stdin_send(sb, run, 0, buf, len, err) : 0;
}

int sp_stdin_close(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return stdin_send(sb, run, 4, NULL, 0, err);
}

/* ---- followers ------------------------------------------------------------ */

struct sp_follower {
	struct sfs_ws *ws;
	long session;
	int wfd;
	pthread_t thread;
	int stop;
	char dir[256];
	char token[17];
};

static void *follow_main(void *arg)
{
	struct sp_follower *f = arg;
	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		const uint8_t *d;
		size_t len;
		int op = sfs_ws_recv(f->ws, 200, &d, &len, NULL, NULL);
		if (op == SFS_WS_TEXT) {
			/* session_info: the session unfollow ends through the kill route */
			long s = sp_session_info(d, len);
			if (s)
				__atomic_store_n(&f->session, s, __ATOMIC_RELEASE);
			continue;
		}
		if (op == 0)
			continue;
		if (op < 0)
			break;
		if (len && d[0] == 3)
			break;
		if (len < 2 || d[0] != 1)
			continue; /* stderr: the follower's pid line */
		const uint8_t *p = d + 1;
		size_t n = len - 1;
		while (n) {
			ssize_t w = send(f->wfd, p, n, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				goto out; /* the engine closed its end */
			p += w;
			n -= (size_t)w;
		}
	}
out:
	close(f->wfd);
	f->wfd = -1;
	return NULL;
}

int sp_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		      void **follower, struct sfs_err *err)
{
	struct sp_follower *f = calloc(1, sizeof *f);
	if (!f)
		return sfs_errf(err, -ENOMEM, "out of memory");
	sfs_sh_run_dir(sb, run, f->dir, sizeof f->dir);
	if (sfs_random_hex(f->token, 16)) {
		free(f);
		return sfs_errf(err, -EIO, "random: out of entropy");
	}
	struct sfs_sh_cmd c;
	int r = sfs_sh_follow(&c, f->dir, from, f->token, err);
	if (r) {
		free(f);
		return r;
	}
	r = sp_exec_open(sb, &(struct sp_exec){.argv = (const char *const *)c.argv, .keep = "0s"},
			 &f->ws, &f->session, err);
	sfs_sh_cmd_free(&c);
	int sv[2] = {-1, -1};
	if (!r && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		r = sfs_errf(err, -errno, "socketpair: %m");
	if (!r) {
		f->wfd = sv[1];
		if (pthread_create(&f->thread, NULL, follow_main, f)) {
			r = sfs_errf(err, -EAGAIN, "sprites: no thread for a journal follower");
			close(sv[0]);
			close(sv[1]);
		}
	}
	if (r) {
		sfs_ws_close(f->ws, SFS_WS_CLOSE_NORMAL, 0);
		free(f);
		return r;
	}
	*fd = sv[0];
	*follower = f;
	return 0;
}

void sp_journal_unfollow(struct sfs_sandbox *sb, void *follower)
{
	struct sp_follower *f = follower;
	if (!f)
		return;
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
	/* tail must not outlive us: end its session through the kill route,
	 * else the kit's unfollow (token file) */
	struct sfs_err err = {0};
	long session = __atomic_load_n(&f->session, __ATOMIC_ACQUIRE);
	if (!session || sp_kill_session(sb, session, "SIGTERM", "2s", &err) < 0) {
		struct sfs_sh_cmd c;
		int code;
		if (!sfs_sh_unfollow(&c, f->dir, 0, f->token, &err))
			kit(sb, &c, poll_timeout_ms(), &code, NULL, NULL, &err);
		if (err.code)
			sfs_log(SFS_LOG_WARN, "sprites: journal follower %s: %s", f->token,
				err.msg);
	}
	pthread_join(f->thread, NULL);
	sfs_ws_close(f->ws, SFS_WS_CLOSE_NORMAL, 0);
	free(f);
}
