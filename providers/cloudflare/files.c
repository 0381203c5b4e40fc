/*
 * workspace/ on Cloudflare (fs/cache/ caches on top): reads and writes by
 * path through the bridge's file routes (GET/PUT /file/<path>), source
 * trees as one hydrate; the bridge has no list, stat, mkdir, delete,
 * rename or chmod, so those are the shell kit's file scripts over exec
 * (sh/fsops.c, one call each), and a bulk read is one tar of many files.
 * A PUT makes a new file 0644 (the container's umask 022) and keeps an
 * existing file's mode: another mode costs a chmod.
 */
#include "cloudflare.h"

#include "../sh/sh.h"
#include "../strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The bridge refuses bodies over 32 MiB (payload_too_large). */
#define CF_BODY_MAX (32u << 20)

/* bytes base64-framed: the SDK under the Worker passes output on as text */
static int run_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		   int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	if (!bytes || !out)
		return cf_exec_cmd(sb, c, timeout_ms, exit, out, outlen, err);
	struct sfs_sh_cmd framed;
	int r = sfs_sh_b64(&framed, c, err);
	if (r)
		return r;
	struct sfs_buf b = {0};
	r = cf_exec_cmd(sb, &framed, timeout_ms, exit, &b.buf, &b.len, err);
	sfs_sh_cmd_free(&framed);
	long m = r ? 0 : sfs_sh_b64_unframe(&b);
	if (m == -ENOMEM)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	else if (m < 0 && *exit == 0)
		r = sfs_errf(err, -EIO, "cloudflare: exec in %s: output without its frame",
			     sb->name);
	else if (m < 0)
		b.len = 0; /* a failed command: its status says it */
	if (!r) {
		if (outlen)
			*outlen = b.len;
		*out = sfs_buf_take(&b);
		if (!*out)
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	sfs_buf_free(&b);
	return r;
}

const struct sfs_sh_exec cf_sh = {.what = "cloudflare", .run = run_cmd, .abs_path = cf_abs_path};

int cf_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	return sfs_sh_xfs_stat(&cf_sh, sb, path, st, err);
}

int cf_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err)
{
	return sfs_sh_xfs_list(&cf_sh, sb, path, ents, n, err);
}

/* "/v1/sandbox/ID/file/<abs path without its leading '/'>", escaped; a
 * call in flight (cf_sb_end) when it returns 0. */
static int file_route(struct sfs_sandbox *sb, const char *rel, char *buf, size_t len,
		      struct sfs_err *err)
{
	char *abs = cf_abs_path(sb, rel);
	char *e = abs ? sfs_http_escape(abs + 1) : NULL;
	free(abs);
	if (!e)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char suffix[4200];
	int n = snprintf(suffix, sizeof(suffix), "/file/%s", e);
	free(e);
	if (n < 0 || (size_t)n >= sizeof(suffix))
		return sfs_errf(err, -ENAMETOOLONG, "cloudflare: path too long");
	return cf_sb_begin(sb, suffix, buf, len, err);
}

static int bridge_req(void *ctx, const char *route, struct sfs_http_req *req,
		      struct sfs_http_resp *resp, struct sfs_err *err)
{
	(void)ctx;
	return cf_req(route, req, resp, err);
}

/* A GET or POST whose 2xx body goes to fd (from offset 0). */
static int fetch_to_fd(const char *method, const char *route, const char *what, const char *subject,
		       int fd, struct sfs_err *err)
{
	struct sfs_http_req req = {.method = method, .retry_unsafe = true}; /* reads */
	return sfs_http_download_fd(bridge_req, NULL, route, &req, fd, err, "cloudflare: %s %s",
				    what, subject);
}

int cf_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	char route[4400];
	int r = file_route(sb, path, route, sizeof(route), err);
	if (r)
		return r;
	r = fetch_to_fd("GET", route, "read", path[0] ? path : "/", fd, err);
	cf_sb_end(sb);
	return r;
}

/* The whole of fd (size bytes, or to its end when size < 0) in memory, at
 * most CF_BODY_MAX. */
static int slurp(int fd, off_t size, const char *what, struct sfs_buf *b, struct sfs_err *err)
{
	if (size < 0) {
		struct stat st;
		if (fstat(fd, &st))
			return sfs_errf(err, -errno, "cloudflare: %s: %s", what, strerror(errno));
		size = st.st_size;
	}
	if ((uint64_t)size > CF_BODY_MAX)
		return sfs_errf(err, -EFBIG,
				"cloudflare: %s: %lld bytes, over the bridge's 32 MiB a request",
				what, (long long)size);
	if (sfs_buf_reserve(b, (size_t)size + 1))
		return sfs_errf(err, -ENOMEM, "out of memory");
	off_t got = 0;
	while (got < size) {
		ssize_t n = pread(fd, b->buf + got, (size_t)(size - got), got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sfs_errf(err, -errno, "cloudflare: %s: %s", what, strerror(errno));
		if (n == 0)
			break;
		got += n;
	}
	b->len = (size_t)got;
	return 0;
}

/* A PUT or POST of a raw body; a 2xx answer is success. */
static int send_body(const char *method, const char *route, const char *ctype, struct sfs_buf *b,
		     const char *what, const char *subject, struct sfs_err *err)
{
	struct sfs_http_req req = {.method = method,
				   .body = b->buf ? b->buf : "",
				   .body_len = b->len,
				   .content_type = ctype,
				   .retry_unsafe =
				       true}; /* a whole file or archive can be repeated */
	struct sfs_http_resp resp;
	int r = cf_req(route, &req, &resp, err);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300)
		r = cf_status_err(what, subject, &resp, err);
	sfs_http_resp_free(&resp);
	return r;
}

int cf_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	char route[4400];
	struct sfs_buf b = {0};
	int r = file_route(sb, path, route, sizeof(route), err);
	if (r)
		return r;
	r = slurp(fd, -1, path, &b, err);
	if (!r)
		r = send_body("PUT", route, "application/octet-stream", &b, "write", path, err);
	cf_sb_end(sb);
	sfs_buf_free(&b);
	if (!r && (mode & 07777) != 0644)
		r = cf_fs_chmod(sb, path, mode, err);
	return r;
}

int cf_persist(const char *id, int fd, struct sfs_err *err)
{
	char route[256];
	int r = cf_path(id, "/persist", route, sizeof(route), err);
	return r ? r : fetch_to_fd("POST", route, "persist", id, fd, err);
}

/* A tar (fd, size bytes or to its end) POSTed to route's hydrate. */
static int post_tar(const char *route, int fd, off_t size, const char *subject, struct sfs_err *err)
{
	struct sfs_buf b = {0};
	int r = slurp(fd, size, "hydrate", &b, err);
	if (!r)
		r = send_body("POST", route, "application/x-tar", &b, "hydrate", subject, err);
	sfs_buf_free(&b);
	return r;
}

int cf_hydrate(const char *id, int fd, struct sfs_err *err)
{
	char route[256];
	int r = cf_path(id, "/hydrate", route, sizeof(route), err);
	return r ? r : post_tar(route, fd, -1, id, err);
}

int cf_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	char route[256];
	int r = cf_sb_begin(sb, "/hydrate", route, sizeof(route), err);
	if (r)
		return r;
	r = post_tar(route, fd, size, sb->name, err);
	cf_sb_end(sb);
	return r;
}

int cf_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	return sfs_sh_xfs_chmod(&cf_sh, sb, path, mode, err);
}

int cf_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	return sfs_sh_xfs_mkdir(&cf_sh, sb, path, mode, err);
}

int cf_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	return sfs_sh_xfs_remove(&cf_sh, sb, path, dir, err);
}

int cf_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	return sfs_sh_xfs_rename(&cf_sh, sb, from, to, err);
}

int cf_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path, struct sfs_err *err)
{
	return sfs_sh_xfs_symlink(&cf_sh, sb, target, path, err);
}

/* ---- bulk reads: one tar of many files in one exec ------------------------- */

int cf_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err)
{
	return sfs_sh_xread_many(&cf_sh, sb, paths, n, on_file, arg, err);
}
