/* The host side of a journal follower: socket pair, thread, tail's pid. */
#include "follower.h"

#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PID_WAIT_MS 5000
#define END_WAIT_MS 3000

int sfs_follower_token(struct sfs_follower *f, struct sfs_err *err)
{
	if (sfs_random_hex(f->token, 16))
		return sfs_errf(err, -EIO, "random: out of entropy");
	return 0;
}

bool sfs_follower_out(struct sfs_follower *f, const char *data, size_t len)
{
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

void sfs_follower_err(struct sfs_follower *f, const char *data, size_t len)
{
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
}

static void *follow_main(void *arg)
{
	struct sfs_follower *f = arg;
	struct sfs_err err = {0};
	int r = f->stream(f, &err);
	bool stop = __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE);
	if (r && !stop && !f->broken)
		sfs_log(SFS_LOG_WARN, "%s: journal follower %s: %s", f->what, f->token, err.msg);
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

int sfs_follower_start(struct sfs_follower *f, int *fd, struct sfs_err *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		int e = errno;
		return sfs_errf(err, -e, "socketpair: %s", strerror(e));
	}
	f->wfd = sv[1];
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	int r = pthread_create(&f->thread, NULL, follow_main, f);
	if (r) {
		close(sv[0]);
		close(sv[1]);
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->mu);
		return sfs_errf(err, -r, "%s: follower thread: %s", f->what, strerror(r));
	}
	f->running = true;
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
		close(sv[0]);
		return sfs_errf(err, -EIO, "%s: the journal follower did not start", f->what);
	}
	*fd = sv[0];
	return 0;
}

bool sfs_follower_ended_naturally(struct sfs_follower *f, long *pid)
{
	pthread_mutex_lock(&f->mu);
	bool natural = f->ended && f->natural;
	*pid = f->pid;
	pthread_mutex_unlock(&f->mu);
	return natural;
}

void sfs_follower_join(struct sfs_follower *f)
{
	/* tail's end closes the stream; if the far side cannot say so, give up */
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

void sfs_follower_destroy(struct sfs_follower *f)
{
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
}
