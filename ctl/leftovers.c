#include "leftovers.h"

#include "../providers/err.h"
#include "../providers/untrusted/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes each entry of dir (relative to the state dir's fd) whose name
 * starts with prefix: a regular file or a symlink (the name, never what it
 * names), and with dirs_too a directory tree (untrusted_remove: by fds,
 * nothing followed). */
static int sweep_dir(int statefd, const char *dir, const char *prefix, bool dirs_too)
{
	int dfd = openat(statefd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    (S_ISDIR(st.st_mode) && !dirs_too))
			continue;
		int r = untrusted_remove(dfd, e->d_name);
		if (r)
			sfs_log(SFS_LOG_WARN, "state: leftover %s/%s: %s", dir, e->d_name,
				strerror(-r));
		else {
			sfs_log(SFS_LOG_INFO, "state: removed leftover %s/%s", dir, e->d_name);
			n++;
		}
	}
	closedir(d);
	return n;
}

int leftovers_sweep(const char *statedir)
{
	int statefd = open(statedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (statefd < 0)
		return 0;
	int n = sweep_dir(statefd, ".", "registry.json.tmp.", false);
	n += sweep_dir(statefd, "git/mirrors", ".tmp-", true);
	n += sweep_dir(statefd, "git/store/objects", "tmp_object_git2_", false);
	/* loose objects' fan-out directories, 00 to ff */
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 256; i++) {
		char sub[32] = "git/store/objects/xx";
		sub[18] = hex[i >> 4];
		sub[19] = hex[i & 15];
		n += sweep_dir(statefd, sub, "tmp_object_git2_", false);
	}
	close(statefd);
	return n;
}
