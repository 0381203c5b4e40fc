/*
 * The local run wrapper.  It is the sandboxfs binary re-executed, so after
 * exec it is single-threaded and owes nothing to the daemon: the daemon can
 * die, restart or unmount and the run goes on.
 *
 * RUNDIR holds:
 *   lock     flock'ed by the wrapper for its whole life (free + no status = lost)
 *   journal  the command's stdout and stderr, merged, appended
 *   stdin    a FIFO; the wrapper keeps a writer open until SIGUSR1 (EOF)
 *   pid      the command's pid, which is also its process group
 *   wpid     the wrapper's pid (for SIGUSR1)
 *   status   "exit N" or "signal N", written atomically when the command ends
 *
 * With isolation=bwrap a seventh argument names the sandbox's namespace
 * holder: the wrapper's child joins it (join.c) and starts the command in
 * it, so `pid` is that child's pid and the group holds both.
 */
#include "isolation.h"
#include "local.h"

#include <errno.h>
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
#include <unistd.h>

static volatile sig_atomic_t stdin_keeper = -1;

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
 * before the rename: pid and wpid name processes that die with the machine,
 * so they only have to survive the daemon, which the page cache does; and
 * the status rename is what wakes `wait` readers (inotify), so it must not
 * wait for a flush.  With durable, the file is fsync'd after the rename: a
 * crash before that leaves no status or an empty one, which reads as `lost`.
 */
static int write_small_file(const char *dir, const char *name, const char *text, bool durable,
			    bool tmp_beside)
{
	char tmp[4200], path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	/* status's temp file is made beside RUNDIR (runs/.N.status.tmp, a
	 * name the daemon's scan of runs/ skips), not in it: a reader of
	 * `wait` has an inotify watch on RUNDIR, and the temp file's creation
	 * and write would wake the journal engine twice just before the rename
	 * that answers it */
	const char *slash = tmp_beside ? strrchr(dir, '/') : NULL;
	if (slash)
		snprintf(tmp, sizeof(tmp), "%.*s/.%s.%s.tmp", (int)(slash - dir), dir, slash + 1,
			 name);
	else
		snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
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
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: sandboxfs %s RUNDIR CWD READY_FD CMD [HOLDER]\n",
			SFS_LOCAL_WRAP_ARG);
		return 2;
	}
	const char *dir = argv[2], *cwd = argv[3], *cmd = argv[5];
	const char *holder = argc == 7 ? argv[6] : NULL;
	int ready_fd = atoi(argv[4]);
	char path[4200];
	/* the command must not inherit it, or the daemon would wait for the
	 * command's end to see the pipe close */
	fcntl(ready_fd, F_SETFD, FD_CLOEXEC);

	snprintf(path, sizeof(path), "%s/lock", dir);
	int lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
		report(ready_fd, "lock");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/journal", dir);
	int journal_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (journal_fd < 0) {
		report(ready_fd, "journal");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/stdin", dir);
	if (mkfifo(path, 0600) < 0 && errno != EEXIST) {
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
	/* Orphaned grandchildren come to us, not to a PID 1 that may never
	 * reap them: a killed process group then really disappears. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	pid_t pid = fork();
	if (pid < 0) {
		report(ready_fd, "fork");
		return 1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		/* a daemon started from a script inherits ignored SIGINT/SIGQUIT
		 * (and libfuse ignores SIGPIPE): the command gets defaults */
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (dup2(in_fd, 0) < 0 || dup2(journal_fd, 1) < 0 || dup2(journal_fd, 2) < 0)
			_exit(126);
		if (holder && sfs_join_holder(holder) < 0)
			_exit(126);
		if (chdir(cwd) < 0) {
			dprintf(2, "sandboxfs: cannot enter workspace %s: %s\n", cwd,
				strerror(errno));
			_exit(126);
		}
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		dprintf(2, "sandboxfs: /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid); /* also here, so the group exists before anyone signals it */
	close(in_fd);
	close(journal_fd);

	char num[32];
	snprintf(num, sizeof(num), "%d\n", (int)pid);
	write_small_file(dir, "pid", num, false, false);
	snprintf(num, sizeof(num), "%d\n", (int)getpid());
	write_small_file(dir, "wpid", num, false, false);
	if (write(ready_fd, "ok\n", 3) < 0) {
		/* the daemon will notice the run through its files */
	}
	close(ready_fd);

	int status = 0;
	for (;;) {
		pid_t r = waitpid(-1, &status, 0);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			break;
	}
	char text[64];
	if (WIFSIGNALED(status))
		snprintf(text, sizeof(text), "signal %d\n", WTERMSIG(status));
	else
		snprintf(text, sizeof(text), "exit %d\n", WEXITSTATUS(status));
	write_small_file(dir, "status", text, true, true);

	/* Reap whatever the command left behind; we hold the lock until the
	 * last descendant is gone so nothing outlives its reaper. */
	if (stdin_keeper >= 0)
		close(keeper);
	stdin_keeper = -1;
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	return 0;
}
