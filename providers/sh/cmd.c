/* Building the kit's commands: argv and single-quoted string forms. */
#include "sh.h"
#include "scripts.h"

#include "../http/http.h"
#include "../provider.h"
#include "../strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char sfs_sh_keepalive[] = SH_KEEPALIVE;

void sfs_sh_cmd_free(struct sfs_sh_cmd *c)
{
	for (size_t i = 0; c->argv && i < c->argc; i++)
		free(c->argv[i]);
	free(c->argv);
	c->argv = NULL;
	c->argc = 0;
}

/* Appends one argument, n bytes of s (a NUL inside is refused). */
static int push(struct sfs_sh_cmd *c, const char *s, size_t n)
{
	if (memchr(s, '\0', n))
		return -EINVAL;
	char **grown = realloc(c->argv, (c->argc + 2) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	c->argv = grown;
	if (!(c->argv[c->argc] = strndup(s, n)))
		return -ENOMEM;
	c->argv[++c->argc] = NULL;
	return 0;
}

static int pushs(struct sfs_sh_cmd *c, const char *s)
{
	return push(c, s, strlen(s));
}

static int fail(struct sfs_sh_cmd *c, int r, const char *what, struct sfs_err *err)
{
	sfs_sh_cmd_free(c);
	if (r == -ENOMEM)
		return sfs_errf(err, -ENOMEM, "out of memory");
	return sfs_errf(err, r, "%s", what);
}

/* sh -c SCRIPT NAME, then n arguments. */
static int build(struct sfs_sh_cmd *c, const char *script, const char *name,
		 const char *const *args, size_t n, struct sfs_err *err)
{
	*c = (struct sfs_sh_cmd){0};
	int r = pushs(c, "/bin/sh");
	if (!r)
		r = pushs(c, "-c");
	if (!r)
		r = pushs(c, script);
	if (!r)
		r = pushs(c, name);
	for (size_t i = 0; !r && i < n; i++)
		r = pushs(c, args[i] ? args[i] : "");
	return r ? fail(c, r, "sh: an argument holds a NUL byte", err) : 0;
}

int sfs_sh_script(struct sfs_sh_cmd *c, const char *script, const char *name,
		  const char *const *args, struct sfs_err *err)
{
	size_t n = 0;
	while (args && args[n])
		n++;
	return build(c, script, name, args, n, err);
}

int sfs_sh_quote(struct sfs_buf *b, const char *s, size_t len)
{
	if (memchr(s, '\0', len))
		return -EINVAL;
	/* inside single quotes every byte is literal but ' itself: close the
	 * quote, add an escaped quote, reopen */
	int r = sfs_buf_addc(b, '\'');
	for (size_t i = 0; !r && i < len; i++)
		r = s[i] == '\'' ? sfs_buf_add(b, "'\\''", 4) : sfs_buf_addc(b, s[i]);
	return r ? r : sfs_buf_addc(b, '\'');
}

int sfs_sh_cmd_string(const struct sfs_sh_cmd *c, char **out, struct sfs_err *err)
{
	struct sfs_buf b = {0};
	int r = 0;
	for (size_t i = 0; !r && i < c->argc; i++) {
		if (i)
			r = sfs_buf_addc(&b, ' ');
		/* the shell's own name needs no quotes: keeps the line readable */
		if (!r)
			r = i == 0 ? sfs_buf_adds(&b, "sh")
				   : sfs_sh_quote(&b, c->argv[i], strlen(c->argv[i]));
	}
	if (!r && !(*out = sfs_buf_take(&b)))
		r = -ENOMEM;
	if (r) {
		sfs_buf_free(&b);
		return sfs_errf(err, r, r == -ENOMEM ? "out of memory" : "sh: bad argument");
	}
	return 0;
}

/* ---- the scripts ---------------------------------------------------------- */

static int check_token(const char *t, struct sfs_err *err)
{
	bool ok = t && *t;
	for (const char *p = t; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		     (*p >= '0' && *p <= '9') || *p == '-' || *p == '_';
	return ok ? 0 : sfs_errf(err, -EINVAL, "sh: bad follower token \"%s\"", t ? t : "");
}

int sfs_sh_prep(struct sfs_sh_cmd *c, const char *rundir, const char *cmd, size_t cmd_len,
		struct sfs_err *err)
{
	int r = build(c, SH_PREP, "sandboxfs-prep", &rundir, 1, err);
	if (!r && (r = push(c, cmd, cmd_len ? cmd_len : strlen(cmd))))
		return fail(c, r, "sh: the command holds a NUL byte", err);
	return r;
}

int sfs_sh_wrapper(struct sfs_sh_cmd *c, const struct sfs_sh_run *run, struct sfs_err *err)
{
	const char *args[] = {run->dir, run->workspace ? run->workspace : "/"};
	int r = build(c, SH_WRAPPER, "sandboxfs-run", args, 2, err);
	if (r)
		return r;
	if ((r = push(c, run->cmd, run->cmd_len ? run->cmd_len : strlen(run->cmd))))
		return fail(c, r, "sh: the command holds a NUL byte", err);
	if ((r = pushs(c, run->keep_stdin ? "-" : "")))
		return fail(c, r, "", err);
	struct sfs_buf kv = {0};
	for (size_t i = 0; run->env && i < run->env->n; i++) {
		const char *k = run->env->v[i].key, *v = run->env->v[i].val;
		/* env(1) reads NAME=VALUE up to the first '=', and an option
		 * from a leading '-' */
		if (!*k || strchr(k, '=') || *k == '-') {
			sfs_buf_free(&kv);
			sfs_sh_cmd_free(c);
			return sfs_errf(err, -EINVAL,
					"environment name \"%s\" cannot be passed to a run", k);
		}
		sfs_buf_reset(&kv);
		r = sfs_buf_printf(&kv, "%s=%s", k, v ? v : "");
		if (!r)
			r = push(c, kv.buf, kv.len);
		if (r) {
			sfs_buf_free(&kv);
			return fail(c, r, "sh: an environment value holds a NUL byte", err);
		}
	}
	sfs_buf_free(&kv);
	return 0;
}

int sfs_sh_kill(struct sfs_sh_cmd *c, const char *rundir, int sig, bool escalate, int grace_ms,
		struct sfs_err *err)
{
	char signum[16], grace[16];
	snprintf(signum, sizeof(signum), "%d", sig);
	snprintf(grace, sizeof(grace), "%d", grace_ms < 0 ? 0 : grace_ms);
	const char *args[] = {rundir, signum, escalate ? "1" : "0", grace};
	return build(c, SH_KILL, "sandboxfs-kill", args, 4, err);
}

int sfs_sh_kill_answer(const char *out, int n, struct sfs_err *err)
{
	if (!strcmp(out, "ok"))
		return 0;
	if (!strcmp(out, "gone"))
		return sfs_errf(err, -ESRCH, "run %d: no process is left to signal", n);
	if (!strcmp(out, "no-pid"))
		return sfs_errf(err, -ESRCH, "run %d: no process group recorded", n);
	if (!strcmp(out, "survived"))
		return sfs_errf(err, -EIO, "run %d: its process group survived SIGKILL", n);
	return sfs_errf(err, -EIO, "run %d: kill: unexpected answer \"%.40s\"", n, out);
}

int sfs_sh_follow(struct sfs_sh_cmd *c, const char *rundir, off_t from, const char *token,
		  struct sfs_err *err)
{
	int r = check_token(token, err);
	if (r)
		return r;
	char first[32];
	snprintf(first, sizeof(first), "%lld", (long long)(from < 0 ? 0 : from) + 1);
	const char *args[] = {rundir, first, token};
	return build(c, SH_FOLLOW, "sandboxfs-follow", args, 3, err);
}

int sfs_sh_unfollow(struct sfs_sh_cmd *c, const char *rundir, int pid, const char *token,
		    struct sfs_err *err)
{
	int r = check_token(token, err);
	if (r)
		return r;
	char p[16] = "";
	if (pid > 0)
		snprintf(p, sizeof(p), "%d", pid);
	const char *args[] = {rundir, p, token};
	return build(c, SH_UNFOLLOW, "sandboxfs-unfollow", args, 3, err);
}

int sfs_sh_forget_followers(struct sfs_sh_cmd *c, const char *runsdir, bool kill,
			    struct sfs_err *err)
{
	const char *args[] = {runsdir, kill ? "1" : "0"};
	return build(c, SH_FORGET_FOLLOWERS, "sandboxfs-forget", args, 2, err);
}

int sfs_sh_read(struct sfs_sh_cmd *c, const char *file, off_t off, size_t max, bool base64,
		struct sfs_err *err)
{
	if (off < 0)
		return sfs_errf(err, -EINVAL, "sh: read at a negative offset");
	char first[32], count[32];
	snprintf(first, sizeof(first), "%lld", (long long)off + 1);
	snprintf(count, sizeof(count), "%zu", max);
	const char *args[] = {file, first, count, base64 ? "b64" : ""};
	return build(c, SH_READ, "sandboxfs-read", args, 4, err);
}

long sfs_sh_read_decode(const char *out, void *buf, size_t max)
{
	const char *frame = out ? strstr(out, "sfs-b64:") : NULL;
	if (!frame)
		return -EIO;
	frame += 8;
	size_t fl = strlen(frame);
	unsigned char *tmp = malloc(fl / 4 * 3 + 4);
	if (!tmp)
		return -ENOMEM;
	long got = sfs_base64_decode(frame, fl, tmp);
	if (got < 0) {
		free(tmp);
		return -EIO;
	}
	if ((size_t)got > max)
		got = (long)max;
	memcpy(buf, tmp, (size_t)got);
	free(tmp);
	return got;
}

/* sh: the wrapped command's stdout in a file, then printed base64-framed. */
static const char b64_wrap[] = "t=${TMPDIR:-/tmp}/.sfs-out.$$; \"$@\" >\"$t\"; s=$?; "
			       "printf sfs-b64:; base64 <\"$t\"; rm -f \"$t\"; exit $s";

int sfs_sh_b64(struct sfs_sh_cmd *c, const struct sfs_sh_cmd *cmd, struct sfs_err *err)
{
	return sfs_sh_script(c, b64_wrap, "sandboxfs-b64", (const char *const *)cmd->argv, err);
}

long sfs_sh_b64_unframe(struct sfs_buf *b)
{
	if (!b->buf)
		return -EIO;
	unsigned char *raw = malloc(b->len + 4);
	if (!raw)
		return -ENOMEM;
	long m = sfs_sh_read_decode(b->buf, raw, b->len + 4);
	if (m >= 0) {
		memcpy(b->buf, raw, (size_t)m);
		b->len = (size_t)m;
		b->buf[m] = '\0';
	}
	free(raw);
	return m;
}

int sfs_sh_status(struct sfs_sh_cmd *c, const char *rundir, struct sfs_err *err)
{
	return build(c, SH_STATUS, "sandboxfs-status", &rundir, 1, err);
}

int sfs_sh_alive(struct sfs_sh_cmd *c, const char *rundir, struct sfs_err *err)
{
	return build(c, SH_ALIVE, "sandboxfs-alive", &rundir, 1, err);
}

bool sfs_sh_parse_status(const char *text, bool *signal, int *code)
{
	int n;
	if (sscanf(text, "exit %d", &n) == 1) {
		*signal = false;
		*code = n;
		return true;
	}
	if (sscanf(text, "signal %d", &n) == 1) {
		*signal = true;
		*code = n;
		return true;
	}
	return false;
}

int sfs_sh_status_apply(const char *out, struct sfs_run *run, const char *what, struct sfs_err *err)
{
	/* the answer is the last line: anything before it is stray stderr */
	const char *line = out ? out : "", *p;
	while ((p = strchr(line, '\n')) && p[1])
		line = p + 1;
	int n = 0;
	bool sig;
	if (sfs_sh_parse_status(line, &sig, &n)) {
		run->state = sig ? SFS_RUN_KILLED : SFS_RUN_EXITED;
		run->code = n;
	} else if (!strncmp(line, "running", 7)) {
		run->state = SFS_RUN_RUNNING;
	} else if (!strncmp(line, "none", 4)) {
		/* the wrapper has not made its directory yet, or never will */
		run->state = time(NULL) - run->started < 60 ? SFS_RUN_RUNNING : SFS_RUN_LOST;
	} else if (!strncmp(line, "lost", 4)) {
		run->state = SFS_RUN_LOST;
	} else {
		return sfs_errf(err, -EPROTO, "%s: run %d: unexpected status \"%.60s\"", what,
				run->n, line);
	}
	return 0;
}

int sfs_sh_mkdir(struct sfs_sh_cmd *c, const char *path, struct sfs_err *err)
{
	return build(c, SH_MKDIR, "sandboxfs-mkdir", &path, 1, err);
}
