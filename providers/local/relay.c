/*
 * The run wrapper's journal relay: the command writes into a pipe and the
 * wrapper appends what it reads to RUNDIR/journal, up to journal.max_size
 * bytes.  Past that one marker line is written and the rest is read and
 * dropped: the command goes on (a full pipe would stop it; an EFBIG from
 * RLIMIT_FSIZE would reach its workspace files too) and the state disk,
 * shared by every sandbox, is not filled by one chatty run.  A write that
 * fails (ENOSPC) cuts it the same way, the marker written in room held past
 * the journal's end from the start (sfs_relay_hold).
 * Libc only (it is linked into sandboxfs-run-wrapper).
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Appends all of buf to fd: the bytes written, fewer when a write fails
 * (errno says why). */
static size_t append_all(int fd, const char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, buf + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			break;
		}
		done += (size_t)w;
	}
	return done;
}

/* The marker's room (either marker, then the count of what was dropped):
 * held past the journal's end from the start. */
#define MARKER_ROOM 4096
/* Held ahead of need, so that most writes need no fallocate of their own. */
#define HOLD_STEP (256 << 10)

/* Blocks for the journal up to end (KEEP_SIZE: its length stays what was
 * written, so a reader sees no zeros); 0, or -1 with errno. */
static int hold_to(struct sfs_relay *r, unsigned long long end)
{
	if (end <= r->held)
		return 0;
	int rc;
	do
		rc = fallocate(r->out, FALLOC_FL_KEEP_SIZE, (off_t)r->held, (off_t)(end - r->held));
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -1;
	r->held = end;
	return 0;
}

/* The fallback room: an fd of an unlinked file in dir that holds a few
 * blocks, or -1. */
static int make_room(const char *dir)
{
	char path[4200];
	if (snprintf(path, sizeof(path), "%s/.journal-room", dir) >= (int)sizeof(path))
		return -1;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	unlink(path); /* its blocks stay until the fd goes: no file left behind */
	/* written, not fallocated: a file system without fallocate too */
	static const char zeros[4096];
	if (append_all(fd, zeros, sizeof(zeros)) != sizeof(zeros)) {
		close(fd);
		return -1;
	}
	return fd;
}

void sfs_relay_hold(struct sfs_relay *r, const char *dir)
{
	r->room = -1;
	r->held = r->written;
	/* a step ahead at once, as each write asks: most runs need no more */
	if (hold_to(r, r->written + MARKER_ROOM + HOLD_STEP) < 0 &&
	    hold_to(r, r->written + MARKER_ROOM) < 0) {
		r->held = 0; /* no fallocate here (or no room): room's blocks */
		r->room = make_room(dir);
	}
}

void sfs_relay_release(struct sfs_relay *r)
{
	struct stat st;
	/* the same length: only the blocks past it go */
	if (r->held && fstat(r->out, &st) == 0 && ftruncate(r->out, st.st_size) < 0) {
		/* they go with the run's directory */
	}
	r->held = 0;
}

/* A failed write cut the journal: the room's blocks are given back and
 * the marker written in them (or in the blocks held past the journal's
 * end), and from now on the output is dropped (counted), so the journal
 * stays what the run printed up to a point, with no gap if room comes
 * back; the relay goes on reading, or the command would block on a full
 * pipe. */
static void cut_for_error(struct sfs_relay *r, int e)
{
	r->capped = true;
	r->error = e;
	if (r->room >= 0) {
		close(r->room);
		r->room = -1;
	}
	char marker[200];
	int m = snprintf(marker, sizeof(marker),
			 "%ssandboxfs: journal cut at %llu bytes: %s (the state disk or the "
			 "sandbox's quota is full); the run's further output is dropped\n",
			 r->written > 0 && r->last != '\n' ? "\n" : "", r->written, strerror(e));
	append_all(r->out, marker, (size_t)m);
}

static void relay_take(struct sfs_relay *r, const char *buf, size_t n)
{
	if (r->capped) {
		if (r->error)
			r->dropped += n;
		return;
	}
	size_t room = r->max > r->written ? (size_t)(r->max - r->written) : 0;
	size_t keep = n < room ? n : room;
	int short_of = 0; /* the errno of a hold that failed: cut after keep */
	if (keep > 0 && r->held) {
		/* the marker's room stays held after what is written: blocks the
		 * journal does not hold yet are taken before, not after, so a run
		 * that grabs every block freed cannot take the marker's */
		unsigned long long need = r->written + keep + MARKER_ROOM;
		/* renewed a step ahead only once it is used up: a fallocate per
		 * HOLD_STEP bytes of output, not one per write */
		if (need > r->held && hold_to(r, need + HOLD_STEP) < 0 && hold_to(r, need) < 0) {
			short_of = errno;
			size_t fits = (size_t)(r->held - MARKER_ROOM - r->written);
			if (keep > fits)
				keep = fits;
		}
	}
	size_t done = keep > 0 ? append_all(r->out, buf, keep) : 0;
	if (done < keep)
		short_of = errno;
	r->written += done;
	if (done > 0)
		r->last = buf[done - 1];
	if (short_of) {
		r->dropped += n - done;
		cut_for_error(r, short_of);
		return;
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

void sfs_relay_finish(struct sfs_relay *r)
{
	if (!r->error || !r->dropped)
		return;
	char line[160];
	int m = snprintf(line, sizeof(line),
			 "sandboxfs: %llu bytes of the run's output were dropped\n", r->dropped);
	if (append_all(r->out, line, (size_t)m) == (size_t)m)
		r->dropped = 0;
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
