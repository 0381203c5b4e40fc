/*
 * Journal followers: the shell kit's follow script (`exec tail -c +N -f
 * JOURNAL`) started through process.Process/Start; its stdout events go
 * into the socket of a host-side follower (providers/follower.c).
 * Dropping the stream alone would leave tail running in the sandbox, so
 * unfollow stops it there first with the kit's unfollow script (tail's pid
 * and a token file the run's wrapper also uses to stop followers when the
 * run ends).
 */
#include "e2b.h"

#include "../follower.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct e2b_follower {
	struct sfs_follower f;	/* first: the stream gets it back */
	struct sfs_sandbox *sb; /* records live until the daemon exits */
	json_t *body;		/* the Start request */
	char dir[256];
};

static int on_data(int fd, const char *data, size_t len, void *arg)
{
	struct sfs_follower *f = arg;
	if (fd == 2) {
		sfs_follower_err(f, data, len);
		return 0;
	}
	return sfs_follower_out(f, data, len) ? 0 : 1; /* 1: nobody reads, drop it */
}

static int stream(struct sfs_follower *f, struct sfs_err *err)
{
	struct e2b_follower *ef = (struct e2b_follower *)f;
	struct e2b_events ev = {.on_data = on_data, .arg = f, .stop = &f->stop};
	return e2b_stream(ef->sb, "Start", ef->body, -1, &ev, err);
}

/* Stops tail in the sandbox unless it ended by itself, then the thread. */
static void stop(struct e2b_follower *ef)
{
	long pid;
	if (!sfs_follower_ended_naturally(&ef->f, &pid)) {
		struct sfs_err err = {0};
		struct sfs_sh_cmd c;
		int code = 0;
		int r = sfs_sh_unfollow(&c, ef->dir, pid > 0 ? (int)pid : 0, ef->f.token, &err);
		if (!r) {
			r = e2b_exec_cmd(ef->sb, &c, 0, &code, NULL, NULL, &err);
			sfs_sh_cmd_free(&c);
		}
		/* the run's wrapper stops it when the run ends, whatever happens */
		if (r)
			sfs_log(SFS_LOG_WARN, "e2b: stopping journal follower %s: %s", ef->f.token,
				err.msg);
	}
	sfs_follower_join(&ef->f);
	sfs_follower_destroy(&ef->f);
	json_decref(ef->body);
	free(ef);
}

int e2b_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		       void **follower, struct sfs_err *err)
{
	struct e2b_follower *ef = calloc(1, sizeof(*ef));
	if (!ef)
		return sfs_errf(err, -ENOMEM, "out of memory");
	ef->sb = sb;
	ef->f.stream = stream;
	ef->f.what = "e2b";
	sfs_sh_run_dir(sb, run, ef->dir, sizeof(ef->dir));
	struct sfs_sh_cmd c;
	int r = sfs_follower_token(&ef->f, err);
	if (!r)
		r = sfs_sh_follow(&c, ef->dir, from, ef->f.token, err);
	if (r) {
		free(ef);
		return r;
	}
	ef->body = e2b_start_body(&c, NULL, false);
	sfs_sh_cmd_free(&c);
	if (!ef->body) {
		free(ef);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	r = sfs_follower_start(&ef->f, fd, err);
	if (r && ef->f.running) {
		stop(ef); /* tail may have started */
		return r;
	}
	if (r) {
		json_decref(ef->body);
		free(ef);
		return r;
	}
	*follower = ef;
	return 0;
}

void e2b_journal_unfollow(struct sfs_sandbox *sb, void *follower)
{
	(void)sb;
	if (follower)
		stop(follower);
}
