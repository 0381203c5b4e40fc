/*
 * Caller credentials for creations.
 *
 * Ownership.  When the daemon is root, objects are created with the calling
 * thread's fsuid/fsgid set to the caller's (setfsuid/setfsgid are per-thread),
 * so the host filesystem assigns owner and group atomically, set-gid parent
 * directories included.  setfsuid() to a non-root uid drops CAP_DAC_OVERRIDE
 * and friends from the thread; we raise them again with capset() (also
 * per-thread), because the kernel has already checked every permission with
 * the caller's full credentials (default_permissions, which also strips
 * S_ISGID in vfs_prepare_mode) and repeating the check as the caller would
 * need their supplementary groups.  So a mount that other users can reach
 * must use default_permissions (SPEC §1).  Create-then-fchown was rejected:
 * it races with sandbox processes renaming things into place, and chown
 * clears S_ISUID.
 *
 * Umask.  Each worker thread unshares its fs_struct once, so that its umask is
 * its own.  With POSIX ACLs (FUSE_CAP_POSIX_ACL + FUSE_CAP_DONT_MASK) the
 * kernel passes the caller's umask unapplied and the thread takes it before a
 * creation: the host filesystem then applies it, or, in a directory with a
 * default ACL, applies the ACL instead (POSIX.1e: the umask is ignored
 * there).  Without them the kernel has already applied the umask and the
 * thread's is 0, so that the daemon's is not applied a second time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"
#include "providers/err.h"

#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Thread_local bool ws_thread_umask_done, ws_thread_umask_own;

void ws_thread_set_umask(fuse_req_t req)
{
	static bool warned;

	if (!ws_thread_umask_done) {
		ws_thread_umask_done = true;
		if (unshare(CLONE_FS) == -1) {
			if (!__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED))
				sfs_log(SFS_LOG_WARN,
					"workspace: unshare(CLONE_FS): %s; new files get the "
					"daemon's umask instead of the caller's",
					strerror(errno));
		} else {
			ws_thread_umask_own = true;
		}
	}
	if (ws_thread_umask_own)
		umask(ws.dont_mask ? fuse_req_ctx(req)->umask & 0777 : 0);
}

/* Switches this thread to the caller's fsuid/fsgid with the capabilities it
 * had, less those in drop (a mask of the low capability word); c tells
 * creds_end what to undo, whatever this returns.  A caller with the daemon's own ids only
 * loses drop, and only when there is something to drop. */
static int creds_begin(fuse_req_t req, uint32_t drop, struct ws_creds *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
	bool same = ctx->uid == ws.fsuid && ctx->gid == ws.fsgid;

	c->ids = false;
	c->dropped = 0;
	if (!ws.root || (same && !drop))
		return 0;
	if (syscall(SYS_capget, &hdr, caps) == -1)
		return errno;
	c->dropped = caps[0].effective & drop;
	if (same && !c->dropped)
		return 0;
	if (!same) {
		c->ids = true;
		setfsgid(ctx->gid);
		setfsuid(ctx->uid);
		/* setfsuid() reports the previous id, never an error: read back. */
		if ((uid_t)setfsuid((uid_t)-1) != ctx->uid ||
		    (gid_t)setfsgid((gid_t)-1) != ctx->gid)
			return EPERM;
	}
	/* setfsuid() to a non-root uid dropped the fs capabilities: raise
	 * them again, less drop */
	caps[0].effective &= ~drop;
	if (syscall(SYS_capset, &hdr, caps) == -1)
		return errno;
	return 0;
}

static void creds_end(const struct ws_creds *c)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];

	if (c->ids) {
		setfsuid(ws.fsuid); /* back to root raises the fs capabilities again */
		setfsgid(ws.fsgid);
		if ((uid_t)setfsuid((uid_t)-1) != ws.fsuid ||
		    (gid_t)setfsgid((gid_t)-1) != ws.fsgid)
			ws_bug("cannot restore the worker thread's fsuid/fsgid");
	}
	if (!c->dropped)
		return;
	if (syscall(SYS_capget, &hdr, caps) == -1)
		ws_bug("capget failed on the worker thread");
	caps[0].effective |= c->dropped;
	if (syscall(SYS_capset, &hdr, caps) == -1)
		ws_bug("cannot take the worker thread's capabilities back");
}

/* CAP_SYS_RESOURCE passes the checks that keep a disk's reserved blocks and
 * quotas for root (ext4_has_free_clusters also lets fsuid 0 through). */
#define WS_DROP_FOR_OTHERS (1u << CAP_SYS_RESOURCE)

int ws_creds_begin(fuse_req_t req, struct ws_creds *c)
{
	return ws_io_creds_begin(req, false, c);
}

void ws_creds_end(const struct ws_creds *c)
{
	creds_end(c);
}

int ws_io_creds_begin(fuse_req_t req, bool drop_fsetid, struct ws_creds *c)
{
	uint32_t drop = drop_fsetid ? 1u << CAP_FSETID : 0;

	if (fuse_req_ctx(req)->uid != 0)
		drop |= WS_DROP_FOR_OTHERS;
	return creds_begin(req, drop, c);
}
