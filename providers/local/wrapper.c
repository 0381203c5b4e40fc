/*
 * The local run wrapper.  It is the sandboxfs binary re-executed, so after
 * exec it is single-threaded and owes nothing to the daemon: the daemon can
 * die, restart or unmount and the run goes on.
 *
 * RUNDIR holds (RUNDIR itself is flock'ed by the wrapper for its whole life,
 * or RUNDIR/lock where a directory cannot be: free and no status means lost):
 *   journal  the command's stdout and stderr, merged, relayed through a pipe
 *            (relay.c) and cut at JOURNAL_MAX bytes with a marker line
 *   stdin    a FIFO; the wrapper keeps a writer open until SIGUSR1 (EOF)
 *   pid      "PID WPID WSTART": the command's pid, which is also its process
 *            group, then the wrapper's (for SIGUSR1) and its start time
 *            (/proc/PID/stat field 22), which proves a live WPID is still
 *            this wrapper
 *   status   "exit N" or "signal N", written atomically when the command ends
 *            (its temp file is reserved at the start: a full disk at the end
 *            cannot make the run `lost`)
 *
 * The command is in the environment as SANDBOXFS_CMD, never in an argv.
 *
 * With isolation=bwrap a sixth argument names the sandbox's namespace
 * holder: the wrapper's child joins it (join.c) and starts the command in
 * it, so `pid` is that child's pid and the group holds both.
 *
 * Six files per run with the daemon's two (the directory, cmd): ext4 without
 * a journal searches past every inode freed in the last minutes for each new
 * one, so each file a run makes costs more after a big cleanup.  A daemon
 * of this version still reads runs an earlier wrapper left (a `lock` file, a
 * separate `wpid`).
 */
#include "isolation.h"
#include "local.h"

#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stdin_keeper = -1;

/* only there to make ppoll return when a child changes state */
static void on_chld(int sig)
{
	(void)sig;
}

static void on_usr1(int sig)
{
	(void)sig;
	if (stdin_keeper >= 0) {
		close(stdin_keeper);
		stdin_keeper = -1;
	}
}

/*
 * Writes RUNDIR/name atomically (temp + rename).  Nothing waits for the disk
 * before the rename: pid names processes that die with the machine,
 * so it only has to survive the daemon, which the page cache does; and
 * the status rename is what wakes `wait` readers (inotify), so it must not
 * wait for a flush.  With durable, the file is fsync'd after the rename: a
 * crash before that leaves no status or an empty one, which reads as `lost`.
 */
/* snprintf that refuses to cut: 0, or -1 (buf "") when it does not fit. */
static int __attribute__((format(printf, 3, 4)))
wpathf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < size)
		return 0;
	buf[0] = '\0';
	return -1;
}

static int write_small_file(const char *dir, const char *name, const char *text, bool durable,
			    bool tmp_beside)
{
	char tmp[4200], path[4200];
	if (wpathf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return -1;
	/* status's temp file is made beside RUNDIR (runs/.N.status.tmp, a
	 * name the daemon's scan of runs/ skips), not in it: a reader of
	 * `wait` has an inotify watch on RUNDIR, and the temp file's creation
	 * and write would wake the journal engine twice just before the rename
	 * that answers it */
	const char *slash = tmp_beside ? strrchr(dir, '/') : NULL;
	if (slash ? wpathf(tmp, sizeof(tmp), "%.*s/.%s.%s.tmp", (int)(slash - dir), dir, slash + 1,
			   name)
		  : wpathf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name))
		return -1;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len || rename(tmp, path) < 0) {
		close(fd);
		return -1;
	}
	int r = durable ? fsync(fd) : 0;
	close(fd);
	return r;
}

/*
 * The status file's temp file, made at the start with room for any status
 * text: rewriting bytes a file already has needs no new block, so a state
 * disk filled meanwhile (by any sandbox's run) cannot fail the final write
 * and leave the run `lost`.  A run directory made ahead (ctl/runs.h) has it
 * as RUNDIR/.status.tmp, made by the daemon: renamed, not made again.  -1
 * if it could not be made (then write_status retries until space comes
 * back).
 */
static int reserve_status(const char *dir, char *tmp, size_t len)
{
	const char *slash = strrchr(dir, '/');
	if (!slash)
		return -1;
	char ahead[4200];
	if (wpathf(tmp, len, "%.*s/.%s.status.tmp", (int)(slash - dir), dir, slash + 1) ||
	    wpathf(ahead, sizeof(ahead), "%s/.status.tmp", dir))
		return -1;
	struct stat st;
	if (rename(ahead, tmp) == 0) {
		int fd = open(tmp, O_WRONLY | O_CLOEXEC);
		if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= SFS_LOCAL_STATUS_ROOM)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	char room[SFS_LOCAL_STATUS_ROOM];
	memset(room, '\n', sizeof(room));
	/* no fsync (a run's start must stay quick): a delayed-allocation file
	 * system (ext4, xfs) reserves the blocks at write, tmpfs has them */
	if (write(fd, room, sizeof(room)) != (ssize_t)sizeof(room)) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	return fd;
}

/* Writes the final status: into the reserved file when there is one,
 * else as write_small_file; while the disk is full it retries (backing off
 * to 5 s) and the wrapper keeps its lock, so the run reads `running`, not
 * `lost`, until space comes back. */
static void write_status(const char *dir, int res_fd, const char *tmp, const char *text)
{
	char path[4200];
	if (wpathf(path, sizeof(path), "%s/status", dir))
		return; /* the wrapper refused such a RUNDIR at its start */
	size_t len = strlen(text);
	long delay_ms = 10;
	for (;;) {
		if (res_fd >= 0) {
			int r = pwrite(res_fd, text, len, 0) == (ssize_t)len &&
					ftruncate(res_fd, (off_t)len) == 0 && rename(tmp, path) == 0
				    ? 0
				    : -1;
			fsync(res_fd);
			close(res_fd);
			if (r == 0)
				return;
			/* the reserved file is gone (removed by hand): the
			 * plain way, which retries while the disk is full */
			res_fd = -1;
			continue;
		} else {
			if (write_small_file(dir, "status", text, true, true) == 0)
				return;
		}
		if (errno != ENOSPC && errno != EDQUOT)
			return;
		struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		if (delay_ms < 5000)
			delay_ms *= 2;
	}
}

static void report(int ready_fd, const char *what)
{
	if (ready_fd >= 0) {
		char msg[512];
		int n = snprintf(msg, sizeof(msg), "%s: %s\n", what, strerror(errno));
		if (write(ready_fd, msg, (size_t)n) < 0) {
			/* the daemon went away; nothing else to tell */
		}
	}
}

int sfs_local_wrapper_main(int argc, char **argv)
{
	/* the command comes in the environment, not argv: a command line is
	 * every host user's to read (ps), an environment its owner's only */
	const char *cmd = getenv(SFS_LOCAL_CMD_ENV);
	if ((argc != 6 && argc != 7) || !cmd) {
		fprintf(stderr,
			"usage: %s=CMD sandboxfs %s RUNDIR CWD READY_FD JOURNAL_MAX [HOLDER]\n",
			SFS_LOCAL_CMD_ENV, SFS_LOCAL_WRAP_ARG);
		return 2;
	}
	const char *dir = argv[2], *cwd = argv[3];
	const char *holder = argc == 7 ? argv[6] : NULL;
	int ready_fd = atoi(argv[4]);
	/* the run's umask (the sandbox's umask=): not in the command's env */
	const char *mask_text = getenv(SFS_LOCAL_UMASK_ENV);
	mode_t run_umask = mask_text ? (mode_t)(strtoul(mask_text, NULL, 8) & 0777) : 022;
	unsetenv(SFS_LOCAL_UMASK_ENV);
	unsigned long long journal_max = strtoull(argv[5], NULL, 10);
	char path[4200];
	/* every RUNDIR/NAME and runs/.N.NAME.tmp below must fit path */
	if (strlen(dir) + 64 > sizeof(path)) {
		report(ready_fd, "run directory path too long");
		return 1;
	}
	/* the command must not inherit it, or the daemon would wait for the
	 * command's end to see the pipe close */
	fcntl(ready_fd, F_SETFD, FD_CLOEXEC);

	/* the directory itself, not a file in it: one inode fewer per run */
	int lock_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock_fd >= 0 && flock(lock_fd, LOCK_EX) < 0) {
		/* a file system that cannot lock a directory (NFS makes flock a
		 * POSIX lock, which an exclusive one needs a file open for
		 * writing for): RUNDIR/lock, which the daemon looks for first */
		close(lock_fd);
		lock_fd = wpathf(path, sizeof(path), "%s/lock", dir)
			      ? -1
			      : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (lock_fd >= 0 && flock(lock_fd, LOCK_EX) < 0) {
			close(lock_fd);
			lock_fd = -1;
		}
	}
	if (lock_fd < 0) {
		report(ready_fd, "lock");
		return 1;
	}
	int journal_fd = wpathf(path, sizeof(path), "%s/journal", dir)
			     ? -1
			     : open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (journal_fd < 0) {
		report(ready_fd, "journal");
		return 1;
	}
	struct stat jst;
	int out[2];
	if (fstat(journal_fd, &jst) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		report(ready_fd, "journal pipe");
		return 1;
	}
	fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
	struct sfs_relay relay = {.in = out[0], .out = journal_fd, .max = journal_max};
	/* a journal already there (none is, today) counts against the cap */
	relay.written = (unsigned long long)jst.st_size;
	relay.last = '\n';
	sfs_relay_hold(&relay, dir);
	char status_tmp[4200];
	int status_fd = reserve_status(dir, status_tmp, sizeof(status_tmp));
	if (wpathf(path, sizeof(path), "%s/stdin", dir) ||
	    (mkfifo(path, 0600) < 0 && errno != EEXIST)) {
		report(ready_fd, "stdin fifo");
		return 1;
	}
	/* Opening O_RDWR never blocks and keeps a writer, so the command's
	 * reads wait for data instead of seeing EOF until SIGUSR1. */
	int keeper = open(path, O_RDWR | O_CLOEXEC);
	int in_fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (keeper < 0 || in_fd < 0) {
		report(ready_fd, "stdin fifo");
		return 1;
	}
	fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) & ~O_NONBLOCK);
	stdin_keeper = keeper;

	struct sigaction sa = {.sa_handler = on_usr1};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	/* SIGCHLD is blocked but while in ppoll: a child's end between a
	 * waitpid and the ppoll is not missed */
	struct sigaction sc = {.sa_handler = on_chld};
	sigemptyset(&sc.sa_mask);
	sigaction(SIGCHLD, &sc, NULL);
	sigset_t chld, poll_mask;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &poll_mask);
	sigdelset(&poll_mask, SIGCHLD);
	/* Orphaned grandchildren come to us, not to a PID 1 that may never
	 * reap them: a killed process group then really disappears. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	/* Every signal blocked across the fork: a kill right after the exec's
	 * reply may reach the child before it has reset what it inherited (an
	 * ignored SIGINT), and a blocked signal stays pending until the child
	 * unblocks it under the default action, where an ignored one would be
	 * dropped. */
	sigset_t all, run_mask;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &run_mask);
	pid_t pid = fork();
	if (pid < 0) {
		report(ready_fd, "fork");
		return 1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		/* tests widen the window above (tests/bats/ctl.bats) */
		const char *delay = getenv("SANDBOXFS_TEST_CHILD_DELAY_MS");
		if (delay) {
			long ms = atol(delay);
			struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		/* a daemon started from a script inherits ignored SIGINT/SIGQUIT
		 * (and libfuse ignores SIGPIPE): the command gets defaults */
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (dup2(in_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0)
			_exit(126);
		if (holder && sfs_join_holder(holder) < 0)
			_exit(126);
		if (chdir(cwd) < 0) {
			dprintf(2, "sandboxfs: cannot enter workspace %s: %s\n", cwd,
				strerror(errno));
			_exit(126);
		}
		umask(run_umask);
		/* the shell takes the command from the environment too (its
		 * argv is the same for every run) and drops the variable before
		 * the command runs, so nothing the command starts sees it */
		execl("/bin/sh", "sh", "-c",
		      "eval \"unset " SFS_LOCAL_CMD_ENV "; $" SFS_LOCAL_CMD_ENV "\"", (char *)NULL);
		dprintf(2, "sandboxfs: /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	sigprocmask(SIG_SETMASK, &run_mask, NULL);
	setpgid(pid, pid); /* also here, so the group exists before anyone signals it */
	close(in_fd);
	close(out[1]);

	/* our start time proves a later reader's pidfd on WPID is us, not a
	 * process that got our number after we ended (descendants.c) */
	char num[80];
	snprintf(num, sizeof(num), "%d %d %llu\n", (int)pid, (int)getpid(),
		 (unsigned long long)sfs_proc_start_time(getpid()));
	write_small_file(dir, "pid", num, false, false);
	if (write(ready_fd, "ok\n", 3) < 0) {
		/* the daemon will notice the run through its files */
	}
	close(ready_fd);

	/* Relay the output and reap children until the pipe is closed by all
	 * (a background process of an isolated run is not our child and may
	 * still write) and the last child is gone: we hold the lock until
	 * then so nothing outlives its reaper. */
	bool pipe_open = true, children = true, ended = false;
	while (pipe_open || children) {
		int status;
		pid_t r;
		while (children && (r = waitpid(-1, &status, WNOHANG)) != 0) {
			if (r < 0) {
				if (errno != EINTR)
					children = false;
				continue;
			}
			if (r != pid || ended)
				continue;
			ended = true;
			/* its output before its status (a `wait` reader then
			 * reads the journal) */
			if (pipe_open && sfs_relay_drain(&relay) != 0) {
				close(out[0]);
				pipe_open = false;
			}
			sfs_relay_finish(&relay);
			char text[64];
			if (WIFSIGNALED(status))
				snprintf(text, sizeof(text), "signal %d\n", WTERMSIG(status));
			else
				snprintf(text, sizeof(text), "exit %d\n", WEXITSTATUS(status));
			write_status(dir, status_fd, status_tmp, text);
			status_fd = -1;
			if (stdin_keeper >= 0)
				close(keeper);
			stdin_keeper = -1;
		}
		if (!pipe_open && !children)
			break;
		struct pollfd pfd = {.fd = out[0], .events = POLLIN};
		int n = ppoll(&pfd, pipe_open ? 1 : 0, NULL, &poll_mask);
		if (n > 0 && pipe_open && sfs_relay_pump(&relay, 0) != 0) {
			close(out[0]);
			pipe_open = false;
		}
	}
	sfs_relay_release(&relay);
	close(journal_fd);
	if (relay.room >= 0)
		close(relay.room);
	if (status_fd >= 0) {
		/* the command's end was never seen (waitpid failed) */
		close(status_fd);
		unlink(status_tmp);
	}
	return 0;
}
