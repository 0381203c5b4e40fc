/*
 * What differs between a snapshot's tree and a live directory, as a list of
 * paths, without writing anything: each directory's entries are matched by
 * name against the snapshot's (its manifest: manifest.c), a file's blob id
 * comes from the stat cache or from hashing it (pread through
 * providers/untrusted: nothing stored), and a directory that is new, gone or of another kind is one
 * path.  The diff is then made of just those paths (diff.c), which is what
 * keeps `cat snapshots/ID/diff` close to `git diff`: no tree is built or
 * written for the unchanged rest.
 *
 * Most of the walk is one lstat per file, which git's own diff spreads over
 * threads (preload-index); so does this walk on a tree of more than
 * WALK_MIN_PER_THREAD entries per thread: directories are jobs on one
 * stack that up to WALK_THREADS threads (the caller is one) take from.  A
 * job holds its directory's fd; past WALK_MAX_JOBS queued a directory is
 * walked where it was found, which bounds the fds held.  During the walk
 * the stat cache is only read (each thread has its own cursor); the blob
 * ids of files it had to hash and found unchanged are noted in it after the
 * threads are joined.  A directory read and found holding exactly the
 * snapshot's names is noted too (cache.c), and while the cache vouches for
 * it, it is not read again: its names are the manifest's, each one stat'd.
 */
#include "internal.h"

#include "../../providers/untrusted/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WALK_THREADS 4
#define WALK_MIN_PER_THREAD 1000
#define WALK_MAX_JOBS 64

struct job {
	int fd; /* the directory, owned by the job */
	uint32_t dir;
	char *path;
	struct stat st; /* the directory's, as its parent's walk saw it */
};

/* What the threads of one walk share. */
struct walk {
	const struct manifest *m;
	const struct scache *cache;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *jobs; /* a stack */
	size_t njobs, cap;
	int busy;  /* threads inside a job */
	int error; /* the first failure, which stops every thread */
	struct sfs_err err;
	bool threaded;
};

/* A file hashed during the walk, to note in the stat cache after it. */
struct note {
	char *path;
	struct stat st;
	git_oid oid;
};

/* One thread's walk. */
struct cmp {
	struct walk *w;
	struct paths out;
	struct note *notes;
	size_t nnotes, capnotes;
	size_t next; /* its stat cache cursor */
	struct sfs_err err;
	char path[8192]; /* the current path, grown and cut as the walk goes */
	size_t plen;
};

int paths_add(struct paths *p, const char *path)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		char **v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	if (!(p->v[p->n] = strdup(path)))
		return -ENOMEM;
	p->n++;
	return 0;
}

void paths_free(struct paths *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

int rec_hash(struct scache *cache, int dirfd, const char *name, const char *rel,
	     const struct stat *st, git_oid *oid)
{
	if (S_ISLNK(st->st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(dirfd, name, target, sizeof(target));
		if (n < 0)
			return -errno;
		return git_odb_hash(oid, target, (size_t)n, GIT_OBJECT_BLOB) < 0 ? -EIO : 0;
	}
	if (cache && scache_hit(cache, rel, st, oid))
		return 0;
	struct stat now;
	int fd = rec_open(dirfd, name, &now);
	if (fd < 0)
		return fd;
	unsigned char raw[20];
	int r = untrusted_blob_sha1(fd, (uint64_t)now.st_size, raw);
	close(fd);
	if (r)
		return r;
	git_oid_fromraw(oid, raw);
	if (cache)
		scache_note(cache, rel, &now, oid); /* the stat of what was read */
	return 0;
}

/* Appends /name to c->path; returns the old length to cut back to, or
 * (size_t)-1 when the path would not fit. */
static size_t push(struct cmp *c, const char *name)
{
	size_t old = c->plen, n = strlen(name);
	if (old + n + 2 > sizeof(c->path))
		return (size_t)-1;
	if (old)
		c->path[c->plen++] = '/';
	memcpy(c->path + c->plen, name, n + 1);
	c->plen += n;
	return old;
}

static void pop(struct cmp *c, size_t old)
{
	c->plen = old;
	c->path[old] = '\0';
}

/* The blob id of the regular file or symlink name, for comparing: the
 * cache's when it vouches, else hashed (*hashed). */
static int file_oid(struct cmp *c, int dirfd, const char *name, const char *rel,
		    const struct stat *st, git_oid *oid, bool *hashed)
{
	*hashed = false;
	if (S_ISREG(st->st_mode) && c->w->cache &&
	    scache_hit_at(c->w->cache, rel, st, oid, &c->next))
		return 0;
	*hashed = true;
	return rec_hash(NULL, dirfd, name, rel, st, oid);
}

/* Remembers a hashed file's blob id for the stat cache, which is told only
 * ids the store has: a file equal to the snapshot's (a changed file's blob
 * is written by no one: diff.c keeps its objects in memory); or a
 * directory's names id (no object: gc.c knows). */
static void add_note(struct cmp *c, const char *rel, const struct stat *st, const git_oid *oid)
{
	if (!(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) || !c->w->cache)
		return;
	if (c->nnotes == c->capnotes) {
		size_t cap = c->capnotes ? c->capnotes * 2 : 16;
		struct note *v = realloc(c->notes, cap * sizeof(*v));
		if (!v)
			return; /* only a speed-up lost */
		c->notes = v;
		c->capnotes = cap;
	}
	struct note *n = &c->notes[c->nnotes];
	if ((n->path = strdup(rel))) {
		n->st = *st;
		n->oid = *oid;
		c->nnotes++;
	}
}

static int cmp_dir(struct cmp *c, int dirfd, uint32_t dir, const struct stat *st);

/* Walks the directory name (a tree in the snapshot too) now, or queues it
 * for any thread when the walk is threaded and the stack has room. */
static int cmp_subdir(struct cmp *c, int dirfd, const char *name, const char *rel,
		      const struct mf_ent *e)
{
	int fd = e->sub < 0 ? -1 : untrusted_open_dir(dirfd, name);
	/* the stat of what was opened (not of the name a moment before): what
	 * the stat cache may say of this directory must be what is read */
	struct stat dst;
	if (fd >= 0 && fstat(fd, &dst) < 0) {
		close(fd);
		fd = -1;
	}
	const struct stat *st = &dst;
	if (fd < 0)
		return paths_add(&c->out, rel); /* let the diff writer say what it is */
	struct walk *w = c->w;
	if (w->threaded) {
		pthread_mutex_lock(&w->mu);
		bool room = w->njobs < WALK_MAX_JOBS;
		if (room && w->njobs == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 16;
			struct job *v = realloc(w->jobs, cap * sizeof(*v));
			if (v) {
				w->jobs = v;
				w->cap = cap;
			}
			room = v != NULL;
		}
		char *path = room ? strdup(rel) : NULL;
		if (path) {
			w->jobs[w->njobs++] = (struct job){fd, (uint32_t)e->sub, path, *st};
			pthread_cond_signal(&w->cv);
		}
		pthread_mutex_unlock(&w->mu);
		if (path)
			return 0;
	}
	int r = cmp_dir(c, fd, (uint32_t)e->sub, st);
	close(fd);
	return r;
}

static int cmp_entry(struct cmp *c, int dirfd, const char *name, const char *rel,
		     const struct mf_ent *e)
{
	struct stat st;
	git_filemode_t fm = 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		fm = rec_filemode(&st);
	if (!fm) /* gone, or a special file (never recorded) */
		return e ? paths_add(&c->out, rel) : 0;
	if (!e || e->mode != fm)
		return paths_add(&c->out, rel);
	if (fm == GIT_FILEMODE_TREE)
		return cmp_subdir(c, dirfd, name, rel, e);
	git_oid oid;
	bool hashed;
	if (file_oid(c, dirfd, name, rel, &st, &oid, &hashed) || !git_oid_equal(&oid, &e->oid))
		return paths_add(&c->out, rel);
	if (hashed)
		add_note(c, rel, &st, &oid);
	return 0;
}

static int walk_error(struct cmp *c, int r)
{
	if (r == -ENOMEM || r == -ENAMETOOLONG)
		return sfs_errf(&c->err, r,
				r == -ENOMEM ? "out of memory" : "diff: a path is too long");
	return r;
}

/* A directory the stat cache vouches holds the snapshot's names: each is
 * looked at (a stat), none is looked for (no readdir, no search). */
static int cmp_listed(struct cmp *c, int dirfd, uint32_t dir)
{
	const struct manifest *m = c->w->m;
	const struct mf_dir *md = &m->dirs[dir];
	int r = 0;
	for (size_t i = md->first; !r && i < (size_t)md->first + md->n; i++) {
		size_t old = push(c, mf_name(m, &m->ents[i]));
		if (old == (size_t)-1)
			return walk_error(c, -ENAMETOOLONG);
		r = cmp_entry(c, dirfd, mf_name(m, &m->ents[i]), c->path, &m->ents[i]);
		pop(c, old);
	}
	return walk_error(c, r);
}

static int cmp_dir(struct cmp *c, int dirfd, uint32_t dir, const struct stat *st)
{
	const struct manifest *m = c->w->m;
	git_oid seen;
	if (c->w->cache && scache_hit_at(c->w->cache, c->path, st, &seen, &c->next) &&
	    git_oid_equal(&seen, &m->dirs[dir].names))
		return cmp_listed(c, dirfd, dir);
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return sfs_errf(&c->err, -errno, "diff: open %s: %s", c->plen ? c->path : ".",
				strerror(errno));
	}
	size_t n = m->dirs[dir].n, found = 0, extra = 0;
	int r = 0;
	struct dirent *de;
	while (!r && (de = readdir(d))) {
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || rec_ignored(name))
			continue;
		const struct mf_ent *e = mf_find(m, dir, name);
		found += e != NULL;
		extra += e == NULL;
		size_t old = push(c, name);
		if (old == (size_t)-1) {
			r = -ENAMETOOLONG;
			break;
		}
		r = cmp_entry(c, dirfd, name, c->path, e);
		pop(c, old);
	}
	/* the tree's entries the directory lacks (special files that replaced
	 * one were listed above) */
	for (size_t i = 0; !r && found < n && i < n; i++) {
		const char *name = mf_name(m, &m->ents[m->dirs[dir].first + i]);
		struct stat st;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
			continue;
		size_t old = push(c, name);
		r = old == (size_t)-1 ? -ENAMETOOLONG : paths_add(&c->out, c->path);
		if (old != (size_t)-1)
			pop(c, old);
	}
	closedir(d);
	/* exactly the snapshot's names (as of st: read after it): noted, unless
	 * changed too recently to trust (scache_note's racy rule) */
	if (!r && !extra && found == n)
		add_note(c, c->path, st, &m->dirs[dir].names);
	return walk_error(c, r);
}

/* Takes jobs until there are none and no thread is in one (which could
 * queue more), or until one failed. */
static void *worker(void *arg)
{
	struct cmp *c = arg;
	struct walk *w = c->w;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		if (w->error || (!w->njobs && !w->busy))
			break;
		if (!w->njobs) {
			pthread_cond_wait(&w->cv, &w->mu);
			continue;
		}
		struct job j = w->jobs[--w->njobs];
		w->busy++;
		pthread_mutex_unlock(&w->mu);
		size_t n = strlen(j.path);
		int r = n < sizeof(c->path) ? 0 : -ENAMETOOLONG;
		if (!r) {
			memcpy(c->path, j.path, n + 1);
			c->plen = n;
			r = cmp_dir(c, j.fd, j.dir, &j.st);
		}
		close(j.fd);
		free(j.path);
		pthread_mutex_lock(&w->mu);
		w->busy--;
		if (r && !w->error) {
			w->error = r;
			w->err = c->err;
		}
		if (w->error || (!w->njobs && !w->busy))
			pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Hands what one thread found to the caller: its paths, and its notes
 * into the stat cache.  -ENOMEM or 0. */
static int gather(struct cmp *c, struct scache *cache, struct paths *out)
{
	int r = 0;
	for (size_t i = 0; i < c->out.n; i++) {
		if (!r && paths_add(out, c->out.v[i]))
			r = -ENOMEM;
	}
	paths_free(&c->out);
	for (size_t i = 0; i < c->nnotes; i++) {
		scache_note(cache, c->notes[i].path, &c->notes[i].st, &c->notes[i].oid);
		free(c->notes[i].path);
	}
	free(c->notes);
	return r;
}

int cmp_tree(const struct manifest *m, int rootfd, struct scache *cache, struct paths *out,
	     struct sfs_err *err)
{
	size_t want = 1 + m->nents / WALK_MIN_PER_THREAD;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (want > (size_t)(cpus > 0 ? cpus : 1))
		want = (size_t)(cpus > 0 ? cpus : 1);
	if (want > WALK_THREADS)
		want = WALK_THREADS;
	struct walk w = {.m = m, .cache = cache, .threaded = want > 1};
	/* the per-thread walks: their path buffers are not on a worker's stack */
	struct cmp *c = calloc(want, sizeof(*c));
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat rst;
	if (fd >= 0 && fstat(fd, &rst) < 0) {
		int e = errno;
		close(fd);
		fd = -1;
		errno = e;
	}
	char *root = strdup("");
	w.jobs = malloc(sizeof(*w.jobs));
	if (!c || fd < 0 || !root || !w.jobs) {
		int e = fd < 0 ? -errno : -ENOMEM;
		if (fd >= 0)
			close(fd);
		free(c);
		free(root);
		free(w.jobs);
		return e == -ENOMEM ? sfs_errf(err, e, "out of memory")
				    : sfs_errf(err, e, "diff: open .: %s", strerror(-e));
	}
	w.cap = 1;
	w.jobs[w.njobs++] = (struct job){fd, 0, root, rst};
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	pthread_t tid[WALK_THREADS];
	size_t started = 0;
	for (size_t i = 0; i < want; i++)
		c[i].w = &w;
	for (size_t i = 1; i < want; i++) {
		if (pthread_create(&tid[i], NULL, worker, &c[i]) != 0)
			break; /* fewer threads: the same walk */
		started = i;
	}
	worker(&c[0]);
	for (size_t i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	/* on a failure, the jobs no thread took */
	for (size_t i = 0; i < w.njobs; i++) {
		close(w.jobs[i].fd);
		free(w.jobs[i].path);
	}
	int r = w.error;
	if (r && err)
		*err = w.err;
	for (size_t i = 0; i < want; i++)
		if (gather(&c[i], cache, out) && !r)
			r = sfs_errf(err, -ENOMEM, "out of memory");
	free(w.jobs);
	free(c);
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cv);
	return r;
}
