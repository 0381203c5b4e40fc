#include "audit.h"

#include "../journal/journal.h"
#include "../providers/options.h"
#include "../providers/redact.h"
#include "../providers/strbuf.h"
#include "../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A buffer past this wakes the writer at once rather than at its tick. */
#define AUDIT_WAKE_BYTES (64 * 1024)
#define AUDIT_TICK_MS 100

struct sfs_audit {
	struct sfs_audit *next; /* the writers list, under list_mu */
	/* Lock order: list_mu, then write_mu (the file: writes, rotation),
	 * then mu (the buffer, a leaf held for a memcpy), then the journal
	 * engine's lock (journal_file_rotate). */
	pthread_mutex_t write_mu, mu;
	struct sfs_buf buf; /* lines not yet written, under mu */
	int fd;		    /* under write_mu; -1 until the first write */
	off_t size;	    /* the file's size, under write_mu */
	bool closed;	    /* under write_mu: its state dir is going, write nothing */
	char path[4200];
	struct sfs_run run; /* what SANDBOX/audit is read through */
};

static struct {
	pthread_mutex_t list_mu;
	pthread_cond_t wake;
	struct sfs_audit *writers;
	pthread_t thread;
	bool running, stop;
} aw = {.list_mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static __thread uid_t caller = (uid_t)-1;

bool audit_enabled(void)
{
	return sfs_opt_get_bool("audit");
}

void audit_set_caller(uid_t uid)
{
	caller = uid;
}

uid_t audit_caller(void)
{
	return caller;
}

/* sb's writer: set once by audit_start, possibly while the record is
 * already listed, so read atomically. */
static struct sfs_audit *writer(struct sfs_sandbox *sb)
{
	return __atomic_load_n(&sb->audit, __ATOMIC_ACQUIRE);
}

int audit_start(struct sfs_sandbox *sb)
{
	if (writer(sb) || !audit_enabled())
		return 0;
	struct sfs_audit *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->write_mu, NULL);
	pthread_mutex_init(&a->mu, NULL);
	a->fd = -1;
	if (sfs_pathf(a->path, sizeof(a->path), "%s/audit", sb->statedir) < 0) {
		pthread_mutex_destroy(&a->write_mu);
		pthread_mutex_destroy(&a->mu);
		free(a);
		return -ENAMETOOLONG;
	}
	struct stat st;
	a->size = stat(a->path, &st) == 0 ? st.st_size : 0;
	a->run.n = 0; /* not a run of the sandbox: never in sb->runs */
	a->run.dir = sb->statedir;
	int r = journal_attach_file(sb, &a->run, a->path, NULL);
	if (r) {
		pthread_mutex_destroy(&a->write_mu);
		pthread_mutex_destroy(&a->mu);
		free(a);
		return r;
	}
	/* published whole: readers of a listed record look without a lock */
	__atomic_store_n(&sb->audit, a, __ATOMIC_RELEASE);
	pthread_mutex_lock(&aw.list_mu);
	a->next = aw.writers;
	aw.writers = a;
	pthread_mutex_unlock(&aw.list_mu);
	return 0;
}

struct sfs_run *audit_run(struct sfs_sandbox *sb)
{
	struct sfs_audit *a = writer(sb);
	return a ? &a->run : NULL;
}

/* At audit.max_size the file becomes audit.1 (the older one goes) and a new
 * one starts; its readers start again at 0 (journal_file_rotate).
 * Holds write_mu. */
static void rotate_held(struct sfs_audit *a)
{
	char old[4300];
	if (sfs_pathf(old, sizeof(old), "%s.1", a->path) < 0)
		return; /* a->path fits 4200 bytes, old 4300: never */
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	int r = journal_file_rotate(&a->run, old);
	if (r)
		sfs_log(SFS_LOG_WARN, "audit: %s: %s", a->path, strerror(-r));
	a->size = 0;
}

/* Writes what a's buffer holds.  Holds write_mu. */
static void flush_held(struct sfs_audit *a)
{
	pthread_mutex_lock(&a->mu);
	struct sfs_buf b = a->buf;
	a->buf = (struct sfs_buf){0};
	pthread_mutex_unlock(&a->mu);
	if (!b.len || a->closed) {
		sfs_buf_free(&b);
		return;
	}
	if (a->fd < 0)
		a->fd = open(a->path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (a->fd < 0) {
		/* ENOENT: the sandbox was destroyed (or forgotten) and its state
		 * directory removed after its last lines were buffered */
		sfs_log(errno == ENOENT ? SFS_LOG_DEBUG : SFS_LOG_WARN,
			"audit: %s: %s (%zu bytes lost)", a->path, strerror(errno), b.len);
		sfs_buf_free(&b);
		return;
	}
	for (size_t done = 0; done < b.len;) {
		ssize_t w = write(a->fd, b.buf + done, b.len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			sfs_log(SFS_LOG_WARN, "audit: %s: %s (%zu bytes lost)", a->path,
				w < 0 ? strerror(errno) : "short write", b.len - done);
			break;
		}
		done += (size_t)w;
		a->size += w;
	}
	sfs_buf_free(&b);
	if (a->size >= (off_t)sfs_opt_get_double("audit.max_size"))
		rotate_held(a);
}

void audit_close(struct sfs_sandbox *sb)
{
	struct sfs_audit *a = writer(sb);
	if (!a)
		return;
	pthread_mutex_lock(&a->write_mu);
	flush_held(a); /* what was said up to now, into the file about to go */
	a->closed = true;
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	pthread_mutex_unlock(&a->write_mu);
}

void audit_free(struct sfs_sandbox *sb)
{
	struct sfs_audit *a = writer(sb);
	if (!a)
		return;
	pthread_mutex_lock(&aw.list_mu);
	for (struct sfs_audit **p = &aw.writers; *p; p = &(*p)->next)
		if (*p == a) {
			*p = a->next;
			break;
		}
	pthread_mutex_unlock(&aw.list_mu);
	pthread_mutex_lock(&a->write_mu);
	flush_held(a);
	pthread_mutex_unlock(&a->write_mu);
	if (a->fd >= 0)
		close(a->fd);
	sfs_buf_free(&a->buf);
	pthread_mutex_destroy(&a->write_mu);
	pthread_mutex_destroy(&a->mu);
	/* the journal engine is stopped, or has dropped sb's journals */
	free(a);
	sb->audit = NULL;
}

/* Formats a line and appends it to sb's buffer: the lock is held for the
 * copy only. */
static void append(struct sfs_sandbox *sb, const char *op, const char *path, int err,
		   const char *to, const char *detail)
{
	struct sfs_audit *a = sb ? writer(sb) : NULL;
	if (!a)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct sfs_buf line = {0};
	int r = audit_format(&line, &ts, caller, op, path, err, to, detail);
	bool wake = false;
	if (!r) {
		pthread_mutex_lock(&a->mu);
		r = sfs_buf_add(&a->buf, line.buf, line.len);
		wake = a->buf.len >= AUDIT_WAKE_BYTES;
		pthread_mutex_unlock(&a->mu);
	}
	if (r)
		sfs_log(SFS_LOG_WARN, "audit: out of memory: a line is lost");
	if (wake)
		pthread_cond_signal(&aw.wake);
	sfs_buf_free(&line);
}

void audit_line(struct sfs_sandbox *sb, const char *op, const char *path, int err,
		const char *detail)
{
	append(sb, op, path, err, NULL, detail);
}

void audit_change(struct sfs_sandbox *sb, const char *op, const char *path, int err, const char *to)
{
	append(sb, op, path, err, to, NULL);
}

static void flush_all(void)
{
	/* list_mu all along: audit_free waits for the pass to finish */
	pthread_mutex_lock(&aw.list_mu);
	for (struct sfs_audit *a = aw.writers; a; a = a->next) {
		pthread_mutex_lock(&a->write_mu);
		flush_held(a);
		pthread_mutex_unlock(&a->write_mu);
	}
	pthread_mutex_unlock(&aw.list_mu);
}

static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&aw.list_mu);
	while (!aw.stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += AUDIT_TICK_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&aw.wake, &aw.list_mu, &until);
		pthread_mutex_unlock(&aw.list_mu);
		flush_all();
		pthread_mutex_lock(&aw.list_mu);
	}
	pthread_mutex_unlock(&aw.list_mu);
	flush_all();
	return NULL;
}

int audit_thread_start(struct sfs_err *err)
{
	if (!audit_enabled())
		return 0;
	aw.stop = false;
	int r = pthread_create(&aw.thread, NULL, writer_main, NULL);
	if (r)
		return sfs_errf(err, -r, "audit thread: %s", strerror(r));
	aw.running = true;
	return 0;
}

void audit_thread_stop(void)
{
	if (!aw.running)
		return;
	pthread_mutex_lock(&aw.list_mu);
	aw.stop = true;
	pthread_cond_signal(&aw.wake);
	pthread_mutex_unlock(&aw.list_mu);
	pthread_join(aw.thread, NULL);
	aw.running = false;
}
