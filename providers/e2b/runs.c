/*
 * Runs: the shell kit's journal wrapper, started through
 * process.Process/Start.  The stream is read only to its start event (the
 * wrapper's pid, kept in the run's directory for stdin) and then dropped:
 * the wrapper goes on, appending the command's merged output to
 * RUNDIR/journal and writing RUNDIR/status when it ends, so output survives
 * the daemon.  RUNDIR is ${TMPDIR:-/tmp}/sandboxfs-runs/KEY-N in the
 * sandbox, outside the workspace.  Status, journal reads and kills are the
 * kit's scripts, each one Start read to its end.
 */
#include "e2b.h"

#include "../config.h"
#include "../options.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READ_MAX (512 * 1024)

static long poll_timeout_ms(void)
{
	return (long)(sfs_opt_get_double("e2b.poll_timeout") * 1000);
}

static int got_pid(long pid, void *arg)
{
	*(long *)arg = pid;
	return 1; /* that is all we wait for: drop the stream */
}

/* The wrapper's pid as envd knows it (SendInput/CloseStdin address it). */
static long saved_pid(struct sfs_run *run)
{
	char file[4200], text[64];
	FILE *f = sfs_pathf(file, sizeof(file), "%s/e2b", run->dir) < 0 ? NULL : fopen(file, "re");
	long pid = 0;
	if (f) {
		if (fgets(text, sizeof(text), f))
			sscanf(text, "pid %ld", &pid);
		fclose(f);
	}
	return pid;
}

/* The run's environment (sb->env and secrets) as Start's `envs`: kept out of
 * the wrapper's argv, which ps in the sandbox shows. */
static int run_envs(struct sfs_sandbox *sb, json_t **out, struct sfs_err *err)
{
	struct sfs_kvlist env;
	int r = sfs_sb_run_env(sb, &env, err);
	if (r)
		return r;
	json_t *o = json_object();
	for (size_t i = 0; o && i < env.n; i++)
		if (json_object_set_new(o, env.v[i].key, json_string(env.v[i].val)))
			json_decref(o), o = NULL;
	sfs_kv_free(&env);
	if (!o)
		return sfs_errf(err, -ENOMEM, "out of memory");
	*out = o;
	return 0;
}

int e2b_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char dir[256];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	json_t *envs = NULL;
	int r = run_envs(sb, &envs, err);
	if (r)
		return r;
	struct sfs_sh_run wrap = {.dir = dir,
				  .workspace = sb->workspace ? sb->workspace : "/",
				  .cmd = run->cmd,
				  .keep_stdin = true}; /* envd's stdin pipe: SendInput */
	struct sfs_sh_cmd c;
	r = sfs_sh_wrapper(&c, &wrap, err);
	if (r) {
		json_decref(envs);
		return r;
	}
	json_t *body = e2b_start_body(&c, envs, true);
	sfs_sh_cmd_free(&c);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	long pid = 0;
	struct e2b_events ev = {.on_start = got_pid, .arg = &pid};
	r = e2b_stream(sb, "Start", body, 0, &ev, err);
	json_decref(body);
	if (r)
		return r;
	if (pid <= 0)
		return sfs_errf(err, -EPROTO, "e2b: run %d in %s: Start gave no pid", run->n,
				sb->name);
	char file[4200], text[64];
	int tl = snprintf(text, sizeof(text), "pid %ld\n", pid);
	if (sfs_pathf(file, sizeof(file), "%s/e2b", run->dir) == 0)
		sfs_write_file_atomic(file, text, (size_t)tl, NULL);
	run->state = SFS_RUN_RUNNING;
	return 0;
}

/* The kit's run scripts through envd's process Start (stdout apart from
 * stderr: journals need no base64). */
static int sh_run(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		  int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	(void)bytes;
	return e2b_exec_cmd(sb, c, timeout_ms, exit, out, outlen, err);
}

const struct sfs_sh_exec e2b_sh = {
    .what = "e2b", .run = sh_run, .abs_path = e2b_abs_path, .raw_stdout = true};

int e2b_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return sfs_sh_xrun_refresh(&e2b_sh, sb, run, poll_timeout_ms(), err);
}

ssize_t e2b_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err)
{
	return sfs_sh_xjournal_read(&e2b_sh, sb, run, off, buf, max > READ_MAX ? READ_MAX : max,
				    poll_timeout_ms(), err);
}

int e2b_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err)
{
	/* envd's SendSignal reaches the process it started, the wrapper, not
	 * the command's own process group: the kit's kill signals the group */
	double g = sfs_opt_get_double("e2b.kill_grace");
	return sfs_sh_xrun_kill(&e2b_sh, sb, run, sig, escalate, (int)(g < 0 ? 0 : g * 1000),
				(long)(g * 1000) + poll_timeout_ms(), err);
}

static int stdin_call(struct sfs_sandbox *sb, struct sfs_run *run, const char *method,
		      const void *buf, size_t len, struct sfs_err *err)
{
	long pid = saved_pid(run);
	if (pid <= 0)
		return sfs_errf(err, -EPIPE, "run %d: stdin: no process known to envd", run->n);
	char *b64 = NULL;
	if (buf && !(b64 = malloc(4 * ((len + 2) / 3) + 1)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (b64)
		sfs_base64_encode(buf, len, b64);
	json_t *body = b64 ? json_pack("{s:{s:I}, s:{s:s}}", "process", "pid", (json_int_t)pid,
				       "input", "stdin", b64)
			   : json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid);
	free(b64);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = e2b_rpc(sb, method, body, NULL, err);
	json_decref(body);
	/* the process is gone or its stdin closed: a pipe without a reader */
	if (r == -ENOENT || r == -EBUSY)
		r = sfs_errf(err, -EPIPE, "run %d: stdin: %s", run->n, err ? err->msg : "closed");
	return r;
}

int e2b_stdin_write(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf, size_t len,
		    struct sfs_err *err)
{
	/* envd takes bytes in messages of any size; keep each request modest */
	const char *p = buf;
	while (len) {
		size_t k = len > 256 * 1024 ? 256 * 1024 : len;
		int r = stdin_call(sb, run, "process.Process/SendInput", p, k, err);
		if (r)
			return r;
		p += k;
		len -= k;
	}
	return 0;
}

int e2b_stdin_close(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return stdin_call(sb, run, "process.Process/CloseStdin", NULL, 0, err);
}
