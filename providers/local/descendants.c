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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Reads pid's parent and state from /proc/PID/stat: "pid (comm) S ppid ...",
 * comm may hold spaces and ')' so the last ')' ends it. */
static int read_stat(pid_t pid, pid_t *ppid, char *state)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (sfs_proc_read(path, buf, sizeof(buf)) <= 0)
		return -1;
	char *end = strrchr(buf, ')');
	int parent;
	if (!end || sscanf(end + 1, " %c %d", state, &parent) != 2)
		return -1;
	*ppid = parent;
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
		if (read_stat(p.pid, &p.ppid, &state) < 0 || (state == 'Z' && !with_zombies))
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

int sfs_local_descendants(pid_t root, bool with_zombies, pid_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	struct sfs_local_proc *procs;
	size_t total;
	int r = list_procs(with_zombies, &procs, &total);
	if (r)
		return r;
	bool *mark = calloc(total ? total : 1, sizeof(*mark));
	pid_t *pids = calloc(total ? total : 1, sizeof(*pids));
	if (!mark || !pids) {
		free(mark);
		free(pids);
		free(procs);
		return -ENOMEM;
	}
	sfs_local_tree_select(procs, total, root, mark);
	for (size_t i = 0; i < total; i++)
		if (mark[i])
			pids[(*n)++] = procs[i].pid;
	free(mark);
	free(procs);
	*out = pids;
	return 0;
}

static bool listed(const pid_t *pids, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/* Signals every descendant of root once, walking /proc again until a walk
 * finds none it has not signalled: a process forked while we walked shows up
 * in the next walk.  The number of walks is capped so a fork bomb under
 * TERM cannot hold us; KILL's repeats (the caller escalates) catch the rest. */
int sfs_local_signal_descendants(pid_t root, int sig)
{
	pid_t *done = NULL;
	size_t ndone = 0, cap = 0;
	int r = 0;
	for (int walk = 0; walk < 200; walk++) {
		pid_t *pids;
		size_t n;
		r = sfs_local_descendants(root, false, &pids, &n);
		if (r)
			break;
		size_t fresh = 0;
		for (size_t i = 0; i < n; i++) {
			if (listed(done, ndone, pids[i]))
				continue;
			if (ndone == cap) {
				cap = cap ? cap * 2 : 64;
				pid_t *grown = realloc(done, cap * sizeof(*done));
				if (!grown) {
					free(pids);
					free(done);
					return -ENOMEM;
				}
				done = grown;
			}
			done[ndone++] = pids[i];
			fresh++;
			kill(pids[i], sig); /* ESRCH: it ended meanwhile, as wanted */
		}
		free(pids);
		if (!fresh)
			break;
	}
	free(done);
	return r;
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
		pid_t ppid;
		char state;
		if (read_stat((pid_t)child, &ppid, &state) == 0 && state != 'Z')
			return 1;
	}
	return 0;
}

pid_t sfs_local_wrapper_pid(const char *run_dir, pid_t wpid)
{
	/* The pid file may outlive the wrapper and its number be reused: only a
	 * process whose argv is "... SFS_LOCAL_WRAP_ARG RUN_DIR ..." is it. */
	if (wpid <= 1)
		return -1;
	char path[64], buf[4400];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)wpid);
	ssize_t len = sfs_proc_read(path, buf, sizeof(buf));
	if (len <= 0)
		return -1;
	const char *arg1 = buf + strlen(buf) + 1;
	if (arg1 >= buf + len || strcmp(arg1, SFS_LOCAL_WRAP_ARG) != 0)
		return -1;
	const char *arg2 = arg1 + strlen(arg1) + 1;
	if (arg2 >= buf + len || strcmp(arg2, run_dir) != 0)
		return -1;
	return wpid;
}
