/*
 * Journal followers: the shell kit's follow script (tail -f of the journal
 * from an offset) under a `sbx exec` the daemon keeps running; the exec's
 * stdout pipe is the follower's fd.  Ending the CLI alone could leave tail
 * running in the VM, so unfollow stops it there first with the kit's
 * unfollow script (by the token file the run's wrapper also uses to stop
 * followers when the run ends), then reaps the CLI (KILLing its group if
 * it lingers).
 */
#include "sbx.h"

#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct sbx_follower {
	pid_t pid; /* the `sbx exec` of tail */
	char dir[256];
	char token[40];
};

int sbx_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		       void **follower, struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "sbx: the sandbox has no name yet");
	struct sbx_follower *f = calloc(1, sizeof(*f));
	if (!f)
		return sfs_errf(err, -ENOMEM, "out of memory");
	sfs_sh_run_dir(sb, run, f->dir, sizeof(f->dir));
	struct sfs_sh_cmd c;
	int r = sfs_random_hex(f->token, 16) ? sfs_errf(err, -EIO, "random: out of entropy") : 0;
	if (!r)
		r = sfs_sh_follow(&c, f->dir, from, f->token, err);
	if (r) {
		free(f);
		return r;
	}
	const char **args = calloc(c.argc + 4, sizeof(*args));
	if (!args) {
		sfs_sh_cmd_free(&c);
		free(f);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	size_t k = 0;
	args[k++] = "exec";
	args[k++] = "--";
	args[k++] = sb->id;
	for (size_t i = 0; i < c.argc; i++)
		args[k++] = c.argv[i];
	r = sbx_cli_spawn(args, &f->pid, fd, err);
	free(args);
	sfs_sh_cmd_free(&c);
	if (r) {
		free(f);
		return r;
	}
	*follower = f;
	return 0;
}

void sbx_journal_unfollow(struct sfs_sandbox *sb, void *follower)
{
	struct sbx_follower *f = follower;
	if (!f)
		return;
	struct sfs_err err = {0};
	struct sfs_sh_cmd c;
	int code = 0;
	int r = sfs_sh_unfollow(&c, f->dir, 0, f->token, &err);
	if (!r) {
		r = sbx_exec(sb, &c, NULL, 0, 0, &code, NULL, NULL, &err);
		sfs_sh_cmd_free(&c);
	}
	if (r) /* the run's wrapper stops it when the run ends, whatever happens */
		sfs_log(SFS_LOG_WARN, "sbx: stopping journal follower %s: %s", f->token, err.msg);
	sbx_cli_reap(f->pid, 2000);
	free(f);
}
