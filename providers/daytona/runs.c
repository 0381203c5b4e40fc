/*
 * Runs: a detached session command under an sh wrapper, which appends the
 * command's merged output to RUNDIR/journal and, when it ends, writes
 * "exit N" or "signal N" to RUNDIR/status (temp + mv, so it is whole).
 * RUNDIR is ${TMPDIR:-/tmp}/sandboxfs-runs/KEY-N inside the sandbox: outside
 * the workspace, so runs do not show in `ls` or `git status`.
 */
#include "daytona.h"

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
	return (long)(sfs_opt_get_double("daytona.poll_timeout") * 1000);
}

int dt_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char sid[96], path[256];
	snprintf(sid, sizeof(sid), "sandboxfs-%s-%d", sb->key,
		 run->n); /* may be cut: never, a key < 40 and a number */
	json_t *body = json_pack("{s:s}", "sessionId", sid);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = dt_toolbox(sb, "POST", "/process/session", body, NULL, err);
	json_decref(body);
	if (r == -EBUSY)
		r = 0; /* a session left by an earlier daemon for this run number */
	if (r)
		return r;
	/* the environment rides along as arguments of the wrapper */
	char dir[256];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	struct sfs_kvlist env;
	r = sfs_sb_run_env(sb, &env, err);
	if (r)
		return r;
	struct sfs_sh_run wrap = {.dir = dir,
				  .workspace = sb->workspace ? sb->workspace : "/",
				  .cmd = run->cmd,
				  .env = &env};
	struct sfs_sh_cmd c;
	char *cmd = NULL;
	r = sfs_sh_wrapper(&c, &wrap, err);
	sfs_kv_free(&env);
	if (r)
		return r;
	r = sfs_sh_cmd_string(&c, &cmd, err);
	sfs_sh_cmd_free(&c);
	if (r)
		return r;
	body = json_pack("{s:s, s:b}", "command", cmd, "runAsync", 1);
	free(cmd);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/process/session/%s/exec",
		 sid); /* may be cut: never, sid < 96 */
	json_t *out = NULL;
	r = dt_toolbox(sb, "POST", path, body, &out, err);
	json_decref(body);
	if (r)
		return r;
	/* the command id, for whoever debugs a run by hand */
	const char *cid = json_string_value(json_object_get(out, "cmdId"));
	char file[4200];
	char text[256];
	/* a debugging note: cut to fit, and written as far as it was made */
	snprintf(text, sizeof(text), "session %s\ncommand %s\n", sid,
		 cid ? cid : "-"); /* message: may be cut */
	if (sfs_pathf(file, sizeof(file), "%s/daytona", run->dir) == 0)
		sfs_write_file_atomic(file, text, strlen(text), NULL);
	json_decref(out);
	run->state = SFS_RUN_RUNNING;
	return 0;
}

/* The kit's run scripts through process/execute (its output folds stderr
 * in: journals come base64-framed). */
static int sh_run(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		  int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	(void)bytes;
	int r = dt_exec_cmd(sb, c, timeout_ms, exit, out, err);
	if (!r && outlen)
		*outlen = *out ? strlen(*out) : 0;
	return r;
}

static const struct sfs_sh_exec dt_sh = {.what = "daytona", .run = sh_run};

int dt_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return sfs_sh_xrun_refresh(&dt_sh, sb, run, poll_timeout_ms(), err);
}

ssize_t dt_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err)
{
	return sfs_sh_xjournal_read(&dt_sh, sb, run, off, buf, max > READ_MAX ? READ_MAX : max,
				    poll_timeout_ms(), err);
}
