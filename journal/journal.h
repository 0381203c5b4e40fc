/*
 * Run journals (SPEC §6): offsets, parked readers, and the engine thread that
 * notices new bytes and run ends.
 *
 * A read at the end of the bytes so far does not hold a thread: the fs layer
 * parks the request here (journal_park + journal_arm) and the engine hands it
 * back through hooks.deliver when bytes arrive, the run ends, or the reader is
 * interrupted.  Nothing here knows FUSE: a request is an opaque pointer.
 *
 * Strategy (chosen from caps, never from a provider's name):
 *  - follow (killable): one watcher per active journal that has readers,
 *    shared by all of them and dropped when the run ends or the last reader
 *    goes.  For a journal file on this host the watcher is an inotify watch.
 *  - poll: bounded provider reads from an offset at an interval into a local
 *    mirror (for providers without a local journal file).
 *
 * Locking: one engine mutex guards every journal, waiter and run->state.
 * Provider calls made under it must be quick (local file checks); callers
 * never hold the tree lock when they call in here.
 */
#ifndef SFS_JOURNAL_H
#define SFS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../providers/provider.h"

enum journal_wait_kind {
	JOURNAL_WAIT_BYTES, /* a journal read: ready when off < size or the run ended */
	JOURNAL_WAIT_END,   /* runs/N/wait: ready when the run ended */
};

struct journal_waiter {
	struct journal_waiter *next, *prev;
	struct sfs_sandbox *sb;
	struct sfs_run *run;
	void *req;
	off_t off;
	size_t size;
	enum journal_wait_kind kind;
	bool armed, interrupted;
	bool eof; /* its file was rotated away: answer end-of-file once armed */
};

/* deliver's err for a reader answered end-of-file although the run goes on
 * (journal_file_rotate). */
#define JOURNAL_EOF 1

struct journal_hooks {
	/* Reply to a parked request: err is 0 (bytes or end available: read
	 * them now), JOURNAL_EOF (answer end-of-file), -EINTR (interrupted) or
	 * another negative errno. */
	void (*deliver)(struct journal_waiter *w, int err);
	/* A run was seen to end (once per run per daemon life). */
	void (*run_ended)(struct sfs_sandbox *sb, struct sfs_run *run);
	/* A run was seen to start producing; may be NULL. */
	void (*run_started)(struct sfs_sandbox *sb, struct sfs_run *run);
};

int journal_engine_start(const struct journal_hooks *hooks, struct sfs_err *err);
/* Stops the thread and answers every parked request with -EIO. */
void journal_engine_stop(void);

/* Starts tracking a run (new or found at startup); refreshes its state. */
int journal_attach(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
/*
 * sb was destroyed: its runs still `running` become `lost` (nothing is left
 * to ask), every journal ends where its bytes end, and every parked reader
 * of them is answered at once (journal: the bytes, then EOF; wait: the
 * status).  With record, each run's final status is written to RUNDIR/ended
 * so a restarted daemon shows the same without asking the provider.
 */
void journal_end_sandbox(struct sfs_sandbox *sb, bool record);
/* Follows a file the daemon appends to itself (SANDBOX/audit) like a
 * journal: run is the caller's, kept "running" until sb is destroyed or
 * detached; no provider is asked anything about it. */
int journal_attach_file(struct sfs_sandbox *sb, struct sfs_run *run, const char *path,
			struct sfs_err *err);
/* Renames the file of journal_attach_file to `to` (rotation: its writer
 * starts a new one): sizes start again at 0, and readers parked at the old
 * end get end-of-file, as a reader of a truncated file does.  0 or -errno. */
int journal_file_rotate(struct sfs_run *run, const char *to);
/* How many times that file was rotated: a reader that began on an older
 * one gets end-of-file instead of reading the new one at its old offset. */
unsigned long journal_file_generation(struct sfs_run *run);
/* Stops tracking every run of sb and answers its parked requests with -ENOENT. */
void journal_detach_sandbox(struct sfs_sandbox *sb);

/* Bytes so far (for st_size). */
off_t journal_size(struct sfs_run *run);
/* Copies the bytes at off (up to size) into buf; *eof set when the run has
 * ended and off is at the end.  Returns bytes copied or -errno. */
ssize_t journal_read(struct sfs_run *run, off_t off, void *buf, size_t size, bool *eof);
/* "running", "exited 0", ... under the engine lock. */
void journal_status_text(struct sfs_run *run, char *buf, size_t len);
bool journal_run_active(struct sfs_run *run);
/*
 * Blocks until the engine has seen run end, the engine stops, or timeout_ms
 * pass (< 0: no limit); woken the moment the engine records the end.  With
 * poke_ms > 0 it also asks the engine to look every poke_ms meanwhile (a
 * kill that wants the status settled now).  Returns whether the run ended.
 */
bool journal_wait_end(struct sfs_run *run, int timeout_ms, int poke_ms);

/*
 * Parks req unless it can be answered now: returns 1 when the caller should
 * answer at once (bytes or end available), 0 when parked.  A parked request
 * is not delivered until journal_arm(req) is called (after the caller has
 * registered its interrupt callback), so the reply can never race the
 * registration.
 */
int journal_park(struct sfs_sandbox *sb, struct sfs_run *run, void *req, off_t off, size_t size,
		 enum journal_wait_kind kind);
void journal_arm(void *req);
/* The reader was interrupted (Ctrl-C): its request is answered -EINTR. */
void journal_interrupt(void *req);

/* Ask the engine to look at every run now (after a kill, a new run). */
void journal_poke(void);

/* For tests and the status file: follower watches currently held. */
int journal_followers(void);

/* Journals the engine's passes visit: a run that ended, was reported and
 * has no reader, watch or follower is left out of them (tests). */
size_t journal_engine_active(void);

#endif
