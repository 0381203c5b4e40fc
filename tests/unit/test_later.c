/* providers/later.c: flushes and calls made a moment later by a thread of
 * their own; at once (a flush) or never (a call) without it. */
#include "check.h"

#include "../../providers/later.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int open_tmp(void)
{
	char path[] = "/tmp/sfs-later-XXXXXX";
	int fd = mkstemp(path);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* a call that holds the thread until released: what is queued meanwhile
 * waits, whatever the machine's load */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_in, gate_open;

static void gate(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&gate_mu);
	gate_in = true;
	pthread_cond_broadcast(&gate_cv);
	while (!gate_open)
		pthread_cond_wait(&gate_cv, &gate_mu);
	pthread_mutex_unlock(&gate_mu);
}

static void close_gate_and_wait_in_it(void)
{
	pthread_mutex_lock(&gate_mu);
	gate_in = gate_open = false;
	pthread_mutex_unlock(&gate_mu);
	sfs_later_call(gate, NULL, 0);
	pthread_mutex_lock(&gate_mu);
	while (!gate_in)
		pthread_cond_wait(&gate_cv, &gate_mu);
	pthread_mutex_unlock(&gate_mu);
}

static void open_gate(void)
{
	pthread_mutex_lock(&gate_mu);
	gate_open = true;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

static int counted;
static void count(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void test_without_the_thread(void)
{
	int a = open_tmp();
	CHECK(a >= 0);
	sfs_later_flush(a, SFS_LATER_DELAY_MS);
	CHECK(!is_open(a));
	int n = 0;
	sfs_later_call(count, &n, SFS_LATER_DELAY_MS);
	usleep(30000);
	CHECK(n == 0);
}

static void test_a_flush_waits_then_happens(void)
{
	struct sfs_err err = {0};
	CHECK(sfs_later_start(&err) == 0);
	close_gate_and_wait_in_it();
	int a = open_tmp(), b = open_tmp();
	CHECK(a >= 0 && b >= 0);
	sfs_later_flush(a, SFS_LATER_DELAY_MS);
	sfs_later_flush(b, SFS_LATER_DELAY_MS);
	CHECK(is_open(a) && is_open(b));
	open_gate();
	for (int i = 0; i < 2000 && (is_open(a) || is_open(b)); i++)
		usleep(1000);
	CHECK(!is_open(a) && !is_open(b));
	sfs_later_stop();
}

static void test_a_call_asked_twice_runs_once(void)
{
	struct sfs_err err = {0};
	CHECK(sfs_later_start(&err) == 0);
	close_gate_and_wait_in_it();
	counted = 0;
	for (int i = 0; i < 3; i++)
		sfs_later_call(count, &counted, SFS_LATER_DELAY_MS);
	open_gate();
	for (int i = 0; i < 2000 && !__atomic_load_n(&counted, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	sfs_later_stop();
	CHECK(counted == 1);
	/* asked again after it ran: runs again */
	CHECK(sfs_later_start(&err) == 0);
	sfs_later_call(count, &counted, SFS_LATER_DELAY_MS);
	for (int i = 0; i < 2000 && __atomic_load_n(&counted, __ATOMIC_SEQ_CST) < 2; i++)
		usleep(1000);
	sfs_later_stop();
	CHECK(counted == 2);
}

static void test_the_earliest_due_runs_first(void)
{
	struct sfs_err err = {0};
	int late = 0, soon = 0;
	CHECK(sfs_later_start(&err) == 0);
	close_gate_and_wait_in_it();
	sfs_later_call(count, &late, 60000);
	sfs_later_call(count, &soon, 60000);
	sfs_later_call(count, &soon, 0); /* asked again sooner: the sooner holds */
	open_gate();
	for (int i = 0; i < 2000 && !__atomic_load_n(&soon, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	sfs_later_stop();
	CHECK(soon == 1);
	CHECK(late == 0); /* not due yet at the stop: dropped */
}

static void test_a_full_queue_and_stop_flush_at_once(void)
{
	struct sfs_err err = {0};
	enum { N = SFS_LATER_MAX + 8 };
	int fds[N];
	CHECK(sfs_later_start(&err) == 0);
	close_gate_and_wait_in_it();
	for (int i = 0; i < N; i++) {
		fds[i] = open_tmp();
		CHECK(fds[i] >= 0);
		sfs_later_flush(fds[i], SFS_LATER_DELAY_MS);
	}
	int open_now = 0;
	for (int i = 0; i < N; i++)
		open_now += is_open(fds[i]);
	CHECK(open_now == SFS_LATER_MAX); /* the queue's worth waits */
	int n = 0;
	sfs_later_call(count, &n, SFS_LATER_DELAY_MS); /* no room: dropped */
	open_gate();
	sfs_later_stop(); /* what is still owed is flushed */
	for (int i = 0; i < N; i++)
		CHECK(!is_open(fds[i]));
	CHECK(n == 0);
}

CHECK_MAIN(CHECK_CASE(test_without_the_thread), CHECK_CASE(test_a_flush_waits_then_happens),
	   CHECK_CASE(test_a_call_asked_twice_runs_once),
	   CHECK_CASE(test_the_earliest_due_runs_first),
	   CHECK_CASE(test_a_full_queue_and_stop_flush_at_once))
