/*
 * The session's reads and writes of /dev/fuse (fuse_session_custom_io), for
 * what libfuse 3.14 has no word for: FUSE_HANDLE_KILLPRIV_V2 and the kill
 * flags the kernel sends with it, and FUSE passthrough.
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
 *
 * Passthrough (Linux 6.9, protocol 7.40): with FUSE_PASSTHROUGH agreed at
 * INIT, a file registered with FUSE_DEV_IOC_BACKING_OPEN and an open reply
 * carrying FOPEN_PASSTHROUGH and its backing id are read, written and
 * mapped by the kernel on the host file directly, with no request to the
 * daemon.  The open reply is libfuse's, patched on its way out by the
 * thread that sends it (kio_reply_open, kio_reply_create).
 */
#include "kernel_io.h"
#include "providers/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Protocol 7.40's names, which Debian 12's linux/fuse.h (7.38) lacks. */
#ifndef FUSE_PASSTHROUGH
#define FUSE_PASSTHROUGH (1ULL << 37)
#endif
#ifndef FOPEN_PASSTHROUGH
#define FOPEN_PASSTHROUGH (1 << 7)
#endif
struct kio_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define KIO_IOC_BACKING_OPEN _IOW(229, 1, struct kio_backing_map)
#define KIO_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
/* fuse_init_out.max_stack_depth (7.40) is unused[0] of 7.38's header.  One:
 * backing files must be on a filesystem that stacks on nothing (a file on
 * overlayfs stays with the daemon), and overlayfs can still stack on us
 * (depth 2, the kernel's limit). */
#define KIO_MAX_STACK_DEPTH 1

static struct fuse_session *session;
static unsigned want_init;
static unsigned offered_init;
static uint64_t init_unique;
static bool init_done;
static bool v2_on, passthrough_on;
/* the request this thread is handling: read by the same worker after the
 * read() that fetched it (libfuse's loop reads, then processes, per thread) */
static __thread bool req_kill;
/* the backing id the open reply this thread is sending gets, or 0 */
static __thread int reply_backing_id;

bool kio_request_kills(const void *buf, size_t len, unsigned *offers)
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
		if (!offers || alen < offsetof(struct fuse_init_in, flags) + sizeof(i->flags))
			return false;
		*offers = (i->flags & FUSE_HANDLE_KILLPRIV_V2) ? KIO_INIT_V2 : 0;
		if ((i->flags & FUSE_INIT_EXT) &&
		    alen >= offsetof(struct fuse_init_in, flags2) + sizeof(i->flags2) &&
		    (i->flags2 & (uint32_t)(FUSE_PASSTHROUGH >> 32)))
			*offers |= KIO_INIT_PASSTHROUGH;
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

int kio_patch_init_reply(struct iovec *iov, int count, uint64_t unique, unsigned want)
{
	if (count < 2 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return -1;
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_init_out *o = iov[1].iov_base;
	if (out->unique != unique)
		return -1;
	if (out->error != 0 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(o->flags))
		return 0;
	unsigned on = 0;
	if (want & KIO_INIT_V2) {
		o->flags |= FUSE_HANDLE_KILLPRIV_V2;
		on |= KIO_INIT_V2;
	}
	/* the kernel refuses passthrough beside its writeback cache */
	if ((want & KIO_INIT_PASSTHROUGH) && !(o->flags & FUSE_WRITEBACK_CACHE) &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, unused) + sizeof(o->unused[0])) {
		o->flags |= FUSE_INIT_EXT;
		o->flags2 |= (uint32_t)(FUSE_PASSTHROUGH >> 32);
		o->unused[0] = KIO_MAX_STACK_DEPTH;
		on |= KIO_INIT_PASSTHROUGH;
	}
	return (int)on;
}

bool kio_patch_open_reply(struct iovec *iov, int count, int backing_id)
{
	struct fuse_open_out o;

	if (count < 2 || iov[0].iov_len < sizeof(struct fuse_out_header) ||
	    ((const struct fuse_out_header *)iov[0].iov_base)->error != 0 ||
	    iov[count - 1].iov_len < sizeof(o))
		return false;
	/* the open reply ends the body (create's follows its entry); a
	 * create's body is a char array, so no aligned access to it */
	char *at = (char *)iov[count - 1].iov_base + iov[count - 1].iov_len - sizeof(o);
	memcpy(&o, at, sizeof(o));
	/* the kernel fails (EIO) a passthrough open with any other flag */
	o.open_flags &= FOPEN_DIRECT_IO | FOPEN_NOFLUSH | FOPEN_PARALLEL_DIRECT_WRITES;
	o.open_flags |= FOPEN_PASSTHROUGH;
	o.padding = (uint32_t)backing_id; /* 7.40's backing_id */
	memcpy(at, &o, sizeof(o));
	return true;
}

static ssize_t kio_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t r = read(fd, buf, len);

	req_kill = false;
	if (r > 0) {
		unsigned offers = 0;
		const struct fuse_in_header *in = buf;
		req_kill = kio_request_kills(buf, (size_t)r, &offers);
		if ((size_t)r >= sizeof(*in) && in->opcode == FUSE_INIT) {
			__atomic_store_n(&offered_init, offers, __ATOMIC_RELAXED);
			__atomic_store_n(&init_unique, in->unique, __ATOMIC_RELEASE);
		}
	}
	return r;
}

static ssize_t kio_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	/* INIT is answered once, before any other request is read; the other
	 * workers read what it turned on later (atomics: the kernel's ordering
	 * is not one a race detector sees) */
	uint64_t unique = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	if (unique && !__atomic_load_n(&init_done, __ATOMIC_ACQUIRE)) {
		unsigned want = want_init & __atomic_load_n(&offered_init, __ATOMIC_RELAXED);
		int on = kio_patch_init_reply(iov, count, unique, want);
		if (on >= 0) {
			__atomic_store_n(&v2_on, (on & KIO_INIT_V2) != 0, __ATOMIC_RELEASE);
			__atomic_store_n(&passthrough_on, (on & KIO_INIT_PASSTHROUGH) != 0,
					 __ATOMIC_RELEASE);
			__atomic_store_n(&init_done, true, __ATOMIC_RELEASE);
		}
	}
	if (reply_backing_id)
		kio_patch_open_reply(iov, count, reply_backing_id);
	return writev(fd, iov, count);
}

static ssize_t kio_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
			       unsigned int flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int kio_install(struct fuse_session *se, bool killpriv_v2, bool passthrough)
{
	static const struct fuse_custom_io io = {
	    .read = kio_read,
	    .writev = kio_writev,
	    .splice_send = kio_splice_send,
	};

	session = se;
	want_init = (killpriv_v2 ? KIO_INIT_V2 : 0) | (passthrough ? KIO_INIT_PASSTHROUGH : 0);
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

mode_t kio_suidgid_to_clear(mode_t mode, bool caller_in_group)
{
	if (!S_ISREG(mode))
		return 0;
	return mode & (S_ISUID | ((mode & S_IXGRP) || !caller_in_group ? S_ISGID : 0));
}

/* Whether the caller's fsgid or one of its supplementary groups is gid; a
 * caller gone meanwhile counts by its fsgid alone. */
static bool kio_caller_in_group(fuse_req_t req, gid_t gid)
{
	gid_t some[64], *list = some;
	int n;
	bool in = fuse_req_ctx(req)->gid == gid;

	if (in)
		return true;
	n = fuse_req_getgroups(req, 64, some);
	if (n > 64) {
		list = malloc((size_t)n * sizeof(*list));
		n = list ? fuse_req_getgroups(req, n, list) : -ENOMEM;
	}
	for (int i = 0; i < n && !in; i++)
		in = list[i] == gid;
	if (list != some)
		free(list);
	return in;
}

mode_t kio_suidgid_to_clear_for(fuse_req_t req, mode_t mode, gid_t gid)
{
	bool in_group = true;

	if ((mode & (S_ISGID | S_IXGRP)) == S_ISGID)
		in_group = kio_caller_in_group(req, gid);
	return kio_suidgid_to_clear(mode, in_group);
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

bool kio_passthrough(void)
{
	return __atomic_load_n(&passthrough_on, __ATOMIC_ACQUIRE);
}

int kio_backing_open(int fd)
{
	struct kio_backing_map map = {.fd = fd};

	if (!session)
		return -ENOTCONN;
	int id = ioctl(fuse_session_fd(session), KIO_IOC_BACKING_OPEN, &map);

	return id < 0 ? -errno : id;
}

void kio_backing_close(int id)
{
	uint32_t arg = (uint32_t)id;

	if (session)
		ioctl(fuse_session_fd(session), KIO_IOC_BACKING_CLOSE, &arg);
}

int kio_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int backing_id)
{
	reply_backing_id = backing_id;
	int r = fuse_reply_open(req, fi);
	reply_backing_id = 0;
	return r;
}

int kio_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
		     const struct fuse_file_info *fi, int backing_id)
{
	reply_backing_id = backing_id;
	int r = fuse_reply_create(req, e, fi);
	reply_backing_id = 0;
	return r;
}
