/* How long the coherence watcher lets a burst of inotify events gather
 * before it reads them (fs/workspace/watcher.c).  Pure: no FUSE, no I/O. */
#ifndef SFS_WS_WATCH_BATCH_H
#define SFS_WS_WATCH_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#define WS_BATCH_MIN_US 2000u
#define WS_BATCH_MAX_US 16000u
/* a pause longer than this between bursts starts the next one at the minimum */
#define WS_BATCH_QUIET_NS 50000000ull

struct ws_batch {
	unsigned wait_us; /* the next burst's wait */
	uint64_t last_ns; /* when the last burst was handled (monotonic) */
};

void ws_batch_init(struct ws_batch *b);
/* The wait before reading the burst whose first event just arrived at now_ns. */
unsigned ws_batch_wait(struct ws_batch *b, uint64_t now_ns);
/* A burst was handled at now_ns; foreign: one of its events was a change
 * made behind the mount (it invalidated something), not the daemon's own. */
void ws_batch_done(struct ws_batch *b, bool foreign, uint64_t now_ns);

#endif
