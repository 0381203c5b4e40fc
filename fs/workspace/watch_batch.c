/*
 * The watcher's wait before reading a burst.  A big write through the mount
 * makes one IN_MODIFY per FUSE request, each a wakeup of the watcher that
 * only finds the daemon's own change (4-6% of the daemon's CPU in a 256 MiB
 * write).  So the wait doubles, up to WS_BATCH_MAX_US, while every burst is
 * the daemon's own, and drops back to WS_BATCH_MIN_US at the first change
 * made behind the mount or after a quiet spell.  What a run changes while
 * the mount is busy writing is seen that much later: milliseconds.
 */
#include "fs/workspace/watch_batch.h"

void ws_batch_init(struct ws_batch *b)
{
	b->wait_us = WS_BATCH_MIN_US;
	b->last_ns = 0;
}

unsigned ws_batch_wait(struct ws_batch *b, uint64_t now_ns)
{
	if (now_ns - b->last_ns > WS_BATCH_QUIET_NS)
		b->wait_us = WS_BATCH_MIN_US;
	return b->wait_us;
}

void ws_batch_done(struct ws_batch *b, bool foreign, uint64_t now_ns)
{
	if (foreign)
		b->wait_us = WS_BATCH_MIN_US;
	else if (b->wait_us < WS_BATCH_MAX_US)
		b->wait_us = b->wait_us * 2 > WS_BATCH_MAX_US ? WS_BATCH_MAX_US : b->wait_us * 2;
	b->last_ns = now_ns;
}
