/*
 * Runs: the shell kit's journal wrapper, started detached by one exec (the
 * exec's stream ends when the detaching shell does, the wrapper lives on),
 * appending the command's merged output to RUNDIR/journal and writing its
 * end to RUNDIR/status.  RUNDIR is ${TMPDIR:-/tmp}/sandboxfs-runs/KEY-N in
 * the sandbox, outside the workspace.  Status and journal are read back
 * with the kit's scripts (poll).  Journal reads are base64-framed by the
 * kit although the exec stream carries base64 chunks: the SDK under the
 * Worker hands output on as (UTF-8 decoded) text, which would mangle bytes
 * that are not UTF-8.
 */
#include "cloudflare.h"

#include "../options.h"
#include "../sh/sh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_MAX (512 * 1024)

/* sh: starts "$@" in the background with no tie to the exec's streams (in
 * a session of its own where setsid exists), then returns. */
static const char detach_script[] =
    "if command -v setsid >/dev/null 2>&1; then setsid \"$@\" </dev/null >/dev/null 2>&1 & "
    "else \"$@\" </dev/null >/dev/null 2>&1 & fi; echo started";

static long poll_timeout_ms(void)
{
	return (long)(sfs_opt_get_double("cloudflare.poll_timeout") * 1000);
}

int cf_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char dir[256];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	/* the bridge's exec has no env field: it rides along as the wrapper's arguments */
	struct sfs_sh_run wrap = {.dir = dir,
				  .workspace = sb->workspace ? sb->workspace : CF_WORKSPACE,
				  .cmd = run->cmd,
				  .env = &sb->env};
	struct sfs_sh_cmd w, c;
	int r = sfs_sh_wrapper(&w, &wrap, err);
	if (r)
		return r;
	r = sfs_sh_script(&c, detach_script, "sandboxfs-detach", (const char *const *)w.argv, err);
	sfs_sh_cmd_free(&w);
	if (r)
		return r;
	int code = 0;
	char *out = NULL;
	r = cf_exec_cmd(sb, &c, 0, &code, &out, NULL, err);
	sfs_sh_cmd_free(&c);
	if (!r && (code || !strstr(out, "started")))
		r = sfs_errf(err, -EIO, "cloudflare: run %d in %s did not start (exit %d)", run->n,
			     sb->name, code);
	free(out);
	if (!r)
		run->state = SFS_RUN_RUNNING;
	return r;
}

int cf_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return sfs_sh_xrun_refresh(&cf_sh, sb, run, poll_timeout_ms(), err);
}

ssize_t cf_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err)
{
	return sfs_sh_xjournal_read(&cf_sh, sb, run, off, buf, max > READ_MAX ? READ_MAX : max,
				    poll_timeout_ms(), err);
}
