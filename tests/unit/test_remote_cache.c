/*
 * The remote workspace cache (fs/cache) without a mount: a fake provider
 * keeps files in memory and counts its calls, so each test can say how many
 * round trips an operation costs and what the remote holds afterwards.
 */
#include "check.h"

#include "../../fs/cache/internal.h"
#include "../../fs/cache/remote_cache.h"
#include "../../providers/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake provider -------------------------------------------------- */

#define NFILES 32

struct ffile {
	bool used;
	char path[256];
	mode_t mode;
	char data[4096];
	size_t len;
	int64_t mtime;
};

static struct {
	pthread_mutex_t mu; /* the retry thread calls in too */
	struct ffile f[NFILES];
	int stats, lists, reads, writes, renames, removes;
	int list_delay_ms; /* a slow listing, for concurrent lookups */
	off_t root_size;   /* the root directory's size as a stat gives it */
	bool fail_writes;
	int64_t clock; /* mtimes: every change moves it */
	/* called once a listing has been taken, before it is returned (a change
	 * made while the listing is in flight), then cleared */
	void (*during_list)(void);
	/* gate: the next write waits, once it has read the file, until
	 * released (a write-back in flight while another call comes in) */
	bool gate, gate_entered, gate_open;
	pthread_cond_t gate_cv;
} FP = {.mu = PTHREAD_MUTEX_INITIALIZER, .gate_cv = PTHREAD_COND_INITIALIZER};

static struct ffile *fp_find(const char *path)
{
	for (int i = 0; i < NFILES; i++)
		if (FP.f[i].used && !strcmp(FP.f[i].path, path))
			return &FP.f[i];
	return NULL;
}

/* Puts a file on the remote side, as a run in the sandbox would. */
static void fp_put(const char *path, const char *text)
{
	pthread_mutex_lock(&FP.mu);
	struct ffile *f = fp_find(path);
	for (int i = 0; !f && i < NFILES; i++)
		if (!FP.f[i].used)
			f = &FP.f[i];
	f->used = true;
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->mode = S_IFREG | 0644;
	f->len = strlen(text);
	memcpy(f->data, text, f->len);
	f->mtime = ++FP.clock;
	pthread_mutex_unlock(&FP.mu);
}

/* Puts a directory on the remote side. */
static void fp_mkdir(const char *path)
{
	fp_put(path, "");
	pthread_mutex_lock(&FP.mu);
	fp_find(path)->mode = S_IFDIR | 0755;
	pthread_mutex_unlock(&FP.mu);
}

/* The remote contents of path ("" if missing), in a static buffer. */
static const char *fp_get(const char *path)
{
	static char out[4097];
	pthread_mutex_lock(&FP.mu);
	struct ffile *f = fp_find(path);
	size_t len = f ? f->len : 0;
	memcpy(out, f ? f->data : "", len);
	out[len] = '\0';
	pthread_mutex_unlock(&FP.mu);
	return out;
}

/* Makes every write-back fail (the remote is away) or work again. */
static void fp_fail(bool fail)
{
	pthread_mutex_lock(&FP.mu);
	FP.fail_writes = fail;
	pthread_mutex_unlock(&FP.mu);
}

static int fp_calls(int *counter)
{
	pthread_mutex_lock(&FP.mu);
	int n = *counter;
	pthread_mutex_unlock(&FP.mu);
	return n;
}

static int fake_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st,
		     struct sfs_err *err)
{
	pthread_mutex_lock(&FP.mu);
	FP.stats++;
	struct ffile *f = fp_find(path);
	int r = 0;
	if (!path[0])
		*st = (struct sfs_rstat){.mode = S_IFDIR | 0755, .size = FP.root_size, .mtime = 1};
	else if (f)
		*st = (struct sfs_rstat){.mode = f->mode, .size = (off_t)f->len, .mtime = f->mtime};
	else
		r = -ENOENT;
	pthread_mutex_unlock(&FP.mu);
	return r;
}

static int fake_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		     struct sfs_err *err)
{
	pthread_mutex_lock(&FP.mu);
	FP.lists++;
	int delay = FP.list_delay_ms;
	pthread_mutex_unlock(&FP.mu);
	if (delay)
		usleep((useconds_t)delay * 1000);
	pthread_mutex_lock(&FP.mu);
	*ents = calloc(NFILES, sizeof(**ents));
	*n = 0;
	size_t pl = strlen(path);
	for (int i = 0; *ents && i < NFILES; i++) {
		const char *p = FP.f[i].path;
		/* the children of path: "" lists the names without a '/' */
		if (!FP.f[i].used || (pl && (strncmp(p, path, pl) || p[pl] != '/')))
			continue;
		const char *name = pl ? p + pl + 1 : p;
		if (strchr(name, '/'))
			continue;
		(*ents)[*n].name = strdup(name);
		(*ents)[*n].st = (struct sfs_rstat){
		    .mode = FP.f[i].mode, .size = (off_t)FP.f[i].len, .mtime = FP.f[i].mtime};
		(*n)++;
	}
	void (*during)(void) = FP.during_list;
	FP.during_list = NULL;
	pthread_mutex_unlock(&FP.mu);
	if (during)
		during();
	return *ents ? 0 : -ENOMEM;
}

static int fake_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	pthread_mutex_lock(&FP.mu);
	FP.reads++;
	struct ffile *f = fp_find(path);
	int r = !f ? -ENOENT : pwrite(fd, f->data, f->len, 0) == (ssize_t)f->len ? 0 : -EIO;
	pthread_mutex_unlock(&FP.mu);
	return r;
}

static int fake_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode,
		      struct sfs_err *err)
{
	char buf[4096];
	ssize_t len = pread(fd, buf, sizeof(buf), 0);
	if (len < 0)
		return -errno;
	pthread_mutex_lock(&FP.mu);
	FP.writes++;
	bool fail = FP.fail_writes;
	if (FP.gate) {
		FP.gate = false;
		FP.gate_entered = true;
		pthread_cond_broadcast(&FP.gate_cv);
		while (!FP.gate_open)
			pthread_cond_wait(&FP.gate_cv, &FP.mu);
	}
	pthread_mutex_unlock(&FP.mu);
	if (fail)
		return sfs_errf(err, -EIO, "fake: the remote is away");
	buf[len] = '\0';
	fp_put(path, len ? buf : "");
	return 0;
}

static int fake_rename(struct sfs_sandbox *sb, const char *from, const char *to,
		       struct sfs_err *err)
{
	pthread_mutex_lock(&FP.mu);
	FP.renames++;
	struct ffile *f = fp_find(from), *old = fp_find(to);
	if (f && old)
		old->used = false;
	if (f)
		snprintf(f->path, sizeof(f->path), "%s", to);
	/* and what is below it, for a directory */
	size_t fl = strlen(from);
	for (int i = 0; f && S_ISDIR(f->mode) && i < NFILES; i++) {
		char *p = FP.f[i].path;
		if (FP.f[i].used && !strncmp(p, from, fl) && p[fl] == '/') {
			char moved[256];
			snprintf(moved, sizeof(moved), "%s%s", to, p + fl);
			snprintf(p, sizeof(FP.f[i].path), "%s", moved);
		}
	}
	pthread_mutex_unlock(&FP.mu);
	return f ? 0 : -ENOENT;
}

static int fake_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	pthread_mutex_lock(&FP.mu);
	struct ffile *f = fp_find(path);
	if (f)
		f->mode = (f->mode & S_IFMT) | mode;
	pthread_mutex_unlock(&FP.mu);
	return f ? 0 : -ENOENT;
}

static int fake_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	pthread_mutex_lock(&FP.mu);
	FP.removes++;
	struct ffile *f = fp_find(path);
	if (f)
		f->used = false;
	pthread_mutex_unlock(&FP.mu);
	return f ? 0 : -ENOENT;
}

static const struct sfs_provider_ops fake_ops = {.fs_stat = fake_stat,
						 .fs_list = fake_list,
						 .fs_read = fake_read,
						 .fs_write = fake_write,
						 .fs_rename = fake_rename,
						 .fs_chmod = fake_chmod,
						 .fs_remove = fake_remove};
static const struct sfs_provider fake_provider = {.name = "fake", .ops = &fake_ops};

/* ---- one sandbox, the hooks, and a fresh cache per test ----------------- */

static struct sfs_sandbox SB = {.name = "t", .serial = 1, .provider = &fake_provider};
static int stale_calls;

static struct sfs_sandbox *get_sandbox(uint32_t serial)
{
	return serial == 1 ? &SB : NULL;
}

static void put_sandbox(struct sfs_sandbox *sb)
{
}

static void node_stale(uint64_t id)
{
	__atomic_add_fetch(&stale_calls, 1, __ATOMIC_RELAXED);
}

static const struct rc_hooks hooks = {
    .sandbox_get = get_sandbox, .sandbox_put = put_sandbox, .node_stale = node_stale};

static char statedir[64];

/* A fresh cache whose busy spells keep what they fetched up to busy_ttl
 * seconds (0: only the TTL counts). */
static void fresh_busy(double ttl, double busy_ttl)
{
	pthread_mutex_lock(&FP.mu);
	memset(FP.f, 0, sizeof(FP.f));
	FP.stats = FP.lists = FP.reads = FP.writes = FP.list_delay_ms = 0;
	FP.renames = FP.removes = 0;
	FP.root_size = 0;
	FP.fail_writes = false;
	FP.during_list = NULL;
	FP.gate = FP.gate_entered = FP.gate_open = false;
	pthread_mutex_unlock(&FP.mu);
	stale_calls = 0;
	snprintf(statedir, sizeof(statedir), "/tmp/sfs-rcache-XXXXXX");
	CHECK(mkdtemp(statedir) != NULL);
	SB.statedir = statedir;
	struct rc_options opt = {.ttl = ttl, .busy_ttl = busy_ttl, .retry_interval = 0.05};
	CHECK_INT(rc_init(&opt, &hooks), 0);
}

static void fresh(double ttl)
{
	fresh_busy(ttl, 0);
}

static void done(void)
{
	rc_shutdown();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", statedir);
	CHECK_INT(system(cmd), 0);
}

static void sleep_s(double s)
{
	struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

/* The root, held for a test (ref) and counted as looked up. */
static void take_root(struct rc_ref *root)
{
	struct rc_entry e;
	CHECK_INT(rc_lookup_root(1, &e), 0);
	CHECK_INT(rc_ref_get(e.id, root), 0);
	rc_entry_free(&e);
}

static int lookup_size(struct rc_ref *dir, const char *name)
{
	struct rc_entry e;
	int r = rc_lookup(dir, name, &e);
	if (r)
		return r;
	int size = (int)e.st.size;
	rc_entry_free(&e);
	return size;
}

static void open_file(struct rc_ref *dir, const char *name, int flags, struct rc_file **f,
		      bool *keep)
{
	struct rc_entry e;
	struct rc_ref ref;
	*f = NULL;
	CHECK_INT(rc_lookup(dir, name, &e), 0);
	CHECK_INT(rc_ref_get(e.id, &ref), 0);
	CHECK_INT(rc_open(&ref, flags, f, keep), 0);
	rc_ref_put(&ref);
	rc_entry_free(&e);
}

static const char *cached(struct rc_file *f)
{
	static char out[4097];
	ssize_t n = pread(rc_file_fd(f), out, sizeof(out) - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	return out;
}

static void write_at(struct rc_file *f, const char *text, off_t off)
{
	CHECK_INT(pwrite(rc_file_fd(f), text, strlen(text), off), (ssize_t)strlen(text));
	rc_file_written(f);
}

static int count_pending(void)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/rcache", statedir);
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += strstr(de->d_name, ".pending") != NULL;
	if (d)
		closedir(d);
	return n;
}

static bool wait_remote(const char *path, const char *want)
{
	for (int i = 0; i < 200; i++) {
		if (!strcmp(fp_get(path), want))
			return true;
		sleep_s(0.025);
	}
	return false;
}

static int threads_of_self(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* ---- the cases ---------------------------------------------------------- */

struct looker {
	struct rc_ref *dir;
	char name[16];
	int size;
};

static void *look(void *arg)
{
	struct looker *l = arg;
	l->size = lookup_size(l->dir, l->name);
	return NULL;
}

/* A large directory's first lookup is one stat; from its second, one
 * listing answers every name, and lookups from many threads at once share
 * the listing in flight instead of each fetching one. */
static void test_listing_at_second_lookup_shared(void)
{
	fresh(30);
	FP.root_size = 1 << 20; /* some 25 000 names on ext4 */
	for (int i = 0; i < 8; i++) {
		char name[16], text[16];
		snprintf(name, sizeof(name), "f%d", i);
		snprintf(text, sizeof(text), "%*d", i + 1, i);
		fp_put(name, text);
	}
	struct rc_ref root;
	take_root(&root);
	int stats = fp_calls(&FP.stats); /* the root's own */
	CHECK_INT(lookup_size(&root, "f0"), 1);
	CHECK_INT(fp_calls(&FP.stats), stats + 1);
	CHECK_INT(fp_calls(&FP.lists), 0);
	pthread_mutex_lock(&FP.mu);
	FP.list_delay_ms = 200;
	pthread_mutex_unlock(&FP.mu);
	struct looker l[8];
	pthread_t t[8];
	for (int i = 0; i < 8; i++) {
		l[i].dir = &root;
		snprintf(l[i].name, sizeof(l[i].name), i < 7 ? "f%d" : "none", i + 1);
		CHECK_INT(pthread_create(&t[i], NULL, look, &l[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 7; i++)
		CHECK_INT(l[i].size, i + 2);
	CHECK_INT(l[7].size, -ENOENT); /* a missing name, from the listing too */
	CHECK_INT(fp_calls(&FP.lists), 1);
	CHECK_INT(fp_calls(&FP.stats), stats + 1);
	rc_ref_put(&root);
	done();
}

/* A small directory (a few names, as .git/refs/heads or .git/objects/ab)
 * is listed at its first lookup: the same one call as a stat, and the
 * lookups after it, of names there or not, cost nothing. */
static void test_small_directory_listed_at_first_lookup(void)
{
	fresh(30);
	FP.root_size = 4096;
	fp_put("HEAD", "ref");
	fp_put("config", "[core]");
	struct rc_ref root;
	take_root(&root);
	int stats = fp_calls(&FP.stats);
	CHECK_INT(lookup_size(&root, "HEAD"), 3);
	CHECK_INT(fp_calls(&FP.lists), 1);
	CHECK_INT(fp_calls(&FP.stats), stats);
	CHECK_INT(lookup_size(&root, "config"), 6);
	CHECK_INT(lookup_size(&root, "alternates"), -ENOENT);
	CHECK_INT(fp_calls(&FP.lists), 1);
	CHECK_INT(fp_calls(&FP.stats), stats);
	rc_ref_put(&root);
	done();
}

/* Which changes through the mount a listing or a prefetched copy fetched
 * meanwhile can have missed (fs/cache/mutations.c). */
static void test_changes_touch_their_path_below_and_parent(void)
{
	struct rsb rs = {0};
	rc_mutated_locked(&rs, ".git/index.lock");
	CHECK(rc_dir_touched_since_locked(&rs, 0, ".git"));	  /* its parent's listing */
	CHECK(!rc_dir_touched_since_locked(&rs, 0, ".git/info")); /* a sibling directory */
	CHECK(!rc_dir_touched_since_locked(&rs, 0, ""));	  /* the grandparent */
	CHECK(rc_file_touched_since_locked(&rs, 0, ".git/index.lock"));
	CHECK(!rc_file_touched_since_locked(&rs, 0, ".git/index"));
	CHECK(!rc_file_touched_since_locked(&rs, 0, ".git/index.lock2"));
	CHECK(!rc_dir_touched_since_locked(&rs, 1, ".git")); /* nothing after it */
	/* a renamed or removed directory: everything below it */
	rc_mutated_locked(&rs, "src");
	CHECK(rc_file_touched_since_locked(&rs, 1, "src/a/f"));
	CHECK(rc_dir_touched_since_locked(&rs, 1, "src/a"));
	CHECK(rc_dir_touched_since_locked(&rs, 1, ""));
	CHECK(!rc_file_touched_since_locked(&rs, 1, "srcx/f"));
	/* once the log no longer reaches back, everything counts as touched */
	for (int i = 0; i < RC_MLOG; i++)
		rc_mutated_locked(&rs, "other/x");
	CHECK(rc_file_touched_since_locked(&rs, 1, "unrelated"));
	CHECK(!rc_file_touched_since_locked(&rs, rs.wctr - 3, "unrelated"));
	rc_mlog_free_locked(&rs);
}

static struct rc_ref chmod_ref;

static void chmod_to(mode_t mode)
{
	struct rc_setattr sa = {.set_mode = true, .mode = mode};
	struct sfs_rstat st;
	CHECK_INT(rc_setattr(&chmod_ref, &sa, &st), 0);
	CHECK_INT(st.mode & 07777, mode);
	rc_rstat_free(&st);
}

static void chmod_600(void)
{
	chmod_to(0600);
}

/* The mode of name as entry i of a walk of dir shows it (readdirplus). */
static int walked_mode(struct rc_ref *dir, const char *name)
{
	struct rc_listing *l;
	CHECK_INT(rc_opendir(dir, &l), 0);
	int mode = -ENOENT;
	for (size_t i = 0; i < rc_listing_count(l); i++) {
		if (strcmp(rc_listing_name(l, i), name))
			continue;
		struct rc_entry e;
		CHECK_INT(rc_listing_entry(dir, l, i, &e), 0);
		mode = (int)(e.st.mode & 07777);
		rc_forget(e.id, 1);
		rc_entry_free(&e);
	}
	rc_listing_free(l);
	return mode;
}

/* A chmod through the mount is what ls -l shows at once: a listing asked
 * for before it (cached, or in flight while it ran, or a walk opened
 * before it) does not bring the old mode back until the TTL runs out. */
static void test_chmod_not_undone_by_an_older_listing(void)
{
	fresh(30);
	fp_put("f", "q");
	fp_put("g", "other");
	struct rc_ref root;
	take_root(&root);
	struct rc_entry e;
	CHECK_INT(rc_lookup(&root, "f", &e), 0); /* lists the root: it is small */
	CHECK_INT(rc_ref_get(e.id, &chmod_ref), 0);
	rc_entry_free(&e);
	CHECK_INT(fp_calls(&FP.lists), 1);
	/* a walk opened before the chmod, the listing cached before it */
	struct rc_listing *l;
	CHECK_INT(rc_opendir(&root, &l), 0);
	chmod_to(0600);
	size_t fi = strcmp(rc_listing_name(l, 0), "f") ? 1 : 0;
	CHECK_INT(rc_listing_entry(&root, l, fi, &e), 0);
	CHECK_INT(e.st.mode & 07777, 0600);
	rc_forget(e.id, 1);
	rc_entry_free(&e);
	rc_listing_free(l);
	CHECK_INT(walked_mode(&root, "f"), 0600);
	struct sfs_rstat st;
	CHECK_INT(rc_getattr(&chmod_ref, &st), 0);
	CHECK_INT(st.mode & 07777, 0600);
	CHECK_INT(fp_calls(&FP.lists), 1);
	/* a listing in flight while the chmod ran: it was taken before */
	pthread_mutex_lock(&R.mu);
	root.n->dir_until = 0; /* the listing is stale: the walk lists again */
	pthread_mutex_unlock(&R.mu);
	chmod_to(0644);
	pthread_mutex_lock(&FP.mu);
	FP.during_list = chmod_600;
	pthread_mutex_unlock(&FP.mu);
	CHECK_INT(walked_mode(&root, "f"), 0600);
	CHECK_INT(fp_calls(&FP.lists), 2);
	CHECK_INT(rc_getattr(&chmod_ref, &st), 0);
	CHECK_INT(st.mode & 07777, 0600);
	CHECK_INT(lookup_size(&root, "f"), 1);
	CHECK_INT(walked_mode(&root, "f"), 0600);
	/* a listing asked for after the chmod is believed: a change made by
	 * something else shows once the TTL runs out */
	pthread_mutex_lock(&FP.mu);
	fp_find("f")->mode = S_IFREG | 0640;
	pthread_mutex_unlock(&FP.mu);
	pthread_mutex_lock(&R.mu);
	root.n->dir_until = 0;
	chmod_ref.n->attr_until = 0;
	pthread_mutex_unlock(&R.mu);
	CHECK_INT(walked_mode(&root, "f"), 0640);
	CHECK_INT(rc_getattr(&chmod_ref, &st), 0);
	CHECK_INT(st.mode & 07777, 0640);
	CHECK_INT(walked_mode(&root, "g"), 0644);
	rc_ref_put(&chmod_ref);
	rc_ref_put(&root);
	done();
}

static void test_ttl_expiry(void)
{
	fresh(0.3);
	fp_put("a.txt", "hello");
	struct rc_ref root;
	take_root(&root);
	CHECK_INT(lookup_size(&root, "a.txt"), 5);
	unsigned long calls = rc_calls(1);
	/* within the TTL: answered from the cache, even though the remote moved */
	fp_put("a.txt", "hello world");
	CHECK_INT(lookup_size(&root, "a.txt"), 5);
	CHECK_INT(rc_calls(1), calls);
	/* after it: asked again */
	sleep_s(0.35);
	CHECK_INT(lookup_size(&root, "a.txt"), 11);
	CHECK(rc_calls(1) > calls);
	/* a missing name is not made up */
	CHECK_INT(lookup_size(&root, "nope"), -ENOENT);
	rc_ref_put(&root);
	done();
}

static void test_invalidated_when_a_run_starts_or_ends(void)
{
	fresh(100);
	fp_put("a.txt", "hello");
	struct rc_ref root;
	take_root(&root);
	struct rc_entry e;
	CHECK_INT(rc_lookup(&root, "a.txt", &e), 0);
	struct rc_ref file;
	CHECK_INT(rc_ref_get(e.id, &file), 0);
	/* a run changes the file: the long TTL would hide it */
	fp_put("a.txt", "changed by a run");
	struct sfs_rstat st;
	CHECK_INT(rc_getattr(&file, &st), 0);
	CHECK_INT(st.size, 5);
	/* the run ends: every node of the sandbox is stale, for us and the caller */
	rc_invalidate_sandbox(1);
	CHECK(stale_calls >= 2); /* the root and the file */
	CHECK_INT(rc_getattr(&file, &st), 0);
	CHECK_INT(st.size, 16);
	/* another sandbox's invalidation does not touch this one */
	unsigned long calls = rc_calls(1);
	rc_invalidate_sandbox(2);
	CHECK_INT(rc_getattr(&file, &st), 0);
	CHECK_INT(rc_calls(1), calls);
	rc_ref_put(&file);
	rc_forget(e.id, 1);
	rc_entry_free(&e);
	rc_ref_put(&root);
	done();
}

/* A walk or lookup answered from what was fetched before a run ended does
 * not make those attributes current again: the run's invalidation holds,
 * and the node's next getattr asks the remote (a readdirplus of a listing
 * read before the run made the file's old size look fresh for the TTL). */
static void test_older_generation_not_made_current(void)
{
	fresh(100);
	fp_put("a.txt", "hello");
	struct rc_ref root;
	take_root(&root);
	struct rc_listing *l;
	CHECK_INT(rc_opendir(&root, &l), 0);
	CHECK_INT(rc_listing_count(l), 1);
	/* a run rewrites the file and ends */
	fp_put("a.txt", "changed by a run");
	rc_invalidate_sandbox(1);
	struct rc_entry e;
	CHECK_INT(rc_listing_entry(&root, l, 0, &e), 0);
	CHECK_INT(e.st.size, 5); /* the walk's own snapshot */
	CHECK(e.ttl == 0);	 /* which the caller must not keep */
	rc_listing_free(l);
	struct rc_ref file;
	CHECK_INT(rc_ref_get(e.id, &file), 0);
	struct sfs_rstat st;
	CHECK_INT(rc_getattr(&file, &st), 0);
	CHECK_INT(st.size, 16);
	rc_ref_put(&file);
	rc_forget(e.id, 1);
	rc_entry_free(&e);
	rc_ref_put(&root);
	done();
}

static void test_close_to_open(void)
{
	fresh(0.2);
	fp_put("a.txt", "first");
	struct rc_ref root;
	take_root(&root);
	struct rc_file *f;
	bool keep;
	open_file(&root, "a.txt", O_RDONLY, &f, &keep);
	CHECK_INT(fp_calls(&FP.reads), 1); /* fetched on open */
	CHECK_STREQ(cached(f), "first");
	CHECK(!keep);
	rc_release(f);
	/* unchanged remote: the cache file is still good, nothing fetched */
	sleep_s(0.25);
	open_file(&root, "a.txt", O_RDONLY, &f, &keep);
	CHECK_INT(fp_calls(&FP.reads), 1);
	CHECK(keep);
	/* changed while open: the open file keeps what it had */
	fp_put("a.txt", "second version");
	CHECK_STREQ(cached(f), "first");
	rc_release(f);
	/* the next open after the TTL sees the change */
	sleep_s(0.25);
	open_file(&root, "a.txt", O_RDONLY, &f, &keep);
	CHECK_INT(fp_calls(&FP.reads), 2);
	CHECK_STREQ(cached(f), "second version");
	CHECK(!keep);
	rc_release(f);
	rc_ref_put(&root);
	done();
}

static void test_write_back_on_flush_fsync_and_close(void)
{
	fresh(100);
	fp_put("a.txt", "old");
	struct rc_ref root;
	take_root(&root);
	struct rc_file *w, *r;
	bool keep;
	open_file(&root, "a.txt", O_RDWR, &w, &keep);
	open_file(&root, "a.txt", O_RDONLY, &r, &keep);
	write_at(w, "new", 0);
	/* nothing is sent before a flush, and a reader's close sends nothing */
	CHECK_INT(fp_calls(&FP.writes), 0);
	CHECK_INT(rc_flush(r), 0);
	CHECK_INT(fp_calls(&FP.writes), 0);
	CHECK_STREQ(fp_get("a.txt"), "old");
	/* flush (close) of the writer sends it */
	CHECK_INT(rc_flush(w), 0);
	CHECK_INT(fp_calls(&FP.writes), 1);
	CHECK_STREQ(fp_get("a.txt"), "new");
	/* a clean flush sends nothing */
	CHECK_INT(rc_flush(w), 0);
	CHECK_INT(fp_calls(&FP.writes), 1);
	/* fsync sends, through any handle */
	write_at(w, "newer", 0);
	CHECK_INT(rc_fsync(r), 0);
	CHECK_STREQ(fp_get("a.txt"), "newer");
	rc_release(r);
	/* the last close of a dirty file without a flush: the retry thread saves it */
	CHECK_INT(rc_start(), 0);
	write_at(w, "newest", 0);
	rc_release(w);
	CHECK(wait_remote("a.txt", "newest"));
	/* create makes the file remotely at its first write-back */
	struct rc_entry e;
	struct rc_file *c;
	CHECK_INT(rc_create(&root, "b.txt", 0600, O_WRONLY | O_CREAT, &e, &c), 0);
	CHECK(fp_find("b.txt") == NULL);
	write_at(c, "made here", 0);
	CHECK_INT(rc_flush(c), 0);
	CHECK_STREQ(fp_get("b.txt"), "made here");
	rc_release(c);
	rc_forget(e.id, 1);
	rc_entry_free(&e);
	rc_ref_put(&root);
	done();
}

/* git's index write: create index.lock, write, close, rename over index.
 * Two calls (the upload at close, the move), not an empty upload at create,
 * the upload, a stat and the move. */
static void test_new_file_made_at_close_in_one_call(void)
{
	fresh(100);
	fp_put("index", "old index");
	struct rc_ref root;
	take_root(&root);
	struct rc_listing *l;
	CHECK_INT(rc_opendir(&root, &l), 0); /* answers O_EXCL below */
	rc_listing_free(l);
	unsigned long calls = rc_calls(1);
	int stats = fp_calls(&FP.stats);
	struct rc_entry e;
	struct rc_file *c;
	CHECK_INT(rc_create(&root, "index.lock", 0644, O_WRONLY | O_CREAT | O_EXCL, &e, &c), 0);
	CHECK_INT(rc_calls(1), calls);
	CHECK(fp_find("index.lock") == NULL);
	/* here it exists: a second O_EXCL create, a lookup */
	struct rc_entry e2;
	struct rc_file *c2;
	CHECK_INT(rc_create(&root, "index.lock", 0644, O_WRONLY | O_CREAT | O_EXCL, &e2, &c2),
		  -EEXIST);
	CHECK_INT(lookup_size(&root, "index.lock"), 0);
	write_at(c, "new index", 0);
	CHECK_INT(rc_flush(c), 0);
	rc_release(c);
	CHECK_STREQ(fp_get("index.lock"), "new index");
	CHECK_INT(rc_rename(&root, "index.lock", &root, "index", false), 0);
	CHECK_STREQ(fp_get("index"), "new index");
	CHECK_INT(rc_calls(1), calls + 2);
	CHECK_INT(fp_calls(&FP.stats), stats);
	/* what it holds shows and reads without a call */
	CHECK_INT(lookup_size(&root, "index"), 9);
	struct rc_file *r;
	bool keep;
	open_file(&root, "index", O_RDONLY, &r, &keep);
	CHECK_STREQ(cached(r), "new index");
	CHECK_INT(rc_calls(1), calls + 2);
	rc_release(r);
	rc_forget(e.id, 1);
	rc_entry_free(&e);

	/* not saved yet: in a listing fetched meanwhile (a run's start dropped
	 * the cached one); unlinked before any write-back, it costs no call */
	CHECK_INT(rc_create(&root, "tmp", 0600, O_RDWR | O_CREAT, &e, &c), 0);
	rc_invalidate_sandbox(1);
	CHECK_INT(rc_opendir(&root, &l), 0);
	bool listed = false;
	for (size_t i = 0; i < rc_listing_count(l); i++)
		listed |= !strcmp(rc_listing_name(l, i), "tmp");
	rc_listing_free(l);
	CHECK(listed);
	calls = rc_calls(1);
	CHECK_INT(rc_remove(&root, "tmp", false), 0);
	write_at(c, "scratch", 0);
	CHECK_INT(rc_flush(c), 0);
	rc_release(c);
	CHECK_INT(rc_calls(1), calls);
	CHECK(fp_find("tmp") == NULL);
	CHECK_INT(lookup_size(&root, "tmp"), -ENOENT);
	rc_forget(e.id, 1);
	rc_entry_free(&e);

	/* renamed while open and unsaved: made at the old name, then moved */
	CHECK_INT(rc_create(&root, "a.new", 0600, O_RDWR | O_CREAT, &e, &c), 0);
	write_at(c, "renamed", 0);
	CHECK_INT(rc_rename(&root, "a.new", &root, "a", false), 0);
	CHECK_STREQ(fp_get("a"), "renamed");
	CHECK(fp_find("a.new") == NULL);
	rc_release(c);
	rc_forget(e.id, 1);
	rc_entry_free(&e);
	rc_ref_put(&root);
	done();
}

/* ---- a write-back in flight against an unlink or a rename -------------- */

static struct rc_file *gated_file;

static void *flush_gated(void *arg)
{
	(void)arg;
	rc_flush(gated_file);
	return NULL;
}

/* Opens name, writes text and starts its write-back in a thread; returns
 * once the fake has the write in hand (and holds it). */
static void start_gated_write_back(struct rc_ref *root, const char *name, const char *text,
				   pthread_t *t)
{
	bool keep;
	open_file(root, name, O_RDWR, &gated_file, &keep);
	write_at(gated_file, text, 0);
	CHECK_INT(ftruncate(rc_file_fd(gated_file), (off_t)strlen(text)), 0);
	pthread_mutex_lock(&FP.mu);
	FP.gate = true;
	pthread_mutex_unlock(&FP.mu);
	CHECK_INT(pthread_create(t, NULL, flush_gated, NULL), 0);
	pthread_mutex_lock(&FP.mu);
	while (!FP.gate_entered)
		pthread_cond_wait(&FP.gate_cv, &FP.mu);
	pthread_mutex_unlock(&FP.mu);
}

static void open_gate(void)
{
	pthread_mutex_lock(&FP.mu);
	FP.gate_open = true;
	pthread_cond_broadcast(&FP.gate_cv);
	pthread_mutex_unlock(&FP.mu);
}

struct racing_call {
	struct rc_ref *root;
	const char *from, *to; /* to NULL: an unlink of from */
	int r;
	bool done;
};

static void *racing_call_main(void *arg)
{
	struct racing_call *c = arg;
	c->r = c->to ? rc_rename(c->root, c->from, c->root, c->to, false)
		     : rc_remove(c->root, c->from, false);
	__atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* The call c made while a write-back is held by the fake: it must wait
 * for the write-back (its io), whose data then lands first. */
static void race_with_write_back(struct racing_call *c)
{
	pthread_t call;
	c->done = false;
	CHECK_INT(pthread_create(&call, NULL, racing_call_main, c), 0);
	sleep_s(0.15);
	CHECK(!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)); /* waiting for the io */
	open_gate();
	pthread_join(call, NULL);
	CHECK_INT(c->r, 0);
}

static void test_unlink_waits_for_a_write_back_in_flight(void)
{
	fresh(30);
	fp_put("a", "old");
	struct rc_ref root;
	take_root(&root);
	pthread_t wb;
	start_gated_write_back(&root, "a", "new", &wb);
	struct racing_call c = {.root = &root, .from = "a"};
	race_with_write_back(&c);
	pthread_join(wb, NULL);
	/* the write landed first and the unlink removed it: it never comes back */
	CHECK(fp_find("a") == NULL);
	rc_release(gated_file);
	CHECK(fp_find("a") == NULL);
	CHECK_INT(lookup_size(&root, "a"), -ENOENT);
	rc_ref_put(&root);
	done();
}

static void test_directory_rename_waits_for_write_backs_below(void)
{
	fresh(30);
	fp_mkdir("d");
	fp_put("d/f", "old");
	struct rc_ref root, d;
	take_root(&root);
	struct rc_entry e;
	CHECK_INT(rc_lookup(&root, "d", &e), 0);
	CHECK_INT(rc_ref_get(e.id, &d), 0);
	rc_entry_free(&e);
	pthread_t wb;
	start_gated_write_back(&d, "f", "new", &wb);
	struct racing_call c = {.root = &root, .from = "d", .to = "e"};
	race_with_write_back(&c);
	pthread_join(wb, NULL);
	/* written at d/f, then moved with d: nothing left at the old path */
	CHECK_STREQ(fp_get("e/f"), "new");
	CHECK(fp_find("d/f") == NULL);
	/* and a write-back after the move goes to the new path */
	write_at(gated_file, "newer", 0);
	CHECK_INT(rc_flush(gated_file), 0);
	CHECK_STREQ(fp_get("e/f"), "newer");
	CHECK(fp_find("d/f") == NULL);
	rc_release(gated_file);
	rc_ref_put(&d);
	rc_ref_put(&root);
	done();
}

static void test_rename_over_a_file_waits_for_its_write_back(void)
{
	fresh(30);
	fp_put("a", "old");
	fp_put("b", "moved");
	struct rc_ref root;
	take_root(&root);
	CHECK_INT(lookup_size(&root, "b"), 5);
	pthread_t wb;
	start_gated_write_back(&root, "a", "written", &wb);
	struct racing_call c = {.root = &root, .from = "b", .to = "a"};
	race_with_write_back(&c);
	pthread_join(wb, NULL);
	/* as on a local disk in either order: the moved file is at a */
	CHECK_STREQ(fp_get("a"), "moved");
	CHECK(fp_find("b") == NULL);
	rc_release(gated_file);
	CHECK_STREQ(fp_get("a"), "moved");
	rc_ref_put(&root);
	done();
}

/* Fetched during a busy spell (no pause of the TTL): kept while the spell
 * lasts, at most busy_ttl; after a pause, asked again. */
static void test_kept_while_busy(void)
{
	fresh_busy(0.3, 1.0);
	fp_put("a.txt", "hello");
	struct rc_ref root;
	take_root(&root);
	unsigned long calls = rc_calls(1);
	CHECK_INT(lookup_size(&root, "a.txt"), 5);
	CHECK(rc_calls(1) > calls);
	calls = rc_calls(1);
	/* changed remotely, then busy for 0.6 s, twice the TTL: still the
	 * copy of the spell */
	fp_put("a.txt", "hello world");
	for (int i = 0; i < 6; i++) {
		sleep_s(0.1);
		CHECK_INT(lookup_size(&root, "a.txt"), 5);
	}
	CHECK_INT(rc_calls(1), calls);
	/* still busy, past busy_ttl: asked again */
	for (int i = 0; i < 5; i++) {
		sleep_s(0.1);
		lookup_size(&root, "a.txt");
	}
	CHECK_INT(lookup_size(&root, "a.txt"), 11);
	CHECK(rc_calls(1) > calls);
	/* a pause of the TTL ends the spell: what it fetched is asked again */
	fp_put("a.txt", "hi");
	sleep_s(0.35);
	CHECK_INT(lookup_size(&root, "a.txt"), 2);
	rc_ref_put(&root);
	done();
}

static void test_failed_write_back_keeps_the_data_and_retries(void)
{
	fresh(100);
	fp_put("a.txt", "old");
	struct rc_ref root;
	take_root(&root);
	struct rc_file *f;
	bool keep;
	open_file(&root, "a.txt", O_RDWR, &f, &keep);
	write_at(f, "precious", 0);
	fp_fail(true);
	CHECK_INT(rc_flush(f), -EIO);
	CHECK_INT(rc_fsync(f), -EIO);
	/* kept: in the cache file, with a note naming the remote path */
	CHECK_STREQ(cached(f), "precious");
	CHECK_INT(count_pending(), 1);
	CHECK_INT(rc_dirty_count(1), 1);
	CHECK_STREQ(fp_get("a.txt"), "old");
	/* attributes show the local data while the remote is away */
	struct rc_entry e;
	CHECK_INT(rc_lookup(&root, "a.txt", &e), 0);
	CHECK_INT(e.st.size, 8);
	/* an open after the failure still reads the unsaved data */
	struct rc_ref ref;
	CHECK_INT(rc_ref_get(e.id, &ref), 0);
	struct rc_file *again;
	CHECK_INT(rc_open(&ref, O_RDONLY, &again, &keep), 0);
	CHECK_STREQ(cached(again), "precious");
	rc_release(again);
	rc_ref_put(&ref);
	rc_forget(e.id, 1);
	rc_entry_free(&e);
	/* a later flush goes through once the remote is back */
	fp_fail(false);
	CHECK_INT(rc_flush(f), 0);
	CHECK_STREQ(fp_get("a.txt"), "precious");
	CHECK_INT(count_pending(), 0);
	CHECK_INT(rc_dirty_count(1), 0);
	/* and with nobody flushing again, the retry thread does it */
	CHECK_INT(rc_start(), 0);
	write_at(f, "second", 0);
	fp_fail(true);
	CHECK_INT(rc_flush(f), -EIO);
	rc_release(f); /* closed with unsaved data */
	sleep_s(0.2);  /* a few failed retries */
	CHECK(fp_calls(&FP.writes) >= 3);
	CHECK_STREQ(fp_get("a.txt"), "precious");
	fp_fail(false);
	CHECK(wait_remote("a.txt", "secondus")); /* "second" over "precious" */
	for (int i = 0; i < 100 && count_pending(); i++)
		sleep_s(0.02);
	CHECK_INT(count_pending(), 0);
	rc_ref_put(&root);
	done();
}

static void test_unsaved_data_survives_a_restart(void)
{
	fresh(100);
	fp_put("a.txt", "old");
	struct rc_ref root;
	take_root(&root);
	struct rc_file *f;
	bool keep;
	open_file(&root, "a.txt", O_RDWR, &f, &keep);
	write_at(f, "written while away", 0);
	fp_fail(true);
	CHECK_INT(rc_flush(f), -EIO);
	rc_release(f);
	rc_ref_put(&root);
	/* the daemon stops with the remote still away: the data stays on disk */
	rc_shutdown();
	CHECK_INT(count_pending(), 1);
	CHECK_STREQ(fp_get("a.txt"), "old");
	/* the next daemon: recovery starts no thread (it runs before the fork of
	 * daemonizing); the retry thread, started after, saves the data */
	fp_fail(false);
	int threads = threads_of_self();
	struct rc_options opt = {.ttl = 100, .retry_interval = 0.05};
	CHECK_INT(rc_init(&opt, &hooks), 0);
	rc_recover_sandbox(&SB);
	CHECK_INT(threads_of_self(), threads);
	CHECK_INT(rc_dirty_count(1), 1);
	CHECK_STREQ(fp_get("a.txt"), "old");
	CHECK_INT(rc_start(), 0);
	CHECK_INT(threads_of_self(), threads + 1);
	CHECK(wait_remote("a.txt", "written while away"));
	for (int i = 0; i < 100 && count_pending(); i++)
		sleep_s(0.02);
	CHECK_INT(count_pending(), 0);
	/* and it reads back through the new cache */
	take_root(&root);
	open_file(&root, "a.txt", O_RDONLY, &f, &keep);
	CHECK_STREQ(cached(f), "written while away");
	rc_release(f);
	rc_ref_put(&root);
	rc_stop();
	CHECK_INT(threads_of_self(), threads);
	done();
}

CHECK_MAIN(CHECK_CASE(test_ttl_expiry), CHECK_CASE(test_chmod_not_undone_by_an_older_listing),
	   CHECK_CASE(test_listing_at_second_lookup_shared),
	   CHECK_CASE(test_small_directory_listed_at_first_lookup),
	   CHECK_CASE(test_changes_touch_their_path_below_and_parent),
	   CHECK_CASE(test_invalidated_when_a_run_starts_or_ends),
	   CHECK_CASE(test_older_generation_not_made_current), CHECK_CASE(test_close_to_open),
	   CHECK_CASE(test_write_back_on_flush_fsync_and_close),
	   CHECK_CASE(test_new_file_made_at_close_in_one_call), CHECK_CASE(test_kept_while_busy),
	   CHECK_CASE(test_failed_write_back_keeps_the_data_and_retries),
	   CHECK_CASE(test_unsaved_data_survives_a_restart),
	   CHECK_CASE(test_unlink_waits_for_a_write_back_in_flight),
	   CHECK_CASE(test_rename_over_a_file_waits_for_its_write_back),
	   CHECK_CASE(test_directory_rename_waits_for_write_backs_below))
