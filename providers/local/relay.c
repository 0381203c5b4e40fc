/*
 * The run wrapper's journal relay: the command writes into a pipe and the
 * wrapper appends what it reads to RUNDIR/journal, up to journal.max_size
 * bytes.  Past that one marker line is written and the rest is read and
 * dropped: the command goes on (a full pipe would stop it; an EFBIG from
 * RLIMIT_FSIZE would reach its workspace files too) and the state disk,
 * shared by every sandbox, is not filled by one chatty run.
 * Libc only (it is linked into sandboxfs-run-wrapper).
 */
#include "local.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Appends all of buf to fd: false when a write fails (ENOSPC: the state
 * disk or the sandbox's quota is full). */
static bool append_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		buf += w;
		len -= (size_t)w;
	}
	return true;
}

static void relay_take(struct sfs_relay *r, const char *buf, size_t n)
{
	if (r->capped)
		return;
	size_t room = r->max > r->written ? (size_t)(r->max - r->written) : 0;
	size_t keep = n < room ? n : room;
	if (keep > 0) {
		/* a failed write ends the journal there: it stays what the run
		 * printed up to a point, with no gap if room comes back; the
		 * relay goes on reading, or the command would block on a full
		 * pipe */
		if (!append_all(r->out, buf, keep)) {
			r->capped = true;
			return;
		}
		r->written += keep;
		r->last = buf[keep - 1];
	}
	if (keep < n) {
		char marker[160];
		int m = snprintf(marker, sizeof(marker),
				 "%ssandboxfs: journal truncated at %llu bytes (journal.max_size); "
				 "the run's further output is dropped\n",
				 r->written > 0 && r->last != '\n' ? "\n" : "",
				 (unsigned long long)r->max);
		append_all(r->out, marker, (size_t)m);
		r->capped = true;
	}
}

int sfs_relay_pump(struct sfs_relay *r, size_t limit)
{
	char buf[65536];
	size_t done = 0;
	while (limit == 0 || done < limit) {
		size_t want = sizeof(buf);
		if (limit && limit - done < want)
			want = limit - done;
		ssize_t n = read(r->in, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return 1;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		relay_take(r, buf, (size_t)n);
		done += (size_t)n;
	}
	return 0;
}

int sfs_relay_drain(struct sfs_relay *r)
{
	/* only what is in the pipe now: a background process still writing
	 * must not hold the status back */
	int pending = 0;
	if (ioctl(r->in, FIONREAD, &pending) < 0 || pending <= 0)
		return 0;
	return sfs_relay_pump(r, (size_t)pending);
}
