/*
 * Small /proc readers shared by the namespace holder (holder.c) and the run
 * wrapper's join (join.c).  Their own file so that the run wrapper program
 * (sandboxfs-run-wrapper, libc only) can link join.c without the holder's
 * configuration and everything that pulls in.
 */
#include "isolation.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Reads a small /proc file; its length or -1. */
ssize_t sfs_proc_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

uint64_t sfs_proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (pid <= 0 || sfs_proc_read(path, buf, sizeof(buf)) <= 0)
		return 0;
	/* "pid (comm) S ppid ..." with field 22 the start time; comm may hold
	 * spaces and ')' so the fields are counted from the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	char state = 0;
	unsigned long long start = 0;
	if (sscanf(p + 1,
		   " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu",
		   &state, &start) != 2 ||
	    state == 'Z' || state == 'X')
		return 0;
	return start;
}
