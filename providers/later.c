/*
 * A thread that does, at the time it is asked for, what an exec need not
 * wait for: the fsync of its run's cmd, and the next run's directory made
 * ahead (ctl/runs.h).  ctl/tree.c asks for both as late as lets the spare
 * be made before the next exec, up to SFS_LATER_DELAY_MS.
 *
 * Not on the worker that answered the exec, right after its reply: the run
 * is then starting, and a short one ending.  On ext4 without a journal,
 * right after many inodes were freed, each inode of the next run's
 * directory can take a millisecond of kernel time that nothing preempts;
 * with a journal, an fsync wakes the journal's thread and the disk's.
 * Done meanwhile, both slowed that run (docs/performance.md, round 8).
 * Calls must not block: one waiting call holds up every later entry.
 */
#include "later.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct later_entry {
	int fd; /* to fsync and close, or -1 */
	void (*fn)(void *);
	void *arg;
	int64_t due_ms;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stop;
	struct later_entry q[SFS_LATER_MAX];
	size_t n;
} lt = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void flush_fd(int fd)
{
	if (fsync(fd) < 0)
		sfs_log(SFS_LOG_WARN, "fsync: %s", strerror(errno));
	close(fd);
}

static void run_entry(const struct later_entry *e)
{
	if (e->fd >= 0)
		flush_fd(e->fd);
	if (e->fn)
		e->fn(e->arg);
}

static void *later_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lt.mu);
	while (!lt.stop) {
		if (!lt.n) {
			pthread_cond_wait(&lt.wake, &lt.mu);
			continue;
		}
		/* the earliest due; a flush before a call due as soon */
		size_t first = 0;
		for (size_t i = 1; i < lt.n; i++)
			if (lt.q[i].due_ms < lt.q[first].due_ms ||
			    (lt.q[i].due_ms == lt.q[first].due_ms && lt.q[i].fd >= 0 &&
			     lt.q[first].fd < 0))
				first = i;
		int64_t due = lt.q[first].due_ms;
		if (sfs_now_ms() < due) {
			struct timespec ts = {.tv_sec = (time_t)(due / 1000),
					      .tv_nsec = (long)(due % 1000) * 1000000L};
			pthread_cond_timedwait(&lt.wake, &lt.mu, &ts);
			continue;
		}
		struct later_entry e = lt.q[first];
		memmove(&lt.q[first], &lt.q[first + 1], (lt.n - first - 1) * sizeof(lt.q[0]));
		lt.n--;
		pthread_mutex_unlock(&lt.mu);
		run_entry(&e);
		pthread_mutex_lock(&lt.mu);
	}
	pthread_mutex_unlock(&lt.mu);
	return NULL;
}

int sfs_later_start(struct sfs_err *err)
{
	pthread_condattr_t ca;
	int r = pthread_condattr_init(&ca);
	if (!r)
		r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* sfs_now_ms's clock */
	if (!r)
		r = pthread_cond_init(&lt.wake, &ca);
	pthread_condattr_destroy(&ca);
	if (r)
		return sfs_errf(err, -r, "later: %s", strerror(r));
	pthread_mutex_lock(&lt.mu);
	lt.stop = false;
	lt.n = 0;
	r = pthread_create(&lt.thread, NULL, later_main, NULL);
	lt.running = r == 0;
	pthread_mutex_unlock(&lt.mu);
	if (r) {
		pthread_cond_destroy(&lt.wake);
		return sfs_errf(err, -r, "later thread: %s", strerror(r));
	}
	return 0;
}

/* Queues e under lt.mu; false when there is no thread or no room. */
static bool queue_locked(struct later_entry e, int delay_ms)
{
	if (!lt.running || lt.stop || lt.n == SFS_LATER_MAX)
		return false;
	e.due_ms = sfs_now_ms() + delay_ms;
	lt.q[lt.n++] = e;
	pthread_cond_signal(&lt.wake); /* it may be due before the others */
	return true;
}

void sfs_later_flush(int fd, int delay_ms)
{
	if (fd < 0)
		return;
	pthread_mutex_lock(&lt.mu);
	bool queued = queue_locked((struct later_entry){.fd = fd}, delay_ms);
	pthread_mutex_unlock(&lt.mu);
	if (!queued)
		flush_fd(fd);
}

void sfs_later_call(void (*fn)(void *), void *arg, int delay_ms)
{
	pthread_mutex_lock(&lt.mu);
	struct later_entry *q = NULL;
	for (size_t i = 0; i < lt.n && !q; i++)
		if (lt.q[i].fn == fn && lt.q[i].arg == arg)
			q = &lt.q[i];
	int64_t due = sfs_now_ms() + delay_ms;
	if (!q) {
		queue_locked((struct later_entry){.fd = -1, .fn = fn, .arg = arg}, delay_ms);
	} else if (due < q->due_ms) {
		q->due_ms = due;
		pthread_cond_signal(&lt.wake);
	}
	pthread_mutex_unlock(&lt.mu);
}

void sfs_later_stop(void)
{
	pthread_mutex_lock(&lt.mu);
	bool running = lt.running;
	lt.stop = true;
	pthread_cond_signal(&lt.wake);
	pthread_mutex_unlock(&lt.mu);
	if (!running)
		return;
	pthread_join(lt.thread, NULL);
	/* the flushes still owed are made; the calls are dropped */
	pthread_mutex_lock(&lt.mu);
	for (size_t i = 0; i < lt.n; i++)
		if (lt.q[i].fd >= 0)
			flush_fd(lt.q[i].fd);
	lt.n = 0;
	lt.running = false;
	pthread_mutex_unlock(&lt.mu);
	pthread_cond_destroy(&lt.wake);
}
