/* The local provider's walk of a run wrapper's descendants
 * (providers/local/descendants.c). */
#include "check.h"

#include "providers/local/local.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* A table listing children before their parents, an unrelated tree, and the
 * root's own parent: only the root's descendants are marked, at any depth. */
static void test_select_any_order(void)
{
	const struct sfs_local_proc procs[] = {
	    {40, 30, 0, 0}, /* great-grandchild, listed first */
	    {30, 20, 0, 0}, /* grandchild (a setsid'd one looks the same) */
	    {20, 10, 0, 0}, /* child of the root */
	    {21, 10, 0, 0}, /* another child */
	    {10, 1, 0, 0},  /* the root itself: not its own descendant */
	    {1, 0, 0, 0},   /* its parent */
	    {50, 1, 0, 0},  /* unrelated */
	    {60, 50, 0, 0}, /* unrelated child */
	};
	bool mark[8];
	CHECK_INT((int)sfs_local_tree_select(procs, 8, 10, mark), 4);
	const bool want[8] = {true, true, true, true, false, false, false, false};
	for (int i = 0; i < 8; i++)
		CHECK(mark[i] == want[i]);
	CHECK_INT((int)sfs_local_tree_select(procs, 8, 99, mark), 0);
	CHECK_INT((int)sfs_local_tree_select(procs, 0, 10, mark), 0);
}

/* On the live system: a child and its child (started in its own session)
 * are found, signalled, and after that nothing is left. */
static void test_live_signal(void)
{
	/* as the run wrapper: the setsid'd grandchild comes back to us */
	CHECK_INT(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	int pipefd[2];
	CHECK_INT(pipe(pipefd), 0);
	pid_t child = fork();
	if (child == 0) {
		pid_t grand = fork();
		if (grand == 0) {
			setsid();
			pause();
			_exit(0);
		}
		dprintf(pipefd[1], "%d\n", (int)grand);
		pause();
		_exit(0);
	}
	char buf[32] = {0};
	CHECK(read(pipefd[0], buf, sizeof(buf) - 1) > 0);
	pid_t grand = atoi(buf);
	pid_t *pids;
	size_t n;
	CHECK_INT(sfs_local_descendants(getpid(), false, &pids, &n), 0);
	CHECK_INT((int)n, 2);
	free(pids);
	CHECK_INT(sfs_local_has_live_children(getpid()), 1);
	struct sfs_local_wrapper self = {.pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0),
					 .pid = getpid()};
	CHECK(self.pidfd >= 0);
	CHECK_INT(sfs_local_run_alive(&self), 1);
	CHECK_INT(sfs_local_run_signal(&self, SIGKILL), 0);
	int st;
	CHECK_INT(waitpid(child, &st, 0), child);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK_INT(waitpid(grand, &st, 0), grand);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK_INT(sfs_local_descendants(getpid(), true, &pids, &n), 0);
	CHECK_INT((int)n, 0);
	free(pids);
	CHECK_INT(sfs_local_has_live_children(getpid()), 0);
	CHECK_INT(sfs_local_run_alive(&self), 0);
	sfs_local_wrapper_close(&self);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* A dead child not reaped yet (a zombie) is a descendant, but not a live one. */
static void test_zombie_is_not_live(void)
{
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	pid_t *pids;
	size_t n = 0;
	/* until the kernel shows it as a zombie (the list leaves zombies out) */
	for (int i = 0; i < 500; i++) {
		CHECK_INT(sfs_local_descendants(getpid(), false, &pids, &n), 0);
		free(pids);
		if (n == 0)
			break;
		usleep(10000);
	}
	CHECK_INT((int)n, 0);
	CHECK_INT(sfs_local_has_live_children(getpid()), 0);
	CHECK_INT(sfs_local_descendants(getpid(), true, &pids, &n), 0);
	CHECK_INT((int)n, 1);
	free(pids);
	int st;
	CHECK_INT(waitpid(child, &st, 0), child);
}

/* A pid file naming a process that is not this run's wrapper is refused. */
static void test_wrapper_pid_checked(void)
{
	struct sfs_local_wrapper w;
	CHECK_INT(sfs_local_wrapper_open("/no/run", getpid(), 0, &w), -ESRCH);
	CHECK_INT(w.pidfd, -1);
	CHECK(sfs_local_wrapper_open("/no/run", -1, 0, &w) < 0);
	CHECK(sfs_local_wrapper_open("/no/run", 1, 0, &w) < 0);
}

CHECK_MAIN(CHECK_CASE(test_select_any_order), CHECK_CASE(test_live_signal),
	   CHECK_CASE(test_zombie_is_not_live), CHECK_CASE(test_wrapper_pid_checked))
