/*
 * Starting a run wrapper from the daemon.  posix_spawn (clone with
 * CLONE_VM|CLONE_VFORK in glibc) does not copy the daemon's page tables,
 * which fork did for every run (0.5-1 ms for a daemon with a few hundred MiB
 * mapped), and it does the child's side of the work (setsid, /dev/null on
 * 0-2, the ready pipe as fd 3, nothing else inherited) without running any
 * of the daemon's code between fork and exec.
 */
#include "local.h"

#include "../util.h"
#include "../spawn_attr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The libc-only wrapper beside sfs_self_exe, else sfs_self_exe itself
 * (same argv either way: sfs_local_wrapper_pid checks it). */
static void wrapper_exe(char *buf, size_t len)
{
	if (sfs_pathf(buf, len, "%s", sfs_self_exe) < 0)
		return; /* "": the spawn fails, it never runs another file */
	char *slash = strrchr(buf, '/');
	if (!slash)
		return;
	size_t dirlen = (size_t)(slash - buf) + 1;
	if (dirlen + sizeof(SFS_LOCAL_WRAP_EXE) > len)
		return;
	memcpy(slash + 1, SFS_LOCAL_WRAP_EXE, sizeof(SFS_LOCAL_WRAP_EXE));
	if (access(buf, X_OK) != 0)
		(void)!sfs_pathf(buf, len, "%s", sfs_self_exe); /* fitted above */
}

int sfs_local_spawn_wrapper(char *const argv[], char *const envp[], int ready_fd, pid_t *pid)
{
	char exe[PATH_MAX];
	wrapper_exe(exe, sizeof(exe));
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int r = posix_spawn_file_actions_init(&fa);
	if (r)
		return -r;
	/* a session of its own: the daemon's terminal and signals are not the
	 * run's; nor the mask and dispositions of the thread that spawns */
	r = sfs_spawn_attr_clean(&attr, POSIX_SPAWN_SETSID);
	if (r) {
		posix_spawn_file_actions_destroy(&fa);
		return -r;
	}
	r = sfs_spawn_stdio_null(&fa, -1);
	/* dup2 clears FD_CLOEXEC on fd 3; everything else of the daemon's closes */
	if (!r)
		r = posix_spawn_file_actions_adddup2(&fa, ready_fd, SFS_LOCAL_READY_FD);
	if (!r)
		r = posix_spawn_file_actions_addclosefrom_np(&fa, SFS_LOCAL_READY_FD + 1);
	if (!r)
		r = posix_spawn(pid, exe, &fa, &attr, argv, envp);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return -r;
}
