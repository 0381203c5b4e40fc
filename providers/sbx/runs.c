/*
 * Runs: the shell kit's journal wrapper started through `sbx exec`,
 * detached inside the VM (setsid, stdio on /dev/null, backgrounded), so
 * the exec returns at once and the run outlives it and the daemon.  Its
 * directory is ${TMPDIR:-/tmp}/sandboxfs-runs/KEY-N in the VM; status and
 * journal are read back with the kit's scripts (poll), kill is the kit's
 * group kill.
 */
#include "sbx.h"

#include "../options.h"
#include "../sh/sh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_MAX (512 * 1024)

/* Runs "$@" detached: a session of its own when setsid exists. */
static const char detach_script[] =
    "if command -v setsid >/dev/null 2>&1; then setsid \"$@\" </dev/null >/dev/null 2>&1 &\n"
    "else \"$@\" </dev/null >/dev/null 2>&1 & fi\n";

static long poll_ms(void)
{
	return (long)(sfs_opt_get_double("sbx.poll_timeout") * 1000);
}

int sbx_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char dir[256];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	struct sfs_kvlist env;
	int r = sfs_sb_run_env(sb, &env, err);
	if (r)
		return r;
	struct sfs_sh_run wrap = {.dir = dir,
				  .workspace = sb->workspace ? sb->workspace : "/",
				  .cmd = run->cmd,
				  .env = &env};
	struct sfs_sh_cmd w, d;
	r = sfs_sh_wrapper(&w, &wrap, err);
	sfs_kv_free(&env);
	if (r)
		return r;
	/* the wrapper's argv becomes the detacher's "$@": still argv only */
	r = sfs_sh_script(&d, detach_script, "sandboxfs-detach", (const char *const *)w.argv, err);
	sfs_sh_cmd_free(&w);
	if (r)
		return r;
	int code = 0;
	r = sbx_exec_n(sb, &d, NULL, 0, 0, 1, &code, NULL, NULL, err);
	sfs_sh_cmd_free(&d);
	if (!r && code)
		r = sfs_errf(err, -EIO, "sbx: run %d did not start (exit %d)", run->n, code);
	if (!r)
		run->state = SFS_RUN_RUNNING;
	return r;
}

int sbx_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return sfs_sh_xrun_refresh(&sbx_sh, sb, run, poll_ms(), err);
}

ssize_t sbx_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err)
{
	/* raw bytes: the exec's stdout is a pipe of its own, stderr apart */
	return sfs_sh_xjournal_read(&sbx_sh, sb, run, off, buf, max > READ_MAX ? READ_MAX : max,
				    poll_ms(), err);
}

int sbx_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err)
{
	return sfs_sh_xrun_kill(&sbx_sh, sb, run, sig, escalate, 2000, 0, err);
}
