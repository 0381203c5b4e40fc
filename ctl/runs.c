#include "runs.h"
#include "sandbox.h"

#include "../journal/journal.h"
#include "../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Run numbers are small decimals without leading zeros (inode numbers keep
 * 24 bits for them, fs/ino.h). */
#define RUNS_MAX (1 << 24)

static int parse_run_number(const char *name)
{
	if (name[0] < '1' || name[0] > '9')
		return -1;
	long n = 0;
	for (const char *p = name; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		n = n * 10 + (*p - '0');
		if (n >= RUNS_MAX)
			return -1;
	}
	return (int)n;
}

/*
 * Makes run n of sb from what its directory holds and starts tracking it.
 * `cmd` is the command; `.cmd` is what a daemon of an earlier version left
 * when it died between starting a run and naming its cmd (the run may still
 * be going): it is renamed to `cmd`.  Neither: the run never started.
 */
static int adopt(struct sfs_sandbox *sb, int n)
{
	struct sfs_run *run = calloc(1, sizeof(*run));
	if (!run || asprintf(&run->dir, "%s/runs/%d", sb->statedir, n) < 0) {
		free(run);
		return -ENOMEM;
	}
	run->n = n;
	char path[4300], tmp[4300];
	if (sfs_pathf(path, sizeof(path), "%s/cmd", run->dir) == 0 &&
	    sfs_pathf(tmp, sizeof(tmp), "%s/.cmd", run->dir) == 0 &&
	    sfs_read_file(path, &run->cmd, NULL) < 0 && sfs_read_file(tmp, &run->cmd, NULL) == 0) {
		if (rename(tmp, path) < 0)
			sfs_log(SFS_LOG_WARN, "%s: run %d: naming its cmd: %s", sb->name, n,
				strerror(errno));
		sfs_log(SFS_LOG_INFO, "%s: run %d was half-created by an earlier daemon: adopted",
			sb->name, n);
	}
	if (!run->cmd && !(run->cmd = strdup(""))) {
		sandbox_run_free(run);
		return -ENOMEM;
	}
	struct stat st;
	if (stat(path, &st) == 0 || stat(run->dir, &st) == 0)
		run->started = st.st_mtime;
	pthread_mutex_lock(&sfs_records_mu);
	int r = sandbox_add_run_locked(sb, run);
	pthread_mutex_unlock(&sfs_records_mu);
	if (r) {
		sandbox_run_free(run);
		return r;
	}
	journal_attach(sb, run, NULL);
	return 0;
}

void runs_load(struct sfs_sandbox *sb)
{
	char dir[4200];
	if (sfs_pathf(dir, sizeof(dir), "%s/runs", sb->statedir) < 0)
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	int max = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		int n = parse_run_number(e->d_name);
		if (n > max)
			max = n;
	}
	closedir(d);
	/* a spare half made by a daemon of an earlier version, which made it
	 * in runs/ itself (now in runs/.next.d, cleared as it is made) */
	char old[4300];
	if (sfs_pathf(old, sizeof(old), "%s/.next.new", dir) == 0)
		sfs_rm_rf(old);
	/* runs[i]->n == i + 1: a number with no directory is a run that
	 * never started, so it is shown `lost` rather than left out */
	for (int n = 1; n <= max; n++) {
		int r = adopt(sb, n);
		if (r) {
			sfs_log(SFS_LOG_ERR, "%s: run %d: %s", sb->name, n, strerror(-r));
			return;
		}
	}
}

#define SPARE ".next"
/* where the spare is made: a name the scans skip as they skip the spare */
#define SPARE_ROOM SPARE ".d"
/* cleared at the first file system that has no RENAME_NOREPLACE */
static bool spares_work = true;

static int claim_spare(struct sfs_sandbox *sb, const char *dir)
{
	char spare[4200];
	if (!__atomic_load_n(&spares_work, __ATOMIC_RELAXED))
		return -ENOENT;
	if (sfs_pathf(spare, sizeof(spare), "%s/runs/" SPARE, sb->statedir) < 0)
		return -ENAMETOOLONG;
	return renameat2(AT_FDCWD, spare, AT_FDCWD, dir, RENAME_NOREPLACE) == 0 ? 0 : -errno;
}

bool runs_make_spare(struct sfs_sandbox *sb)
{
	char spare[4200], room[4200], tmp[4300], path[4400];
	if (!__atomic_load_n(&spares_work, __ATOMIC_RELAXED))
		return false;
	if (sfs_pathf(spare, sizeof(spare), "%s/runs/" SPARE, sb->statedir) < 0)
		return false;
	if (access(spare, F_OK) == 0 || errno != ENOENT)
		return false;
	/* made whole in runs/.next.d, then renamed: a crash leaves either a
	 * complete spare or a half one the next attempt clears.  Not in runs/
	 * itself: a creation holds its directory's lock while ext4 searches
	 * for a free inode, and a run's wrapper renames its status file out
	 * of its directory into runs/ and back meanwhile
	 * (providers/local/wrapper.c) */
	if (sfs_pathf(room, sizeof(room), "%s/runs/" SPARE_ROOM, sb->statedir) < 0 ||
	    sfs_pathf(tmp, sizeof(tmp), "%s/run", room) < 0)
		return false;
	if (mkdir(room, 0700) < 0 && errno != EEXIST)
		return false; /* runs/ gone with the sandbox, or the disk full */
	if (mkdir(tmp, 0700) < 0 && (errno != EEXIST || sfs_rm_rf(tmp) < 0 || mkdir(tmp, 0700) < 0))
		return false;
	int fd = sfs_pathf(path, sizeof(path), "%s/.cmd.tmp", tmp) < 0
		     ? -1
		     : open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r = fd < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	if (!r && sb->provider->ops->run_prepare_dir)
		r = sb->provider->ops->run_prepare_dir(sb, tmp);
	if (!r && renameat2(AT_FDCWD, tmp, AT_FDCWD, spare, RENAME_NOREPLACE) < 0) {
		r = -errno;
		if (r == -EINVAL)
			__atomic_store_n(&spares_work, false, __ATOMIC_RELAXED);
	}
	if (r)
		sfs_rm_rf(tmp);
	return r == 0;
}

bool runs_is_spare(const char *name)
{
	return strncmp(name, SPARE, strlen(SPARE)) == 0;
}

int runs_reserve(struct sfs_sandbox *sb, const char *cmd, struct sfs_run **out, struct sfs_err *err)
{
	char dir[4200];
	if (sfs_pathf(dir, sizeof(dir), "%s/runs", sb->statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "run dir %s/runs: path too long", sb->statedir);
	/* there after the first run: one mkdir, not one per path component */
	int r = mkdir(dir, 0700) == 0 || errno == EEXIST ? 0 : sfs_mkdir_p(dir, 0700);
	if (r)
		return sfs_errf(err, r, "run dir %s: %s", dir, strerror(-r));
	for (;;) {
		pthread_mutex_lock(&sfs_records_mu);
		int n = (int)sb->nruns + 1;
		pthread_mutex_unlock(&sfs_records_mu);
		if (n >= RUNS_MAX)
			return sfs_errf(err, -ENOSPC, "sandbox \"%s\" has run out of run numbers",
					sb->name);
		if (sfs_pathf(dir, sizeof(dir), "%s/runs/%d", sb->statedir, n) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "run dir %s/runs/%d: path too long",
					sb->statedir, n);
		/* a claim that fails on a directory already there fails the
		 * mkdir too (EEXIST: adopted below) */
		if (claim_spare(sb, dir) == 0 || mkdir(dir, 0700) == 0) {
			struct sfs_run *run = calloc(1, sizeof(*run));
			if (!run || !(run->dir = strdup(dir)) || !(run->cmd = strdup(cmd))) {
				sandbox_run_free(run);
				sfs_rm_rf(dir); /* a claimed spare has files */
				return sfs_errf(err, -ENOMEM, "out of memory");
			}
			run->n = n;
			run->started = time(NULL);
			*out = run;
			return 0;
		}
		if (errno != EEXIST)
			return sfs_errf(err, -errno, "run dir %s: %s", dir, strerror(errno));
		/* someone else's: a run all the same, never a number to reuse */
		r = adopt(sb, n);
		if (r)
			return sfs_errf(err, r, "run %d: %s", n, strerror(-r));
	}
}
