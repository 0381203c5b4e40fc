/*
 * The host side of a journal follower (provider.h journal_follow), for
 * providers whose follower is the shell kit's follow script (`exec tail -c
 * +N -f JOURNAL`) on a stream they read: a socket pair whose one end the
 * journal engine reads, a thread that runs the provider's stream and writes
 * tail's stdout into the other end, and tail's pid, which the script prints
 * first on stderr, so unfollow can stop it in the sandbox.
 *
 *	struct my_follower { struct sfs_follower f; ...; };
 *	f.stream = my_stream;               runs in the thread: feeds stdout to
 *	                                    sfs_follower_out, stderr to
 *	                                    sfs_follower_err, honours f.stop
 *	sfs_follower_start(&f, fd, err)     returns once tail's pid is known
 *	...
 *	sfs_follower_ended_naturally(&f, &pid)  then stop tail in the sandbox
 *	sfs_follower_join(&f)               waits for the stream to end, drops it
 *	sfs_follower_destroy(&f)
 */
#ifndef SFS_FOLLOWER_H
#define SFS_FOLLOWER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct sfs_follower {
	/* set by the provider before sfs_follower_start */
	int (*stream)(struct sfs_follower *f, struct sfs_err *err); /* 0: tail ended */
	const char *what;					    /* log prefix ("docker") */
	char token[17]; /* the follow script's token (random hex) */
	bool running;	/* the thread was started: sfs_follower_join it */
	/* internal */
	int wfd; /* our end of the socket pair; the thread closes it */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	long pid;     /* tail's pid in the sandbox, 0 until known, -1 unreadable */
	bool ended;   /* the thread is done */
	bool natural; /* the stream ended because tail ended */
	bool broken;  /* the reader went away */
	int stop;     /* set atomically: the stream is to be dropped */
	char line[32];
	size_t linelen;
};

/* A fresh token in f->token; 0 or -EIO. */
int sfs_follower_token(struct sfs_follower *f, struct sfs_err *err);
/* Starts the thread; *fd is the engine's end.  Returns once tail's pid is
 * known or the stream ended, within 5 s; else an error, and if f->running
 * the caller still stops tail and calls sfs_follower_join. */
int sfs_follower_start(struct sfs_follower *f, int *fd, struct sfs_err *err);
/* Stream bytes: stdout into the socket (false: the reader went away, drop
 * the stream), stderr for tail's pid. */
bool sfs_follower_out(struct sfs_follower *f, const char *data, size_t len);
void sfs_follower_err(struct sfs_follower *f, const char *data, size_t len);
/* Whether the stream ended because tail ended (nothing to stop); *pid gets
 * tail's pid for unfollow otherwise. */
bool sfs_follower_ended_naturally(struct sfs_follower *f, long *pid);
/* Waits up to 3 s for the stream to end (tail stopped), then drops it and
 * joins the thread. */
void sfs_follower_join(struct sfs_follower *f);
void sfs_follower_destroy(struct sfs_follower *f);

#endif
