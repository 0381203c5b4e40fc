#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct journal {
	struct journal *next;
	struct sfs_sandbox *sb;
	struct sfs_run *run;
	char path[4200];     /* the file reads are served from */
	off_t size;          /* last observed size */
	bool ended;          /* run over and its final size observed */
	bool end_reported;
	struct journal_waiter *waiters;
	int nwaiters;
	int watch;           /* inotify watch descriptor of the follower, or -1 */
};

static struct {
	pthread_mutex_t mu;
	pthread_t thread;
	bool running, stop;
	int inotify_fd, wake_fd;
	struct journal *journals;
	struct journal_hooks hooks;
	int followers;
} eng = {.mu = PTHREAD_MUTEX_INITIALIZER, .inotify_fd = -1, .wake_fd = -1};

#define TICK_MS 100
#define REFRESH_IDLE_MS 250

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct journal *find_locked(struct sfs_run *run)
{
	return run->journal;
}

static off_t stat_size(struct journal *j)
{
	struct stat st;
	if (stat(j->path, &st) < 0)
		return j->size; /* not created yet: nothing written */
	return st.st_size > j->size ? st.st_size : j->size;
}

void journal_poke(void)
{
	uint64_t one = 1;
	if (eng.wake_fd >= 0 && write(eng.wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the engine is awake anyway */
	}
}

static void refresh_locked(struct journal *j)
{
	if (j->ended)
		return;
	if (j->run->state == SFS_RUN_RUNNING)
		j->sb->provider->ops->run_refresh(j->sb, j->run, NULL);
	j->size = stat_size(j);
	if (j->run->state != SFS_RUN_RUNNING) {
		/* the wrapper records the status after the command's last
		 * write, so this size is final */
		j->size = stat_size(j);
		j->ended = true;
	}
}

static void set_watch_locked(struct journal *j)
{
	bool want = !j->ended && j->nwaiters > 0;
	if (want && j->watch < 0) {
		char dir[4200];
		snprintf(dir, sizeof(dir), "%s", j->path);
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		j->watch = inotify_add_watch(eng.inotify_fd, dir,
					     IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE);
		if (j->watch >= 0)
			eng.followers++;
	} else if (!want && j->watch >= 0) {
		/* other journals never share a directory, so the wd is ours */
		inotify_rm_watch(eng.inotify_fd, j->watch);
		j->watch = -1;
		eng.followers--;
	}
}

static void unlink_waiter(struct journal *j, struct journal_waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		j->waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->next = w->prev = NULL;
	j->nwaiters--;
}

static bool waiter_ready(struct journal *j, struct journal_waiter *w)
{
	if (w->kind == JOURNAL_WAIT_END)
		return j->ended;
	return w->off < j->size || j->ended;
}

struct ready {
	struct journal_waiter *w;
	int err;
};

struct ready_list {
	struct ready *v;
	size_t n, cap;
};

static void push_ready(struct ready_list *l, struct journal_waiter *w, int err)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct ready *grown = realloc(l->v, cap * sizeof(*grown));
		if (!grown)
			return; /* stays unanswered until the next pass */
		l->v = grown;
		l->cap = cap;
	}
	l->v[l->n].w = w;
	l->v[l->n].err = err;
	l->n++;
}

/* Moves every answerable waiter of j to l. */
static void collect_locked(struct journal *j, struct ready_list *l)
{
	struct journal_waiter *w = j->waiters, *next;
	for (; w; w = next) {
		next = w->next;
		if (!w->armed)
			continue;
		int err = w->interrupted ? -EINTR : 0;
		if (err || waiter_ready(j, w)) {
			size_t before = l->n;
			push_ready(l, w, err);
			if (l->n > before)
				unlink_waiter(j, w);
		}
	}
}

static void deliver_all(struct ready_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		eng.hooks.deliver(l->v[i].w, l->v[i].err);
		free(l->v[i].w);
	}
	l->n = 0;
}

struct ended {
	struct sfs_sandbox *sb;
	struct sfs_run *run;
};

static void *engine_main(void *arg)
{
	(void)arg;
	struct ready_list ready = {0};
	struct ended ended[64];
	int64_t last_idle = 0;
	struct pollfd pfd[2] = {{.fd = eng.inotify_fd, .events = POLLIN},
				{.fd = eng.wake_fd, .events = POLLIN}};
	for (;;) {
		poll(pfd, 2, TICK_MS);
		char buf[4096];
		if (pfd[0].revents & POLLIN)
			while (read(eng.inotify_fd, buf, sizeof(buf)) > 0)
				;
		if (pfd[1].revents & POLLIN) {
			uint64_t n;
			if (read(eng.wake_fd, &n, sizeof(n)) < 0) {
				/* nothing pending */
			}
		}
		size_t nended = 0;
		int64_t now = now_ms();
		bool idle_pass = now - last_idle >= REFRESH_IDLE_MS;
		if (idle_pass)
			last_idle = now;

		pthread_mutex_lock(&eng.mu);
		if (eng.stop) {
			pthread_mutex_unlock(&eng.mu);
			break;
		}
		for (struct journal *j = eng.journals; j; j = j->next) {
			/* runs without readers are still checked now and then,
			 * so their end invalidates caches promptly */
			if (j->nwaiters > 0 || idle_pass)
				refresh_locked(j);
			if (j->ended && !j->end_reported && nended < 64) {
				j->end_reported = true;
				ended[nended].sb = j->sb;
				ended[nended].run = j->run;
				nended++;
			}
			collect_locked(j, &ready);
			set_watch_locked(j);
		}
		if (idle_pass)
			for (size_t i = 0; i < sfs_nproviders; i++)
				if (sfs_providers[i]->ops->tick)
					sfs_providers[i]->ops->tick();
		pthread_mutex_unlock(&eng.mu);

		deliver_all(&ready);
		/* hooks run unlocked; sandboxes are only freed after
		 * journal_detach_sandbox, which waits for the lock, and the
		 * ended list is consumed before we take it again */
		for (size_t i = 0; i < nended && eng.hooks.run_ended; i++)
			eng.hooks.run_ended(ended[i].sb, ended[i].run);
	}
	free(ready.v);
	return NULL;
}

int journal_engine_start(const struct journal_hooks *hooks, struct sfs_err *err)
{
	eng.hooks = *hooks;
	eng.inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (eng.inotify_fd < 0)
		return sfs_errf(err, -errno, "inotify: %s", strerror(errno));
	eng.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (eng.wake_fd < 0) {
		int e = errno;
		close(eng.inotify_fd);
		eng.inotify_fd = -1;
		return sfs_errf(err, -e, "eventfd: %s", strerror(e));
	}
	eng.stop = false;
	int r = pthread_create(&eng.thread, NULL, engine_main, NULL);
	if (r) {
		close(eng.inotify_fd);
		close(eng.wake_fd);
		eng.inotify_fd = eng.wake_fd = -1;
		return sfs_errf(err, -r, "journal thread: %s", strerror(r));
	}
	eng.running = true;
	return 0;
}

static void drop_journal_locked(struct journal *j, struct ready_list *l, int err)
{
	while (j->waiters) {
		struct journal_waiter *w = j->waiters;
		unlink_waiter(j, w);
		push_ready(l, w, err);
	}
	j->nwaiters = 0;
	j->ended = true;
	set_watch_locked(j);
	j->run->journal = NULL;
}

void journal_engine_stop(void)
{
	if (!eng.running)
		return;
	pthread_mutex_lock(&eng.mu);
	eng.stop = true;
	pthread_mutex_unlock(&eng.mu);
	journal_poke();
	pthread_join(eng.thread, NULL);
	eng.running = false;

	struct ready_list l = {0};
	pthread_mutex_lock(&eng.mu);
	while (eng.journals) {
		struct journal *j = eng.journals;
		eng.journals = j->next;
		drop_journal_locked(j, &l, -EIO);
		free(j);
	}
	pthread_mutex_unlock(&eng.mu);
	deliver_all(&l);
	free(l.v);
	close(eng.inotify_fd);
	close(eng.wake_fd);
	eng.inotify_fd = eng.wake_fd = -1;
}

int journal_attach(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	struct journal *j = calloc(1, sizeof(*j));
	if (!j)
		return sfs_errf(err, -ENOMEM, "out of memory");
	j->sb = sb;
	j->run = run;
	j->watch = -1;
	const struct sfs_provider_ops *ops = sb->provider->ops;
	if (!ops->journal_local_path ||
	    ops->journal_local_path(sb, run, j->path, sizeof(j->path)) < 0) {
		/* poll mirror: bytes fetched with ops->journal_read land here */
		snprintf(j->path, sizeof(j->path), "%s/journal.mirror", run->dir);
	}
	pthread_mutex_lock(&eng.mu);
	run->journal = j;
	refresh_locked(j);
	j->next = eng.journals;
	eng.journals = j;
	pthread_mutex_unlock(&eng.mu);
	journal_poke();
	return 0;
}

void journal_detach_sandbox(struct sfs_sandbox *sb)
{
	struct ready_list l = {0};
	pthread_mutex_lock(&eng.mu);
	for (struct journal **pj = &eng.journals; *pj;) {
		struct journal *j = *pj;
		if (j->sb != sb) {
			pj = &j->next;
			continue;
		}
		*pj = j->next;
		drop_journal_locked(j, &l, -ENOENT);
		free(j);
	}
	pthread_mutex_unlock(&eng.mu);
	deliver_all(&l);
	free(l.v);
}

off_t journal_size(struct sfs_run *run)
{
	pthread_mutex_lock(&eng.mu);
	struct journal *j = find_locked(run);
	off_t size = 0;
	if (j) {
		j->size = stat_size(j);
		size = j->size;
	}
	pthread_mutex_unlock(&eng.mu);
	return size;
}

ssize_t journal_read(struct sfs_run *run, off_t off, void *buf, size_t size, bool *eof)
{
	char path[4200];
	bool ended;
	pthread_mutex_lock(&eng.mu);
	struct journal *j = find_locked(run);
	if (!j) {
		pthread_mutex_unlock(&eng.mu);
		return -ENOENT;
	}
	/* decide "ended" before reading, so bytes that arrive in between are
	 * never mistaken for the end */
	ended = j->ended;
	memcpy(path, j->path, sizeof(path));
	pthread_mutex_unlock(&eng.mu);

	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0;
	if (fd >= 0) {
		do
			n = pread(fd, buf, size, off);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			n = -errno;
		close(fd);
	} else if (errno != ENOENT) {
		return -errno;
	}
	*eof = (n == 0 && ended);
	return n;
}

void journal_status_text(struct sfs_run *run, char *buf, size_t len)
{
	pthread_mutex_lock(&eng.mu);
	sfs_run_status_text(run, buf, len);
	pthread_mutex_unlock(&eng.mu);
}

bool journal_run_active(struct sfs_run *run)
{
	pthread_mutex_lock(&eng.mu);
	bool active = run->state == SFS_RUN_RUNNING;
	pthread_mutex_unlock(&eng.mu);
	return active;
}

int journal_park(struct sfs_sandbox *sb, struct sfs_run *run, void *req, off_t off, size_t size,
		 enum journal_wait_kind kind)
{
	pthread_mutex_lock(&eng.mu);
	struct journal *j = find_locked(run);
	if (!j) {
		pthread_mutex_unlock(&eng.mu);
		return 1;
	}
	j->size = stat_size(j);
	struct journal_waiter probe = {.off = off, .kind = kind};
	if (waiter_ready(j, &probe)) {
		pthread_mutex_unlock(&eng.mu);
		return 1;
	}
	struct journal_waiter *w = calloc(1, sizeof(*w));
	if (!w) {
		pthread_mutex_unlock(&eng.mu);
		return -ENOMEM;
	}
	w->sb = sb;
	w->run = run;
	w->req = req;
	w->off = off;
	w->size = size;
	w->kind = kind;
	w->next = j->waiters;
	if (j->waiters)
		j->waiters->prev = w;
	j->waiters = w;
	j->nwaiters++;
	pthread_mutex_unlock(&eng.mu);
	return 0;
}

static struct journal_waiter *find_waiter_locked(void *req)
{
	for (struct journal *j = eng.journals; j; j = j->next)
		for (struct journal_waiter *w = j->waiters; w; w = w->next)
			if (w->req == req)
				return w;
	return NULL;
}

void journal_arm(void *req)
{
	pthread_mutex_lock(&eng.mu);
	struct journal_waiter *w = find_waiter_locked(req);
	if (w)
		w->armed = true;
	pthread_mutex_unlock(&eng.mu);
	/* bytes may have arrived between park and arm: look again */
	journal_poke();
}

void journal_interrupt(void *req)
{
	pthread_mutex_lock(&eng.mu);
	struct journal_waiter *w = find_waiter_locked(req);
	if (w)
		w->interrupted = true;
	pthread_mutex_unlock(&eng.mu);
	journal_poke();
}

int journal_followers(void)
{
	pthread_mutex_lock(&eng.mu);
	int n = eng.followers;
	pthread_mutex_unlock(&eng.mu);
	return n;
}
