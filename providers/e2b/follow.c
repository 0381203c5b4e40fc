/*
 * Journal followers: the shell kit's follow script (`exec tail -c +N -f
 * JOURNAL`) started through process.Process/Start, whose stdout events a
 * thread writes into a socket whose other end the journal engine reads.
 * Dropping the stream alone would leave tail running in the sandbox, so
 * unfollow stops it there first with the kit's unfollow script (tail's pid
 * comes first on the stream's stderr and sits in a token file the run's
 * wrapper also uses to stop followers when the run ends).
 */
#include "e2b.h"

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

struct e2b_follower {
	struct sfs_sandbox *sb; /* records live until the daemon exits */
	json_t *body;		/* the Start request */
	char dir[256];
	char token[17];
	int wfd; /* our end of the socket pair; the thread closes it */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	long pid;     /* tail's pid in the sandbox, 0 until known */
	bool ended;   /* the thread is done */
	bool natural; /* the stream ended because tail ended */
	bool broken;  /* the reader went away */
	int stop;     /* set atomically: drops the stream */
	char line[32];
	size_t linelen;
};

static int on_data(int fd, const char *data, size_t len, void *arg)
{
	struct e2b_follower *f = arg;
	if (fd == 2) {
		pthread_mutex_lock(&f->mu);
		for (size_t i = 0; i < len && !f->pid; i++) {
			if (data[i] == '\n') {
				f->line[f->linelen] = '\0';
				f->pid = atol(f->line);
				if (f->pid <= 0)
					f->pid = -1;
				pthread_cond_broadcast(&f->cv);
			} else if (f->linelen < sizeof(f->line) - 1) {
				f->line[f->linelen++] = data[i];
			}
		}
		pthread_mutex_unlock(&f->mu);
		return 0;
	}
	while (len) {
		ssize_t w = send(f->wfd, data, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			f->broken = true;
			return 1; /* drop the stream: nobody reads */
		}
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

static void *follow_main(void *arg)
{
	struct e2b_follower *f = arg;
	struct sfs_err err = {0};
	struct e2b_events ev = {.on_data = on_data, .arg = f, .stop = &f->stop};
	int r = e2b_stream(f->sb, "Start", f->body, -1, &ev, &err);
	bool stop = __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE);
	if (r && !stop && !f->broken)
		sfs_log(SFS_LOG_WARN, "e2b: journal follower %s: %s", f->token, err.msg);
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

/* Stops tail in the sandbox (unless it ended by itself), then the thread. */
static void follower_stop(struct e2b_follower *f)
{
	pthread_mutex_lock(&f->mu);
	bool natural = f->ended && f->natural;
	long pid = f->pid;
	pthread_mutex_unlock(&f->mu);
	if (!natural) {
		struct sfs_err err = {0};
		struct sfs_sh_cmd c;
		int code = 0;
		int r = sfs_sh_unfollow(&c, f->dir, pid > 0 ? (int)pid : 0, f->token, &err);
		if (!r) {
			r = e2b_exec_cmd(f->sb, &c, 0, &code, NULL, NULL, &err);
			sfs_sh_cmd_free(&c);
		}
		/* the run's wrapper stops it when the run ends, whatever happens */
		if (r)
			sfs_log(SFS_LOG_WARN, "e2b: stopping journal follower %s: %s", f->token,
				err.msg);
	}
	/* tail's end closes the stream; if envd cannot say so, give up on it */
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

static void follower_free(struct e2b_follower *f)
{
	json_decref(f->body);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

int e2b_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		       void **follower, struct sfs_err *err)
{
	struct e2b_follower *f = calloc(1, sizeof(*f));
	if (!f)
		return sfs_errf(err, -ENOMEM, "out of memory");
	f->sb = sb;
	e2b_run_dir(sb, run, f->dir, sizeof(f->dir));
	if (sfs_random_hex(f->token, 16)) {
		free(f);
		return sfs_errf(err, -EIO, "random: out of entropy");
	}
	struct sfs_sh_cmd c;
	int r = sfs_sh_follow(&c, f->dir, from, f->token, err);
	if (r) {
		free(f);
		return r;
	}
	f->body = e2b_start_body(&c, NULL, false);
	sfs_sh_cmd_free(&c);
	if (!f->body) {
		free(f);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		json_decref(f->body);
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
		return sfs_errf(err, -r, "e2b: follower thread: %s", strerror(r));
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
		return sfs_errf(err, -EIO, "e2b: run %d: the journal follower did not start",
				run->n);
	}
	*fd = sv[0];
	*follower = f;
	return 0;
}

void e2b_journal_unfollow(struct sfs_sandbox *sb, void *follower)
{
	(void)sb;
	struct e2b_follower *f = follower;
	if (!f)
		return;
	follower_stop(f);
	follower_free(f);
}
