/*
 * workspace/ in an sbx VM (fs/cache/ caches on top): every operation is one
 * `sbx exec` of a shell kit file script, through the kit's ops (struct
 * sfs_sh_exec sbx_sh) where no input goes in; reads come back on the exec's
 * stdout (its own pipe: raw bytes), writes and source trees go in on its
 * stdin (-i).
 */
#include "sbx.h"

#include "../sh/sh.h"
#include "../strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The whole file $1 on stdout; a directory or a missing file is an errno. */
static const char read_script[] = "[ -e \"$1\" ] || exit 2\n"
				  "[ -d \"$1\" ] && exit 21\n"
				  "exec cat -- \"$1\" || exit 5\n";
/* stdin replaces $1 (atomically: temp + mv) with mode $2. */
static const char write_script[] =
    "d=$(dirname -- \"$1\"); [ -d \"$d\" ] || exit 2\n"
    "[ -d \"$1\" ] && exit 21\n"
    "t=\"$d/.sfs-write.$$\"\n"
    "(umask 077; cat >\"$t\") && chmod \"$2\" \"$t\" && mv -f \"$t\" \"$1\" && exit 0\n"
    "rm -f \"$t\"; exit 5\n";
/* stdin (a tar) unpacked at $1. */
static const char untar_script[] = "mkdir -p \"$1\" && tar -xf - -C \"$1\" || exit 5\n";

/* Runs a script on a (and b) with in on stdin; its exit status as an errno. */
static int fs_script(struct sfs_sandbox *sb, const char *what, const char *script, const char *a,
		     const char *b, const void *in, size_t inlen, char **out, size_t *len,
		     struct sfs_err *err)
{
	const char *args[] = {a, b, NULL};
	struct sfs_sh_cmd c;
	int r = sfs_sh_script(&c, script, "sandboxfs-fs", args, err);
	if (r)
		return r;
	int code = 0;
	struct sfs_err e = {0}; /* a failing script's stderr lands here */
	r = sbx_exec(sb, &c, in, inlen, 0, &code, out, len, &e);
	sfs_sh_cmd_free(&c);
	if (r)
		return sfs_errf(err, r, "%s", e.msg);
	if (code) {
		if (out) {
			free(*out);
			*out = NULL;
		}
		r = sfs_sh_fs_errno(code);
		return sfs_errf(err, r, "sbx: %s %s: %s", what, a, e.msg[0] ? e.msg : strerror(-r));
	}
	return 0;
}

/* The script on the absolute path of rel (and b as is). */
static int on_path(struct sfs_sandbox *sb, const char *what, const char *script, const char *rel,
		   const char *b, const void *in, size_t inlen, char **out, size_t *len,
		   struct sfs_err *err)
{
	char *abs = sbx_abs_path(sb, rel);
	if (!abs)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = fs_script(sb, what, script, abs, b, in, inlen, out, len, err);
	free(abs);
	return r;
}

/* The kit's file ops and run scripts through `sbx exec` (no stdin). */
static int sh_run(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		  int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	(void)bytes; /* stdout is a pipe of its own: always bytes as they are */
	return sbx_exec(sb, c, NULL, 0, timeout_ms, exit, out, outlen, err);
}

const struct sfs_sh_exec sbx_sh = {
    .what = "sbx", .run = sh_run, .abs_path = sbx_abs_path, .raw_stdout = true};

int sbx_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	return sfs_sh_xfs_stat(&sbx_sh, sb, path, st, err);
}

int sbx_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err)
{
	return sfs_sh_xfs_list(&sbx_sh, sb, path, ents, n, err);
}

int sbx_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	char *out = NULL;
	size_t len = 0;
	int r = on_path(sb, "read", read_script, path, NULL, NULL, 0, &out, &len, err);
	for (size_t done = 0; !r && done < len;) {
		ssize_t w = pwrite(fd, out + done, len - done, (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			r = sfs_errf(err, -EIO, "sbx: read %s: cache write: %s", path,
				     strerror(errno));
		else
			done += (size_t)w;
	}
	if (!r && ftruncate(fd, (off_t)len))
		r = sfs_errf(err, -EIO, "sbx: read %s: %s", path, strerror(errno));
	free(out);
	return r;
}

int sbx_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	struct sfs_buf data = {0};
	int r = sfs_buf_add_fd(&data, fd);
	if (r)
		return sfs_errf(err, r, "sbx: write %s: %s", path, strerror(-r));
	char m[16];
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777 ? mode & 07777 : 0644));
	/* a non-NULL input even when empty: the script reads stdin */
	r = on_path(sb, "write", write_script, path, m, data.buf ? data.buf : "", data.len, NULL,
		    NULL, err);
	sfs_buf_free(&data);
	return r;
}

int sbx_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	struct sfs_buf tar = {0};
	int r = sfs_buf_add_fd(&tar, fd);
	if (r) {
		sfs_buf_free(&tar);
		return sfs_errf(err, r, "sbx: source tree (%lld bytes): %s", (long long)size,
				strerror(-r));
	}
	r = on_path(sb, "source tree", untar_script, "", NULL, tar.buf ? tar.buf : "", tar.len,
		    NULL, NULL, err);
	sfs_buf_free(&tar);
	return r;
}

int sbx_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	return sfs_sh_xfs_mkdir(&sbx_sh, sb, path, mode, err);
}

int sbx_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	return sfs_sh_xfs_remove(&sbx_sh, sb, path, dir, err);
}

int sbx_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	return sfs_sh_xfs_rename(&sbx_sh, sb, from, to, err);
}

int sbx_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	return sfs_sh_xfs_chmod(&sbx_sh, sb, path, mode, err);
}

int sbx_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		   struct sfs_err *err)
{
	return sfs_sh_xfs_symlink(&sbx_sh, sb, target, path, err);
}

int sbx_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		     int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		     void *arg, struct sfs_err *err)
{
	return sfs_sh_xread_many(&sbx_sh, sb, paths, n, on_file, arg, err);
}
