/*
 * The fs_* ops of a provider whose API has no route for them, as the kit's
 * file scripts (fs.c) run through the provider's own exec (struct
 * sfs_sh_exec): stat, list, chmod, mkdir, remove, rename, symlink, one call
 * each; and a polled run's status, journal reads and kill.  Shared by
 * vercel, cloudflare and sbx.
 */
#include "sh.h"

#include "../provider.h"
#include "../untrusted/name.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs a file script on abs paths a (and b); its exit status as an errno. */
static int run_script(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *op,
		      const char *script, const char *a, const char *b, char **out, size_t *len,
		      struct sfs_err *err)
{
	const char *args[] = {a, b, NULL};
	struct sfs_sh_cmd c;
	int r = sfs_sh_script(&c, script, "sandboxfs-fs", args, err);
	if (r)
		return r;
	int code = 0;
	struct sfs_err e = {0}; /* a failing script's stderr lands here */
	r = x->run(sb, &c, true, 0, &code, out, len, &e);
	sfs_sh_cmd_free(&c);
	if (r)
		return sfs_errf(err, r, "%s", e.msg);
	if (code) {
		if (out) {
			free(*out);
			*out = NULL;
		}
		r = sfs_sh_fs_errno(code);
		return sfs_errf(err, r, "%s: %s %s: %s", x->what, op, a,
				e.msg[0] ? e.msg : strerror(-r));
	}
	return 0;
}

/* The script on one workspace path (and a second argument b). */
static int on_path(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *op,
		   const char *script, const char *path, const char *b, char **out, size_t *len,
		   struct sfs_err *err)
{
	char *abs = x->abs_path(sb, path);
	if (!abs)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = run_script(x, sb, op, script, abs, b, out, len, err);
	free(abs);
	return r;
}

int sfs_sh_xfs_stat(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		    struct sfs_rstat *st, struct sfs_err *err)
{
	char *out = NULL;
	size_t len = 0;
	int r = on_path(x, sb, "stat", sfs_sh_fs_stat, path, NULL, &out, &len, err);
	if (!r && (r = sfs_sh_stat_parse(out, len, st)))
		r = sfs_errf(err, r == -ENOMEM ? -ENOMEM : -EIO, "%s: stat %s: bad answer", x->what,
			     path);
	free(out);
	return r;
}

int sfs_sh_xfs_list(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		    struct sfs_rdirent **ents, size_t *n, struct sfs_err *err)
{
	char *out = NULL;
	size_t len = 0;
	struct sfs_name_drops drops = {0};
	int r = on_path(x, sb, "list", sfs_sh_fs_list, path, NULL, &out, &len, err);
	if (!r && (r = sfs_sh_list_parse(out, len, ents, n, &drops)))
		r = sfs_errf(err, r == -ENOMEM ? -ENOMEM : -EIO, "%s: list %s: %s", x->what, path,
			     r == -EAGAIN ? "it changed while being read" : strerror(-r));
	if (!r)
		sfs_name_drops_log(&drops, x->what, sb->name, path);
	free(out);
	return r;
}

int sfs_sh_xfs_chmod(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		     mode_t mode, struct sfs_err *err)
{
	char m[16];
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
	return on_path(x, sb, "chmod", sfs_sh_fs_chmod, path, m, NULL, NULL, err);
}

int sfs_sh_xfs_mkdir(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		     mode_t mode, struct sfs_err *err)
{
	char m[16];
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
	return on_path(x, sb, "mkdir", sfs_sh_fs_mkdir, path, m, NULL, NULL, err);
}

int sfs_sh_xfs_remove(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		      bool dir, struct sfs_err *err)
{
	return on_path(x, sb, dir ? "rmdir" : "unlink", dir ? sfs_sh_fs_rmdir : sfs_sh_fs_unlink,
		       path, NULL, NULL, NULL, err);
}

int sfs_sh_xfs_rename(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *from,
		      const char *to, struct sfs_err *err)
{
	char *b = x->abs_path(sb, to);
	if (!b)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = on_path(x, sb, "rename", sfs_sh_fs_rename, from, b, NULL, NULL, err);
	free(b);
	return r;
}

int sfs_sh_xfs_symlink(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *target,
		       const char *path, struct sfs_err *err)
{
	return on_path(x, sb, "symlink", sfs_sh_fs_symlink, path, target, NULL, NULL, err);
}

/* Runs a run script c (freed here) whose answer is its text output. */
static int run_text(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, struct sfs_sh_cmd *c,
		    long timeout_ms, char **out, struct sfs_err *err)
{
	int code = 0;
	int r = x->run(sb, c, false, timeout_ms, &code, out, NULL, err);
	sfs_sh_cmd_free(c);
	return r;
}

void sfs_sh_run_dir(const struct sfs_sandbox *sb, const struct sfs_run *run, char *buf, size_t len)
{
	snprintf(buf, len, "sandboxfs-runs/%s-%d", sb->key,
		 run->n); /* may be cut: never, a key < 40 and a number */
}

int sfs_sh_xrun_refresh(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, struct sfs_run *run,
			long timeout_ms, struct sfs_err *err)
{
	char dir[256];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	struct sfs_sh_cmd c;
	char *out = NULL;
	int r = sfs_sh_status(&c, dir, err);
	if (!r)
		r = run_text(x, sb, &c, timeout_ms, &out, err);
	if (!r)
		r = sfs_sh_status_apply(out, run, x->what, err);
	free(out);
	return r;
}

ssize_t sfs_sh_xjournal_read(const struct sfs_sh_exec *x, struct sfs_sandbox *sb,
			     struct sfs_run *run, off_t off, void *buf, size_t max, long timeout_ms,
			     struct sfs_err *err)
{
	char dir[256], journal[300];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	snprintf(journal, sizeof(journal), "%s/journal",
		 dir); /* may be cut: never, 256 + 8 < 300 */
	/* base64-framed by the read script itself (any bytes over any
	 * transport) unless stdout carries bytes as they are */
	struct sfs_sh_cmd c;
	int r = sfs_sh_read(&c, journal, off, max, !x->raw_stdout, err);
	if (r)
		return r;
	int code = 0;
	char *out = NULL;
	size_t len = 0;
	r = x->run(sb, &c, x->raw_stdout, timeout_ms, &code, &out, x->raw_stdout ? &len : NULL,
		   err);
	sfs_sh_cmd_free(&c);
	if (r)
		return r;
	if (code == 3 || (x->raw_stdout && !len)) {
		free(out);
		return 0; /* no journal (yet) */
	}
	long got = -EIO;
	if (!code && x->raw_stdout) {
		got = (long)(len < max ? len : max);
		memcpy(buf, out, (size_t)got);
	} else if (!code) {
		got = sfs_sh_read_decode(out, buf, max);
	}
	free(out);
	if (got == -ENOMEM)
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (got < 0)
		return sfs_errf(err, -EIO, "%s: journal read of run %d: bad answer (exit %d)",
				x->what, run->n, code);
	return got;
}

int sfs_sh_xrun_kill(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, struct sfs_run *run,
		     int sig, bool escalate, int grace_ms, long timeout_ms, struct sfs_err *err)
{
	char dir[256];
	sfs_sh_run_dir(sb, run, dir, sizeof(dir));
	struct sfs_sh_cmd c;
	char *out = NULL;
	int r = sfs_sh_kill(&c, dir, sig, escalate, grace_ms, err);
	if (!r)
		r = run_text(x, sb, &c, timeout_ms, &out, err);
	if (!r) {
		size_t l = out ? strlen(out) : 0;
		while (l && (out[l - 1] == '\n' || out[l - 1] == '\r' || out[l - 1] == ' '))
			out[--l] = '\0'; /* the script's one word, without its newline */
		r = sfs_sh_kill_answer(out ? out : "", run->n, err);
	}
	free(out);
	return r;
}

int sfs_sh_xread_many(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *const *paths,
		      size_t n,
		      int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		      void *arg, struct sfs_err *err)
{
	char *ws = x->abs_path(sb, "");
	if (!ws)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct sfs_sh_cmd c;
	int r = sfs_sh_bulk_read(&c, ws, paths, n, err);
	free(ws);
	if (r)
		return r;
	int code = 0;
	char *out = NULL;
	size_t len = 0;
	r = x->run(sb, &c, true, 0, &code, &out, &len, err);
	sfs_sh_cmd_free(&c);
	if (!r && code)
		r = sfs_errf(err, sfs_sh_fs_errno(code), "%s: bulk read of %zu files: exit %d",
			     x->what, n, code);
	if (!r)
		r = sfs_sh_bulk_each(out, len, on_file, arg, err);
	free(out);
	return r;
}
