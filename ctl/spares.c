/*
 * The thread that makes each sandbox's next run directory ahead
 * (runs/.next, ctl/runs.h), SPARE_DELAY_MS after the exec that used the
 * last one.
 *
 * Not at once, on the worker that answered the exec: on ext4 without a
 * journal, right after many inodes were freed, each of the spare's five or
 * six inodes can take a millisecond of kernel time that nothing preempts,
 * and made while the run that exec started was starting and ending, that
 * time landed on the run (docs/performance.md, round 8).  A short run is
 * over by then; a long one is past its start.
 */
#include "spares.h"
#include "runs.h"
#include "tree.h"

#include "../providers/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#define SPARE_DELAY_MS 10
/* sandboxes waiting for a spare at once; past that one waits its turn on
 * the exec that finds no spare (it makes its directory itself) */
#define SPARES_QUEUE_MAX 64

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stop;
	struct {
		struct sfs_sandbox *sb;
		int64_t due_ms;
	} q[SPARES_QUEUE_MAX];
	size_t n;
} sp = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* sb stays valid: records live as long as the daemon (graveyard) */
static void make_spare(struct sfs_sandbox *sb)
{
	struct sfs_err err = {0};
	pthread_mutex_lock(&sb->op_mutex);
	if (tree_check_live(sb, &err) == 0 && sfs_sb_get_state(sb) == SFS_SB_RUNNING)
		runs_make_spare(sb);
	pthread_mutex_unlock(&sb->op_mutex);
}

static void until_ms(struct timespec *ts, int64_t ms)
{
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

static void *spares_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sp.mu);
	while (!sp.stop) {
		if (!sp.n) {
			pthread_cond_wait(&sp.wake, &sp.mu);
			continue;
		}
		/* first in, first due: every entry waits the same delay */
		int64_t now = sfs_now_ms();
		if (now < sp.q[0].due_ms) {
			struct timespec ts;
			until_ms(&ts, sp.q[0].due_ms);
			pthread_cond_timedwait(&sp.wake, &sp.mu, &ts);
			continue;
		}
		struct sfs_sandbox *sb = sp.q[0].sb;
		memmove(&sp.q[0], &sp.q[1], (sp.n - 1) * sizeof(sp.q[0]));
		sp.n--;
		pthread_mutex_unlock(&sp.mu);
		make_spare(sb);
		pthread_mutex_lock(&sp.mu);
	}
	pthread_mutex_unlock(&sp.mu);
	return NULL;
}

int spares_start(struct sfs_err *err)
{
	pthread_condattr_t ca;
	int r = pthread_condattr_init(&ca);
	if (!r)
		r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* sfs_now_ms's clock */
	if (!r)
		r = pthread_cond_init(&sp.wake, &ca);
	pthread_condattr_destroy(&ca);
	if (r)
		return sfs_errf(err, -r, "spares: %s", strerror(r));
	sp.stop = false;
	sp.n = 0;
	r = pthread_create(&sp.thread, NULL, spares_main, NULL);
	if (r) {
		pthread_cond_destroy(&sp.wake);
		return sfs_errf(err, -r, "spares thread: %s", strerror(r));
	}
	sp.running = true;
	return 0;
}

void spares_request(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&sp.mu);
	bool queued = false;
	for (size_t i = 0; i < sp.n && !queued; i++)
		queued = sp.q[i].sb == sb;
	/* one write's several execs, or execs quicker than the delay: one
	 * spare, made when the first is due */
	if (sp.running && !sp.stop && !queued && sp.n < SPARES_QUEUE_MAX) {
		sp.q[sp.n].sb = sb;
		sp.q[sp.n].due_ms = sfs_now_ms() + SPARE_DELAY_MS;
		if (sp.n++ == 0)
			pthread_cond_signal(&sp.wake);
	}
	pthread_mutex_unlock(&sp.mu);
}

void spares_stop(void)
{
	if (!sp.running)
		return;
	pthread_mutex_lock(&sp.mu);
	sp.stop = true;
	pthread_cond_signal(&sp.wake);
	pthread_mutex_unlock(&sp.mu);
	pthread_join(sp.thread, NULL);
	pthread_mutex_lock(&sp.mu);
	sp.running = false;
	sp.n = 0; /* best effort: the next exec makes its directory itself */
	pthread_mutex_unlock(&sp.mu);
	pthread_cond_destroy(&sp.wake);
}
