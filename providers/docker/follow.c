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

#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PID_WAIT_MS 5000
#define END_WAIT_MS 3000
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
	char cid[DK_ID_MAX];
	char eid[DK_ID_MAX];
	char dir[64];
	char token[17];
	int wfd; /* our end of the socket pair; the thread closes it */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pid;      /* tail's pid in the container, 0 until known */
	bool ended;   /* the thread is done */
	bool natural; /* the stream ended because tail ended */
	bool broken;  /* the reader went away */
	int stop;     /* set atomically: aborts the stream */
	char line[32];
	size_t linelen;
};

static bool on_frame(void *arg, int stream, const char *data, size_t len)
{
	struct dk_follower *f = arg;
	if (stream == 2) {
		pthread_mutex_lock(&f->mu);
		for (size_t i = 0; i < len && !f->pid; i++) {
			if (data[i] == '\n') {
				f->line[f->linelen] = '\0';
				f->pid = atoi(f->line);
				if (f->pid <= 0)
					f->pid = -1;
				pthread_cond_broadcast(&f->cv);
			} else if (f->linelen < sizeof(f->line) - 1) {
				f->line[f->linelen++] = data[i];
			}
		}
		pthread_mutex_unlock(&f->mu);
		return true;
	}
	while (len) {
		ssize_t w = send(f->wfd, data, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			f->broken = true;
			return false;
		}
		data += w;
		len -= (size_t)w;
	}
	return true;
}

static void *follow_main(void *arg)
{
	struct dk_follower *f = arg;
	struct sfs_err err = {0};
	int r = dk_exec_stream(f->eid, on_frame, f, &f->stop, &err);
	bool stop = __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE);
	if (r && !stop && !f->broken)
		sfs_log(SFS_LOG_WARN, "docker: journal follower %s: %s", f->token, err.msg);
	close(f->wfd);
	pthread_mutex_lock(&f->mu);
	f->natural = r == 0 && !stop && !f->broken;
	f->ended = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

static void deadline_in(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
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
	snprintf(s->cid, sizeof(s->cid), "%s", f->cid);
	snprintf(s->dir, sizeof(s->dir), "%s", f->dir);
	snprintf(s->token, sizeof(s->token), "%s", f->token);
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

/* Stops tail in the container (unless it ended by itself), then the thread. */
static void follower_stop(struct dk_follower *f)
{
	pthread_mutex_lock(&f->mu);
	bool natural = f->ended && f->natural;
	int pid = f->pid;
	pthread_mutex_unlock(&f->mu);
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
		int r = unfollow(f->cid, f->dir, f->token, pid, &err);
		if (r && r != -ENOENT) {
			sfs_log(SFS_LOG_WARN,
				"docker: stopping journal follower %s: %s (retried when the "
				"engine answers)",
				f->token, err.msg);
			stale_add(f, pid);
		}
	}
	/* tail's end closes the stream; if the engine cannot say so, give up on it */
	struct timespec ts;
	deadline_in(&ts, END_WAIT_MS);
	pthread_mutex_lock(&f->mu);
	while (!f->ended)
		if (pthread_cond_timedwait(&f->cv, &f->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->mu);
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
	pthread_join(f->thread, NULL);
}

static void follower_free(struct dk_follower *f)
{
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

int dk_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		      void **follower, struct sfs_err *err)
{
	struct dk_follower *f = calloc(1, sizeof(*f));
	if (!f)
		return sfs_errf(err, -ENOMEM, "out of memory");
	dk_current(sb, f->cid, sizeof(f->cid));
	dk_run_dir(run->n, f->dir, sizeof(f->dir));
	int r = sfs_random_hex(f->token, 16);
	if (!f->cid[0] || r) {
		free(f);
		return sfs_errf(err, -EIO, "docker: no container to follow run %d in", run->n);
	}
	/* a follower of this container left from an engine outage goes first */
	dk_followers_reap(f->cid);
	struct sfs_sh_cmd c;
	r = sfs_sh_follow(&c, f->dir, from, f->token, err);
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
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		free(f);
		return sfs_errf(err, r, "socketpair: %s", strerror(-r));
	}
	f->wfd = sv[1];
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	r = pthread_create(&f->thread, NULL, follow_main, f);
	if (r) {
		close(sv[0]);
		close(sv[1]);
		follower_free(f);
		return sfs_errf(err, -r, "docker: follower thread: %s", strerror(r));
	}
	/* hand it over only once tail's pid is known, so unfollow can stop it */
	struct timespec ts;
	deadline_in(&ts, PID_WAIT_MS);
	pthread_mutex_lock(&f->mu);
	while (!f->pid && !f->ended)
		if (pthread_cond_timedwait(&f->cv, &f->mu, &ts) == ETIMEDOUT)
			break;
	bool ok = f->pid > 0 || f->ended;
	pthread_mutex_unlock(&f->mu);
	if (!ok) {
		follower_stop(f);
		close(sv[0]);
		follower_free(f);
		return sfs_errf(err, -EIO, "docker: run %d: the journal follower did not start",
				run->n);
	}
	*fd = sv[0];
	*follower = f;
	return 0;
}

void dk_journal_unfollow(struct sfs_sandbox *sb, void *follower)
{
	struct dk_follower *f = follower;
	if (!f)
		return;
	follower_stop(f);
	follower_free(f);
}
