/*
 * The journal engine (journal/journal.c) without FUSE or a real provider:
 * two fake providers, one whose journal is a file on this host (follow by
 * inotify) and one that only answers bounded reads (poll into a mirror).
 * Requests are plain pointers; the deliver hook records what the engine
 * answered, and the tests wait for it on a condition variable with a
 * deadline, so nothing here sleeps a fixed time to "let the engine run".
 */
#include "check.h"

#include "journal/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- what the engine delivered --------------------------------------- */

#define MAX_DELIVERED 1024

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	void *req[MAX_DELIVERED];
	int err[MAX_DELIVERED];
	int ended_before[MAX_DELIVERED]; /* `ended` when it was delivered */
	int n;
	int ended; /* run_ended hook calls */
} got = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void on_deliver(struct journal_waiter *w, int err)
{
	pthread_mutex_lock(&got.mu);
	if (got.n < MAX_DELIVERED) {
		got.req[got.n] = w->req;
		got.err[got.n] = err;
		got.ended_before[got.n] = got.ended;
		got.n++;
	}
	pthread_cond_broadcast(&got.cv);
	pthread_mutex_unlock(&got.mu);
}

static void on_ended(struct sfs_sandbox *sb, struct sfs_run *run)
{
	(void)sb;
	(void)run;
	pthread_mutex_lock(&got.mu);
	got.ended++;
	pthread_cond_broadcast(&got.cv);
	pthread_mutex_unlock(&got.mu);
}

static void reset_got(void)
{
	pthread_mutex_lock(&got.mu);
	got.n = 0;
	got.ended = 0;
	pthread_mutex_unlock(&got.mu);
}

/* Waits up to ms for `count` deliveries; returns how many there are. */
static int wait_delivered(int count, int ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&got.mu);
	while (got.n < count && pthread_cond_timedwait(&got.cv, &got.mu, &until) == 0)
		;
	int n = got.n;
	pthread_mutex_unlock(&got.mu);
	return n;
}

/* Waits up to ms for the run_ended hook to have been called `count` times. */
static int wait_ended(int count, int ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000 + 1;
	pthread_mutex_lock(&got.mu);
	while (got.ended < count && pthread_cond_timedwait(&got.cv, &got.mu, &until) == 0)
		;
	int n = got.ended;
	pthread_mutex_unlock(&got.mu);
	return n;
}

/* The error delivered for req, or 1 when none was. */
static int delivered_err(void *req)
{
	int e = 1;
	pthread_mutex_lock(&got.mu);
	for (int i = 0; i < got.n; i++)
		if (got.req[i] == req)
			e = got.err[i];
	pthread_mutex_unlock(&got.mu);
	return e;
}

static int times_delivered(void *req)
{
	int k = 0;
	pthread_mutex_lock(&got.mu);
	for (int i = 0; i < got.n; i++)
		k += got.req[i] == req;
	pthread_mutex_unlock(&got.mu);
	return k;
}

/* ---- fake providers --------------------------------------------------- */

/* What the fake "sandbox" says about each run (the wrapper's status). */
static struct {
	pthread_mutex_t mu;
	enum sfs_run_state state[8];
	int code[8];
	char remote[8][4096]; /* poll provider: the journal inside the sandbox */
	size_t remote_len[8];
	int read_error[8]; /* poll provider: every read fails with this */
	int reads;	   /* poll provider: journal_read calls */
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static char tmpdir[256];

static int fake_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	(void)sb;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	run->state = fake.state[run->n];
	run->code = fake.code[run->n];
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

static int fake_local_path(struct sfs_sandbox *sb, struct sfs_run *run, char *buf, size_t len)
{
	(void)sb;
	snprintf(buf, len, "%s/journal", run->dir);
	return 0;
}

static ssize_t fake_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err)
{
	(void)sb;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.reads++;
	ssize_t n;
	if (fake.read_error[run->n]) {
		n = fake.read_error[run->n];
	} else if ((size_t)off >= fake.remote_len[run->n]) {
		n = 0;
	} else {
		n = (ssize_t)(fake.remote_len[run->n] - (size_t)off);
		if ((size_t)n > max)
			n = (ssize_t)max;
		memcpy(buf, fake.remote[run->n] + off, (size_t)n);
	}
	pthread_mutex_unlock(&fake.mu);
	return n;
}

static const struct sfs_provider_ops local_ops = {
    .run_refresh = fake_refresh,
    .journal_local_path = fake_local_path,
};
static const struct sfs_provider local_provider = {
    .name = "fake-local",
    .caps = {[SFS_CAP_EXEC] = true, [SFS_CAP_KILLABLE] = true},
    .ops = &local_ops,
};
static const struct sfs_provider_ops poll_ops = {
    .run_refresh = fake_refresh,
    .journal_read = fake_read,
};
static const struct sfs_provider poll_provider = {
    .name = "fake-poll",
    .caps = {[SFS_CAP_EXEC] = true},
    .ops = &poll_ops,
};

/* follow provider: a follow that takes a while to start (an HTTP call),
 * and an unfollow that takes a while too (a docker engine call, a join). */
static struct {
	pthread_mutex_t mu;
	int follows_done, unfollows_done;
	int64_t unfollow_ms;
} slow = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int slow_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		       void **follower, struct sfs_err *err)
{
	(void)sb;
	(void)run;
	(void)from;
	(void)err;
	usleep(300 * 1000);
	int p[2];
	if (pipe(p) < 0)
		return -errno;
	*fd = p[0];
	*follower = (void *)(intptr_t)p[1];
	pthread_mutex_lock(&slow.mu);
	slow.follows_done++;
	pthread_mutex_unlock(&slow.mu);
	return 0;
}

static void slow_unfollow(struct sfs_sandbox *sb, void *follower)
{
	(void)sb;
	usleep((useconds_t)slow.unfollow_ms * 1000);
	close((int)(intptr_t)follower);
	pthread_mutex_lock(&slow.mu);
	slow.unfollows_done++;
	pthread_mutex_unlock(&slow.mu);
}

static const struct sfs_provider_ops follow_ops = {
    .run_refresh = fake_refresh,
    .journal_read = fake_read,
    .journal_follow = slow_follow,
    .journal_unfollow = slow_unfollow,
};
static const struct sfs_provider follow_provider = {
    .name = "fake-follow",
    .caps = {[SFS_CAP_EXEC] = true, [SFS_CAP_BACKGROUND] = true, [SFS_CAP_KILLABLE] = true},
    .ops = &follow_ops,
};

static void set_run(int n, enum sfs_run_state state, int code)
{
	pthread_mutex_lock(&fake.mu);
	fake.state[n] = state;
	fake.code[n] = code;
	pthread_mutex_unlock(&fake.mu);
}

static void remote_append(int n, const char *s)
{
	pthread_mutex_lock(&fake.mu);
	size_t k = strlen(s);
	memcpy(fake.remote[n] + fake.remote_len[n], s, k);
	fake.remote_len[n] += k;
	pthread_mutex_unlock(&fake.mu);
}

static void local_append(struct sfs_run *run, const char *s)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/journal", run->dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	CHECK(fd >= 0);
	CHECK_INT(write(fd, s, strlen(s)), (long long)strlen(s));
	close(fd);
}

/* A sandbox record and a run of it, with the run's directory made. */
static struct sfs_sandbox *new_sandbox(const struct sfs_provider *p)
{
	struct sfs_sandbox *sb = calloc(1, sizeof(*sb));
	snprintf(sb->name, sizeof(sb->name), "%s", p->name);
	sb->provider = p;
	return sb;
}

static struct sfs_run *new_run(int n)
{
	struct sfs_run *run = calloc(1, sizeof(*run));
	run->n = n;
	if (asprintf(&run->dir, "%s/run%d", tmpdir, n) < 0)
		abort();
	mkdir(run->dir, 0700);
	return run;
}

static void free_run(struct sfs_run *run)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/journal", run->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/journal.mirror", run->dir);
	unlink(path);
	rmdir(run->dir);
	free(run->dir);
	free(run);
}

static ssize_t read_at(struct sfs_run *run, off_t off, char *buf, size_t size, bool *eof)
{
	ssize_t n = journal_read(run, off, buf, size - 1, eof);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* ---- cases ------------------------------------------------------------ */

/* Offsets: bytes at any offset; EOF only once the run is over and the
 * reader is at the end. */
static void test_offsets_and_eof(void)
{
	struct sfs_sandbox *sb = new_sandbox(&local_provider);
	struct sfs_run *run = new_run(1);
	set_run(1, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	char buf[64];
	bool eof = true;
	CHECK_INT(read_at(run, 0, buf, sizeof(buf), &eof), 0);
	CHECK(!eof); /* nothing yet, but running: not the end */
	local_append(run, "hello world\n");
	CHECK_INT(journal_size(run), 12);
	CHECK_INT(read_at(run, 6, buf, sizeof(buf), &eof), 6);
	CHECK_STREQ(buf, "world\n");
	CHECK(!eof);
	CHECK_INT(read_at(run, 12, buf, sizeof(buf), &eof), 0);
	CHECK(!eof);
	set_run(1, SFS_RUN_EXITED, 3);
	reset_got();
	/* a WAIT_END waiter is how the fs layer learns of the end */
	int w;
	CHECK_INT(journal_park(sb, run, &w, 0, 0, JOURNAL_WAIT_END), 0);
	journal_arm(&w);
	CHECK(wait_delivered(1, 5000) >= 1);
	CHECK_INT(delivered_err(&w), 0);
	CHECK_INT(read_at(run, 12, buf, sizeof(buf), &eof), 0);
	CHECK(eof);
	CHECK_INT(read_at(run, 0, buf, sizeof(buf), &eof), 12); /* rereading works */
	CHECK(!eof);
	char text[64];
	journal_status_text(run, text, sizeof(text));
	CHECK_STREQ(text, "exited 3");
	CHECK(!journal_run_active(run));
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* A reader waiting for a run's end is answered after the run_ended hook
 * (the fs layer's drop of the workspace caches the run made stale): a read
 * right after `wait` must not see what was cached before the run ended. */
static void test_end_hook_before_wait_readers(void)
{
	struct sfs_sandbox *sb = new_sandbox(&local_provider);
	struct sfs_run *run = new_run(7);
	set_run(7, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	reset_got();
	int w;
	CHECK_INT(journal_park(sb, run, &w, 0, 0, JOURNAL_WAIT_END), 0);
	journal_arm(&w);
	set_run(7, SFS_RUN_EXITED, 0);
	CHECK_INT(wait_delivered(1, 5000), 1);
	CHECK_INT(delivered_err(&w), 0);
	pthread_mutex_lock(&got.mu);
	int hooks_before = got.ended_before[0];
	pthread_mutex_unlock(&got.mu);
	CHECK_INT(hooks_before, 1);
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* A parked read is not answered before it is armed, and is answered
 * (once) when bytes arrive. */
static void test_park_arm_and_wake(void)
{
	struct sfs_sandbox *sb = new_sandbox(&local_provider);
	struct sfs_run *run = new_run(2);
	set_run(2, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	reset_got();
	local_append(run, "abc");
	int early, late;
	/* bytes at the offset: answer at once, nothing parked */
	CHECK_INT(journal_park(sb, run, &early, 0, 4096, JOURNAL_WAIT_BYTES), 1);
	/* at the end: parked */
	CHECK_INT(journal_park(sb, run, &late, 3, 4096, JOURNAL_WAIT_BYTES), 0);
	local_append(run, "def");
	/* not armed: the engine must not answer it, whatever it notices */
	CHECK_INT(wait_delivered(1, 400), 0);
	journal_arm(&late);
	CHECK_INT(wait_delivered(1, 5000), 1);
	CHECK_INT(delivered_err(&late), 0);
	CHECK_INT(times_delivered(&late), 1);
	CHECK_INT(times_delivered(&early), 0);
	/* a watch is held while someone waits, and a second beyond (a reader
	 * that reads again soon does not pay a new watch), then dropped */
	CHECK_INT(wait_delivered(2, 300), 1);
	for (int i = 0; i < 300 && journal_followers() != 0; i++)
		usleep(10000);
	CHECK_INT(journal_followers(), 0);
	set_run(2, SFS_RUN_EXITED, 0);
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* Ctrl-C: an interrupted reader is answered -EINTR at once; the others
 * stay parked. */
static void test_interrupt(void)
{
	struct sfs_sandbox *sb = new_sandbox(&local_provider);
	struct sfs_run *run = new_run(3);
	set_run(3, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	reset_got();
	int a, b;
	CHECK_INT(journal_park(sb, run, &a, 0, 100, JOURNAL_WAIT_BYTES), 0);
	CHECK_INT(journal_park(sb, run, &b, 0, 100, JOURNAL_WAIT_BYTES), 0);
	journal_arm(&a);
	journal_arm(&b);
	journal_interrupt(&a);
	CHECK_INT(wait_delivered(1, 5000), 1);
	CHECK_INT(delivered_err(&a), -EINTR);
	CHECK_INT(delivered_err(&b), 1); /* still waiting */
	/* the run ends: the other reader is released with "read now" */
	set_run(3, SFS_RUN_KILLED, 15);
	journal_poke();
	CHECK_INT(wait_delivered(2, 5000), 2);
	CHECK_INT(delivered_err(&b), 0);
	CHECK_INT(wait_ended(1, 5000), 1); /* the run_ended hook, once */
	/* after the end, a reader at the end is never parked */
	int c;
	CHECK_INT(journal_park(sb, run, &c, 0, 100, JOURNAL_WAIT_BYTES), 1);
	CHECK_INT(journal_park(sb, run, &c, 0, 0, JOURNAL_WAIT_END), 1);
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* A follower started for a sandbox that went meanwhile is stopped outside
 * the engine's lock: a slow unfollow (a provider's HTTP call) never holds
 * up the journals of every other sandbox. */
static void test_unwanted_follower_stopped_unlocked(void)
{
	struct sfs_sandbox *sb = new_sandbox(&follow_provider);
	struct sfs_run *run = new_run(6);
	set_run(6, SFS_RUN_RUNNING, 0);
	slow.unfollow_ms = 1500;
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	reset_got();
	int a;
	CHECK_INT(journal_park(sb, run, &a, 0, 100, JOURNAL_WAIT_BYTES), 0);
	journal_arm(&a);
	journal_poke();
	/* the sandbox goes (rmdir) while the follow is being started */
	usleep(100 * 1000);
	journal_end_sandbox(sb, false);
	CHECK_INT(wait_delivered(1, 5000), 1);
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&slow.mu);
		int done = slow.follows_done;
		pthread_mutex_unlock(&slow.mu);
		if (done)
			break;
		usleep(10 * 1000);
	}
	CHECK_INT(slow.follows_done, 1);
	usleep(100 * 1000); /* the engine applies it: the unfollow starts */
	/* another reader's question meanwhile is answered at once */
	int64_t t0 = mono_ms();
	(void)journal_size(run);
	int64_t took = mono_ms() - t0;
	CHECK(took < 500);
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&slow.mu);
		int done = slow.unfollows_done;
		pthread_mutex_unlock(&slow.mu);
		if (done)
			break;
		usleep(10 * 1000);
	}
	CHECK_INT(slow.unfollows_done, 1);
	set_run(6, SFS_RUN_EXITED, 0);
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* 200 readers of one run: all answered exactly once when bytes come, and
 * no watch is left once they are gone. */
static void test_many_readers(void)
{
	struct sfs_sandbox *sb = new_sandbox(&local_provider);
	struct sfs_run *run = new_run(4);
	set_run(4, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	reset_got();
	static int reqs[200];
	for (int i = 0; i < 200; i++) {
		CHECK_INT(journal_park(sb, run, &reqs[i], 0, 10, JOURNAL_WAIT_BYTES), 0);
		journal_arm(&reqs[i]);
	}
	CHECK(journal_followers() <= 1); /* one watch per journal, shared */
	local_append(run, "x");
	CHECK_INT(wait_delivered(200, 5000), 200);
	int once = 0;
	for (int i = 0; i < 200; i++)
		once += times_delivered(&reqs[i]) == 1 && delivered_err(&reqs[i]) == 0;
	CHECK_INT(once, 200);
	/* the engine drops its watch once nobody waits (a second later) */
	for (int i = 0; i < 150 && journal_followers() > 0; i++)
		usleep(20000), journal_poke();
	CHECK_INT(journal_followers(), 0);
	set_run(4, SFS_RUN_EXITED, 0);
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* Poll strategy: bounded reads from an offset land in the mirror and wake
 * readers; after the end the remainder is fetched, then EOF. */
static void test_poll_mirror(void)
{
	struct sfs_sandbox *sb = new_sandbox(&poll_provider);
	struct sfs_run *run = new_run(5);
	set_run(5, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	reset_got();
	int r1;
	CHECK_INT(journal_park(sb, run, &r1, 0, 100, JOURNAL_WAIT_BYTES), 0);
	journal_arm(&r1);
	remote_append(5, "first\n");
	CHECK_INT(wait_delivered(1, 5000), 1);
	CHECK_INT(delivered_err(&r1), 0);
	char buf[64];
	bool eof = true;
	CHECK_INT(read_at(run, 0, buf, sizeof(buf), &eof), 6);
	CHECK_STREQ(buf, "first\n");
	CHECK(!eof);
	/* the last bytes and the end arrive together */
	remote_append(5, "last\n");
	set_run(5, SFS_RUN_EXITED, 0);
	int r2;
	if (journal_park(sb, run, &r2, 11, 0, JOURNAL_WAIT_END) == 0) {
		journal_arm(&r2);
		CHECK_INT(wait_delivered(2, 5000), 2);
	}
	CHECK_INT(read_at(run, 6, buf, sizeof(buf), &eof), 5);
	CHECK_STREQ(buf, "last\n");
	CHECK_INT(read_at(run, 11, buf, sizeof(buf), &eof), 0);
	CHECK(eof);
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* A poll run that ends (as `state`) with `text` mirrored, after which every
 * fetch of the remainder fails with `error`: a reader at the end is still
 * answered, and reads the mirror, then EOF.  What the mirror holds is the
 * journal (issue 10 #3). */
static void check_remainder_gives_up(int n, const char *text, enum sfs_run_state state, int error)
{
	struct sfs_sandbox *sb = new_sandbox(&poll_provider);
	struct sfs_run *run = new_run(n);
	off_t len = (off_t)strlen(text);
	remote_append(n, text);
	set_run(n, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(sb, run, NULL), 0);
	reset_got();
	int r;
	CHECK_INT(journal_park(sb, run, &r, 0, 100, JOURNAL_WAIT_BYTES), 0);
	journal_arm(&r);
	CHECK_INT(wait_delivered(1, 5000), 1);
	pthread_mutex_lock(&fake.mu);
	fake.read_error[n] = error;
	pthread_mutex_unlock(&fake.mu);
	set_run(n, state, 0);
	int w;
	if (journal_park(sb, run, &w, len, 100, JOURNAL_WAIT_BYTES) == 0) {
		journal_arm(&w);
		CHECK_INT(wait_delivered(2, 10000), 2);
		CHECK_INT(delivered_err(&w), 0);
	}
	char buf[64];
	bool eof = false;
	CHECK_INT(read_at(run, 0, buf, sizeof(buf), &eof), len);
	CHECK_INT(read_at(run, len, buf, sizeof(buf), &eof), 0);
	CHECK(eof);
	journal_detach_sandbox(sb);
	free_run(run);
	free(sb);
}

/* The sandbox is gone (-ENOENT): the engine stops fetching at once. */
static void test_poll_lost_remainder_ends(void)
{
	check_remainder_gives_up(6, "partial", SFS_RUN_LOST, -ENOENT);
}

/* The fetch keeps failing with an error that might pass (-EIO: an engine
 * outage): the engine gives up after a few tries, so a finished run never
 * parks a reader for long. */
static void test_poll_failing_remainder_ends(void)
{
	check_remainder_gives_up(7, "some", SFS_RUN_EXITED, -EIO);
}

/* Detaching a sandbox answers its parked readers -ENOENT and forgets its
 * runs; another sandbox's readers are untouched. */
static void test_detach_releases_readers(void)
{
	struct sfs_sandbox *a = new_sandbox(&local_provider), *b = new_sandbox(&local_provider);
	struct sfs_run *ra = new_run(7), *rb = new_run(1);
	set_run(7, SFS_RUN_RUNNING, 0);
	set_run(1, SFS_RUN_RUNNING, 0);
	CHECK_INT(journal_attach(a, ra, NULL), 0);
	CHECK_INT(journal_attach(b, rb, NULL), 0);
	reset_got();
	int wa, wb;
	CHECK_INT(journal_park(a, ra, &wa, 0, 10, JOURNAL_WAIT_BYTES), 0);
	CHECK_INT(journal_park(b, rb, &wb, 0, 10, JOURNAL_WAIT_END), 0);
	journal_arm(&wa);
	journal_arm(&wb);
	journal_detach_sandbox(a);
	CHECK_INT(wait_delivered(1, 5000), 1);
	CHECK_INT(delivered_err(&wa), -ENOENT);
	CHECK_INT(delivered_err(&wb), 1);
	CHECK(ra->journal == NULL);
	bool eof;
	char buf[8];
	CHECK_INT(journal_read(ra, 0, buf, sizeof(buf), &eof), -ENOENT);
	/* engine stop answers what is left with -EIO */
	journal_engine_stop();
	CHECK_INT(wait_delivered(2, 5000), 2);
	CHECK_INT(delivered_err(&wb), -EIO);
	static const struct journal_hooks hooks = {.deliver = on_deliver, .run_ended = on_ended};
	CHECK_INT(journal_engine_start(&hooks, NULL), 0);
	free_run(ra);
	free_run(rb);
	free(a);
	free(b);
}

/* Ended runs leave the engine's passes (a daemon with thousands of runs
 * walked them all at every wake-up: 20-45% of its CPU per exec), come
 * back for a reader, a sandbox's end or detach, and leave again. */
static void test_ended_runs_leave_the_passes(void)
{
	struct sfs_sandbox *sb = new_sandbox(&local_provider);
	struct sfs_run *runs[6];
	for (int i = 0; i < 6; i++) {
		runs[i] = new_run(i + 1);
		set_run(i + 1, SFS_RUN_RUNNING, 0);
		CHECK_INT(journal_attach(sb, runs[i], NULL), 0);
		local_append(runs[i], "out\n");
	}
	CHECK_INT((int)journal_engine_active(), 6);
	for (int i = 0; i < 6; i++)
		set_run(i + 1, SFS_RUN_EXITED, i);
	for (int t = 0; t < 500 && journal_engine_active() > 0; t++)
		usleep(10000);
	CHECK_INT((int)journal_engine_active(), 0);
	/* still read, to the end, with their status */
	bool eof = false;
	char buf[16];
	CHECK_INT(read_at(runs[2], 0, buf, sizeof(buf), &eof), 4);
	CHECK_STREQ(buf, "out\n");
	CHECK_INT(journal_park(sb, runs[2], buf, 4, 10, JOURNAL_WAIT_END), 1);
	CHECK_INT(runs[2]->state, SFS_RUN_EXITED);
	/* the sandbox's end visits them all, then they leave again */
	journal_end_sandbox(sb, false);
	for (int t = 0; t < 500 && journal_engine_active() > 0; t++)
		usleep(10000);
	CHECK_INT((int)journal_engine_active(), 0);
	/* and detach finds them where they are */
	journal_detach_sandbox(sb);
	for (int i = 0; i < 6; i++) {
		CHECK(runs[i]->journal == NULL);
		free_run(runs[i]);
	}
	free(sb);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sfs-test-journal.XXXXXX");
	if (!mkdtemp(tmpdir))
		abort();
	static const struct journal_hooks hooks = {.deliver = on_deliver, .run_ended = on_ended};
	struct sfs_err err = {0};
	if (journal_engine_start(&hooks, &err) != 0) {
		fprintf(stderr, "journal_engine_start: %s\n", err.msg);
		abort();
	}
}

static void teardown(void)
{
	journal_engine_stop();
	rmdir(tmpdir);
}

static void test_setup(void)
{
	setup();
}
static void test_teardown(void)
{
	teardown();
}

CHECK_MAIN(CHECK_CASE(test_setup), CHECK_CASE(test_offsets_and_eof),
	   CHECK_CASE(test_park_arm_and_wake), CHECK_CASE(test_end_hook_before_wait_readers),
	   CHECK_CASE(test_interrupt), CHECK_CASE(test_unwanted_follower_stopped_unlocked),
	   CHECK_CASE(test_many_readers), CHECK_CASE(test_poll_mirror),
	   CHECK_CASE(test_poll_lost_remainder_ends), CHECK_CASE(test_poll_failing_remainder_ends),
	   CHECK_CASE(test_detach_releases_readers), CHECK_CASE(test_ended_runs_leave_the_passes),
	   CHECK_CASE(test_teardown))
