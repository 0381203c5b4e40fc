/*
 * The session's reads and writes of /dev/fuse (fuse_session_custom_io), for
 * what libfuse 3.14 has no word for: FUSE_HANDLE_KILLPRIV_V2 and the kill
 * flags the kernel sends with it.
 *
 * Without it, the kernel asks for security.capability before every write
 * (the answer "none" is not remembered), one round trip more per write.
 * With it, the superblock is SB_NOSEC: the kernel asks once and then knows
 * the inode has nothing to kill until its attributes change; in exchange
 * the daemon clears set-user-ID and set-group-ID when the kernel flags a
 * write, truncate or O_TRUNC open by a caller without CAP_FSETID (the host
 * does not: the daemon has CAP_FSETID).  The host's own write and truncate
 * drop security.capability whatever the caller's capabilities.
 *
 * Only read() is offered, never splice receive: the flags are read from the
 * request in the thread that then handles it, which a request spliced into
 * a pipe would hide (and libfuse splices only where the pipe can hold the
 * largest write, which root here cannot make it).
 */
#include "kernel_io.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static struct fuse_session *session;
static bool want_v2;
static bool offered_v2;
static uint64_t init_unique;
static bool v2_on;
/* the request this thread is handling: read by the same worker after the
 * read() that fetched it (libfuse's loop reads, then processes, per thread) */
static __thread bool req_kill;

bool kio_request_kills(const void *buf, size_t len, bool *offers_v2)
{
	const struct fuse_in_header *in = buf;
	const char *arg = (const char *)buf + sizeof(*in);
	size_t alen;

	if (len < sizeof(*in))
		return false;
	alen = len - sizeof(*in);
	switch (in->opcode) {
	case FUSE_INIT: {
		const struct fuse_init_in *i = (const void *)arg;
		if (offers_v2 && alen >= offsetof(struct fuse_init_in, flags) + sizeof(i->flags))
			*offers_v2 = (i->flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
		return false;
	}
	case FUSE_WRITE:
		return alen >= sizeof(struct fuse_write_in) &&
		       (((const struct fuse_write_in *)(const void *)arg)->write_flags &
			FUSE_WRITE_KILL_SUIDGID);
	case FUSE_SETATTR:
		return alen >= sizeof(struct fuse_setattr_in) &&
		       (((const struct fuse_setattr_in *)(const void *)arg)->valid &
			FATTR_KILL_SUIDGID);
	case FUSE_OPEN:
		return alen >= sizeof(struct fuse_open_in) &&
		       (((const struct fuse_open_in *)(const void *)arg)->open_flags &
			FUSE_OPEN_KILL_SUIDGID);
	case FUSE_CREATE:
		return alen >= sizeof(struct fuse_create_in) &&
		       (((const struct fuse_create_in *)(const void *)arg)->open_flags &
			FUSE_OPEN_KILL_SUIDGID);
	default:
		return false;
	}
}

bool kio_patch_init_reply(struct iovec *iov, int count, uint64_t unique, bool want)
{
	if (count < 2 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return false;
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_init_out *o = iov[1].iov_base;
	if (out->unique != unique || out->error != 0 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(o->flags))
		return false;
	if (want)
		o->flags |= FUSE_HANDLE_KILLPRIV_V2;
	return want;
}

static ssize_t kio_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t r = read(fd, buf, len);

	req_kill = false;
	if (r > 0) {
		bool offers = false;
		const struct fuse_in_header *in = buf;
		req_kill = kio_request_kills(buf, (size_t)r, &offers);
		if ((size_t)r >= sizeof(*in) && in->opcode == FUSE_INIT) {
			__atomic_store_n(&offered_v2, offers, __ATOMIC_RELAXED);
			__atomic_store_n(&init_unique, in->unique, __ATOMIC_RELEASE);
		}
	}
	return r;
}

static ssize_t kio_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	/* INIT is answered once, before any other request is read; the other
	 * workers read v2_on later (atomics: the kernel's ordering is not one
	 * a race detector sees) */
	uint64_t unique = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	if (unique && !__atomic_load_n(&v2_on, __ATOMIC_ACQUIRE) &&
	    kio_patch_init_reply(iov, count, unique,
				 want_v2 && __atomic_load_n(&offered_v2, __ATOMIC_RELAXED)))
		__atomic_store_n(&v2_on, true, __ATOMIC_RELEASE);
	return writev(fd, iov, count);
}

static ssize_t kio_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
			       unsigned int flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int kio_install(struct fuse_session *se, bool killpriv_v2)
{
	static const struct fuse_custom_io io = {
	    .read = kio_read,
	    .writev = kio_writev,
	    .splice_send = kio_splice_send,
	};

	session = se;
	want_v2 = killpriv_v2;
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

mode_t kio_suidgid_to_clear(mode_t mode)
{
	if (!S_ISREG(mode))
		return 0;
	return mode & (S_ISUID | ((mode & S_IXGRP) ? S_ISGID : 0));
}

int kio_status_has_fsetid(FILE *status)
{
	char line[256];
	unsigned long long caps;

	while (fgets(line, sizeof(line), status))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			return (caps >> CAP_FSETID) & 1;
	return -1;
}

bool kio_caller_has_fsetid(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	char path[64];
	int has = -1;

	/* the caller's thread: its task's capabilities, as the kernel checks */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)c->pid);
	FILE *f = c->pid > 0 ? fopen(path, "re") : NULL;
	if (f) {
		has = kio_status_has_fsetid(f);
		fclose(f);
	}
	return has < 0 ? c->uid == 0 : has == 1;
}

void kio_inval_attr(fuse_ino_t ino)
{
	if (session)
		fuse_lowlevel_notify_inval_inode(session, ino, -1, 0);
}

bool kio_killpriv_v2(void)
{
	return __atomic_load_n(&v2_on, __ATOMIC_ACQUIRE);
}

bool kio_kill_suidgid(void)
{
	return req_kill;
}
