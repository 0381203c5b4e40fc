/*
 * The processes of a local run beyond its process group.  The run wrapper
 * is the subreaper of everything the command starts (wrapper.c), so a
 * descendant that left the group (setsid, a daemonizing server) still has
 * a parent chain that ends at the wrapper: /proc finds it there.
 */
#include "isolation.h"
#include "local.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

size_t sfs_local_tree_select(const struct sfs_local_proc *procs, size_t n, pid_t root, bool *mark)
{
	for (size_t i = 0; i < n; i++)
		mark[i] = false;
	/* Fixpoint over the parent links: each pass marks the children of what
	 * is marked, so an order of the table that lists children before their
	 * parents costs passes, never a miss.  Marks never point back at root
	 * (a pid is never its own ancestor), so this ends within n passes. */
	size_t count = 0;
	for (bool more = true; more;) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			if (mark[i] || procs[i].pid == root)
				continue;
			bool child = procs[i].ppid == root;
			for (size_t j = 0; !child && j < n; j++)
				child = mark[j] && procs[j].pid == procs[i].ppid;
			if (child) {
				mark[i] = true;
				count++;
				more = true;
			}
		}
	}
	return count;
}

/* Reads what /proc/PID/stat says of pid: "pid (comm) S ppid pgrp session
 * ... starttime(22)"; comm may hold spaces and ')' so the last ')' ends it.
 * start may be NULL. */
static int read_stat(pid_t pid, pid_t *ppid, pid_t *sid, char *state, uint64_t *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (sfs_proc_read(path, buf, sizeof(buf)) <= 0)
		return -1;
	char *end = strrchr(buf, ')');
	int parent, session;
	unsigned long long st = 0;
	if (!end || sscanf(end + 1,
			   " %c %d %*d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
			   "%*d %*d %llu",
			   state, &parent, &session, &st) != 4)
		return -1;
	*ppid = parent;
	*sid = session;
	if (start)
		*start = st;
	return 0;
}

/* The processes now in /proc, zombies only when with_zombies.  A process
 * gone between readdir and its stat is simply not listed. */
static int list_procs(bool with_zombies, struct sfs_local_proc **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		struct sfs_local_proc p = {.pid = atoi(e->d_name)};
		char state;
		if (read_stat(p.pid, &p.ppid, &p.sid, &state, &p.start) < 0 ||
		    (state == 'Z' && !with_zombies))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 256;
			struct sfs_local_proc *grown = realloc(*out, cap * sizeof(**out));
			if (!grown) {
				closedir(d);
				free(*out);
				*out = NULL;
				*n = 0;
				return -ENOMEM;
			}
			*out = grown;
		}
		(*out)[(*n)++] = p;
	}
	closedir(d);
	return 0;
}

/* The processes of w's run as one walk of /proc sees them: the descendants
 * of the wrapper and the members of its session (a bwrap run's orphans
 * belong to the namespace's pid 1, not to the wrapper, but stay in the
 * session), never the wrapper itself.  Only valid while the wrapper lives:
 * the caller checks that after the walk (then the session id and every
 * parent link seen in the walk were the wrapper's). */
static int select_procs(pid_t root, pid_t sid, bool with_zombies, struct sfs_local_proc **out,
			size_t *n)
{
	struct sfs_local_proc *procs;
	size_t total;
	*out = NULL;
	*n = 0;
	int r = list_procs(with_zombies, &procs, &total);
	if (r)
		return r;
	bool *mark = calloc(total ? total : 1, sizeof(*mark));
	if (!mark) {
		free(procs);
		return -ENOMEM;
	}
	sfs_local_tree_select(procs, total, root, mark);
	size_t k = 0;
	for (size_t i = 0; i < total; i++)
		if (procs[i].pid != root && (mark[i] || (sid > 0 && procs[i].sid == sid)))
			procs[k++] = procs[i];
	free(mark);
	*out = procs;
	*n = k;
	return 0;
}

static int run_procs(const struct sfs_local_wrapper *w, bool with_zombies,
		     struct sfs_local_proc **out, size_t *n)
{
	return select_procs(w->pid, w->pid, with_zombies, out, n);
}

int sfs_local_descendants(pid_t root, bool with_zombies, pid_t **out, size_t *n)
{
	struct sfs_local_proc *procs;
	*out = NULL;
	int r = select_procs(root, 0, with_zombies, &procs, n);
	if (r)
		return r;
	pid_t *pids = calloc(*n ? *n : 1, sizeof(*pids));
	if (!pids) {
		free(procs);
		*n = 0;
		return -ENOMEM;
	}
	for (size_t i = 0; i < *n; i++)
		pids[i] = procs[i].pid;
	free(procs);
	*out = pids;
	return 0;
}

static bool listed(const struct sfs_local_proc *done, size_t n, const struct sfs_local_proc *p)
{
	for (size_t i = 0; i < n; i++)
		if (done[i].pid == p->pid && done[i].start == p->start)
			return true;
	return false;
}

/* Signals the process p that a walk saw, through a pidfd: the pidfd names
 * one process for good, and the start time read after it was opened says
 * that process is the one the walk saw, not a newcomer with its number. */
static void signal_proc(const struct sfs_local_proc *p, int sig)
{
	int fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (fd < 0)
		return; /* ended meanwhile, as wanted */
	pid_t ppid, sid;
	char state;
	uint64_t start;
	if (read_stat(p->pid, &ppid, &sid, &state, &start) == 0 && start == p->start)
		syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
	close(fd);
}

int sfs_local_run_signal(const struct sfs_local_wrapper *w, int sig)
{
	struct sfs_local_proc *done = NULL;
	size_t ndone = 0, cap = 0;
	int r = 0;
	/* Walks again until a walk finds none it has not signalled: a
	 * process forked while we walked shows up in the next walk.  The
	 * number of walks is capped so a fork bomb under TERM cannot hold us;
	 * KILL's repeats (the caller escalates) catch the rest. */
	for (int walk = 0; walk < 200; walk++) {
		struct sfs_local_proc *procs;
		size_t n;
		r = run_procs(w, false, &procs, &n);
		if (r)
			break;
		if (!sfs_local_wrapper_alive(w)) {
			/* the walk cannot tell the run's processes from
			 * others any more: nothing is signalled */
			free(procs);
			r = -ESRCH;
			break;
		}
		size_t fresh = 0;
		for (size_t i = 0; i < n; i++) {
			if (listed(done, ndone, &procs[i]))
				continue;
			if (ndone == cap) {
				cap = cap ? cap * 2 : 64;
				struct sfs_local_proc *grown = realloc(done, cap * sizeof(*done));
				if (!grown) {
					free(procs);
					free(done);
					return -ENOMEM;
				}
				done = grown;
			}
			done[ndone++] = procs[i];
			fresh++;
			signal_proc(&procs[i], sig);
		}
		free(procs);
		if (!fresh)
			break;
	}
	free(done);
	return r;
}

int sfs_local_run_alive(const struct sfs_local_wrapper *w)
{
	/* the common case without a walk: a live child of the live wrapper */
	int kids = sfs_local_has_live_children(w->pid);
	if (!sfs_local_wrapper_alive(w))
		return 0;
	if (kids > 0)
		return 1;
	struct sfs_local_proc *procs;
	size_t n;
	int r = run_procs(w, false, &procs, &n);
	if (r)
		return r;
	free(procs);
	return sfs_local_wrapper_alive(w) && n > 0;
}

int sfs_local_has_live_children(pid_t pid)
{
	/* Any live descendant's parent chain ends at a direct child that is
	 * alive too (a zombie has no children: they went to the subreaper), so
	 * this is "has a live descendant": a few small reads, no walk of /proc.
	 * Zombies do not count: they are dead, only not reaped yet (and the
	 * wrapper's own exit may leave one, e.g. a sanitizer's helper). */
	char path[96], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	ssize_t len = sfs_proc_read(path, buf, sizeof(buf));
	if (len < 0)
		return -1;
	if (len == (ssize_t)sizeof(buf) - 1)
		return 1; /* hundreds of children: some are surely alive */
	char *p = buf, *end;
	for (long child; (child = strtol(p, &end, 10)) > 0; p = end) {
		pid_t ppid, sid;
		char state;
		if (read_stat((pid_t)child, &ppid, &sid, &state, NULL) == 0 && state != 'Z')
			return 1;
	}
	return 0;
}

/* Whether wpid's argv is "... SFS_LOCAL_WRAP_ARG RUN_DIR ...". */
static bool wrapper_argv(const char *run_dir, pid_t wpid)
{
	char path[64], buf[4400];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)wpid);
	ssize_t len = sfs_proc_read(path, buf, sizeof(buf));
	if (len <= 0)
		return false;
	const char *arg1 = buf + strlen(buf) + 1;
	if (arg1 >= buf + len || strcmp(arg1, SFS_LOCAL_WRAP_ARG) != 0)
		return false;
	const char *arg2 = arg1 + strlen(arg1) + 1;
	return arg2 < buf + len && strcmp(arg2, run_dir) == 0;
}

int sfs_local_wrapper_open(const char *run_dir, pid_t wpid, uint64_t wstart,
			   struct sfs_local_wrapper *w)
{
	/* The pid file outlives the wrapper and its number may be reused:
	 * the number is only where to look.  A pidfd pins one process; read
	 * after it is open, the start time the wrapper recorded and its argv
	 * (the run's directory) say that process is this run's wrapper. */
	w->pidfd = -1;
	w->pid = -1;
	w->start = 0;
	if (wpid <= 1)
		return -ESRCH;
	int fd = (int)syscall(SYS_pidfd_open, wpid, 0);
	if (fd < 0)
		return -errno;
	uint64_t start = sfs_proc_start_time(wpid);
	if (!start || (wstart && start != wstart) || !wrapper_argv(run_dir, wpid)) {
		close(fd);
		return -ESRCH;
	}
	struct sfs_local_wrapper proven = {.pidfd = fd, .pid = wpid, .start = start};
	/* still the same process after the reads (not one that reused the
	 * number after the pidfd's own process ended) */
	if (!sfs_local_wrapper_alive(&proven)) {
		close(fd);
		return -ESRCH;
	}
	*w = proven;
	return 0;
}

bool sfs_local_wrapper_alive(const struct sfs_local_wrapper *w)
{
	if (w->pidfd < 0)
		return false;
	struct pollfd p = {.fd = w->pidfd, .events = POLLIN};
	return poll(&p, 1, 0) == 0;
}

int sfs_local_wrapper_signal(const struct sfs_local_wrapper *w, int sig)
{
	if (w->pidfd < 0 || syscall(SYS_pidfd_send_signal, w->pidfd, sig, NULL, 0) < 0)
		return w->pidfd < 0 ? -ESRCH : -errno;
	return 0;
}

void sfs_local_wrapper_close(struct sfs_local_wrapper *w)
{
	if (w->pidfd >= 0)
		close(w->pidfd);
	w->pidfd = -1;
}
