#include "../providers/err.h"
#include "fs.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

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
} nq = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

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
		free(j);
		pthread_mutex_lock(&nq.mu);
	}
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
	pthread_cond_signal(&nq.cv);
	pthread_mutex_unlock(&nq.mu);
}

void notify_inval_entry(fuse_ino_t parent, const char *name)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return; /* the entry then lives out its timeout */
	j->kind = JOB_ENTRY;
	j->ino = parent;
	snprintf(j->name, sizeof(j->name), "%s", name);
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
