/* The Cloudflare provider: lifecycle, snapshots (persist/hydrate), forks, tunnels, the op table. */
#include "cloudflare.h"

#include "../options.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char create_keys[] = "provider id ready_timeout";

/* `new` options: id= takes a bridge id of the caller's (the bridge makes a
 * sandbox for any id it accepts), ready_timeout= how long the container may
 * take to answer. */
static int parse_opts(const struct sfs_kvlist *opts, const char **id, double *ready,
		      struct sfs_err *err)
{
	*id = NULL;
	*ready = 120;
	for (size_t i = 0; opts && i < opts->n; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (!strncmp(k, "env.", 4) || !strcmp(k, "provider"))
			continue;
		if (!strcmp(k, "id")) {
			*id = v;
		} else if (!strcmp(k, "ready_timeout")) {
			char *end;
			double d = strtod(v, &end);
			if (!*v || *end || !(d > 0 && d <= 3600))
				return sfs_errf(err, -EINVAL,
						"cloudflare: ready_timeout=%s: expected seconds "
						"from 0 to 3600",
						v);
			*ready = d;
		} else if (!strcmp(k, "image")) {
			return sfs_errf(
			    err, -EINVAL,
			    "cloudflare: image= is not per sandbox: the bridge Worker's "
			    "wrangler.jsonc fixes it (docs/cloudflare.md)");
		} else {
			return sfs_errf(err, -EINVAL,
					"cloudflare: unknown option \"%s\" (known: %s env.K=)", k,
					create_keys);
		}
	}
	return 0;
}

/* GET .../running until the container answers (it starts on first use),
 * then publishes id and workspace (our Worker names it; else /workspace). */
static int wait_running(struct sfs_sandbox *sb, const char *id, double limit, struct sfs_err *err)
{
	char path[256];
	int r = cf_path(id, "/running", path, sizeof(path), err);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long delay_ms = 100;
	while (!r) {
		json_t *o = NULL;
		r = cf_call("GET", path, &o, err);
		if (r)
			break;
		if (json_is_true(json_object_get(o, "running"))) {
			const char *ws = json_string_value(json_object_get(o, "workspace"));
			if (!ws || ws[0] != '/')
				ws = CF_WORKSPACE;
			r = sfs_sb_publish(sb, id, sb->image ? NULL : "default", ws, err);
			json_decref(o);
			break;
		}
		json_decref(o);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - t0.tv_sec) > limit)
			return sfs_errf(err, -ETIMEDOUT,
					"cloudflare: sandbox %s did not start within %.0f s", id,
					limit);
		struct timespec d = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
		nanosleep(&d, NULL);
		if (delay_ms < 1000)
			delay_ms *= 2;
	}
	return r;
}

/* POST /v1/sandbox: a new id (the container starts on first use). */
static int mint(char **id, struct sfs_err *err)
{
	json_t *o = NULL;
	int r = cf_call("POST", "/v1/sandbox", &o, err);
	if (r)
		return r;
	const char *s = json_string_value(json_object_get(o, "id"));
	if (!s)
		r = sfs_errf(err, -EPROTO, "cloudflare: POST /v1/sandbox: the answer has no id");
	else if (!(*id = strdup(s)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	return r;
}

static void delete_remote(const char *id)
{
	char path[256];
	struct sfs_err err = {0};
	if (cf_path(id, "", path, sizeof(path), &err))
		return;
	int r = cf_call("DELETE", path, NULL, &err);
	if (r && r != -ENOENT)
		sfs_log(SFS_LOG_WARN, "cloudflare: could not delete sandbox %s: %s", id, err.msg);
}

/* A new sandbox for sb: a minted id (deleted again on failure) or the
 * caller's own. */
static int make(struct sfs_sandbox *sb, const char *given, double ready, struct sfs_err *err)
{
	char *id = NULL;
	int r = given ? ((id = strdup(given)) ? 0 : sfs_errf(err, -ENOMEM, "out of memory"))
		      : mint(&id, err);
	if (!r)
		r = wait_running(sb, id, ready, err);
	if (r && id && !given)
		delete_remote(id);
	free(id);
	return r;
}

static int cf_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	char *url = NULL;
	const char *token, *id;
	double ready;
	int r = cf_creds(&url, &token, err);
	free(url);
	if (!r)
		r = parse_opts(opts, &id, &ready, err);
	return r ? r : make(sb, id, ready, err);
}

static int cf_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "cloudflare: no sandbox id to resume");
	char *id = strdup(sb->id);
	if (!id)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = wait_running(sb, id, sfs_opt_get_double("cloudflare.timeout"), err);
	free(id);
	return r;
}

/* STATEDIR/cloudflare-snapshots[/ID.tar]; an id is letters, digits and '-'. */
static int snap_file(struct sfs_sandbox *sb, const char *id, char *buf, size_t len,
		     struct sfs_err *err)
{
	if (id && (!*id || strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(id)))
		return sfs_errf(err, -ENOENT, "cloudflare: no snapshot %s", id);
	int n = snprintf(buf, len, "%s/cloudflare-snapshots%s%s%s", sb->statedir, id ? "/" : "",
			 id ? id : "", id ? ".tar" : "");
	return n < 0 || (size_t)n >= len ? sfs_errf(err, -ENAMETOOLONG, "cloudflare: path too long")
					 : 0;
}

static int cf_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	char path[256];
	int r = cf_path(sb->id, "", path, sizeof(path), err);
	/* no call may reach the id after the DELETE (it would make a fresh
	 * container): refuse new ones, let those in flight end first */
	if (!r && cf_sb_closing(sb, false, (long)(sfs_opt_get_double("cloudflare.timeout") * 1000)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r) {
		r = cf_call("DELETE", path, NULL, err);
		if (r == -ENOENT)
			r = 0; /* already gone is what we wanted */
		if (r)
			cf_sb_closing(sb, true, 0);
	}
	for (size_t i = 0; !r && i < sb->nsnapshots; i++) {
		char file[4200];
		struct sfs_err e = {0};
		if (!snap_file(sb, sb->snapshots[i].id, file, sizeof(file), &e))
			unlink(file);
	}
	return r;
}

static int cf_stop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	(void)sb;
	return sfs_errf(err, -EOPNOTSUPP,
			"cloudflare: no stop or start: a Cloudflare sandbox sleeps by itself "
			"(the Worker's sleepAfter) and wakes on the next call");
}

static int cf_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	(void)label; /* the label lives in snapshots/ID/info */
	char dir[4200], file[4200], sid[64], tmp[4300];
	unsigned rnd = 0;
	int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (ufd >= 0) {
		if (read(ufd, &rnd, sizeof(rnd)) < 0)
			rnd = 0;
		close(ufd);
	}
	snprintf(sid, sizeof(sid), "cfsnap-%lld-%08x", (long long)time(NULL), rnd);
	int r = snap_file(sb, NULL, dir, sizeof(dir), err);
	if (!r)
		r = snap_file(sb, sid, file, sizeof(file), err);
	if (r)
		return r;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return sfs_errf(err, -errno, "cloudflare: %s: %s", dir, strerror(errno));
	if (sfs_pathf(tmp, sizeof(tmp), "%s.part", file) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "cloudflare: %s: path too long", file);
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sfs_errf(err, -errno, "cloudflare: %s: %s", tmp, strerror(errno));
	r = cf_persist(sb->id, fd, err);
	if (!r && fsync(fd))
		r = sfs_errf(err, -errno, "cloudflare: %s: %s", tmp, strerror(errno));
	close(fd);
	if (!r && rename(tmp, file))
		r = sfs_errf(err, -errno, "cloudflare: %s: %s", file, strerror(errno));
	if (r) {
		unlink(tmp);
		return r;
	}
	if (!(*id = strdup(sid))) {
		unlink(file);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	return 0;
}

/* sh: empties directory $1 (hydrate unpacks on top of what is there). */
static const char clear_script[] = "cd -- \"$1\" || exit 2; "
				   "find . -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + || exit 5";

/* The workspace of sb (id) becomes the tar in fd. */
static int replace_workspace(struct sfs_sandbox *sb, int fd, struct sfs_err *err)
{
	const char *args[] = {sb->workspace ? sb->workspace : CF_WORKSPACE, NULL};
	struct sfs_sh_cmd c;
	int r = sfs_sh_script(&c, clear_script, "sandboxfs-clear", args, err);
	if (r)
		return r;
	int code = 0;
	r = cf_exec_cmd(sb, &c, 0, &code, NULL, NULL, err);
	sfs_sh_cmd_free(&c);
	if (!r && code)
		r = sfs_errf(err, -EIO, "cloudflare: could not empty the workspace of %s (exit %d)",
			     sb->name, code);
	return r ? r : cf_hydrate(sb->id, fd, err);
}

static int open_snapshot(struct sfs_sandbox *sb, const char *sid, int *fd, struct sfs_err *err)
{
	char file[4200];
	int r = snap_file(sb, sid, file, sizeof(file), err);
	if (r)
		return r;
	if ((*fd = open(file, O_RDONLY | O_CLOEXEC)) < 0)
		return sfs_errf(err, errno == ENOENT ? -ENOENT : -errno,
				"cloudflare: snapshot %s: %s", sid, strerror(errno));
	return 0;
}

static int cf_restore(struct sfs_sandbox *sb, const char *sid, struct sfs_err *err)
{
	int fd;
	int r = open_snapshot(sb, sid, &fd, err);
	if (r)
		return r;
	r = replace_workspace(sb, fd, err);
	close(fd);
	return r;
}

static int cf_snapshot_delete(struct sfs_sandbox *sb, const char *sid, struct sfs_err *err)
{
	char file[4200];
	int r = snap_file(sb, sid, file, sizeof(file), err);
	if (r == -ENOENT)
		return 0;
	if (!r && unlink(file) && errno != ENOENT)
		r = sfs_errf(err, -errno, "cloudflare: %s: %s", file, strerror(errno));
	return r;
}

/* A new sandbox hydrated from the source's snapshot `from`, or from a
 * persist of it now: the bridge has no fork of its own. */
static int cf_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		   struct sfs_err *err)
{
	int fd = -1, r;
	if (from) {
		r = open_snapshot(src, from, &fd, err);
	} else {
		char tmpl[4200];
		fd = sfs_pathf(tmpl, sizeof(tmpl), "%s/.cloudflare-fork-XXXXXX", src->statedir) < 0
			 ? (errno = ENAMETOOLONG, -1)
			 : mkostemp(tmpl, O_CLOEXEC);
		r = fd < 0 ? sfs_errf(err, -errno, "cloudflare: %s: %s", tmpl, strerror(errno)) : 0;
		if (fd >= 0) {
			unlink(tmpl);
			r = cf_persist(src->id, fd, err);
		}
	}
	if (!r)
		r = make(dst, NULL, sfs_opt_get_double("cloudflare.timeout"), err);
	if (!r) {
		r = cf_hydrate(dst->id, fd, err);
		if (r)
			delete_remote(dst->id);
	}
	if (fd >= 0)
		close(fd);
	return r;
}

static int cf_expose(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	char suffix[32], path[256];
	snprintf(suffix, sizeof(suffix), "/tunnel/%d", port);
	json_t *o = NULL;
	int r = cf_path(sb->id, suffix, path, sizeof(path), err);
	if (!r)
		r = cf_call("POST", path, &o, err);
	const char *u = r ? NULL : json_string_value(json_object_get(o, "url"));
	if (!r && !u)
		r = sfs_errf(err, -EPROTO, "cloudflare: the tunnel answer for port %d has no url",
			     port);
	else if (!r && !(*url = strdup(u)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	return r;
}

static bool cf_configured(char *why, size_t len)
{
	char *url = NULL;
	const char *token;
	struct sfs_err err = {0};
	if (cf_creds(&url, &token, &err)) {
		snprintf(why, len, "%s", err.msg); /* message: may be cut */
		return false;
	}
	snprintf(why, len, "ready: sandbox bridge at %s", url); /* message: may be cut */
	free(url);
	return true;
}

static const struct sfs_provider_ops cloudflare_ops = {
    .create = cf_create,
    .resume = cf_resume,
    .destroy = cf_destroy,
    .run_start = cf_run_start,
    .run_refresh = cf_run_refresh,
    .journal_read = cf_journal_read,
    .fs_stat = cf_fs_stat,
    .fs_list = cf_fs_list,
    .fs_read = cf_fs_read,
    .fs_read_many = cf_fs_read_many,
    .fs_write = cf_fs_write,
    .fs_put_tree = cf_fs_put_tree,
    .fs_mkdir = cf_fs_mkdir,
    .fs_remove = cf_fs_remove,
    .fs_rename = cf_fs_rename,
    .fs_chmod = cf_fs_chmod,
    .fs_symlink = cf_fs_symlink,
    .snapshot = cf_snapshot,
    .restore = cf_restore,
    .snapshot_delete = cf_snapshot_delete,
    .fork = cf_fork,
    .expose = cf_expose,
    .stop = cf_stop,
    .start = cf_stop,
    .state_free = cf_state_free,
    .configured = cf_configured,
};

static const char *const cloudflare_credential_env[] = {"CLOUDFLARE_SANDBOX_TOKEN", NULL};

const struct sfs_provider sfs_provider_cloudflare = {
    .name = "cloudflare",
    /* killableProcesses: the bridge has no process routes (kill is DELETE
     * of the sandbox), so `kill` is refused and `cancel` destroys.
     * writableStdin: only the PTY websocket has stdin.
     * networkPolicy: egress is fixed by the Worker, not per sandbox.
     * durableFilesystem: a container that sleeps comes back with an empty
     * disk (snapshots are how files outlive it). */
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    [SFS_CAP_PORTS] = true,
	    [SFS_CAP_BACKGROUND] = true,
	    [SFS_CAP_WRITABLE_STDIN] = false,
	    [SFS_CAP_KILLABLE] = false,
	    [SFS_CAP_SNAPSHOTS] = true,
	    [SFS_CAP_NETWORK_POLICY] = false,
	    [SFS_CAP_DURABLE_FS] = false,
	    [SFS_CAP_FORK] = true,
	},
    .host_fs = false,
    .credential_env = cloudflare_credential_env,
    .ops = &cloudflare_ops,
    .options = sfs_cloudflare_options,
};
