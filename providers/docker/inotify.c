/*
 * Waking journal readers of a container's run by inotify.  When the
 * container's overlay merged directory is reachable from this host, the
 * engine reads the journal as a host file; this puts its inotify watch on
 * the run's directory inside that merged directory, so a byte the run
 * writes (or its status renamed in) wakes parked readers at once instead of
 * at the engine's next tick.  Writes made inside the container go through
 * the same overlay superblock, and overlayfs reports them on its own inode
 * as well as on the upper layer's (checked on overlay2 with Linux 6.x), so
 * the merged directory is watched: it is reached by the same symlink-free
 * walk as every other host access (dk_host_open), and no second path (the
 * UpperDir) has to be trusted.  Not reachable (a remote engine, another
 * storage driver, docker.fs=archive): no watch, the tick looks.
 */
#include "docker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <unistd.h>

int dk_run_dir_open(struct sfs_sandbox *sb, int n)
{
	char dir[64];
	dk_run_dir(n, dir, sizeof(dir));
	int fd;
	int r = dk_host_open(sb, dir, O_PATH | O_DIRECTORY, 0, &fd, NULL);
	return r ? r : fd;
}

int dk_journal_watch(struct sfs_sandbox *sb, struct sfs_run *run, int inotify_fd, uint32_t mask)
{
	if (dk_fs_archive_only())
		return -EOPNOTSUPP;
	int fd = dk_run_dir_open(sb, run->n);
	if (fd < 0)
		return fd;
	/* the directory we opened, not whatever the path names by now */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(inotify_fd, path, mask | IN_ONLYDIR);
	int r = wd < 0 ? -errno : wd;
	close(fd);
	return r;
}
