/*
 * Journal followers: one attached exec of `tail -c +N -f JOURNAL` per
 * followed journal, its stdout demultiplexed by a thread into a socket whose
 * other end the journal engine reads.  Dropping the stream alone would leave
 * tail running in the container, so unfollow kills it there first (its pid
 * comes first on the exec's stderr, and sits in a token file the run's
 * wrapper also uses to stop followers when the run ends).
 */
#include "docker.h"
#include "exec.h"
#include "../sh/sh.h"

#include "../follower.h"
#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STALE_MAX 64

/* Followers that could not be stopped (the engine was out of reach): killed
 * as soon as it answers again, before a new follower of theirs starts. */
struct stale {
	struct stale *next;
	char cid[DK_ID_MAX];
	char dir[64];
	char token[17];
	int pid;
};
static pthread_mutex_t stale_mu = PTHREAD_MUTEX_INITIALIZER;
static struct stale *stale;
static size_t nstale;

struct dk_follower {
	struct sfs_follower f; /* first: the stream gets it back */
	char cid[DK_ID_MAX];
	char eid[DK_ID_MAX];
	char dir[64];
};

static bool on_frame(void *arg, int stream, const char *data, size_t len)
{
	struct sfs_follower *f = arg;
	if (stream == 2) {
		sfs_follower_err(f, data, len);
		return true;
	}
	return sfs_follower_out(f, data, len);
}

static int stream(struct sfs_follower *f, struct sfs_err *err)
{
	struct dk_follower *df = (struct dk_follower *)f;
	return dk_exec_stream(df->eid, on_frame, f, &f->stop, err);
}

/* Kills one follower in its container: 0, or the engine's error (-ENOENT:
 * the container is gone, and the follower with it). */
static int unfollow(const char *cid, const char *dir, const char *token, int pid,
		    struct sfs_err *err)
{
	struct sfs_sh_cmd c;
	int r = sfs_sh_unfollow(&c, dir, pid, token, err);
	if (!r)
		r = dk_sh_cmd(cid, &c, NULL, 0, err);
	sfs_sh_cmd_free(&c);
	return r;
}

static void stale_add(const struct dk_follower *f, int pid)
{
	struct stale *s = calloc(1, sizeof(*s));
	if (!s)
		return;
	if (sfs_pathf(s->cid, sizeof(s->cid), "%s", f->cid) < 0 ||
	    sfs_pathf(s->dir, sizeof(s->dir), "%s", f->dir) < 0 ||
	    sfs_pathf(s->token, sizeof(s->token), "%s", f->f.token) < 0) {
		free(s);
		return; /* never a kill aimed by a cut name */
	}
	s->pid = pid;
	pthread_mutex_lock(&stale_mu);
	s->next = stale;
	stale = s;
	if (++nstale > STALE_MAX) {
		/* the oldest: its container never answered again */
		struct stale **p = &stale;
		while ((*p)->next)
			p = &(*p)->next;
		free(*p);
		*p = NULL;
		nstale--;
	}
	pthread_mutex_unlock(&stale_mu);
}

void dk_followers_reap(const char *cid)
{
	pthread_mutex_lock(&stale_mu);
	struct stale *mine = NULL, **p = &stale;
	while (*p) {
		struct stale *s = *p;
		if (!cid || strcmp(s->cid, cid) == 0) {
			*p = s->next;
			s->next = mine;
			mine = s;
			nstale--;
		} else {
			p = &s->next;
		}
	}
	pthread_mutex_unlock(&stale_mu);
	while (mine) {
		struct stale *s = mine;
		mine = s->next;
		struct sfs_err err = {0};
		int r = unfollow(s->cid, s->dir, s->token, s->pid, &err);
		if (r == 0 || r == -ENOENT) {
			if (r == 0)
				sfs_log(SFS_LOG_INFO,
					"docker: stopped journal follower %s, left from an engine "
					"outage",
					s->token);
			free(s);
			continue;
		}
		pthread_mutex_lock(&stale_mu); /* still out of reach: later */
		s->next = stale;
		stale = s;
		nstale++;
		pthread_mutex_unlock(&stale_mu);
	}
}

void dk_followers_shutdown(void)
{
	pthread_mutex_lock(&stale_mu);
	while (stale) {
		struct stale *s = stale;
		stale = s->next;
		free(s);
	}
	nstale = 0;
	pthread_mutex_unlock(&stale_mu);
}

/* Stops tail in the container (unless it ended by itself), then the thread,
 * and frees f. */
static void follower_stop(struct dk_follower *f)
{
	long pid;
	bool natural = sfs_follower_ended_naturally(&f->f, &pid);
	if (natural) {
		/* A stream whose engine connection dropped ends just like one
		 * whose tail ended: only the engine can tell them apart. */
		bool running = true;
		int code;
		if (dk_exec_inspect(f->eid, &running, &code, NULL) != 0 || running)
			natural = false;
	}
	if (!natural) {
		struct sfs_err err = {0};
		int r = unfollow(f->cid, f->dir, f->f.token, (int)pid, &err);
		if (r && r != -ENOENT) {
			sfs_log(SFS_LOG_WARN,
				"docker: stopping journal follower %s: %s (retried when the "
				"engine answers)",
				f->f.token, err.msg);
			stale_add(f, (int)pid);
		}
	}
	sfs_follower_join(&f->f);
	sfs_follower_destroy(&f->f);
	free(f);
}

int dk_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		      void **follower, struct sfs_err *err)
{
	struct dk_follower *f = calloc(1, sizeof(*f));
	if (!f)
		return sfs_errf(err, -ENOMEM, "out of memory");
	f->f.stream = stream;
	f->f.what = "docker";
	dk_current(sb, f->cid, sizeof(f->cid));
	dk_run_dir(run->n, f->dir, sizeof(f->dir));
	if (!f->cid[0] || sfs_follower_token(&f->f, NULL)) {
		free(f);
		return sfs_errf(err, -EIO, "docker: no container to follow run %d in", run->n);
	}
	/* a follower of this container left from an engine outage goes first */
	dk_followers_reap(f->cid);
	struct sfs_sh_cmd c;
	int r = sfs_sh_follow(&c, f->dir, from, f->f.token, err);
	if (r) {
		free(f);
		return r;
	}
	struct dk_exec x = {
	    .cid = f->cid, .argv = (const char *const *)c.argv, .workdir = "/", .user = "0"};
	r = dk_exec_create(&x, true, f->eid, sizeof(f->eid), err);
	sfs_sh_cmd_free(&c);
	if (r) {
		free(f);
		return r;
	}
	r = sfs_follower_start(&f->f, fd, err);
	if (r && f->f.running) {
		follower_stop(f); /* tail may have started */
		return sfs_errf(err, r, "docker: run %d: the journal follower did not start",
				run->n);
	}
	if (r) {
		free(f);
		return r;
	}
	*follower = f;
	return 0;
}

void dk_journal_unfollow(struct sfs_sandbox *sb, void *follower)
{
	(void)sb;
	if (follower)
		follower_stop(follower);
}
