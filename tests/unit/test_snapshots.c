/* fs/snapshots: the object store, the stat cache, diff and restore, on a
 * real directory tree in a temporary state dir. */
#include "check.h"

#include "fs/snapshots/snapshots.h"
#include "providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char state[256], ws[300], cache[300];

static void put(const char *rel, const char *text, mode_t mode)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	chmod(p, mode);
}

static char *slurp(const char *rel)
{
	char p[512], *data = NULL;
	size_t len;
	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	return sfs_read_file(p, &data, &len) == 0 ? data : NULL;
}

static struct stat stat_of(const char *rel)
{
	char p[512];
	struct stat st = {0};
	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	lstat(p, &st);
	return st;
}

static int rootfd(void)
{
	return open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void setup(void)
{
	snprintf(state, sizeof(state), "/tmp/sfs-test-snap-XXXXXX");
	if (!mkdtemp(state))
		abort();
	snprintf(ws, sizeof(ws), "%s/ws", state);
	snprintf(cache, sizeof(cache), "%s/statcache", state);
	mkdir(ws, 0755);
	CHECK_INT(snap_store_init(state, NULL), 0);
	put("a.txt", "one\ntwo\nthree\n", 0644);
	put("run.sh", "#!/bin/sh\necho hi\n", 0755);
	put("private", "secret-ish\n", 0600);
	char p[512];
	snprintf(p, sizeof(p), "%s/sub", ws);
	mkdir(p, 0755);
	put("sub/b.txt", "bee\n", 0644);
	snprintf(p, sizeof(p), "%s/empty", ws);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/link", ws);
	symlink("sub/b.txt", p);
	snprintf(p, sizeof(p), "%s/fifo", ws);
	mkfifo(p, 0644);
	snprintf(p, sizeof(p), "%s/.git", ws);
	mkdir(p, 0755);
	put(".git/HEAD", "ref: refs/heads/main\n", 0644);
}

static void test_take_info_browse(void)
{
	setup();
	int fd = rootfd();
	char commit[41];
	struct snap_stats st;
	struct sfs_err err = {0};
	CHECK_INT(snap_take(fd, cache, "k1", "s1", "first", 1700000000, commit, &st, &err), 0);
	CHECK_STREQ(err.msg, "");
	CHECK_INT(st.files, 5);	  /* a.txt run.sh private sub/b.txt link; not .git */
	CHECK_INT(st.skipped, 1); /* the fifo */
	struct snap_info info;
	CHECK_INT(snap_info_read(commit, &info, &err), 0);
	CHECK_STREQ(info.label, "first");
	CHECK_STREQ(info.key, "k1");
	CHECK_INT(info.time, 1700000000);
	CHECK_INT(info.st.files, 5);
	CHECK_INT(info.st.skipped, 1);
	struct snap_node n;
	CHECK_INT(snap_lookup(commit, "private", &n), 0);
	CHECK_INT(n.mode, S_IFREG | 0600);
	CHECK_INT(n.size, 11);
	CHECK_INT(snap_lookup(commit, "run.sh", &n), 0);
	CHECK_INT(n.mode, S_IFREG | 0755);
	CHECK_INT(snap_lookup(commit, "empty", &n), 0);
	CHECK_INT(n.mode, S_IFDIR | 0700);
	CHECK_INT(snap_lookup(commit, "link", &n), 0);
	CHECK_INT(n.mode & S_IFMT, S_IFLNK);
	char *data;
	size_t len;
	CHECK_INT(snap_blob(n.oid, &data, &len), 0);
	CHECK(len == 9 && memcmp(data, "sub/b.txt", 9) == 0);
	free(data);
	CHECK_INT(snap_lookup(commit, ".git", &n), -ENOENT);
	CHECK_INT(snap_lookup(commit, "fifo", &n), -ENOENT);
	struct snap_dirent *v;
	size_t cnt;
	CHECK_INT(snap_list(commit, "", &v, &cnt), 0);
	CHECK_INT(cnt, 6);
	snap_dirents_free(v, cnt);
	CHECK_INT(snap_list(commit, "empty", &v, &cnt), 0);
	CHECK_INT(cnt, 0);
	snap_dirents_free(v, cnt);
	CHECK_INT(snap_list(commit, "a.txt", &v, &cnt), -ENOTDIR);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* The stat cache: a second snapshot reads only files that changed. */
static void test_stat_cache(void)
{
	setup();
	sleep(1); /* files changed in the cache's second are not trusted */
	int fd = rootfd();
	char c1[41], c2[41];
	struct snap_stats st;
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, c1, &st, NULL), 0);
	CHECK_INT(st.hashed, 4);
	CHECK_INT(snap_take(fd, cache, "k1", "s2", NULL, 1, c2, &st, NULL), 0);
	CHECK_INT(st.hashed, 0);
	CHECK_STREQ(c1, c2); /* same tree, time and message: the same commit */
	put("a.txt", "changed\n", 0644);
	CHECK_INT(snap_take(fd, cache, "k1", "s3", NULL, 2, c2, &st, NULL), 0);
	CHECK_INT(st.hashed, 1);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

static void on_change(void *ctx, char what, const char *rel)
{
	char *ev = ctx;
	size_t n = strlen(ev);
	snprintf(ev + n, 1024 - n, "%s%c %s|", n ? "" : "|", what, rel);
}

static void test_diff_restore(void)
{
	setup();
	int fd = rootfd();
	char commit[41];
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, commit, NULL, NULL), 0);
	struct stat keep = stat_of("sub/b.txt");
	put("a.txt", "one\nTWO\nthree\n", 0644);
	put("new.txt", "added\n", 0644);
	put("private", "secret-ish\n", 0640);
	char p[512];
	snprintf(p, sizeof(p), "%s/run.sh", ws);
	chmod(p, 0644);
	snprintf(p, sizeof(p), "%s/link", ws);
	unlink(p);
	symlink("a.txt", p);
	snprintf(p, sizeof(p), "%s/empty", ws);
	rmdir(p);
	put("empty", "now a file\n", 0644);
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	CHECK_INT(snap_diff(commit, fd, cache, &d, &err), 0);
	CHECK(d.buf && strstr(d.buf, "-two\n+TWO\n"));
	CHECK(d.buf && strstr(d.buf, "new file mode 100644"));
	CHECK(d.buf && strstr(d.buf, "old mode 100755\nnew mode 100644"));
	CHECK(d.buf && strstr(d.buf, "+added\n"));
	CHECK(d.buf && !strstr(d.buf, "sub/b.txt\n+"));
	sfs_buf_free(&d);
	struct snap_restore_stats rs;
	char events[1024] = "";
	CHECK_INT(snap_restore(commit, fd, cache, &rs, on_change, events, 0, 0, &err), 0);
	CHECK(strstr(events, "|w a.txt|"));
	CHECK(strstr(events, "|r new.txt|"));
	CHECK(strstr(events, "|m run.sh|"));
	CHECK(strstr(events, "|m private|"));
	CHECK(strstr(events, "|w link|"));
	CHECK(!strstr(events, "sub/b.txt"));
	CHECK_STREQ(err.msg, "");
	char *a = slurp("a.txt");
	CHECK_STREQ(a, "one\ntwo\nthree\n");
	free(a);
	CHECK_INT(stat_of("new.txt").st_mode, 0);
	CHECK_INT(stat_of("private").st_mode, S_IFREG | 0600);
	CHECK_INT(stat_of("run.sh").st_mode, S_IFREG | 0755);
	CHECK_INT(stat_of("empty").st_mode, S_IFDIR | 0700);
	char t[64] = "";
	snprintf(p, sizeof(p), "%s/link", ws);
	CHECK_INT(readlink(p, t, sizeof(t)), 9);
	CHECK(strncmp(t, "sub/b.txt", 9) == 0);
	struct stat after = stat_of("sub/b.txt");
	CHECK(after.st_ino == keep.st_ino && after.st_mtim.tv_nsec == keep.st_mtim.tv_nsec);
	CHECK(stat_of(".git/HEAD").st_size > 0); /* left alone */
	/* a.txt, link, empty rewritten; new.txt removed; modes of two fixed */
	CHECK_INT(rs.written, 3);
	CHECK_INT(rs.removed, 1);
	CHECK_INT(rs.modes, 2);
	/* and now nothing differs */
	CHECK_INT(snap_diff(commit, fd, cache, &d, &err), 0);
	CHECK_INT(d.len, 0);
	sfs_buf_free(&d);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* Counts the loose objects of the store. */
static int loose_objects(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd),
		 "find %s/git/store/objects -type f -path '*/objects/?"
		 "?/*' | wc -l",
		 state);
	FILE *f = popen(cmd, "r");
	int n = -1;
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

/* Whole directories appearing and going, a file becoming a directory. */
static void test_diff_dirs(void)
{
	setup();
	int fd = rootfd();
	char commit[41], p[512];
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, commit, NULL, NULL), 0);
	snprintf(p, sizeof(p), "%s/newdir", ws);
	mkdir(p, 0755);
	put("newdir/x.txt", "x\n", 0644);
	put("sub/b.txt", "bee\n", 0644);
	snprintf(p, sizeof(p), "rm -r %s/sub", ws);
	CHECK_INT(system(p), 0);
	snprintf(p, sizeof(p), "%s/a.txt", ws);
	unlink(p);
	mkdir(p, 0755);
	put("a.txt/inner", "in\n", 0644);
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	int objects = loose_objects();
	CHECK_INT(snap_diff(commit, fd, cache, &d, &err), 0);
	CHECK_STREQ(err.msg, "");
	CHECK_INT(loose_objects(), objects); /* a diff writes nothing to the store */
	CHECK(d.buf && strstr(d.buf, "+++ b/newdir/x.txt"));
	CHECK(d.buf && strstr(d.buf, "--- a/sub/b.txt"));
	CHECK(d.buf && strstr(d.buf, "--- a/a.txt\n+++ /dev/null"));
	CHECK(d.buf && strstr(d.buf, "+++ b/a.txt/inner"));
	CHECK(d.buf && !strstr(d.buf, "run.sh"));
	sfs_buf_free(&d);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

static void test_diff_paths(void)
{
	setup();
	char old[300];
	snprintf(old, sizeof(old), "%s/old", state);
	mkdir(old, 0755);
	char p[512];
	snprintf(p, sizeof(p), "%s/a.txt", old);
	FILE *f = fopen(p, "w");
	fputs("one\ntwo\nthree\n", f);
	fclose(f);
	put("a.txt", "one\n2\nthree\n", 0644);
	int ofd = open(old, O_PATH | O_DIRECTORY), nfd = rootfd();
	const char *paths[] = {"a.txt", "sub", "gone.txt"};
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	CHECK_INT(snap_diff_paths(ofd, nfd, paths, 3, &d, &err), 0);
	CHECK_STREQ(err.msg, "");
	CHECK(d.buf && strstr(d.buf, "-two\n+2\n"));
	CHECK(d.buf && strstr(d.buf, "+++ b/sub/b.txt"));
	CHECK(d.buf && !strstr(d.buf, "run.sh")); /* not listed: not read */
	sfs_buf_free(&d);
	close(ofd);
	close(nfd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

static void test_forget(void)
{
	setup();
	int fd = rootfd();
	char c[41];
	CHECK_INT(snap_take(fd, cache, "k9", "a", NULL, 1, c, NULL, NULL), 0);
	CHECK_INT(snap_take(fd, cache, "k9", "b", NULL, 1, c, NULL, NULL), 0);
	char ref[512];
	snprintf(ref, sizeof(ref), "%s/git/store/refs/sandboxfs/k9/a", state);
	CHECK_INT(access(ref, F_OK), 0);
	CHECK_INT(snap_forget("k9", "a", NULL), 1);
	CHECK_INT(snap_forget("k9", "a", NULL), 0); /* gone already */
	CHECK(access(ref, F_OK) != 0);
	CHECK_INT(snap_forget("k9", NULL, NULL), 1);
	snprintf(ref, sizeof(ref), "%s/git/store/refs/sandboxfs/k9/b", state);
	CHECK(access(ref, F_OK) != 0);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* The file rel of snapshot commit, restored into a fresh directory. */
static char *restored(const char *commit, const char *rel)
{
	char dir[400], rcache[400], p[600], *data = NULL;
	size_t len;
	static int n;
	snprintf(dir, sizeof(dir), "%s/out%d", state, __atomic_add_fetch(&n, 1, __ATOMIC_SEQ_CST));
	CHECK_INT(sfs_pathf(rcache, sizeof(rcache), "%s.cache", dir), 0);
	mkdir(dir, 0755);
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct snap_restore_stats st;
	struct sfs_err e = {0};
	int r = snap_restore(commit, fd, rcache, &st, NULL, NULL, 0, 0, &e);
	if (r)
		fprintf(stderr, "restore %s: %s\n", commit, e.msg);
	close(fd);
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	if (r || sfs_read_file(p, &data, &len) != 0)
		data = NULL;
	sfs_rm_rf(dir);
	unlink(rcache);
	return data;
}

static void test_gc(void)
{
	setup();
	int fd = rootfd();
	char keep[41], gone[41];
	CHECK_INT(snap_take(fd, cache, "k1", "keep", NULL, 1, keep, NULL, NULL), 0);
	int before = loose_objects();
	put("unique.txt", "only in the snapshot that goes\n", 0644);
	sleep(1); /* older than the cache's second: the stat cache notes it */
	CHECK_INT(snap_take(fd, cache, "k2", "gone", NULL, 1, gone, NULL, NULL), 0);
	/* a blob, the root tree, a commit: new; the rest is shared */
	CHECK_INT(loose_objects(), before + 3);
	struct snap_gc_stats st;
	CHECK_INT(snap_gc(NULL, &st, NULL), 0);
	CHECK_INT((int)st.removed, 0); /* every object is reachable */
	CHECK_INT(snap_forget("k2", NULL, NULL), 1);
	/* a stat cache naming the unique blob is dropped; one that does not, kept */
	char other[400];
	snprintf(other, sizeof(other), "%s/other.statcache", state);
	CHECK_INT(rename(cache, other), 0);
	char pattern[400];
	snprintf(pattern, sizeof(pattern), "%s/*.statcache", state);
	CHECK_INT(snap_gc(pattern, &st, NULL), 0);
	CHECK_INT((int)st.removed, 3);
	CHECK_INT(loose_objects(), before);
	CHECK(st.removed_bytes > 0);
	CHECK_INT(access(other, F_OK), -1); /* it vouched for unique.txt's blob */
	char *a = restored(keep, "a.txt");
	CHECK_STREQ(a ? a : "(none)", "one\ntwo\nthree\n");
	free(a);
	CHECK_INT(snap_gc(pattern, &st, NULL), 0);
	CHECK_INT((int)st.removed, 0);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* Snapshots taken while another thread deletes snapshots and sweeps: none
 * loses an object it names (the writer lock keeps the sweep out of the
 * window between an object's write and its ref). */
struct gc_race {
	int rounds;
	char commits[40][41];
};

static void *race_writer(void *arg)
{
	struct gc_race *g = arg;
	char dir[400], wcache[400], p[500], id[16], text[64];
	snprintf(dir, sizeof(dir), "%s/w", state);
	snprintf(wcache, sizeof(wcache), "%s/w.statcache", state);
	mkdir(dir, 0755);
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < g->rounds; i++) {
		snprintf(p, sizeof(p), "%s/f", dir);
		snprintf(text, sizeof(text), "generation %d\n", i);
		FILE *f = fopen(p, "w");
		fputs(text, f);
		fclose(f);
		snprintf(id, sizeof(id), "s%d", i);
		struct sfs_err e = {0};
		if (snap_take(fd, wcache, "kw", id, NULL, 1, g->commits[i], NULL, &e)) {
			fprintf(stderr, "snapshot %s: %s\n", id, e.msg);
			g->commits[i][0] = '\0';
		}
	}
	close(fd);
	return NULL;
}

static void test_gc_concurrent(void)
{
	setup();
	int fd = rootfd();
	struct gc_race g = {.rounds = 40};
	pthread_t w;
	CHECK_INT(pthread_create(&w, NULL, race_writer, &g), 0);
	char c[41];
	for (int i = 0; i < 40; i++) {
		char text[64];
		snprintf(text, sizeof(text), "churn %d\n", i);
		put("churn.txt", text, 0644);
		CHECK_INT(snap_take(fd, cache, "kg", "tmp", NULL, 1, c, NULL, NULL), 0);
		CHECK_INT(snap_forget("kg", NULL, NULL), 1);
		CHECK_INT(snap_gc(NULL, NULL, NULL), 0);
	}
	pthread_join(w, NULL);
	for (int i = 0; i < g.rounds; i++) {
		char want[64];
		snprintf(want, sizeof(want), "generation %d\n", i);
		CHECK(g.commits[i][0] != '\0');
		char *got = restored(g.commits[i], "f");
		CHECK_STREQ(got ? got : "(missing)", want);
		free(got);
	}
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* Waits for the start of a wall-clock second, so what follows (well under
 * half a second of work) happens within one second. */
static void start_of_second(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_nsec > 100000000L) {
		struct timespec rest = {0, 1000000000L - ts.tv_nsec + 1000000L};
		nanosleep(&rest, NULL);
	}
}

/* Rewrites rel with text of the same size and puts its old mtime back
 * (`touch -r` of itself): only the ctime and the contents differ. */
static void rewrite_same_size(const char *rel, const char *text)
{
	struct stat was = stat_of(rel);
	CHECK_INT((long long)strlen(text), was.st_size);
	put(rel, text, was.st_mode & 07777);
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", ws, rel);
	struct timespec times[2] = {was.st_atim, was.st_mtim};
	CHECK_INT(utimensat(AT_FDCWD, p, times, AT_SYMLINK_NOFOLLOW), 0);
	struct stat now = stat_of(rel);
	CHECK(now.st_size == was.st_size && now.st_mtim.tv_sec == was.st_mtim.tv_sec &&
	      now.st_mtim.tv_nsec == was.st_mtim.tv_nsec);
}

/* The racy-git rule: a file changed in the second a cache is made (or
 * later) is not noted in it, so a same-size rewrite with its mtime put
 * back, in that second, is still read (and shows in the diff). */
static void test_stat_cache_racy(void)
{
	start_of_second();
	setup(); /* every file written in this second */
	int fd = rootfd();
	char c1[41], c2[41];
	struct snap_stats st;
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, c1, &st, NULL), 0);
	CHECK_INT(st.hashed, 4);
	CHECK_INT(snap_take(fd, cache, "k1", "s2", NULL, 1, c2, &st, NULL), 0);
	CHECK_INT(st.hashed, 4); /* none was noted: all changed this second */
	rewrite_same_size("a.txt", "one\nTWO\nthree\n");
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	CHECK_INT(snap_diff(c1, fd, cache, &d, &err), 0);
	CHECK(d.buf && strstr(d.buf, "-two\n+TWO\n"));
	sfs_buf_free(&d);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* Once noted (older than the cache's second), a file rewritten with the
 * same size and its mtime put back is still read: its ctime moved, and the
 * cache compares ctimes (which no utimensat can set) to the nanosecond.
 * And a kept cache (cache_pool.c) is used only while its file is the one
 * it was kept for. */
static void test_stat_cache_same_size(void)
{
	setup();
	sleep(1);
	int fd = rootfd();
	char c1[41], c2[41];
	struct snap_stats st;
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, c1, &st, NULL), 0);
	CHECK_INT(st.hashed, 4);
	CHECK_INT(snap_take(fd, cache, "k1", "s2", NULL, 1, c2, &st, NULL), 0);
	CHECK_INT(st.hashed, 0); /* all noted, kept in memory or read back */
	rewrite_same_size("sub/b.txt", "BEE\n");
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	CHECK_INT(snap_diff(c1, fd, cache, &d, &err), 0);
	CHECK(d.buf && strstr(d.buf, "-bee\n+BEE\n"));
	CHECK(d.buf && !strstr(d.buf, "a.txt"));
	sfs_buf_free(&d);
	CHECK_INT(snap_take(fd, cache, "k1", "s3", NULL, 1, c2, &st, NULL), 0);
	CHECK_INT(st.hashed, 1);
	/* the cache file replaced behind the daemon's back: not the kept one */
	CHECK_INT(unlink(cache), 0);
	CHECK_INT(snap_take(fd, cache, "k1", "s4", NULL, 1, c2, &st, NULL), 0);
	CHECK_INT(st.hashed, 4);
	put("../statcache", "sandboxfs-statcache 3 not this store\n", 0600);
	CHECK_INT(snap_take(fd, cache, "k1", "s5", NULL, 1, c2, &st, NULL), 0);
	CHECK_INT(st.hashed, 4);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* Diffs against two snapshots, in turn and from several threads at once:
 * each snapshot's kept manifest gives its own diff. */
struct diff_job {
	const char *commit, *want, *absent;
	int fd, bad;
};

static void *diff_worker(void *arg)
{
	struct diff_job *j = arg;
	for (int i = 0; i < 20; i++) {
		struct sfs_buf d = {0};
		struct sfs_err err = {0};
		if (snap_diff(j->commit, j->fd, cache, &d, &err) != 0 || !d.buf ||
		    !strstr(d.buf, j->want) || strstr(d.buf, j->absent))
			j->bad++;
		sfs_buf_free(&d);
	}
	return NULL;
}

static void test_diff_two_snapshots(void)
{
	setup();
	int fd = rootfd();
	char c1[41], c2[41];
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, c1, NULL, NULL), 0);
	put("sub/b.txt", "bee\nsecond\n", 0644);
	CHECK_INT(snap_take(fd, cache, "k1", "s2", NULL, 1, c2, NULL, NULL), 0);
	put("a.txt", "one\ntwo\nthree\nfour\n", 0644);
	struct diff_job jobs[4] = {
	    {c1, "+second\n", "deleted file", fd, 0},
	    {c2, "+four\n", "+second\n", fd, 0},
	    {c1, "+four\n", "deleted file", fd, 0},
	    {c2, " three\n+four\n", "sub/b.txt", fd, 0},
	};
	for (int i = 0; i < 4; i++)
		diff_worker(&jobs[i]);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CHECK_INT(pthread_create(&t[i], NULL, diff_worker, &jobs[i]), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_INT(jobs[i].bad, 0);
	}
	/* gone from the store: no diff from a kept manifest */
	CHECK_INT(snap_forget("k1", "s1", NULL), 1);
	CHECK_INT(snap_gc(NULL, NULL, NULL), 0);
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	CHECK_INT(snap_diff(c1, fd, cache, &d, &err), -ENOENT);
	sfs_buf_free(&d);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* A tree big enough for the threaded walk (compare.c: more than 1000
 * entries a thread, and more directories than jobs it queues): every
 * change is found wherever it is, nothing else is listed, and the files
 * the diff had to hash are noted in its stat cache for the next snapshot. */
static void test_diff_threaded(void)
{
	setup();
	char p[512], rel[64];
	for (int d = 0; d < 100; d++) {
		snprintf(p, sizeof(p), "%s/d%03d", ws, d);
		mkdir(p, 0755);
		for (int f = 0; f < 25; f++) {
			snprintf(rel, sizeof(rel), "d%03d/f%02d", d, f);
			put(rel, rel, 0644);
		}
	}
	snprintf(p, sizeof(p), "%s/d007/deep", ws);
	mkdir(p, 0755);
	put("d007/deep/x", "x\n", 0644);
	sleep(1); /* older than the caches' second: noted */
	int fd = rootfd();
	char commit[41], other[400];
	struct snap_stats st;
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, commit, &st, NULL), 0);
	CHECK_INT(st.hashed, 2505);
	/* a diff with a cache of its own: every file hashed, and noted */
	snprintf(other, sizeof(other), "%s/other.statcache", state);
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	CHECK_INT(snap_diff(commit, fd, other, &d, &err), 0);
	CHECK_INT(d.len, 0);
	sfs_buf_free(&d);
	CHECK_INT(snap_take(fd, other, "k1", "s2", NULL, 1, commit, &st, NULL), 0);
	CHECK_INT(st.hashed, 0);
	put("d000/f00", "changed first\n", 0644);
	put("d050/f12", "changed middle\n", 0644);
	put("d099/f24", "changed last\n", 0644);
	put("d007/deep/x", "deep\n", 0644);
	put("d042/new", "added\n", 0644);
	snprintf(p, sizeof(p), "%s/d063/f05", ws);
	unlink(p);
	snprintf(p, sizeof(p), "rm -r %s/d080", ws);
	CHECK_INT(system(p), 0);
	CHECK_INT(snap_diff(commit, fd, cache, &d, &err), 0);
	CHECK_STREQ(err.msg, "");
	const char *want[] = {"+++ b/d000/f00",	   "+++ b/d050/f12", "+++ b/d099/f24",
			      "+++ b/d007/deep/x", "+++ b/d042/new", "--- a/d063/f05",
			      "--- a/d080/f00",	   "--- a/d080/f24"};
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
		CHECK(d.buf && strstr(d.buf, want[i]));
	int files = 0;
	for (const char *q = d.buf; q && (q = strstr(q, "diff --git ")); q++)
		files++;
	CHECK_INT(files, 6 + 25); /* and nothing else */
	sfs_buf_free(&d);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

/* Whether the stat cache file holds a record for path (its 16-bit length,
 * then the path and its NUL). */
static bool cache_has(const char *path)
{
	char *data = NULL, key[300];
	size_t len, n = strlen(path);
	uint16_t l16 = (uint16_t)n;
	memcpy(key, &l16, 2);
	memcpy(key + 2, path, n + 1);
	bool found = sfs_read_file(cache, &data, &len) == 0 && memmem(data, len, key, n + 3);
	free(data);
	return found;
}

/* A directory read and found holding the snapshot's names is noted in the
 * stat cache and not read again while its mtime and ctime stand: a file
 * changed in it is still found (each name is stat'd), and a name added or
 * renamed with the directory's mtime put back still shows (the ctime
 * moved).  gc keeps a cache with such records (their ids are no objects). */
static void test_diff_dir_listing(void)
{
	setup();
	sleep(1); /* older than the cache's second: noted */
	int fd = rootfd();
	char commit[41];
	CHECK_INT(snap_take(fd, cache, "k1", "s1", NULL, 1, commit, NULL, NULL), 0);
	struct sfs_buf d = {0};
	struct sfs_err err = {0};
	CHECK_INT(snap_diff(commit, fd, cache, &d, &err), 0);
	CHECK_INT(d.len, 0);
	CHECK(cache_has("sub"));
	CHECK(cache_has("empty"));
	put("sub/b.txt", "bee, changed\n", 0644);
	CHECK_INT(snap_diff(commit, fd, cache, &d, &err), 0);
	CHECK(d.buf && strstr(d.buf, "+bee, changed\n"));
	sfs_buf_free(&d);
	put("sub/b.txt", "bee\n", 0644);
	struct stat was = stat_of("sub");
	char from[512], to[512];
	snprintf(from, sizeof(from), "%s/sub/b.txt", ws);
	snprintf(to, sizeof(to), "%s/sub/c.txt", ws);
	CHECK_INT(rename(from, to), 0);
	put("empty/new.txt", "new\n", 0644);
	struct timespec times[2] = {was.st_atim, was.st_mtim};
	snprintf(from, sizeof(from), "%s/sub", ws);
	CHECK_INT(utimensat(AT_FDCWD, from, times, 0), 0);
	CHECK_INT(snap_diff(commit, fd, cache, &d, &err), 0);
	CHECK_STREQ(err.msg, "");
	CHECK(d.buf && strstr(d.buf, "--- a/sub/b.txt\n+++ /dev/null"));
	CHECK(d.buf && strstr(d.buf, "+++ b/sub/c.txt"));
	CHECK(d.buf && strstr(d.buf, "+++ b/empty/new.txt"));
	sfs_buf_free(&d);
	struct snap_gc_stats gs;
	CHECK_INT(snap_gc(cache, &gs, NULL), 0);
	CHECK_INT(access(cache, F_OK), 0);
	CHECK_INT((int)gs.caches_dropped, 0);
	close(fd);
	snap_store_shutdown();
	sfs_rm_rf(state);
}

CHECK_MAIN(CHECK_CASE(test_take_info_browse), CHECK_CASE(test_stat_cache),
	   CHECK_CASE(test_stat_cache_racy), CHECK_CASE(test_stat_cache_same_size),
	   CHECK_CASE(test_diff_two_snapshots), CHECK_CASE(test_diff_restore),
	   CHECK_CASE(test_diff_dirs), CHECK_CASE(test_diff_paths), CHECK_CASE(test_forget),
	   CHECK_CASE(test_gc), CHECK_CASE(test_gc_concurrent), CHECK_CASE(test_diff_threaded),
	   CHECK_CASE(test_diff_dir_listing))
