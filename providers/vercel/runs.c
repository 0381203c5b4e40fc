/*
 * Runs: a detached command (`wait` false) under the shell kit's journal
 * wrapper, which appends the command's merged output to RUNDIR/journal and
 * writes its end to RUNDIR/status.  RUNDIR is ${TMPDIR:-/tmp}/
 * sandboxfs-runs/KEY-N in the sandbox, outside the workspace.  Status and
 * journal are read back with the kit's scripts in waited commands (poll).
 */
#include "vercel.h"

#include "../options.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_MAX (512 * 1024)

static long poll_timeout_ms(void)
{
	return (long)(sfs_opt_get_double("vercel.poll_timeout") * 1000);
}

int vc_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char dir[256], path[256];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	int r = vc_session_path(sb, "/cmd", path, sizeof(path), err);
	if (r)
		return r;
	/* the environment (secrets too) rides along as arguments of the wrapper */
	struct sfs_kvlist env;
	r = sfs_sb_run_env(sb, &env, err);
	if (r)
		return r;
	struct sfs_sh_run wrap = {.dir = dir,
				  .workspace = sb->workspace ? sb->workspace : "/",
				  .cmd = run->cmd,
				  .env = &env};
	struct sfs_sh_cmd c;
	r = sfs_sh_wrapper(&c, &wrap, err);
	sfs_kv_free(&env);
	if (r)
		return r;
	json_t *args = json_array(), *body = NULL;
	for (size_t i = 1; args && i < c.argc; i++)
		if (json_array_append_new(args, json_string(c.argv[i]))) {
			json_decref(args);
			args = NULL;
		}
	if (args)
		body = json_pack("{s:s, s:O, s:b}", "command", c.argv[0], "args", args, "wait", 0);
	json_decref(args);
	sfs_sh_cmd_free(&c);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	json_t *out = NULL;
	r = vc_call("POST", path, NULL, false, body, &out, err);
	json_decref(body);
	if (r)
		return r;
	/* the command id, for whoever debugs a run by hand */
	const char *cid = json_string_value(json_object_get(json_object_get(out, "command"), "id"));
	char file[4200], text[256];
	snprintf(text, sizeof(text), "command %s\n", cid ? cid : "-"); /* message: may be cut */
	if (sfs_pathf(file, sizeof(file), "%s/vercel", run->dir) == 0)
		sfs_write_file_atomic(file, text, strlen(text), NULL);
	json_decref(out);
	run->state = SFS_RUN_RUNNING;
	return 0;
}

int vc_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return sfs_sh_xrun_refresh(&vc_sh, sb, run, poll_timeout_ms(), err);
}

ssize_t vc_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err)
{
	return sfs_sh_xjournal_read(&vc_sh, sb, run, off, buf, max > READ_MAX ? READ_MAX : max,
				    poll_timeout_ms(), err);
}
