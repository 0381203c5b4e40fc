#include "secrets.h"
#include "audit.h"
#include "tree_internal.h"

#include "../providers/redact.h"
#include "../providers/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool ctl_env_name_ok(const char *k)
{
	if (!k || !((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
		return false;
	for (k++; *k; k++)
		if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
		      (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

int secret_ref_check(const char *name, const char *ref, struct sfs_err *err)
{
	if (!ctl_env_name_ok(name))
		return sfs_errf(err, -EINVAL,
				"bad secret name \"%s\" (an environment variable name: A-Z a-z "
				"0-9 _, not starting with a digit)",
				name);
	if (!strncmp(ref, "env:", 4)) {
		if (!ctl_env_name_ok(ref + 4))
			return sfs_errf(err, -EINVAL,
					"the secret %s: bad variable name \"%s\" after env:", name,
					ref + 4);
		return 0;
	}
	if (!strncmp(ref, "file:", 5)) {
		if (ref[5] != '/')
			return sfs_errf(err, -EINVAL,
					"the secret %s: file:%s is not an absolute path (the "
					"daemon's working directory is /)",
					name, ref + 5);
		return 0;
	}
	return sfs_errf(err, -EINVAL,
			"the secret %s: its source is env:VAR or file:PATH, not \"%s\"", name, ref);
}

/* Whom a secret file (and every directory and symlink on its path) may
 * belong to: the ctl writer, sandboxfs's user, or root.  Anything else is
 * another party's word: a user who planted /tmp/x, or a sandbox whose
 * workspace the path goes through (its run could put a symlink to
 * /etc/shadow there, or a file saying "running", which would then be
 * redacted from every status until restart). */
static bool trusted_owner(uid_t uid)
{
	uid_t caller = audit_caller();
	return uid == 0 || uid == geteuid() || (caller != (uid_t)-1 && uid == caller);
}

/* Checks the path as written: each directory on it trusted and not
 * writable by others (a sticky one, /tmp, may be: nobody else can replace
 * an entry there), each symlink on it trusted.  0 or -EPERM with why. */
static int path_trusted(const char *name, const char *path, struct sfs_err *err)
{
	char pre[4096];
	size_t n = strlen(path);
	if (n >= sizeof(pre))
		return sfs_errf(err, -ENAMETOOLONG, "the secret %s: file:%.64s...: path too long",
				name, path);
	for (size_t i = 1; i <= n; i++) {
		if (i < n && path[i] != '/')
			continue;
		memcpy(pre, path, i);
		pre[i] = '\0';
		struct stat l, st;
		if (lstat(pre, &l) < 0)
			return 0; /* open() says what is missing */
		if (S_ISLNK(l.st_mode) && !trusted_owner(l.st_uid))
			return sfs_errf(
			    err, -EPERM,
			    "the secret %s: file:%s goes through the symlink %s of uid %u, "
			    "who could point it anywhere",
			    name, path, pre, (unsigned)l.st_uid);
		if (i == n || stat(pre, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (!trusted_owner(st.st_uid) ||
		    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)))
			return sfs_errf(
			    err, -EPERM,
			    "the secret %s: file:%s is in %s (uid %u, mode %04o), which "
			    "someone else may change",
			    name, path, pre, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
	return 0;
}

/* The file's bytes, at most SECRET_MAX + 1 of them, into b. */
static int read_file(const char *name, const char *path, struct sfs_buf *b, struct sfs_err *err)
{
	/* O_NONBLOCK: a FIFO planted at PATH must not hang the daemon */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		return sfs_errf(err, e == ENOENT ? -ENOENT : -e, "the secret %s: file:%s: %s", name,
				path, strerror(e));
	}
	struct stat st;
	int r = 0;
	struct stat mnt;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		r = sfs_errf(err, -EINVAL, "the secret %s: file:%s is not a regular file", name,
			     path);
	/* a file of sandboxfs's own mount is served by this daemon: a run's
	 * wait or a journal read would park this thread (and with enough of
	 * them every FUSE thread) until it ends; refused, wherever the path
	 * led (symlinks, bind mounts).  Before the mount is up (a restart
	 * reading its secrets again) sfs_mount_dir is the host's directory
	 * under it, and a file beside it is any host file. */
	else if (sfs_mount_dir && __atomic_load_n(&sfs_mount_live, __ATOMIC_ACQUIRE) &&
		 stat(sfs_mount_dir, &mnt) == 0 && mnt.st_dev == st.st_dev)
		r = sfs_errf(err, -EINVAL,
			     "the secret %s: file:%s is a file of the sandboxfs mount itself (%s); "
			     "a secret is read from a host file",
			     name, path, sfs_mount_dir);
	else if (!trusted_owner(st.st_uid))
		r = sfs_errf(err, -EPERM,
			     "the secret %s: file:%s belongs to uid %u; a secret file must be "
			     "yours, sandboxfs's user's or root's",
			     name, path, (unsigned)st.st_uid);
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		r = sfs_errf(err, -EPERM,
			     "the secret %s: file:%s may be written by others (mode %04o); `chmod "
			     "go-w` it",
			     name, path, (unsigned)(st.st_mode & 07777));
	else
		r = path_trusted(name, path, err);
	char chunk[8192];
	while (!r && b->len <= SECRET_MAX) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = sfs_errf(err, -errno, "the secret %s: file:%s: %s", name, path,
				     strerror(errno));
		else if (n == 0)
			break;
		else if (sfs_buf_add(b, chunk, (size_t)n))
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	close(fd);
	explicit_bzero(chunk, sizeof(chunk));
	return r;
}

int secret_read(const char *name, const char *ref, char **val, struct sfs_err *err)
{
	*val = NULL;
	int r = secret_ref_check(name, ref, err);
	if (r)
		return r;
	struct sfs_buf b = {0};
	if (!strncmp(ref, "env:", 4)) {
		const char *v = getenv(ref + 4);
		if (!v)
			return sfs_errf(err, -ENOENT,
					"the secret %s: env:%s is not set in the daemon's "
					"environment",
					name, ref + 4);
		if (sfs_buf_adds(&b, v))
			return sfs_errf(err, -ENOMEM, "out of memory");
	} else {
		r = read_file(name, ref + 5, &b, err);
		/* one trailing newline is how `echo value > file` ends */
		if (!r && b.len && b.buf[b.len - 1] == '\n')
			b.len--;
		if (!r && b.len && b.buf[b.len - 1] == '\r')
			b.len--;
	}
	if (!r && b.len > SECRET_MAX)
		r = sfs_errf(err, -EFBIG, "the secret %s: %s holds more than %d bytes", name, ref,
			     SECRET_MAX);
	else if (!r && memchr(b.buf ? b.buf : "", '\0', b.len))
		r = sfs_errf(err, -EINVAL,
			     "the secret %s: %s holds a NUL byte (an environment value "
			     "cannot)",
			     name, ref);
	else if (!r && b.len < SECRET_MIN)
		r = sfs_errf(err, -EINVAL,
			     "the secret %s: %s holds %zu bytes, fewer than %d (too short "
			     "to hide: it would be redacted inside ordinary text)",
			     name, ref, b.len, SECRET_MIN);
	char *v = NULL;
	if (!r && !(v = strndup(b.buf, b.len)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (b.buf)
		explicit_bzero(b.buf, b.len);
	sfs_buf_free(&b);
	/* registered before anything can print it */
	if (!r && sfs_redact_add_secret(v)) {
		explicit_bzero(v, strlen(v));
		free(v);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (!r)
		*val = v;
	return r;
}

static void free_values(struct sfs_kvlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].val)
			explicit_bzero(l->v[i].val, strlen(l->v[i].val));
	sfs_kv_free(l);
}

/* Reads every NAME=REF of refs; NAME=(empty) is a removal, read as nothing. */
static int read_all(const struct sfs_kvlist *refs, struct sfs_kvlist *vals, struct sfs_err *err)
{
	int r = 0;
	for (size_t i = 0; !r && i < refs->n; i++) {
		if (!refs->v[i].val[0])
			continue;
		char *v = NULL;
		r = secret_read(refs->v[i].key, refs->v[i].val, &v, err);
		if (!r && sfs_kv_set(vals, refs->v[i].key, v))
			r = sfs_errf(err, -ENOMEM, "out of memory");
		if (v) {
			explicit_bzero(v, strlen(v));
			free(v);
		}
	}
	return r;
}

int secrets_from_opts(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	struct sfs_kvlist refs = {0};
	int r = 0;
	for (size_t i = 0; !r && i < opts->n; i++) {
		const char *k = opts->v[i].key;
		if (strncmp(k, "secret.", 7) != 0)
			continue;
		r = secret_ref_check(k + 7, opts->v[i].val, err);
		if (!r && sfs_kv_set(&refs, k + 7, opts->v[i].val))
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	struct sfs_kvlist vals = {0};
	if (!r)
		r = read_all(&refs, &vals, err);
	if (r) {
		sfs_kv_free(&refs);
		free_values(&vals);
		return r;
	}
	/* the sandbox is already listed (reserved): status may be reading it */
	pthread_mutex_lock(&sfs_records_mu);
	sb->secrets = refs;
	sb->secret_vals = vals;
	pthread_mutex_unlock(&sfs_records_mu);
	return 0;
}

void secrets_load(struct sfs_sandbox *sb)
{
	for (size_t i = 0; i < sb->secrets.n; i++) {
		struct sfs_err err = {0};
		char *v;
		if (secret_read(sb->secrets.v[i].key, sb->secrets.v[i].val, &v, &err) == 0) {
			int r = sfs_kv_set(&sb->secret_vals, sb->secrets.v[i].key, v);
			explicit_bzero(v, strlen(v));
			free(v);
			if (!r)
				continue;
			sfs_errf(&err, r, "the secret %s: out of memory", sb->secrets.v[i].key);
		}
		/* runs fail and say so until `secret NAME=...` is written again */
		sfs_log(SFS_LOG_ERR, "%s: %s", sb->name, err.msg);
		sfs_sb_set_error(sb, err.msg);
	}
}

/* sb's references and values trade places with *refs and *vals. */
static void swap_locked(struct sfs_sandbox *sb, struct sfs_kvlist *refs, struct sfs_kvlist *vals)
{
	struct sfs_kvlist t = sb->secrets;
	sb->secrets = *refs;
	*refs = t;
	t = sb->secret_vals;
	sb->secret_vals = *vals;
	*vals = t;
}

int secrets_set(struct sfs_sandbox *sb, const struct sfs_kvlist *changes, struct sfs_err *err)
{
	int r = sfs_provider_require(sb->provider, SFS_CAP_ENV, err);
	for (size_t i = 0; !r && i < changes->n; i++)
		if (changes->v[i].val[0])
			r = secret_ref_check(changes->v[i].key, changes->v[i].val, err);
		else if (!ctl_env_name_ok(changes->v[i].key))
			r = secret_ref_check(changes->v[i].key, "", err);
	struct sfs_kvlist vals = {0};
	/* read with no lock held: a slow file must not stall the sandbox */
	if (!r)
		r = read_all(changes, &vals, err);
	struct sfs_kvlist refs = {0}, all = {0};
	pthread_mutex_lock(&sb->op_mutex);
	pthread_mutex_lock(&tree_save_mu);
	pthread_mutex_lock(&sfs_records_mu);
	if (!r && (sfs_kv_copy(&refs, &sb->secrets) || sfs_kv_copy(&all, &sb->secret_vals)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	for (size_t i = 0; !r && i < changes->n; i++) {
		const char *k = changes->v[i].key, *ref = changes->v[i].val;
		if (!ref[0]) {
			sfs_kv_del(&refs, k);
			sfs_kv_del(&all, k);
		} else if (sfs_kv_set(&refs, k, ref) || sfs_kv_set(&all, k, sfs_kv_get(&vals, k))) {
			r = sfs_errf(err, -ENOMEM, "out of memory");
		}
	}
	if (!r)
		swap_locked(sb, &refs, &all);
	pthread_mutex_unlock(&sfs_records_mu);
	if (!r) {
		r = tree_save_held(NULL, err);
		if (r) { /* undo: the registry does not have it */
			pthread_mutex_lock(&sfs_records_mu);
			swap_locked(sb, &refs, &all);
			pthread_mutex_unlock(&sfs_records_mu);
		}
	}
	pthread_mutex_unlock(&tree_save_mu);
	pthread_mutex_unlock(&sb->op_mutex);
	sfs_kv_free(&refs);
	free_values(&all);
	free_values(&vals);
	return r;
}

char *secrets_names_locked(const struct sfs_sandbox *sb)
{
	struct sfs_buf b = {0};
	int r = sfs_buf_adds(&b, "");
	for (size_t i = 0; !r && i < sb->secrets.n; i++)
		r = sfs_buf_printf(&b, "%s%s", i ? " " : "", sb->secrets.v[i].key);
	if (r) {
		sfs_buf_free(&b);
		return NULL;
	}
	return sfs_buf_take(&b);
}

int sfs_sb_run_env(struct sfs_sandbox *sb, struct sfs_kvlist *out, struct sfs_err *err)
{
	*out = (struct sfs_kvlist){0};
	int r = 0;
	const char *missing = NULL;
	pthread_mutex_lock(&sfs_records_mu);
	r = sfs_kv_copy(out, &sb->env);
	for (size_t i = 0; !r && i < sb->secrets.n; i++) {
		const char *k = sb->secrets.v[i].key, *v = sfs_kv_get(&sb->secret_vals, k);
		if (!v) {
			missing = k;
			break;
		}
		r = sfs_kv_set(out, k, v);
	}
	char name[128] = "", ref[4200] = "";
	if (missing) {
		snprintf(name, sizeof(name), "%s", missing); /* message: may be cut */
		snprintf(ref, sizeof(ref), "%s",
			 sfs_kv_get(&sb->secrets, missing)); /* message: may be cut */
	}
	pthread_mutex_unlock(&sfs_records_mu);
	if (r || missing)
		free_values(out);
	if (r)
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (missing)
		return sfs_errf(err, -EIO,
				"the secret %s could not be read from %s when the daemon started; "
				"set it again with the sandbox ctl's secret verb once it can be "
				"read",
				name, ref);
	return 0;
}
