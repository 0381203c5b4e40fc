/*
 * Acting on a sandbox's tree as the sandbox would: this thread's fsuid,
 * fsgid and groups become the sandbox's, and it keeps no capability that
 * passes a permission check on a write (CAP_DAC_OVERRIDE, CAP_FOWNER,
 * CAP_FSETID, CAP_CHOWN, CAP_SYS_RESOURCE ...), so the kernel refuses
 * whatever the sandbox itself could not do, even where a check of ours was
 * wrong.  CAP_DAC_READ_SEARCH stays: the daemon reads its own store (the
 * snapshots' objects) meanwhile.  All of it is per thread (setfsuid, the
 * raw setgroups and capset system calls), and undone by untrusted_creds_end.
 */
#ifndef SFS_UNTRUSTED_CREDS_H
#define SFS_UNTRUSTED_CREDS_H

#include <linux/capability.h>
#include <stdbool.h>
#include <sys/types.h>

struct untrusted_creds {
	bool on;
	uid_t fsuid;
	gid_t fsgid;
	int ngroups;
	gid_t *groups;
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
};

/* Becomes uid:gid on this thread when the daemon is root and uid is not
 * (otherwise nothing changes, and 0).  0, or a negative errno with the
 * thread as it was. */
int untrusted_creds_begin(struct untrusted_creds *c, uid_t uid, gid_t gid);

/* Undoes untrusted_creds_begin (a thread that cannot be given its own ids
 * back is not left serving: the daemon aborts). */
void untrusted_creds_end(struct untrusted_creds *c);

#endif
