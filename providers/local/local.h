/* The local provider: a sandbox is a host directory plus the process groups started in it. */
#ifndef SFS_LOCAL_H
#define SFS_LOCAL_H

#include "../options.h"
#include "isolation.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

/* argv[1] that makes the sandboxfs binary act as the run wrapper. */
#define SFS_LOCAL_WRAP_ARG "__local-run-wrapper"

/* The environment variable that brings the run's command to the wrapper
 * and its shell (an argv is readable by every host user). */
#define SFS_LOCAL_CMD_ENV "SANDBOXFS_CMD"
/* The variable that gives the wrapper the run's umask (octal); the wrapper
 * takes it out of the command's environment. */
#define SFS_LOCAL_UMASK_ENV "SANDBOXFS_RUN_UMASK"

/* The libc-only wrapper program, looked for beside the sandboxfs binary. */
#define SFS_LOCAL_WRAP_EXE "sandboxfs-run-wrapper"
/* The fd the wrapper reports "ok" (or why not) on. */
#define SFS_LOCAL_READY_FD 3
/* Bytes the status file's temp file is made with (wrapper.c): room for any
 * status text. */
#define SFS_LOCAL_STATUS_ROOM 64

/* spawn.c: starts the wrapper (argv as for sfs_local_wrapper_main, its
 * READY_FD argument SFS_LOCAL_READY_FD) in a session of its own, with
 * /dev/null on 0-2 and ready_fd as SFS_LOCAL_READY_FD; -errno. */
int sfs_local_spawn_wrapper(char *const argv[], char *const envp[], int ready_fd, pid_t *pid);

/* The run wrapper: argv = exe ARG RUNDIR CWD READY_FD JOURNAL_MAX
 * [HOLDER], the command in SFS_LOCAL_CMD_ENV.  Single-threaded
 * after exec; returns the process exit status. */
int sfs_local_wrapper_main(int argc, char **argv);

/* relay.c: the run's output, from the pipe `in` (O_NONBLOCK) to the
 * journal `out`, at most max bytes, then one marker line and nothing.  A
 * write that fails (ENOSPC: the state disk or the sandbox's quota is full)
 * cuts it the same way, the marker written in the room `room` held (an fd
 * of an unlinked file with a few blocks, closed to free them; -1: none). */
struct sfs_relay {
	int in, out, room;
	unsigned long long written, max;
	/* the journal's blocks end here (fallocate'd past its end, kept from
	 * the run's reach): written + the marker's room at least; 0 where the
	 * file system cannot, then room holds the marker's blocks instead */
	unsigned long long held;
	unsigned long long dropped; /* bytes read and not kept after a failed write */
	int error;		    /* the errno of that write, 0 */
	char last;		    /* the last byte kept (a marker starts a line of its own) */
	bool capped;		    /* the marker is written; the rest is read and dropped */
};
/* Holds the marker's room as blocks of the journal itself, past its end
 * (r->out, r->written set): a block freed for the marker could be taken
 * by the run first, a block of the journal cannot.  Where the file system
 * cannot (no fallocate), r->held stays 0 and r->room is an unlinked file
 * of dir holding a few blocks, freed for the marker (-1 when not even). */
void sfs_relay_hold(struct sfs_relay *r, const char *dir);
/* At the run's end: the blocks held past the journal's end go back. */
void sfs_relay_release(struct sfs_relay *r);
/* After the command's end: one line saying how many bytes were dropped
 * since a failed write cut the journal, if there were any and room. */
void sfs_relay_finish(struct sfs_relay *r);
/* Reads what the pipe has (at most limit bytes, 0: no limit) into the
 * journal: 1 at EOF, 0 when it would block or limit is reached, -1. */
int sfs_relay_pump(struct sfs_relay *r, size_t limit);
/* Relays what is in the pipe at this moment and no more (the command has
 * ended: its output is in the journal before its status); as pump. */
int sfs_relay_drain(struct sfs_relay *r);

/* descendants.c: the processes of a run.  The wrapper is a session leader
 * and the subreaper of everything the command starts, so a run's processes
 * are its descendants and its session's members; both are told apart from
 * other processes only while the wrapper lives, which a pidfd on it shows. */
struct sfs_local_proc {
	pid_t pid, ppid;
	pid_t sid;	/* session */
	uint64_t start; /* start time, /proc/PID/stat field 22 */
};
/* Pure: marks (mark[i]) the entries of procs that descend from root (root
 * itself not included); returns how many. */
size_t sfs_local_tree_select(const struct sfs_local_proc *procs, size_t n, pid_t root, bool *mark);
/* The descendants of root now in /proc (zombies too when with_zombies), in
 * *out (free it); -errno. */
int sfs_local_descendants(pid_t root, bool with_zombies, pid_t **out, size_t *n);
/* 1 if pid (single-threaded) has a child that is not a zombie, 0 if not,
 * -1 if the kernel cannot tell (no CONFIG_PROC_CHILDREN, pid gone). */
int sfs_local_has_live_children(pid_t pid);
/* A run's wrapper, proven: pidfd names it for good. */
struct sfs_local_wrapper {
	int pidfd; /* -1: none */
	pid_t pid; /* also its session id */
	uint64_t start;
};
/* Opens the wrapper that the pid file of run_dir names (wpid, and wstart
 * when the wrapper recorded it, else 0): 0 when that process is alive and
 * is run_dir's wrapper, else -ESRCH (or -errno). */
int sfs_local_wrapper_open(const char *run_dir, pid_t wpid, uint64_t wstart,
			   struct sfs_local_wrapper *w);
/* Whether the wrapper has not ended (its pidfd is not readable). */
bool sfs_local_wrapper_alive(const struct sfs_local_wrapper *w);
/* Signals the wrapper itself (SIGUSR1 closes the run's stdin); -errno. */
int sfs_local_wrapper_signal(const struct sfs_local_wrapper *w, int sig);
void sfs_local_wrapper_close(struct sfs_local_wrapper *w);
/* Sends sig to each process of w's run (never the wrapper) through a pidfd
 * opened on what a walk of /proc found, walking again until a walk finds
 * none new (a process forked meanwhile is caught); nothing once the
 * wrapper has ended (-ESRCH); -errno. */
int sfs_local_run_signal(const struct sfs_local_wrapper *w, int sig);
/* 1 if w's run has a live process (not a zombie), 0 if not or the wrapper
 * has ended, -errno. */
int sfs_local_run_alive(const struct sfs_local_wrapper *w);

/* isolated.c: a sandbox's isolation settings (in local.c's state, behind
 * its leaf lock; copied out and back by the op holder). */
struct sfs_sandbox;
struct sfs_kvlist;
struct local_iso {
	bool bwrap;
	uid_t uid; /* the sandbox's own host uid and gid (ids.c), kept for its life */
	gid_t gid;
	mode_t umask;	    /* the runs' umask (umask=, local.umask; 077 isolated, else 022) */
	char network[1024]; /* policy text (providers/netpolicy): host, none, allow:... */
	struct sfs_holder holder; /* holder.target 0: none started yet */
};
/* Reads isolation=, network= and umask= of `new` (defaults
 * local.isolation, local.network, local.umask) into iso; -EINVAL /
 * -EOPNOTSUPP with why. */
int sfs_local_iso_options(const struct sfs_kvlist *opts, struct local_iso *iso,
			  struct sfs_err *err);
/* For a new bwrap sandbox on host dir `dir` (owned: made by the daemon,
 * then given to the sandbox uid): its net directory and its holder. */
int sfs_local_iso_create(struct sfs_sandbox *sb, const char *dir, bool owned, struct local_iso *iso,
			 struct sfs_err *err);
/* Makes sure iso's holder runs (a new one when it died or was killed);
 * *changed tells the caller to store iso back. */
int sfs_local_iso_ensure(struct sfs_sandbox *sb, const char *dir, struct local_iso *iso,
			 bool *changed, struct sfs_err *err);
/* `policy network P` (P checked): later runs get P; an allow-list change
 * applies at once, a change between host and an own network namespace
 * takes a new holder at the next run. */
int sfs_local_iso_set_network(struct sfs_sandbox *sb, const char *dir, struct local_iso *iso,
			      const char *policy, struct sfs_err *err);
/* Ends the sandbox's namespace: every process in it. */
int sfs_local_iso_end(struct sfs_sandbox *sb, struct local_iso *iso, struct sfs_err *err);
/* The holder's record in STATE/sandboxes/KEY/holder (written on each change,
 * so a holder started between two registry saves is found too). */
void sfs_local_iso_save_holder(struct sfs_sandbox *sb, const struct local_iso *iso);
void sfs_local_iso_load_holder(struct sfs_sandbox *sb, struct local_iso *iso);
/* The environment an isolated run starts from (none of the daemon's):
 * PATH, HOME=/tmp, and with an allow: policy the proxy variables. */
int sfs_local_iso_env(const struct local_iso *iso, struct sfs_kvlist *env);
/* At load (before the daemon forks): an allow: sandbox whose holder lives
 * is queued; the first tick (after it) attaches the proxy to it. */
void sfs_local_iso_loaded(struct sfs_sandbox *sb, const struct local_iso *iso);
void sfs_local_iso_tick(void);
json_t *sfs_local_iso_json(const struct local_iso *iso);
void sfs_local_iso_from_json(json_t *o, struct local_iso *iso);

/* Gives back the sandbox's uid and gid (at destroy). */
void sfs_local_iso_release(struct sfs_sandbox *sb, const struct local_iso *iso);
/* Gives a copy of another sandbox's workspace (fork) to iso's ids: what
 * belonged to from's uid or gid is made iso's, symlinks not followed. */
int sfs_local_iso_adopt_copy(const struct local_iso *from, const struct local_iso *iso,
			     const char *dir, struct sfs_err *err);

/* ids.c: an isolated sandbox's own uid and gid (one number) from
 * local.isolation_ids=FIRST:COUNT, leased in STATE/isolation-ids/ID (a file
 * holding the sandbox key); a daemon that is not root gives its own. */
/* Pure: "FIRST:COUNT" (no 0, no 65534, below (uid_t)-1); -EINVAL with why. */
int sfs_local_ids_parse(const char *text, unsigned long long *first, unsigned long long *count,
			struct sfs_err *err);
/* The lowest id of the range no lease, host user or group, or running
 * process has; leased to key.  -EAGAIN when none is left. */
int sfs_local_ids_take(const char *key, uid_t *uid, gid_t *gid, struct sfs_err *err);
/* At load: leases uid to key again if its lease is missing. */
void sfs_local_ids_keep(const char *key, uid_t uid);
/* Removes key's lease of uid. */
void sfs_local_ids_release(const char *key, uid_t uid);

/* Pure: a umask as text ("077", "0022": octal digits, at most 0777);
 * -EINVAL with why. */
int sfs_local_umask_parse(const char *text, mode_t *mask, struct sfs_err *err);
/* The umask of runs of a sandbox with no umask= (local.umask, else 077
 * isolated and 022 not). */
mode_t sfs_local_umask_default(bool isolated);

/* options.c: the -o local.KEY rows (providers/options.h). */
extern const struct sfs_opt sfs_local_options[];

#endif
