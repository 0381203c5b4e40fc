#include "../providers/err.h"
#include "fs.h"
#include "../providers/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum job_kind { JOB_ENTRY, JOB_INODE, JOB_WS };

struct job {
	struct job *next;
	enum job_kind kind;
	fuse_ino_t ino;
	uint32_t serial;
	char name[256];
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool running, stop;
	struct job *head, *tail;
	/* entry jobs queued and sent so far: notify_wait_entries waits for the
	 * second to reach what the first was when it was called */
	uint64_t entries_queued, entries_sent;
	/* the same for every job */
	uint64_t queued, sent;
	pthread_cond_t sent_cv;
} nq = {.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.sent_cv = PTHREAD_COND_INITIALIZER};

static void *notify_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&nq.mu);
	for (;;) {
		while (!nq.head && !nq.stop)
			pthread_cond_wait(&nq.cv, &nq.mu);
		if (!nq.head && nq.stop)
			break;
		struct job *j = nq.head;
		nq.head = j->next;
		if (!nq.head)
			nq.tail = NULL;
		pthread_mutex_unlock(&nq.mu);
		/* ENOENT only means the kernel had nothing cached */
		switch (j->kind) {
		case JOB_ENTRY:
			fuse_lowlevel_notify_inval_entry(sfs_session, j->ino, j->name,
							 strlen(j->name));
			break;
		case JOB_INODE:
			fuse_lowlevel_notify_inval_inode(sfs_session, j->ino, 0, 0);
			break;
		case JOB_WS:
			ws_invalidate_sandbox(j->serial);
			break;
		}
		bool entry = j->kind == JOB_ENTRY;
		free(j);
		pthread_mutex_lock(&nq.mu);
		if (entry)
			nq.entries_sent++;
		nq.sent++;
		pthread_cond_broadcast(&nq.sent_cv);
	}
	/* nothing more will be sent: release any waiter */
	nq.entries_sent = nq.entries_queued;
	nq.sent = nq.queued;
	pthread_cond_broadcast(&nq.sent_cv);
	pthread_mutex_unlock(&nq.mu);
	return NULL;
}

int notify_start(void)
{
	nq.stop = false;
	int r = pthread_create(&nq.thread, NULL, notify_main, NULL);
	if (r)
		return -r;
	nq.running = true;
	return 0;
}

void notify_stop(void)
{
	if (!nq.running)
		return;
	pthread_mutex_lock(&nq.mu);
	nq.stop = true;
	/* pending invalidations are moot once the session ends */
	while (nq.head) {
		struct job *j = nq.head;
		nq.head = j->next;
		free(j);
	}
	nq.tail = NULL;
	pthread_cond_signal(&nq.cv);
	pthread_mutex_unlock(&nq.mu);
	pthread_join(nq.thread, NULL);
	nq.running = false;
}

static void push(struct job *j)
{
	pthread_mutex_lock(&nq.mu);
	if (!nq.running || nq.stop) {
		pthread_mutex_unlock(&nq.mu);
		free(j);
		return;
	}
	if (nq.tail)
		nq.tail->next = j;
	else
		nq.head = j;
	nq.tail = j;
	if (j->kind == JOB_ENTRY)
		nq.entries_queued++;
	nq.queued++;
	pthread_cond_signal(&nq.cv);
	pthread_mutex_unlock(&nq.mu);
}

/* Waits (at most timeout_ms) until *sent reaches what *queued is now. */
static void wait_sent(const uint64_t *queued, const uint64_t *sent, int timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&nq.mu);
	uint64_t target = *queued;
	while (nq.running && *sent < target &&
	       pthread_cond_timedwait(&nq.sent_cv, &nq.mu, &until) == 0)
		;
	pthread_mutex_unlock(&nq.mu);
}

void notify_wait_entries(int timeout_ms)
{
	wait_sent(&nq.entries_queued, &nq.entries_sent, timeout_ms);
}

void notify_wait_all(int timeout_ms)
{
	wait_sent(&nq.queued, &nq.sent, timeout_ms);
}

void notify_inval_entry(fuse_ino_t parent, const char *name)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return; /* the entry then lives out its timeout */
	j->kind = JOB_ENTRY;
	j->ino = parent;
	if (sfs_pathf(j->name, sizeof(j->name), "%s", name) < 0) {
		free(j);
		return; /* never another entry's: it lives out its timeout */
	}
	push(j);
}

void notify_inval_inode(fuse_ino_t ino)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->kind = JOB_INODE;
	j->ino = ino;
	push(j);
}

void notify_ws_sandbox(uint32_t serial)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->kind = JOB_WS;
	j->serial = serial;
	push(j);
}
