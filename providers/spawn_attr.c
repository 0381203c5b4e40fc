#include "spawn_attr.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

int sfs_spawn_attr_clean(posix_spawnattr_t *attr, short flags)
{
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	int r = posix_spawnattr_init(attr);
	if (r)
		return r;
	r = posix_spawnattr_setflags(attr, flags | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (!r && (flags & POSIX_SPAWN_SETPGROUP))
		r = posix_spawnattr_setpgroup(attr, 0);
	if (!r)
		r = posix_spawnattr_setsigmask(attr, &none);
	if (!r)
		r = posix_spawnattr_setsigdefault(attr, &all);
	if (r)
		posix_spawnattr_destroy(attr);
	return r;
}

int sfs_spawn_stdio_null(posix_spawn_file_actions_t *fa, int errfd)
{
	int r = posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDWR, 0);
	if (!r)
		r = posix_spawn_file_actions_adddup2(fa, 0, 1);
	if (!r)
		r = posix_spawn_file_actions_adddup2(fa, errfd >= 0 ? errfd : 0, 2);
	return r;
}

int sfs_spawn_tool(char *const argv[], int errfd)
{
	static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int r = posix_spawn_file_actions_init(&fa);
	if (r)
		return -r;
	r = sfs_spawn_attr_clean(&attr, 0);
	if (r) {
		posix_spawn_file_actions_destroy(&fa);
		return -r;
	}
	r = sfs_spawn_stdio_null(&fa, errfd);
	if (!r)
		r = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	pid_t pid;
	/* not posix_spawnp: it would search the daemon's own PATH */
	if (!r) {
		r = ENOENT;
		static const char *const dirs[] = {"/usr/sbin", "/usr/bin", "/sbin", "/bin"};
		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && r == ENOENT; i++) {
			char path[256];
			if (sfs_pathf(path, sizeof(path), "%s/%s", dirs[i], argv[0]) < 0)
				break;
			r = posix_spawn(&pid, path, &fa, &attr, argv, env);
		}
	}
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (r)
		return -r;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}
