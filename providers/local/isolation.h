/*
 * isolation=bwrap for local sandboxes: one long-lived namespace holder per
 * sandbox (holder.c, daemon side) and runs that join its namespaces
 * (join.c, run wrapper side).  docs/architecture.md "Local isolation".
 */
#ifndef SFS_LOCAL_ISOLATION_H
#define SFS_LOCAL_ISOLATION_H

#include "../err.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the workspace and the proxy directory appear inside the sandbox. */
#define SFS_ISO_WORKSPACE "/workspace"
#define SFS_ISO_PROXY_DIR "/run/sandboxfs"

/* What a holder is made from. */
struct sfs_holder_spec {
	const char *bwrap;     /* the bwrap binary (local.bwrap) */
	const char *workspace; /* host directory bound read-write at SFS_ISO_WORKSPACE */
	const char *proxy_dir; /* host directory bound at SFS_ISO_PROXY_DIR, or NULL */
	const char *log_path;  /* bwrap's stderr goes here (appended) */
	const char *hostname;
	bool unshare_net; /* network none or allow: a net namespace with loopback only */
	uid_t uid;	  /* host uid and gid the sandbox runs as (never 0 when the */
	gid_t gid;	  /* daemon is root: the sandbox's own, local/ids.c) */
};

/* A running holder: the pid (host view) of the process whose namespaces
 * runs join, and its start time (/proc/PID/stat field 22), so a pid reused
 * after the holder died is never taken for it. */
struct sfs_holder {
	pid_t init;	/* bwrap's pid 1 of the sandbox: killing it ends every process */
	pid_t target;	/* the holder command (pid 2 inside): the namespaces runs join */
	uint64_t start; /* target's start time */
	pid_t outer;	/* bwrap's outer process, the daemon's child (reaped by tick) */
	uid_t uid;
	gid_t gid;
	bool unshare_net;
};

/* Whether bwrap can be used here (binary present, user namespaces allowed);
 * -EOPNOTSUPP with why not. */
int sfs_holder_check(const char *bwrap, struct sfs_err *err);

/* Starts a holder; on failure -EOPNOTSUPP (or another errno) with bwrap's
 * own words from the log. */
int sfs_holder_start(const struct sfs_holder_spec *spec, struct sfs_holder *h, struct sfs_err *err);

/* Whether h's target still is the process it was started as. */
bool sfs_holder_alive(const struct sfs_holder *h);

/* SIGKILLs the holder's pid 1 (every process of the sandbox goes with it)
 * and waits up to 5 s for the namespace to empty; 0 or -errno. */
int sfs_holder_kill(const struct sfs_holder *h);

/* procstat.c: a small /proc file into buf (NUL-terminated); its length or
 * -1. */
ssize_t sfs_proc_read(const char *path, char *buf, size_t size);
/* A process's start time in clock ticks since boot, 0 when it is gone. */
uint64_t sfs_proc_start_time(pid_t pid);

/* The wrapper's argument that carries a holder: "TARGET:START:UID:GID:NET". */
int sfs_holder_format(const struct sfs_holder *h, char *buf, size_t len);

/* join.c, in the run wrapper's child: enters the namespaces named by arg
 * (sfs_holder_format), drops every capability and privilege, and forks
 * once more (the pid namespace applies to children).  Returns in the
 * grandchild (0), which goes on to exec the command; the middle process
 * never returns (it waits and exits with the grandchild's status).  On
 * failure returns -1 with a message on stderr. */
int sfs_join_holder(const char *arg);

#endif
