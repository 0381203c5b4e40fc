/* envd's file API behind workspace/ (fs/cache/ caches on top): bytes
 * through /files, metadata through filesystem.Filesystem, and what neither
 * has (chmod, symlink, rmdir of an empty directory) through the shell. */
#include "e2b.h"

#include "../sh/sh.h"
#include "../untrusted/name.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* RFC 3339 ("2024-05-01T10:20:30.123456Z", or with an offset) to seconds. */
static int64_t parse_time(const char *s)
{
	if (!s)
		return 0;
	struct tm tm = {0};
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		return 0;
	int64_t t = (int64_t)timegm(&tm);
	while (*rest == '.' || (*rest >= '0' && *rest <= '9'))
		rest++;
	if ((*rest == '+' || *rest == '-') && strlen(rest) >= 6) {
		int64_t off = ((rest[1] - '0') * 10 + (rest[2] - '0')) * 3600 +
			      ((rest[4] - '0') * 10 + (rest[5] - '0')) * 60;
		t += *rest == '+' ? -off : off;
	}
	return t;
}

int e2b_entry_from_json(json_t *o, struct sfs_rstat *st)
{
	memset(st, 0, sizeof(*st));
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *perm = json_string_value(json_object_get(o, "permissions"));
	mode_t t = S_IFREG;
	if (type && !strcmp(type, "FILE_TYPE_DIRECTORY"))
		t = S_IFDIR;
	else if (type && !strcmp(type, "FILE_TYPE_SYMLINK"))
		t = S_IFLNK;
	else if (perm && perm[0] == 'p')
		t = S_IFIFO;
	else if (perm && perm[0] == 's')
		t = S_IFSOCK;
	json_t *m = json_object_get(o, "mode");
	mode_t bits = json_is_integer(m) ? (mode_t)json_integer_value(m) & 07777 : 0644;
	st->mode = t | bits;
	/* int64 travels as a string in proto3 JSON */
	json_t *size = json_object_get(o, "size");
	long long sz = json_is_string(size)    ? strtoll(json_string_value(size), NULL, 10)
		       : json_is_integer(size) ? (long long)json_integer_value(size)
					       : 0;
	st->size = sz < 0 ? 0 : (off_t)sz;
	st->mtime = parse_time(json_string_value(json_object_get(o, "modifiedTime")));
	const char *target = json_string_value(json_object_get(o, "symlinkTarget"));
	if (t == S_IFLNK && target && !(st->link = strdup(target)))
		return -ENOMEM;
	return 0;
}

static int path_call(struct sfs_sandbox *sb, const char *method, const char *rel, json_t **out,
		     struct sfs_err *err)
{
	char *abs = e2b_abs_path(sb, rel);
	json_t *body = abs ? json_pack("{s:s}", "path", abs) : NULL;
	free(abs);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = e2b_rpc(sb, method, body, out, err);
	json_decref(body);
	return r;
}

/* A symlink whose target the API did not give: readlink. */
static int read_target(struct sfs_sandbox *sb, const char *rel, struct sfs_rstat *st,
		       struct sfs_err *err)
{
	char *abs = e2b_abs_path(sb, rel);
	if (!abs)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int code = 0;
	char *out = NULL;
	const char *args[] = {abs, NULL};
	int r = e2b_exec(sb, "readlink -- \"$1\"", args, &code, &out, err);
	free(abs);
	if (!r && code != 0)
		r = sfs_errf(err, -EIO, "e2b: readlink %s failed", rel);
	if (!r) {
		size_t n = strlen(out);
		if (n && out[n - 1] == '\n')
			out[n - 1] = '\0';
		st->link = out;
		out = NULL;
	}
	free(out);
	return r;
}

int e2b_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	json_t *o = NULL;
	int r = path_call(sb, "filesystem.Filesystem/Stat", path, &o, err);
	if (!r && e2b_entry_from_json(json_object_get(o, "entry"), st))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	if (!r && S_ISLNK(st->mode) && !st->link)
		r = read_target(sb, path, st, err);
	return r;
}

int e2b_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err)
{
	char *abs = e2b_abs_path(sb, path);
	json_t *body = abs ? json_pack("{s:s, s:i}", "path", abs, "depth", 1) : NULL;
	free(abs);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	json_t *o = NULL;
	int r = e2b_rpc(sb, "filesystem.Filesystem/ListDir", body, &o, err);
	json_decref(body);
	if (r)
		return r;
	struct sfs_name_drops drops = {0};
	r = sfs_rdirents_from_json(json_object_get(o, "entries"), e2b_entry_from_json, ents, n,
				   &drops);
	json_decref(o);
	if (r)
		return sfs_errf(err, r, "out of memory");
	sfs_name_drops_log(&drops, "e2b", sb->name, path);
	return 0;
}

static int envd(void *sb, const char *route, struct sfs_http_req *req, struct sfs_http_resp *resp,
		struct sfs_err *err)
{
	return e2b_envd_req(sb, route, req, resp, err);
}

/* "/files?path=ABS" for rel. */
static char *files_query(struct sfs_sandbox *sb, const char *rel)
{
	char *abs = e2b_abs_path(sb, rel);
	char *esc = abs ? sfs_http_escape(abs) : NULL;
	char *q = NULL;
	if (esc && asprintf(&q, "/files?path=%s", esc) < 0)
		q = NULL;
	free(abs);
	free(esc);
	return q;
}

int e2b_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	char *q = files_query(sb, path);
	if (!q)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct sfs_http_req req = {.method = "GET"};
	int r = sfs_http_download_fd(envd, sb, q, &req, fd, err, "e2b: read %s in %s",
				     path[0] ? path : "/", sb->name);
	free(q);
	return r;
}

/* A shell one-liner on one path whose failure is told by its output. */
static int sh_path(struct sfs_sandbox *sb, const char *script, const char *a, const char *rel,
		   char **out, int *code, struct sfs_err *err)
{
	char *abs = e2b_abs_path(sb, rel);
	if (!abs)
		return sfs_errf(err, -ENOMEM, "out of memory");
	const char *args[] = {a ? a : abs, a ? abs : NULL, NULL};
	int r = e2b_exec(sb, script, args, code, out, err);
	free(abs);
	return r;
}

int e2b_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	/* envd has no chmod call */
	char m[16];
	snprintf(m, sizeof(m), "%o", (unsigned)(mode & 07777));
	int code = 0;
	char *out = NULL;
	int r = sh_path(sb, "chmod -- \"$1\" \"$2\" 2>&1", m, path, &out, &code, err);
	if (!r && code)
		r = sfs_errf(err, out && strstr(out, "No such") ? -ENOENT : -EIO,
			     "e2b: chmod %s: %s", path, out && *out ? out : "failed");
	free(out);
	return r;
}

int e2b_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	char *q = files_query(sb, path), *abs = e2b_abs_path(sb, path);
	if (!q || !abs) {
		free(q);
		free(abs);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	/* multipart: one part named file whose filename is the destination */
	struct sfs_http_req req = {.method = "POST",
				   .upload_field = "file",
				   .upload_fd = fd,
				   .upload_name = abs,
				   .retry_unsafe = true}; /* a whole-file upload can be repeated */
	struct sfs_http_resp resp;
	int r = e2b_envd_req(sb, q, &req, &resp, err);
	free(q);
	free(abs);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300)
		r = sfs_http_status_errf(err, &resp, "e2b: write %s in %s", path[0] ? path : "/",
					 sb->name);
	sfs_http_resp_free(&resp);
	/* uploads make files 0644 and keep an existing file's mode */
	if (!r && mode && (mode & 07777) != 0644)
		r = e2b_fs_chmod(sb, path, mode, err);
	return r;
}

int e2b_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	int r = path_call(sb, "filesystem.Filesystem/MakeDir", path, NULL, err);
	if (r == -EEXIST)
		return sfs_errf(err, -EEXIST, "e2b: mkdir %s: it exists", path);
	if (!r && mode && (mode & 07777) != 0755)
		r = e2b_fs_chmod(sb, path, mode, err);
	return r;
}

int e2b_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	if (!path[0])
		return sfs_errf(err, -EBUSY, "e2b: the workspace root cannot be removed");
	if (!dir)
		return path_call(sb, "filesystem.Filesystem/Remove", path, NULL, err);
	/* Remove is recursive: rmdir must refuse a directory with entries */
	int code = 0;
	char *out = NULL;
	int r = sh_path(sb, "rmdir -- \"$1\" 2>&1", NULL, path, &out, &code, err);
	if (!r && code)
		r = sfs_errf(err,
			     out && strstr(out, "not empty")	 ? -ENOTEMPTY
			     : out && strstr(out, "No such")	 ? -ENOENT
			     : out && strstr(out, "Not a direc") ? -ENOTDIR
								 : -EIO,
			     "e2b: rmdir %s: %s", path, out && *out ? out : "failed");
	free(out);
	return r;
}

int e2b_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	char *a = e2b_abs_path(sb, from), *b = e2b_abs_path(sb, to);
	json_t *body = a && b ? json_pack("{s:s, s:s}", "source", a, "destination", b) : NULL;
	free(a);
	free(b);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = e2b_rpc(sb, "filesystem.Filesystem/Move", body, NULL, err);
	json_decref(body);
	return r;
}

int e2b_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		   struct sfs_err *err)
{
	int code = 0;
	char *out = NULL;
	int r = sh_path(sb, "ln -s -- \"$1\" \"$2\" 2>&1", target, path, &out, &code, err);
	if (!r && code)
		r = sfs_errf(err, out && strstr(out, "exists") ? -EEXIST : -EIO,
			     "e2b: symlink %s: %s", path, out && *out ? out : "failed");
	free(out);
	return r;
}

/* A source tree (ctl/source.c): the archive goes up as one file and is
 * unpacked by one command, two calls whatever the file count. */
int e2b_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	static const char rel[] = ".sandboxfs-source.tar";
	int r = e2b_fs_write(sb, rel, fd, 0600, err);
	if (r)
		return r;
	char *tar = e2b_abs_path(sb, rel), *root = e2b_abs_path(sb, "");
	int code = -1;
	char *out = NULL;
	if (tar && root) {
		const char *args[] = {tar, root, NULL};
		r = e2b_exec(sb, "tar -xf \"$1\" -C \"$2\" 2>&1; s=$?; rm -f -- \"$1\"; exit $s",
			     args, &code, &out, err);
		if (!r && code)
			r = sfs_errf(err, -EIO,
				     "e2b: unpacking the source tree (%lld bytes): tar: %s",
				     (long long)size, out && *out ? out : "failed");
	} else {
		r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (r)
		e2b_fs_remove(sb, rel, false, NULL);
	free(out);
	free(tar);
	free(root);
	return r;
}

/* Several small files in one call (fs/cache/prefetch.c): the kit's bulk
 * read, one Start whose stdout is the tar as it is (stderr travels apart). */
int e2b_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		     int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		     void *arg, struct sfs_err *err)
{
	return sfs_sh_xread_many(&e2b_sh, sb, paths, n, on_file, arg, err);
}
