/*
 * fsbench: the timed workloads of bench/workspace.sh, one per subcommand,
 * each printing "<seconds>" (or "<p50_us> <p99_us>" for cat) on stdout.
 * Single-threaded, fixed sizes, no randomness: the same work on every
 * target.  Built by bench/workspace.sh (gcc -O2), not by CMake.
 *
 *   fsbench create DIR NDIRS NFILES SIZE [DIR...]
 *                                          NFILES files of SIZE bytes in NDIRS dirs
 *   fsbench walk DIR                       readdir + lstat of the whole tree
 *   fsbench readall DIR                    open + read + close of every file
 *   fsbench write FILE MIB                 sequential 1 MiB writes, fsync
 *   fsbench read FILE                      sequential 1 MiB reads
 *   fsbench saves DIR N [DIR...]           editor saves: temp, write, fsync, rename
 *
 * With more than one DIR, create and saves go round the DIRs one file or
 * one save at a time: the targets (say sandboxfs with and without an
 * option) then share the machine's load as evenly as it can be shared,
 * and their daemons' CPU times compare (bench/workspace.sh -c).
 *   fsbench cat FILE N                     open + read + close latency, p50 p99 (us)
 *   fsbench rmtree DIR                     unlink everything, rmdir
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fsbench: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void write_all(int fd, const char *buf, size_t len, const char *path)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0)
			die("write", path);
		buf += n;
		len -= (size_t)n;
	}
}

static int create_tree(char **dirs, int ndirs_rr, int ndirs, int nfiles, size_t size)
{
	char path[PATH_MAX], *buf = malloc(size ? size : 1);

	if (!buf)
		return 1;
	memset(buf, 'x', size);
	for (int t = 0; t < ndirs_rr; t++) {
		mkdir(dirs[t], 0755);
		for (int d = 0; d < ndirs; d++) {
			snprintf(path, sizeof(path), "%s/d%02d", dirs[t], d);
			if (mkdir(path, 0755) < 0 && errno != EEXIST)
				die("mkdir", path);
		}
	}
	for (int i = 0; i < nfiles; i++)
		for (int t = 0; t < ndirs_rr; t++) {
			snprintf(path, sizeof(path), "%s/d%02d/f%05d.txt", dirs[t], i % ndirs, i);
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0)
				die("create", path);
			write_all(fd, buf, size, path);
			close(fd);
		}
	free(buf);
	return 0;
}

/* One editor save of document.txt in dir: a temporary file written and
 * synced, renamed over it. */
static void save(const char *dir, int i)
{
	char path[PATH_MAX], tmp[PATH_MAX], text[256];

	snprintf(path, sizeof(path), "%s/document.txt", dir);
	snprintf(tmp, sizeof(tmp), "%s/.document.txt.tmp", dir);
	int n = snprintf(text, sizeof(text), "revision %d of the document\n", i);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		die("open", tmp);
	write_all(fd, text, (size_t)n, tmp);
	if (fsync(fd) < 0)
		die("fsync", tmp);
	close(fd);
	if (rename(tmp, path) < 0)
		die("rename", tmp);
}

typedef void (*visit_fn)(const char *path, const struct stat *st, void *arg);

static void walk(const char *dir, visit_fn fn, void *arg, int post_rmdir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];

	if (!dp)
		die("opendir", dir);
	while ((de = readdir(dp))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) < 0)
			die("lstat", path);
		if (S_ISDIR(st.st_mode))
			walk(path, fn, arg, post_rmdir);
		else if (fn)
			fn(path, &st, arg);
	}
	closedir(dp);
	if (post_rmdir && rmdir(dir) < 0)
		die("rmdir", dir);
}

static void read_one(const char *path, const struct stat *st, void *arg)
{
	char buf[65536];
	int fd = open(path, O_RDONLY);

	(void)st;
	(void)arg;
	if (fd < 0)
		die("open", path);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

static void unlink_one(const char *path, const struct stat *st, void *arg)
{
	(void)st;
	(void)arg;
	if (unlink(path) < 0)
		die("unlink", path);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";
	double t0 = now();

	if (!strcmp(cmd, "create") && argc >= 6) {
		char **dirs = argv + 5; /* DIR, then the other DIRs after SIZE */
		size_t size = (size_t)atol(argv[5]);

		dirs[0] = argv[2];
		create_tree(dirs, argc - 5, atoi(argv[3]), atoi(argv[4]), size);
	} else if (!strcmp(cmd, "walk") && argc == 3) {
		walk(argv[2], NULL, NULL, 0);
	} else if (!strcmp(cmd, "readall") && argc == 3) {
		walk(argv[2], read_one, NULL, 0);
	} else if (!strcmp(cmd, "rmtree") && argc == 3) {
		walk(argv[2], unlink_one, NULL, 1);
	} else if (!strcmp(cmd, "write") && argc == 4) {
		size_t chunk = 1 << 20;
		char *buf = malloc(chunk);
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (!buf || fd < 0)
			die("open", argv[2]);
		memset(buf, 'b', chunk);
		for (long i = 0; i < atol(argv[3]); i++)
			write_all(fd, buf, chunk, argv[2]);
		if (fsync(fd) < 0)
			die("fsync", argv[2]);
		close(fd);
		free(buf);
	} else if (!strcmp(cmd, "read") && argc == 3) {
		size_t chunk = 1 << 20;
		char *buf = malloc(chunk);
		int fd = open(argv[2], O_RDONLY);

		if (!buf || fd < 0)
			die("open", argv[2]);
		while (read(fd, buf, chunk) > 0)
			;
		close(fd);
		free(buf);
	} else if (!strcmp(cmd, "saves") && argc >= 4) {
		for (int i = 0; i < atoi(argv[3]); i++) {
			save(argv[2], i);
			for (int t = 4; t < argc; t++)
				save(argv[t], i);
		}
	} else if (!strcmp(cmd, "cat") && argc == 4) {
		int n = atoi(argv[3]);
		double *lat = calloc((size_t)n, sizeof(*lat));
		char buf[4096];

		if (!lat)
			return 1;
		for (int i = 0; i < n; i++) {
			double s = now();
			int fd = open(argv[2], O_RDONLY);

			if (fd < 0)
				die("open", argv[2]);
			if (read(fd, buf, sizeof(buf)) < 0)
				die("read", argv[2]);
			close(fd);
			lat[i] = now() - s;
		}
		qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
		printf("%.1f %.1f\n", lat[n / 2] * 1e6, lat[(size_t)(n * 0.99)] * 1e6);
		free(lat);
		return 0;
	} else {
		fprintf(stderr, "usage: see the comment at the top of bench/fsbench.c\n");
		return 2;
	}
	printf("%.4f\n", now() - t0);
	return 0;
}
