/*
 * Remote file access (the fs_* ops) for containers whose files are not
 * reachable from this host (a remote engine, no overlay2, or
 * -o docker.fs=archive): stat, read and write through the archive API, one
 * request each; listings and the other changes through short sh scripts.
 * fs/cache/ caches on top.  Paths are relative to the workspace root.
 */
#include "docker.h"
#include "engine.h"
#include "exec.h"

#include "../sh/sh.h"
#include "../tar.h"
#include "../untrusted/name.h"
#include "../util.h"

#include <curl/curl.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TAR_BLOCK SFS_TAR_BLOCK

/* The container path of a workspace-relative path. */
static int full_path(struct sfs_sandbox *sb, const char *path, char *buf, size_t len,
		     struct sfs_err *err)
{
	pthread_mutex_lock(&sfs_records_mu);
	const char *ws = sb->workspace ? sb->workspace : "/";
	int n = path[0]
		    ? snprintf(buf, len, "%s%s%s", ws, ws[strlen(ws) - 1] == '/' ? "" : "/", path)
		    : snprintf(buf, len, "%s", ws);
	pthread_mutex_unlock(&sfs_records_mu);
	if (n < 0 || (size_t)n >= len)
		return sfs_errf(err, -ENAMETOOLONG, "docker: %s: path too long", path);
	return 0;
}

static int container(struct sfs_sandbox *sb, char *cid, size_t len, struct sfs_err *err)
{
	dk_current(sb, cid, len);
	return cid[0] ? 0 : sfs_errf(err, -ENOENT, "docker: sandbox has no container");
}

/* ---- stat ---------------------------------------------------------------- */

static int fs_script(struct sfs_sandbox *sb, const char *what, const char *script,
		     const char *const *args, struct dk_buf *out, struct sfs_err *err);

/* The archive API's linkTarget is resolved (absolute, ".." gone), so the
 * target as the link holds it (SPEC §5 shows that) is read with readlink. */
static int raw_link_target(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st,
			   struct sfs_err *err)
{
	char full[4096];
	int r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	const char *args[] = {full, NULL};
	struct dk_buf out = {.max = 8192};
	r = fs_script(sb, "readlink", sfs_sh_fs_readlink, args, &out, err);
	if (!r) {
		size_t l = out.b.len;
		if (l && out.b.buf[l - 1] == '\n')
			l--;
		char *link = strndup(out.b.buf ? out.b.buf : "", l);
		if (!link)
			r = sfs_errf(err, -ENOMEM, "out of memory");
		else {
			free(st->link);
			st->link = link;
		}
	}
	dk_buf_free(&out);
	return r;
}

/* The archive API's URL for a workspace path of sb's container. */
int dk_archive_url(struct sfs_sandbox *sb, const char *path, char *url, size_t len,
		   struct sfs_err *err)
{
	char cid[DK_ID_MAX], full[4096];
	int r = container(sb, cid, sizeof(cid), err);
	if (!r)
		r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	char *epath = sfs_http_escape_component(full);
	if (!epath)
		return sfs_errf(err, -ENOMEM, "out of memory");
	r = sfs_pathf(url, len, "/containers/%s/archive?path=%s", cid, epath);
	free(epath);
	return r < 0 ? sfs_errf(err, -ENAMETOOLONG, "docker: %s: path too long", full) : 0;
}

int dk_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	char url[12400];
	int r = dk_archive_url(sb, path, url, sizeof(url), err);
	if (r)
		return r;
	struct dk_resp resp;
	r = dk_request("HEAD", url, NULL, NULL, 0, 30, &resp, err);
	if (r)
		return r;
	if (resp.status == 404) {
		dk_resp_free(&resp);
		return -ENOENT; /* an answer, not a failure */
	}
	if (resp.status >= 400 || !resp.path_stat) {
		r = sfs_errf(err, resp.status >= 400 ? sfs_http_status_errno(resp.status) : -EIO,
			     "docker: stat %s: HTTP %ld", path, resp.status);
		dk_resp_free(&resp);
		return r;
	}
	r = dk_path_stat_decode(resp.path_stat, st, err);
	dk_resp_free(&resp);
	if (r == -EIO)
		r = sfs_errf(err, -EIO, "docker: stat %s: unreadable stat header", path);
	if (!r && S_ISLNK(st->mode)) {
		r = raw_link_target(sb, path, st, err);
		if (r) {
			free(st->link);
			st->link = NULL;
		}
	}
	return r;
}

/* ---- scripts ------------------------------------------------------------- */

/* Runs a script as the container's user; its exit status is an errno
 * (2 ENOENT, 17 EEXIST, 20 ENOTDIR, 21 EISDIR, 39 ENOTEMPTY ...). */
static int fs_script(struct sfs_sandbox *sb, const char *what, const char *script,
		     const char *const *args, struct dk_buf *out, struct sfs_err *err)
{
	char cid[DK_ID_MAX];
	int r = container(sb, cid, sizeof(cid), err);
	if (r)
		return r;
	const char *argv[8] = {"/bin/sh", "-c", script, "sandboxfs-fs"};
	size_t n = 4;
	for (; *args && n < 7; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	struct dk_exec x = {.cid = cid, .argv = argv, .workdir = "/"};
	struct dk_buf e = {.max = 512};
	int code = 0;
	r = dk_exec_run(&x, out, &e, &code, err);
	if (!r && code) {
		size_t l = e.b.len;
		while (l && e.b.buf[l - 1] == '\n')
			l--;
		r = sfs_sh_fs_errno(code);
		sfs_errf(err, r, "docker: %s: %s", what,
			 l ? (e.b.buf[l] = '\0', e.b.buf) : strerror(-r));
	}
	dk_buf_free(&e);
	return r;
}

int dk_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err)
{
	char full[4096];
	int r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	const char *args[] = {full, NULL};
	struct dk_buf out = {0};
	r = fs_script(sb, "list", sfs_sh_fs_list, args, &out, err);
	*ents = NULL;
	*n = 0;
	if (r || !out.b.len) {
		dk_buf_free(&out);
		return r;
	}
	struct sfs_rdirent *v = NULL;
	size_t count = 0;
	struct sfs_name_drops drops = {0};
	r = sfs_sh_list_parse(out.b.buf, out.b.len, &v, &count, &drops);
	dk_buf_free(&out);
	if (r)
		return sfs_errf(err, r == -EAGAIN ? -EIO : r, "docker: list %s: %s", full,
				r == -EAGAIN ? "it changed while being read" : strerror(-r));
	sfs_name_drops_log(&drops, "docker", sb->name, path);
	*ents = v;
	*n = count;
	return 0;
}

int dk_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	char full[4096], m[16];
	int r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
	const char *args[] = {full, m, NULL};
	return fs_script(sb, "mkdir", sfs_sh_fs_mkdir, args, NULL, err);
}

int dk_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	char full[4096];
	int r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	const char *args[] = {full, NULL};
	return fs_script(sb, dir ? "rmdir" : "unlink", dir ? sfs_sh_fs_rmdir : sfs_sh_fs_unlink,
			 args, NULL, err);
}

int dk_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	char f[4096], t[4096];
	int r = full_path(sb, from, f, sizeof(f), err);
	if (!r)
		r = full_path(sb, to, t, sizeof(t), err);
	if (r)
		return r;
	const char *args[] = {f, t, NULL};
	return fs_script(sb, "rename", sfs_sh_fs_rename, args, NULL, err);
}

int dk_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	char full[4096], m[16];
	int r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
	const char *args[] = {full, m, NULL};
	return fs_script(sb, "chmod", sfs_sh_fs_chmod, args, NULL, err);
}

int dk_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path, struct sfs_err *err)
{
	char full[4096];
	int r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	const char *args[] = {full, target, NULL};
	return fs_script(sb, "symlink", sfs_sh_fs_symlink, args, NULL, err);
}

/* ---- read: GET archive, the first entry's bytes into fd ------------------ */

/* The first entry streamed into fd; it must be a regular file. */
struct untar {
	int fd;
	off_t written;
	bool done;
	int error; /* negative errno */
	struct sfs_tar_reader tar;
	struct sfs_err terr;
};

static int untar_entry(void *arg, const struct sfs_tar_entry *e)
{
	struct untar *u = arg;
	if (e->type != '0') {
		u->error = e->type == '5' ? -EISDIR : -EINVAL;
		return SFS_TAR_STOP;
	}
	return 0;
}

static int untar_data(void *arg, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	struct untar *u = arg;
	while (n) {
		ssize_t w = pwrite(u->fd, p, n, u->written);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			u->error = -errno;
			return SFS_TAR_STOP;
		}
		u->written += w;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static int untar_end(void *arg, const struct sfs_tar_entry *e)
{
	((struct untar *)arg)->done = true;
	return SFS_TAR_STOP;
}

static const struct sfs_tar_ops untar_ops = {
    .entry = untar_entry, .data = untar_data, .end = untar_end};

static bool untar_sink(void *arg, const char *data, size_t len)
{
	struct untar *u = arg;
	int r = sfs_tar_feed(&u->tar, data, len, &u->terr);
	if (r < 0 && !u->error)
		u->error = r == -ENOMEM ? -ENOMEM : -EIO;
	return r == 0; /* 1: the file is whole (or refused): stop the download */
}

int dk_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	char url[12400];
	int r = dk_archive_url(sb, path, url, sizeof(url), err);
	if (r)
		return r;
	struct untar u = {.fd = fd};
	sfs_tar_init(&u.tar, &untar_ops, &u);
	r = dk_stream("GET", url, NULL, untar_sink, &u, NULL, err);
	if (r >= 0 && !u.done && !u.error && sfs_tar_finish(&u.tar, &u.terr) == 0)
		u.error = -EIO; /* the archive ended, and no file */
	sfs_tar_free(&u.tar);
	if (r == -ENOENT)
		return sfs_errf(err, -ENOENT, "docker: read %s: no such file", path);
	if (r < 0)
		return r;
	if (u.error)
		return sfs_errf(err, u.error, "docker: read %s: %s", path,
				u.terr.msg[0] ? u.terr.msg : strerror(-u.error));
	if (!u.done)
		return sfs_errf(err, -EIO, "docker: read %s: the archive ended early", path);
	return 0;
}

/* ---- write: PUT archive of a one-entry tar ------------------------------- */

struct tarball {
	unsigned char head[3 * TAR_BLOCK]; /* [a GNU long-name entry and its name,] the header */
	size_t head_len, pos;		   /* pos: bytes produced so far */
	int fd;
	off_t size;
	int error;
};

static size_t tarball_read(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct tarball *t = arg;
	size_t want = size * nmemb, got = 0;
	size_t body_end = t->head_len + (size_t)t->size;
	size_t padded = t->head_len + ((size_t)t->size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
	size_t total = padded + 2 * TAR_BLOCK;
	while (got < want && t->pos < total) {
		if (t->pos < t->head_len) {
			size_t n = t->head_len - t->pos;
			n = n < want - got ? n : want - got;
			memcpy(buf + got, t->head + t->pos, n);
			got += n;
			t->pos += n;
		} else if (t->pos < body_end) {
			size_t n = body_end - t->pos;
			n = n < want - got ? n : want - got;
			ssize_t r = pread(t->fd, buf + got, n, (off_t)(t->pos - t->head_len));
			if (r <= 0) {
				t->error = r < 0 ? -errno : -EIO; /* shorter than it was */
				return CURL_READFUNC_ABORT;
			}
			got += (size_t)r;
			t->pos += (size_t)r;
		} else {
			size_t n = total - t->pos; /* padding and the two end blocks */
			n = n < want - got ? n : want - got;
			memset(buf + got, 0, n);
			got += n;
			t->pos += n;
		}
	}
	return got;
}

int dk_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	char cid[DK_ID_MAX], full[4096];
	int r = container(sb, cid, sizeof(cid), err);
	if (!r)
		r = full_path(sb, path, full, sizeof(full), err);
	if (r)
		return r;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sfs_errf(err, -errno, "docker: write %s: %s", full, strerror(errno));
	char *slash = strrchr(full, '/');
	const char *name = slash + 1;
	char dir[4096];
	if (sfs_pathf(dir, sizeof(dir), "%.*s", slash == full ? 1 : (int)(slash - full), full) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: write %s: path too long", full);
	if (!*name || strlen(name) > 255)
		return sfs_errf(err, -EINVAL, "docker: write %s: bad file name", full);
	struct tarball t = {.fd = fd, .size = st.st_size};
	/* a GNU long name ('L' entry whose data is the name) when it needs one */
	long ln = sfs_tar_long_name(t.head, sizeof(t.head) - TAR_BLOCK, name);
	if (ln < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: write %s: name too long", full);
	sfs_tar_header(t.head + ln, name, '0', (uint64_t)st.st_size, mode, time(NULL));
	t.head_len = (size_t)ln + TAR_BLOCK;
	char *edir = sfs_http_escape_component(dir);
	if (!edir)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char url[12400];
	int pr = sfs_pathf(url, sizeof(url),
			   "/containers/%s/archive?path=%s&noOverwriteDirNonDir=1", cid, edir);
	free(edir);
	if (pr < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: write %s: path too long", full);
	size_t total = t.head_len + ((size_t)st.st_size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK +
		       2 * TAR_BLOCK;
	struct dk_resp resp;
	r = dk_upload("PUT", url, "application/x-tar", tarball_read, &t, total, 600, &resp, err);
	if (r)
		return t.error
			   ? sfs_errf(err, t.error, "docker: write %s: reading the local copy: %s",
				      full, strerror(-t.error))
			   : r;
	if (resp.status >= 400) {
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		r = sfs_errf(err, resp.status == 404 ? -ENOENT : sfs_http_status_errno(resp.status),
			     "docker: write %s: %s", full, msg);
	}
	dk_resp_free(&resp);
	return r;
}

/* ---- put_tree: one PUT of a whole archive at the workspace root ---------- */

struct fd_source {
	int fd;
	int error;
};

static size_t fd_read(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct fd_source *s = arg;
	for (;;) {
		ssize_t n = read(s->fd, buf, size * nmemb);
		if (n >= 0)
			return (size_t)n;
		if (errno != EINTR) {
			s->error = -errno;
			return CURL_READFUNC_ABORT;
		}
	}
}

int dk_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	char cid[DK_ID_MAX], full[4096];
	int r = container(sb, cid, sizeof(cid), err);
	if (!r)
		r = full_path(sb, "", full, sizeof(full), err);
	if (r)
		return r;
	char *e = sfs_http_escape_component(full);
	if (!e)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char url[12400];
	int pr = sfs_pathf(url, sizeof(url),
			   "/containers/%s/archive?path=%s&noOverwriteDirNonDir=1", cid, e);
	free(e);
	if (pr < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: %s: path too long", full);
	struct fd_source s = {.fd = fd};
	struct dk_resp resp;
	r = dk_upload("PUT", url, "application/x-tar", fd_read, &s, (size_t)size, 600, &resp, err);
	if (r)
		return s.error ? sfs_errf(err, s.error, "docker: upload: reading the archive: %s",
					  strerror(-s.error))
			       : r;
	if (resp.status >= 400) {
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		r = sfs_errf(err, sfs_http_status_errno(resp.status), "docker: upload to %s: %s",
			     full, msg);
	}
	dk_resp_free(&resp);
	return r;
}
