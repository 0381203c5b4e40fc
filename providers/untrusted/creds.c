#include "creds.h"

#include "../err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Not glibc's setgroups: it changes every thread of the process. */
static int thread_setgroups(int n, const gid_t *list)
{
	return syscall(SYS_setgroups, (size_t)n, list) == 0 ? 0 : -errno;
}

static int thread_caps(bool set, struct __user_cap_data_struct *caps)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	return syscall(set ? SYS_capset : SYS_capget, &hdr, caps) == 0 ? 0 : -errno;
}

int untrusted_creds_begin(struct untrusted_creds *c, uid_t uid, gid_t gid)
{
	memset(c, 0, sizeof(*c));
	if (geteuid() != 0 || uid == 0)
		return 0;
	int r = thread_caps(false, c->caps);
	if (r)
		return r;
	int n = getgroups(0, NULL);
	if (n < 0)
		return -errno;
	c->groups = calloc((size_t)n + 1, sizeof(gid_t));
	if (!c->groups)
		return -ENOMEM;
	c->ngroups = getgroups(n, c->groups);
	if (c->ngroups < 0) {
		r = -errno;
		free(c->groups);
		c->groups = NULL;
		return r;
	}
	c->fsuid = (uid_t)setfsuid((uid_t)-1);
	c->fsgid = (gid_t)setfsgid((gid_t)-1);
	c->on = true;
	r = thread_setgroups(0, NULL);
	if (!r) {
		setfsgid(gid);
		setfsuid(uid);
		/* setfsuid() reports the previous id, never an error: read back */
		if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid)
			r = -EPERM;
	}
	if (!r) {
		/* setfsuid() to a non-root uid took the file system capabilities
		 * from the effective set; of the rest, those that pass a check
		 * on what is written go too, and reading the store comes back */
		struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
		memcpy(caps, c->caps, sizeof(caps));
		caps[0].effective &=
		    ~((1u << CAP_CHOWN) | (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH) |
		      (1u << CAP_FOWNER) | (1u << CAP_FSETID) | (1u << CAP_MKNOD) |
		      (1u << CAP_LINUX_IMMUTABLE) | (1u << CAP_SYS_RESOURCE));
		caps[0].effective |= c->caps[0].effective & (1u << CAP_DAC_READ_SEARCH);
		caps[1].effective &= ~(1u << (CAP_MAC_OVERRIDE - 32));
		r = thread_caps(true, caps);
	}
	if (r)
		untrusted_creds_end(c);
	return r;
}

void untrusted_creds_end(struct untrusted_creds *c)
{
	if (!c->on)
		return;
	c->on = false;
	setfsuid(c->fsuid);
	setfsgid(c->fsgid);
	bool ok = (uid_t)setfsuid((uid_t)-1) == c->fsuid && (gid_t)setfsgid((gid_t)-1) == c->fsgid;
	ok = ok && thread_setgroups(c->ngroups, c->groups) == 0;
	ok = ok && thread_caps(true, c->caps) == 0;
	free(c->groups);
	c->groups = NULL;
	if (!ok) {
		/* a root thread serving everyone with a sandbox's ids, or the
		 * other way round: neither may go on */
		sfs_log(SFS_LOG_ERR, "untrusted: cannot give a thread its own credentials back");
		abort();
	}
}
