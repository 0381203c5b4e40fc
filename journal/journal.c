#include "journal.h"

#include "../providers/config.h"
#include "../providers/redact.h"
#include "../providers/options.h"
#include "../providers/util.h"

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
	/* on eng.idle: ended, its end reported, nothing to watch, follow or
	 * answer; the engine's passes do not visit it (engine_main) */
	bool idle;
	off_t size; /* last observed size */
	bool ended; /* run over and its final size observed */
	/* redact=journal: reads hide secret values (same length), and while
	 * the run goes on the last bytes that could begin one are held back:
	 * readers see `visible` bytes, computed for vis_size and vis_gen */
	bool redact;
	off_t visible, vis_size;
	unsigned long vis_gen;
	unsigned long rotations; /* plain files: journal_file_rotate */
	bool end_reported;
	struct journal_waiter *waiters;
	int nwaiters;
	int watch;	     /* inotify watch descriptor of the follower, or -1 */
	int64_t watch_until; /* keep the watch until then with no reader */

	/* A file the daemon itself appends to (SANDBOX/audit): no provider
	 * behind it, "running" until its sandbox goes (journal_attach_file). */
	bool plain;
	/* Journals not on this host are mirrored into run->dir. */
	bool local;	    /* path is the provider's own file */
	bool follow;	    /* strategy: follow (else poll) */
	int mirror_fd;	    /* O_APPEND writer of the mirror, or -1 */
	int follow_fd;	    /* the provider follower's output, or -1 */
	void *follower;	    /* the provider's follower handle */
	bool final_pending; /* run over: fetch what is left, then end */
	int final_failures; /* failed fetches of the remainder in a row */
	int64_t next_poll_ms;
	/* last: the fields above are what each engine pass reads, in the first
	 * cache lines of a journal rather than past 4 KiB of path */
	char path[4200]; /* the file reads are served from */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t ended; /* broadcast when a run leaves `running` or the engine stops */
	pthread_t thread;
	bool running, stop;
	int inotify_fd, wake_fd;
	struct journal *journals; /* those the engine's passes visit */
	struct journal *idle;	  /* the others (struct journal: idle) */
	struct journal_hooks hooks;
	int followers;
} eng = {.mu = PTHREAD_MUTEX_INITIALIZER,
	 .ended = PTHREAD_COND_INITIALIZER,
	 .inotify_fd = -1,
	 .wake_fd = -1};

#define TICK_MS 100
#define REFRESH_IDLE_MS 250
/* A run that is over never parks a reader for long: fetching the remainder
 * of a mirrored journal gives up after this many failures in a row (one per
 * poll interval), and at once when the provider says there is nothing left
 * to fetch it from.  What the mirror holds is then the journal. */
#define FINAL_TRIES 5

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

/* Nothing for the engine to do for j until a reader parks on it: a
 * daemon that ran thousands of runs walks only those still going. */
static bool quiescent_locked(const struct journal *j)
{
	return j->ended && j->end_reported && !j->plain && !j->waiters && j->watch < 0 &&
	       j->follow_fd < 0 && !j->final_pending;
}

/* Back among those the engine visits. */
static void unidle_locked(struct journal *j)
{
	if (!j->idle)
		return;
	for (struct journal **pj = &eng.idle; *pj; pj = &(*pj)->next) {
		if (*pj == j) {
			*pj = j->next;
			break;
		}
	}
	j->idle = false;
	j->next = eng.journals;
	eng.journals = j;
}

static void unidle_sandbox_locked(struct sfs_sandbox *sb)
{
	for (struct journal **pj = &eng.idle; *pj;) {
		struct journal *j = *pj;
		if (j->sb != sb) {
			pj = &j->next;
			continue;
		}
		*pj = j->next;
		j->idle = false;
		j->next = eng.journals;
		eng.journals = j;
	}
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

/* After the run's state is known: a local journal's size is final once the
 * run is over (the wrapper records the status after the command's last
 * write); a mirrored one still has to fetch what is left. */
static void settle_locked(struct journal *j)
{
	if (j->ended)
		return;
	j->size = stat_size(j);
	if (j->run->state == SFS_RUN_RUNNING)
		return;
	if (j->local)
		j->ended = true;
	else if (!j->final_pending)
		j->final_pending = true;
}

/* A watch lives while someone reads and a second beyond, so a reader that
 * reads, handles the bytes and reads again does not pay an inotify_add_watch
 * per read.  A new watch sees only what happens after it: the engine makes
 * one more pass at once, so bytes written (or a status renamed in) between
 * this pass's look at the run and the watch are not left for the tick. */
static void set_watch_locked(struct journal *j)
{
	int64_t now = now_ms();
	if (j->nwaiters > 0)
		j->watch_until = now + 1000;
	bool want = j->local && !j->ended && (j->nwaiters > 0 || now < j->watch_until);
	if (want && j->watch < 0) {
		const uint32_t mask = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE;
		const struct sfs_provider_ops *ops = j->sb->provider->ops;
		if (ops->journal_watch) {
			j->watch = ops->journal_watch(j->sb, j->run, eng.inotify_fd, mask);
		} else {
			char dir[4200];
			if (sfs_pathf(dir, sizeof(dir), "%s", j->path) < 0)
				dir[0] = '\0'; /* no watch: the tick looks instead */
			char *slash = strrchr(dir, '/');
			if (slash)
				*slash = '\0';
			j->watch = inotify_add_watch(eng.inotify_fd, dir, mask);
		}
		if (j->watch < 0)
			j->watch = -1; /* the tick looks instead */
		if (j->watch >= 0) {
			eng.followers++;
			journal_poke();
		}
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

/* The bytes readers may see: all of them, but for a redacted journal of a
 * run still going, those that cannot be the start of a secret value whose
 * end has not arrived (providers/redact_stream.c).  A tail of at most
 * longest-1 bytes is read from the file: a local file, quick. */
static off_t visible_locked(struct journal *j)
{
	if (!j->redact || j->ended)
		return j->size;
	unsigned long gen = sfs_redact_generation();
	if (j->vis_size == j->size && j->vis_gen == gen)
		return j->visible;
	size_t longest = sfs_redact_longest();
	size_t want = longest > 1 ? longest - 1 : 0;
	if ((off_t)want > j->size)
		want = (size_t)j->size;
	off_t vis = j->size;
	char *tail = want ? malloc(want) : NULL;
	int fd = want ? open(j->path, O_RDONLY | O_CLOEXEC) : -1;
	ssize_t n = fd >= 0 && tail ? pread(fd, tail, want, j->size - (off_t)want) : 0;
	if (fd >= 0)
		close(fd);
	if (want && n != (ssize_t)want)
		vis = j->size - (off_t)want; /* could not look: hold back all it might be */
	else if (want)
		vis = j->size - (off_t)sfs_redact_holdback(tail, want);
	free(tail);
	j->visible = vis;
	j->vis_size = j->size;
	j->vis_gen = gen;
	return vis;
}

static bool waiter_ready(struct journal *j, struct journal_waiter *w)
{
	if (w->kind == JOURNAL_WAIT_END)
		return j->ended;
	return w->off < visible_locked(j) || j->ended;
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
		int err = w->interrupted ? -EINTR : w->eof ? JOURNAL_EOF : 0;
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

/* Work the engine does without its lock (provider calls may block). */
struct job {
	struct sfs_sandbox *sb;
	struct sfs_run *run;
	enum { JOB_REFRESH, JOB_READ, JOB_FOLLOW, JOB_UNFOLLOW } kind;
	off_t off;	/* JOB_READ, JOB_FOLLOW: from here */
	void *follower; /* JOB_UNFOLLOW */
	/* results */
	struct sfs_run state; /* JOB_REFRESH: a copy the provider updates */
	char *buf;
	ssize_t n;
	int fd;
};

struct jobs {
	struct job *v;
	size_t n, cap;
};

/* A new slot at the end of l, NULL when out of memory (retried on a later
 * pass). */
static struct job *job_slot(struct jobs *l)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct job *grown = realloc(l->v, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		l->v = grown;
		l->cap = cap;
	}
	return &l->v[l->n++];
}

static struct job *push_job(struct jobs *l, struct journal *j, int kind)
{
	struct job *job = job_slot(l);
	if (!job)
		return NULL;
	memset(job, 0, sizeof(*job));
	job->sb = j->sb;
	job->run = j->run;
	job->kind = kind;
	job->fd = -1;
	return job;
}

/* A copy of job on l (its buffer not taken), NULL when out of memory. */
static struct job *push_job_copy(struct jobs *l, const struct job *src)
{
	struct job *job = job_slot(l);
	if (!job)
		return NULL;
	*job = *src;
	job->buf = NULL;
	return job;
}

#define POLL_READ_MAX (1 << 20)

static void run_job(struct job *job)
{
	const struct sfs_provider_ops *ops = job->sb->provider->ops;
	switch (job->kind) {
	case JOB_REFRESH:
		ops->run_refresh(job->sb, &job->state, NULL);
		break;
	case JOB_READ:
		job->buf = malloc(POLL_READ_MAX);
		job->n = job->buf && ops->journal_read
			     ? ops->journal_read(job->sb, job->run, job->off, job->buf,
						 POLL_READ_MAX, NULL)
			     : -EIO;
		break;
	case JOB_FOLLOW:
		if (!ops->journal_follow ||
		    ops->journal_follow(job->sb, job->run, job->off, &job->fd, &job->follower,
					NULL) < 0) {
			job->fd = -1;
			job->follower = NULL;
		}
		break;
	case JOB_UNFOLLOW:
		ops->journal_unfollow(job->sb, job->follower);
		break;
	}
}

static int open_mirror_locked(struct journal *j)
{
	if (j->mirror_fd < 0)
		j->mirror_fd =
		    open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	return j->mirror_fd;
}

static void append_locked(struct journal *j, const char *buf, size_t n)
{
	if (open_mirror_locked(j) < 0)
		return;
	while (n) {
		ssize_t w = write(j->mirror_fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		n -= (size_t)w;
		j->size += w;
	}
}

/* Drains a follower's output into the mirror; false at its EOF. */
static bool drain_follower_locked(struct journal *j)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(j->follow_fd, buf, sizeof(buf));
		if (n > 0) {
			append_locked(j, buf, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		return false;
	}
}

static void stop_follower_locked(struct journal *j, struct jobs *jobs)
{
	if (j->follow_fd < 0)
		return;
	drain_follower_locked(j);
	close(j->follow_fd);
	j->follow_fd = -1;
	struct job *job = push_job(jobs, j, JOB_UNFOLLOW);
	if (job)
		job->follower = j->follower;
	j->follower = NULL;
	eng.followers--;
}

/* Decides, under the lock, what provider work this pass needs. */
static void plan_locked(struct journal *j, bool idle_pass, int64_t now, struct jobs *jobs)
{
	if (j->ended || j->plain)
		return;
	if (j->run->state == SFS_RUN_RUNNING && (j->nwaiters > 0 || idle_pass)) {
		struct job *job = push_job(jobs, j, JOB_REFRESH);
		if (job)
			job->state = *j->run;
	}
	if (j->local)
		return;
	bool active = j->run->state == SFS_RUN_RUNNING;
	if (j->follow) {
		if (active && j->nwaiters > 0 && j->follow_fd < 0 && now >= j->next_poll_ms) {
			struct job *job = push_job(jobs, j, JOB_FOLLOW);
			if (job)
				job->off = j->size;
			j->next_poll_ms = now + 1000; /* don't hammer a failing follow */
		} else if ((!active || j->nwaiters == 0) && j->follow_fd >= 0) {
			stop_follower_locked(j, jobs);
		}
	}
	/* poll strategy, and the remainder of a followed run after its end */
	bool poll = !j->follow && (j->nwaiters > 0 || idle_pass) && active;
	if ((poll || j->final_pending) && now >= j->next_poll_ms) {
		struct job *job = push_job(jobs, j, JOB_READ);
		if (job)
			job->off = j->size;
		j->next_poll_ms =
		    now + (int64_t)(sfs_opt_get_double("journal.poll_interval") * 1000);
	}
}

/* Errors after which fetching a finished run's remainder again is futile:
 * the sandbox or the file is gone, or the provider cannot read it. */
static bool permanent_error(ssize_t n)
{
	return n == -ENOENT || n == -ESRCH || n == -EOPNOTSUPP || n == -EINVAL || n == -EACCES ||
	       n == -EPERM || n == -ENOMEM;
}

/* Applies the results of the unlocked work.  True when a follower it
 * started is not wanted: the caller has it stopped once unlocked (for
 * docker an engine call, for e2b an HTTP exec: never under eng.mu, which
 * every journal read and status of the mount waits for). */
static bool apply_locked(struct job *job)
{
	struct journal *j = job->run->journal;
	switch (job->kind) {
	case JOB_REFRESH:
		if (!j || j->ended)
			break; /* ended meanwhile (journal_end_sandbox): that stays */
		job->run->state = job->state.state;
		job->run->code = job->state.code;
		if (job->run->state != SFS_RUN_RUNNING)
			pthread_cond_broadcast(&eng.ended);
		break;
	case JOB_READ:
		if (!j || j->ended || j->size != job->off)
			break; /* detached, or bytes came another way meanwhile */
		if (job->n > 0) {
			append_locked(j, job->buf, (size_t)job->n);
			j->next_poll_ms = 0; /* more may be waiting */
			j->final_failures = 0;
		} else if (job->n == 0 && j->final_pending) {
			j->ended = true;
		} else if (job->n < 0 && j->final_pending) {
			/* nothing to fetch the rest with, or no hope of it */
			if (!job->sb->provider->ops->journal_read || permanent_error(job->n) ||
			    ++j->final_failures >= FINAL_TRIES) {
				char nm[64]; /* mv may rename it meanwhile */
				sfs_log(SFS_LOG_WARN,
					"%s: run %d: journal ends at %lld bytes: the rest cannot "
					"be fetched (%s)",
					sfs_sb_copy_name(job->sb, nm), job->run->n,
					(long long)j->size, strerror((int)-job->n));
				j->ended = true;
			}
		}
		break;
	case JOB_FOLLOW:
		if (job->fd < 0)
			break;
		if (!j || j->follow_fd >= 0 || j->ended || j->nwaiters == 0) {
			close(job->fd);
			job->fd = -1;
			return true;
		}
		fcntl(job->fd, F_SETFL, fcntl(job->fd, F_GETFL) | O_NONBLOCK);
		j->follow_fd = job->fd;
		j->follower = job->follower;
		eng.followers++;
		break;
	case JOB_UNFOLLOW:
		break;
	}
	return false;
}

struct ended {
	struct sfs_sandbox *sb;
	struct sfs_run *run;
};

static void *engine_main(void *arg)
{
	(void)arg;
	struct ready_list ready = {0};
	struct jobs jobs = {0}, unwanted = {0};
	struct ended ended[64];
	int64_t last_idle = 0;
	struct pollfd *pfd = NULL;
	size_t pfd_cap = 0;
	for (;;) {
		/* the poll set: inotify, the wake eventfd, every follower */
		pthread_mutex_lock(&eng.mu);
		size_t nfd = 2;
		for (struct journal *j = eng.journals; j; j = j->next)
			nfd += j->follow_fd >= 0;
		if (nfd > pfd_cap) {
			struct pollfd *grown = realloc(pfd, nfd * sizeof(*grown));
			if (grown) {
				pfd = grown;
				pfd_cap = nfd;
			}
		}
		if (nfd > pfd_cap)
			nfd = pfd_cap > 2 ? pfd_cap : 2;
		if (!pfd) {
			pthread_mutex_unlock(&eng.mu);
			usleep(TICK_MS * 1000);
			continue;
		}
		pfd[0] = (struct pollfd){.fd = eng.inotify_fd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = eng.wake_fd, .events = POLLIN};
		size_t k = 2;
		for (struct journal *j = eng.journals; j && k < nfd; j = j->next)
			if (j->follow_fd >= 0)
				pfd[k++] = (struct pollfd){.fd = j->follow_fd, .events = POLLIN};
		pthread_mutex_unlock(&eng.mu);

		poll(pfd, k, TICK_MS);
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
		int64_t now = now_ms();
		bool idle_pass = now - last_idle >= REFRESH_IDLE_MS;
		if (idle_pass)
			last_idle = now;

		/* 1. under the lock: follower bytes, and what to ask providers */
		pthread_mutex_lock(&eng.mu);
		if (eng.stop) {
			pthread_mutex_unlock(&eng.mu);
			break;
		}
		for (struct journal *j = eng.journals; j; j = j->next) {
			if (j->follow_fd >= 0 && !drain_follower_locked(j))
				stop_follower_locked(j, &jobs);
			plan_locked(j, idle_pass, now, &jobs);
		}
		pthread_mutex_unlock(&eng.mu);

		/* 2. provider calls, unlocked: they may block on the network */
		for (size_t i = 0; i < jobs.n; i++)
			run_job(&jobs.v[i]);
		if (idle_pass)
			for (size_t i = 0; i < sfs_nproviders; i++)
				if (sfs_providers[i]->ops->tick)
					sfs_providers[i]->ops->tick();

		/* 3. under the lock: apply, settle, collect answerable readers */
		size_t nended = 0;
		pthread_mutex_lock(&eng.mu);
		for (size_t i = 0; i < jobs.n; i++) {
			if (apply_locked(&jobs.v[i])) {
				struct job *u = push_job_copy(&unwanted, &jobs.v[i]);
				if (u)
					u->kind = JOB_UNFOLLOW;
				else /* no memory for the list: stopped here */
					jobs.v[i].sb->provider->ops->journal_unfollow(
					    jobs.v[i].sb, jobs.v[i].follower);
			}
			free(jobs.v[i].buf);
		}
		jobs.n = 0;
		for (struct journal **pj = &eng.journals; *pj;) {
			struct journal *j = *pj;
			settle_locked(j);
			if (j->ended && j->follow_fd >= 0)
				stop_follower_locked(j, &jobs);
			if (j->ended && !j->end_reported && nended < 64) {
				j->end_reported = true;
				ended[nended].sb = j->sb;
				ended[nended].run = j->run;
				nended++;
			}
			collect_locked(j, &ready);
			set_watch_locked(j);
			if (!quiescent_locked(j)) {
				pj = &j->next;
				continue;
			}
			*pj = j->next;
			j->idle = true;
			j->next = eng.idle;
			eng.idle = j;
		}
		pthread_mutex_unlock(&eng.mu);
		/* followers stopped in step 3, and those started but no longer
		 * wanted, are reaped now, unlocked */
		for (size_t i = 0; i < jobs.n; i++)
			run_job(&jobs.v[i]);
		jobs.n = 0;
		for (size_t i = 0; i < unwanted.n; i++)
			run_job(&unwanted.v[i]);
		unwanted.n = 0;

		/* the end hooks first: a reader that `wait`ed for the run finds
		 * the workspace caches the run made stale already dropped.
		 * Sandboxes are never freed while the daemon runs (graveyard), so
		 * these pointers stay valid unlocked. */
		for (size_t i = 0; i < nended && eng.hooks.run_ended; i++)
			eng.hooks.run_ended(ended[i].sb, ended[i].run);
		deliver_all(&ready);
	}
	free(pfd);
	free(jobs.v);
	free(unwanted.v);
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
	if (j->mirror_fd >= 0)
		close(j->mirror_fd);
	j->mirror_fd = -1;
	j->run->journal = NULL;
}

void journal_engine_stop(void)
{
	if (!eng.running)
		return;
	pthread_mutex_lock(&eng.mu);
	eng.stop = true;
	pthread_cond_broadcast(&eng.ended);
	pthread_mutex_unlock(&eng.mu);
	journal_poke();
	pthread_join(eng.thread, NULL);
	eng.running = false;

	struct ready_list l = {0};
	struct jobs jobs = {0};
	pthread_mutex_lock(&eng.mu);
	while (eng.idle)
		unidle_locked(eng.idle);
	while (eng.journals) {
		struct journal *j = eng.journals;
		eng.journals = j->next;
		stop_follower_locked(j, &jobs);
		drop_journal_locked(j, &l, -EIO);
		free(j);
	}
	pthread_mutex_unlock(&eng.mu);
	for (size_t i = 0; i < jobs.n; i++)
		run_job(&jobs.v[i]);
	free(jobs.v);
	deliver_all(&l);
	free(l.v);
	close(eng.inotify_fd);
	close(eng.wake_fd);
	eng.inotify_fd = eng.wake_fd = -1;
}

/* RUNDIR/ended: "exit N", "signal N" or "lost", written when the run's
 * sandbox was destroyed under it (journal_end_sandbox). */
static bool read_ended(struct sfs_run *run, struct sfs_run *out)
{
	char path[4300], text[64] = "";
	if (sfs_pathf(path, sizeof(path), "%s/ended", run->dir) < 0)
		return false;
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(text, sizeof(text), f) != NULL;
	fclose(f);
	int n;
	if (ok && sscanf(text, "exit %d", &n) == 1) {
		out->state = SFS_RUN_EXITED;
		out->code = n;
	} else if (ok && sscanf(text, "signal %d", &n) == 1) {
		out->state = SFS_RUN_KILLED;
		out->code = n;
	} else {
		out->state = SFS_RUN_LOST;
	}
	return true;
}

static void write_ended(struct sfs_run *run, enum sfs_run_state state, int code)
{
	char path[4300], text[64];
	if (sfs_pathf(path, sizeof(path), "%s/ended", run->dir) < 0)
		return;
	int len = state == SFS_RUN_EXITED   ? snprintf(text, sizeof(text), "exit %d\n", code)
		  : state == SFS_RUN_KILLED ? snprintf(text, sizeof(text), "signal %d\n", code)
					    : snprintf(text, sizeof(text), "lost\n");
	struct sfs_err err = {0};
	if (sfs_write_file_atomic(path, text, (size_t)len, &err) < 0)
		sfs_log(SFS_LOG_WARN, "run %d: %s", run->n, err.msg);
}

void journal_end_sandbox(struct sfs_sandbox *sb, bool record)
{
	struct ready_list l = {0};
	struct jobs jobs = {0};
	struct final {
		struct sfs_run *run;
		enum sfs_run_state state;
		int code;
	} *finals = NULL;
	size_t nfinals = 0, cap = 0;
	pthread_mutex_lock(&eng.mu);
	unidle_sandbox_locked(sb); /* every run of it is recorded below */
	for (struct journal *j = eng.journals; j; j = j->next) {
		if (j->sb != sb)
			continue;
		stop_follower_locked(j, &jobs);
		if (j->run->state == SFS_RUN_RUNNING)
			j->run->state = SFS_RUN_LOST; /* gone with its sandbox, end unseen */
		pthread_cond_broadcast(&eng.ended);
		j->size = stat_size(j);
		j->ended = true;
		j->final_pending = false;
		/* every reader at once: the bytes there are, then EOF or the
		 * status (one not armed yet is answered by the engine's next pass) */
		collect_locked(j, &l);
		set_watch_locked(j);
		if (record && nfinals == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct final *grown = realloc(finals, ncap * sizeof(*grown));
			if (grown) {
				finals = grown;
				cap = ncap;
			}
		}
		if (record && nfinals < cap && !j->plain)
			finals[nfinals++] = (struct final){j->run, j->run->state, j->run->code};
	}
	pthread_mutex_unlock(&eng.mu);
	for (size_t i = 0; i < jobs.n; i++)
		run_job(&jobs.v[i]);
	free(jobs.v);
	deliver_all(&l);
	free(l.v);
	for (size_t i = 0; i < nfinals; i++)
		write_ended(finals[i].run, finals[i].state, finals[i].code);
	free(finals);
	journal_poke();
}

/* A journal of run, tracked by nobody yet. */
static struct journal *journal_new(struct sfs_sandbox *sb, struct sfs_run *run)
{
	struct journal *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->sb = sb;
	j->run = run;
	j->watch = -1;
	j->mirror_fd = j->follow_fd = -1;
	j->vis_size = -1;
	return j;
}

int journal_attach(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	struct journal *j = journal_new(sb, run);
	if (!j)
		return sfs_errf(err, -ENOMEM, "out of memory");
	j->follow = strcmp(sfs_provider_journal_mode(sb->provider), "follow") == 0;
	j->redact = sb->redact_journal; /* set at create, never changed */
	const struct sfs_provider_ops *ops = sb->provider->ops;
	j->local = ops->journal_local_path &&
		   ops->journal_local_path(sb, run, j->path, sizeof(j->path)) == 0;
	if (!j->local) {
		/* bytes fetched by the follower or by bounded reads land here */
		if (sfs_pathf(j->path, sizeof(j->path), "%s/journal.mirror", run->dir) < 0) {
			free(j); /* nothing else is held yet */
			return sfs_errf(err, -ENAMETOOLONG, "%s/journal.mirror: path too long",
					run->dir);
		}
	}
	/* the first look at the run's state happens here, before readers come;
	 * a run its sandbox's destruction ended says so itself (the provider
	 * has nothing left to ask) */
	struct sfs_run copy = *run;
	bool final = read_ended(run, &copy);
	if (!final)
		ops->run_refresh(sb, &copy, NULL);
	pthread_mutex_lock(&eng.mu);
	run->state = copy.state;
	run->code = copy.code;
	if (run->state != SFS_RUN_RUNNING)
		pthread_cond_broadcast(&eng.ended);
	run->journal = j;
	settle_locked(j);
	if (final) {
		j->ended = true;
		j->final_pending = false;
	}
	j->next = eng.journals;
	eng.journals = j;
	pthread_mutex_unlock(&eng.mu);
	journal_poke();
	return 0;
}

int journal_attach_file(struct sfs_sandbox *sb, struct sfs_run *run, const char *path,
			struct sfs_err *err)
{
	struct journal *j = journal_new(sb, run);
	if (!j)
		return sfs_errf(err, -ENOMEM, "out of memory");
	j->plain = j->local = true;
	j->redact = false; /* its writer redacts each line */
	if (sfs_pathf(j->path, sizeof(j->path), "%s", path) < 0) {
		free(j); /* nothing else is held yet */
		return sfs_errf(err, -ENAMETOOLONG, "%s: path too long", path);
	}
	pthread_mutex_lock(&eng.mu);
	run->state = SFS_RUN_RUNNING;
	run->journal = j;
	j->size = stat_size(j);
	j->next = eng.journals;
	eng.journals = j;
	pthread_mutex_unlock(&eng.mu);
	return 0;
}

int journal_file_rotate(struct sfs_run *run, const char *to)
{
	struct ready_list l = {0};
	int r = 0;
	pthread_mutex_lock(&eng.mu);
	struct journal *j = find_locked(run);
	/* renamed under the lock: no reader sizes the old file and reads the
	 * new one in between */
	if (j && rename(j->path, to) < 0)
		r = -errno;
	if (j && !r) {
		j->rotations++;
		j->size = 0;
		j->size = stat_size(j);
		/* a reader past the new end would wait for bytes that are never
		 * coming at its offset: it gets end-of-file, as a reader of a
		 * truncated file does (tail -f then starts from the top) */
		for (struct journal_waiter *w = j->waiters, *next; w; w = next) {
			next = w->next;
			if (w->kind != JOURNAL_WAIT_BYTES)
				continue;
			if (!w->armed) { /* answered once armed (collect_locked) */
				w->eof = true;
				continue;
			}
			size_t before = l.n;
			push_ready(&l, w, JOURNAL_EOF);
			if (l.n > before)
				unlink_waiter(j, w);
			else
				w->eof = true;
		}
	}
	pthread_mutex_unlock(&eng.mu);
	deliver_all(&l);
	free(l.v);
	return j ? r : -ENOENT;
}

unsigned long journal_file_generation(struct sfs_run *run)
{
	pthread_mutex_lock(&eng.mu);
	unsigned long g = run->journal ? run->journal->rotations : 0;
	pthread_mutex_unlock(&eng.mu);
	return g;
}

void journal_detach_sandbox(struct sfs_sandbox *sb)
{
	struct ready_list l = {0};
	struct jobs jobs = {0};
	pthread_mutex_lock(&eng.mu);
	unidle_sandbox_locked(sb); /* and dropped below */
	for (struct journal **pj = &eng.journals; *pj;) {
		struct journal *j = *pj;
		if (j->sb != sb) {
			pj = &j->next;
			continue;
		}
		*pj = j->next;
		stop_follower_locked(j, &jobs);
		drop_journal_locked(j, &l, -ENOENT);
		free(j);
	}
	pthread_mutex_unlock(&eng.mu);
	for (size_t i = 0; i < jobs.n; i++)
		run_job(&jobs.v[i]);
	free(jobs.v);
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
		size = visible_locked(j);
	}
	pthread_mutex_unlock(&eng.mu);
	return size;
}

/* A redacted read: the bytes at off (at most size, none at or past
 * `visible`) with every secret value masked, decided by a window reaching
 * longest-1 bytes on each side (providers/redact_stream.c). */
static ssize_t read_redacted(int fd, off_t off, char *buf, size_t size, off_t visible)
{
	if (off >= visible)
		return 0;
	size_t want = (off_t)size < visible - off ? size : (size_t)(visible - off);
	size_t l = sfs_redact_longest(), reach = l > 1 ? l - 1 : 0;
	off_t from = off > (off_t)reach ? off - (off_t)reach : 0;
	size_t span = (size_t)(off - from) + want + reach;
	char *win = malloc(span);
	if (!win)
		return -ENOMEM;
	ssize_t n;
	do
		n = pread(fd, win, span, from);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		n = -errno;
	} else if ((size_t)n < (size_t)(off - from) + want) {
		n = -EIO; /* the file shrank: journals only grow */
	} else {
		sfs_redact_mask(win, (size_t)n);
		memcpy(buf, win + (off - from), want);
		n = (ssize_t)want;
	}
	free(win);
	return n;
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
	bool redact = j->redact;
	off_t visible = 0;
	if (redact) {
		j->size = stat_size(j);
		visible = visible_locked(j);
	}
	memcpy(path, j->path, sizeof(path));
	pthread_mutex_unlock(&eng.mu);

	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0;
	if (fd >= 0 && redact) {
		n = read_redacted(fd, off, buf, size, visible);
		close(fd);
	} else if (fd >= 0) {
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

bool journal_wait_end(struct sfs_run *run, int timeout_ms, int poke_ms)
{
	struct timespec limit, now;
	clock_gettime(CLOCK_REALTIME, &limit); /* the condition variable's clock */
	int64_t end_ns = timeout_ms < 0 ? INT64_MAX
					: (int64_t)limit.tv_sec * 1000000000 + limit.tv_nsec +
					      (int64_t)timeout_ms * 1000000;
	if (poke_ms > 0)
		journal_poke();
	pthread_mutex_lock(&eng.mu);
	while (run->state == SFS_RUN_RUNNING && !eng.stop) {
		clock_gettime(CLOCK_REALTIME, &now);
		int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		if (now_ns >= end_ns)
			break;
		int64_t wake_ns = end_ns;
		if (poke_ms > 0 && now_ns + (int64_t)poke_ms * 1000000 < wake_ns)
			wake_ns = now_ns + (int64_t)poke_ms * 1000000;
		if (wake_ns == INT64_MAX) {
			pthread_cond_wait(&eng.ended, &eng.mu);
			continue;
		}
		limit.tv_sec = (time_t)(wake_ns / 1000000000);
		limit.tv_nsec = (long)(wake_ns % 1000000000);
		if (pthread_cond_timedwait(&eng.ended, &eng.mu, &limit) == ETIMEDOUT &&
		    poke_ms > 0) {
			pthread_mutex_unlock(&eng.mu);
			journal_poke();
			pthread_mutex_lock(&eng.mu);
		}
	}
	bool ended = run->state != SFS_RUN_RUNNING;
	pthread_mutex_unlock(&eng.mu);
	return ended;
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
	unidle_locked(j); /* a parked reader is the engine's to answer */
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

size_t journal_engine_active(void)
{
	size_t n = 0;
	pthread_mutex_lock(&eng.mu);
	for (struct journal *j = eng.journals; j; j = j->next)
		n++;
	pthread_mutex_unlock(&eng.mu);
	return n;
}

int journal_followers(void)
{
	pthread_mutex_lock(&eng.mu);
	int n = eng.followers;
	pthread_mutex_unlock(&eng.mu);
	return n;
}
