/* The Vercel provider: options, lifecycle, sessions, snapshots, forks, ports, the op table. */
#include "vercel.h"

#include "../config.h"
#include "../options.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char create_keys[] = "provider image runtime ports timeout vcpus persistent resume "
				  "network region snapshot name";

static bool known_option(const char *k)
{
	if (!strncmp(k, "env.", 4) || !strncmp(k, "tag.", 4))
		return true;
	return sfs_word_in(create_keys, k);
}

static int parse_long(const char *k, const char *v, long lo, long hi, long *out,
		      struct sfs_err *err)
{
	char *end;
	long n = strtol(v, &end, 10);
	if (!*v || *end || n < lo || n > hi)
		return sfs_errf(err, -EINVAL, "vercel: %s=%s: expected a number from %ld to %ld", k,
				v, lo, hi);
	*out = n;
	return 0;
}

static int parse_bool(const char *k, const char *v, bool *out, struct sfs_err *err)
{
	if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
		*out = true;
	else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
		*out = false;
	else
		return sfs_errf(err, -EINVAL, "vercel: %s=%s: expected true or false", k, v);
	return 0;
}

/* ports=3000,8080: at most 4 (the API's limit). */
static int parse_ports(const char *v, json_t *arr, struct sfs_err *err)
{
	char *copy = strdup(v), *save = NULL;
	if (!copy)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = 0, n = 0;
	for (char *t = strtok_r(copy, ",", &save); t && !r; t = strtok_r(NULL, ",", &save)) {
		long p = 0;
		r = parse_long("ports", t, 1, 65535, &p, err);
		if (!r && ++n > 4)
			r = sfs_errf(err, -EINVAL, "vercel: ports=%s: at most 4 ports", v);
		if (!r && json_array_append_new(arr, json_integer(p)))
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (!r && !n)
		r = sfs_errf(err, -EINVAL, "vercel: ports=%s: expected PORT[,PORT]...", v);
	free(copy);
	return r;
}

/* network=none|host|allow:H,H... (SPEC §11) as a Vercel networkPolicy. */
static int network_policy(const char *v, json_t **out, struct sfs_err *err)
{
	if (!strcmp(v, "none"))
		*out = json_pack("{s:s}", "mode", "deny-all");
	else if (!strcmp(v, "host"))
		*out = json_pack("{s:s}", "mode", "allow-all");
	else if (!strncmp(v, "allow:", 6) && v[6]) {
		json_t *hosts = json_array();
		char *copy = strdup(v + 6), *save = NULL;
		for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && hosts;
		     t = strtok_r(NULL, ",", &save))
			if (json_array_append_new(hosts, json_string(t))) {
				json_decref(hosts);
				hosts = NULL;
			}
		free(copy);
		*out = hosts && copy ? json_pack("{s:o}", "allow", hosts) : NULL;
		if (!copy)
			json_decref(hosts);
	} else {
		return sfs_errf(err, -EINVAL,
				"vercel: network=%s: expected none, host or allow:H,...", v);
	}
	return *out ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
}

/* Sets body.key to v (taken), -ENOMEM with a message. */
static int put(json_t *body, const char *key, json_t *v, struct sfs_err *err)
{
	return json_object_set_new(body, key, v) ? sfs_errf(err, -ENOMEM, "out of memory") : 0;
}

/* The create body for `new ... provider=vercel` options; *resume is set by
 * resume=true (then only the name matters). */
static int create_body(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, const char *project,
		       json_t **out, bool *resume, struct sfs_err *err)
{
	json_t *body = json_object(), *env = json_object(), *tags = json_object();
	int r = body && env && tags ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
	const char *name = sb->name, *image = NULL, *runtime = NULL;
	bool persistent = true; /* stop/start keep the files (durableFilesystem) */
	*resume = false;
	for (size_t i = 0; !r && i < sb->env.n; i++)
		r = put(env, sb->env.v[i].key, json_string(sb->env.v[i].val), err);
	for (size_t i = 0; opts && !r && i < opts->n; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		long n = 0; /* -O2 cannot see parse_long set it whenever it returns 0 */
		if (!known_option(k)) {
			r = sfs_errf(err, -EINVAL,
				     "vercel: unknown option \"%s\" (known: %s env.K= tag.K=)", k,
				     create_keys);
		} else if (!strncmp(k, "tag.", 4)) {
			r = put(tags, k + 4, json_string(v), err);
		} else if (!strcmp(k, "image")) {
			image = v;
		} else if (!strcmp(k, "runtime")) {
			runtime = v;
		} else if (!strcmp(k, "name")) {
			name = v;
		} else if (!strcmp(k, "ports")) {
			json_t *arr = json_array();
			r = arr ? parse_ports(v, arr, err)
				: sfs_errf(err, -ENOMEM, "out of memory");
			if (!r)
				r = put(body, "ports", arr, err);
			else
				json_decref(arr);
		} else if (!strcmp(k, "timeout")) {
			/* seconds here, milliseconds in the API */
			r = parse_long(k, v, 1, 7 * 24 * 3600, &n, err);
			if (!r)
				r = put(body, "timeout", json_integer((json_int_t)n * 1000), err);
		} else if (!strcmp(k, "vcpus")) {
			r = parse_long(k, v, 1, 64, &n, err);
			if (!r)
				r = put(body, "resources",
					json_pack("{s:I}", "vcpus", (json_int_t)n), err);
		} else if (!strcmp(k, "persistent")) {
			r = parse_bool(k, v, &persistent, err);
		} else if (!strcmp(k, "resume")) {
			r = parse_bool(k, v, resume, err);
		} else if (!strcmp(k, "network")) {
			json_t *pol = NULL;
			r = network_policy(v, &pol, err);
			if (!r)
				r = put(body, "networkPolicy", pol, err);
		} else if (!strcmp(k, "region")) {
			r = put(body, "region", json_string(v), err);
		} else if (!strcmp(k, "snapshot")) {
			r = put(body, "source",
				json_pack("{s:s, s:s}", "type", "snapshot", "snapshotId", v), err);
		}
	}
	if (!r && image && runtime)
		r = sfs_errf(err, -EINVAL, "vercel: image= and runtime= exclude each other");
	if (!r)
		r = put(body, "projectId", json_string(project), err);
	if (!r)
		r = put(body, "name", json_string(name), err);
	if (!r && image)
		r = put(body, "image", json_string(image), err);
	if (!r && runtime)
		r = put(body, "runtime", json_string(runtime), err);
	if (!r)
		r = put(body, "persistent", json_boolean(persistent), err);
	if (!r && json_object_set(body, "env", env))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r && json_object_set(body, "tags", tags))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(env);
	json_decref(tags);
	if (r) {
		json_decref(body);
		return r;
	}
	*out = body;
	return 0;
}

/* "/v2/sandboxes/NAME" + suffix, the name escaped. */
static int sandbox_path(const char *name, const char *suffix, char *buf, size_t len,
			struct sfs_err *err)
{
	char *e = sfs_http_escape_component(name);
	if (!e)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int n = snprintf(buf, len, "/v2/sandboxes/%s%s", e, suffix);
	free(e);
	return n < 0 || (size_t)n >= len ? sfs_errf(err, -ENAMETOOLONG, "vercel: name too long")
					 : 0;
}

/* GET the sandbox (resume=true starts a new session when it is stopped)
 * until its session runs, and adopt it. */
static int get_running(struct sfs_sandbox *sb, const char *name, bool resume, struct sfs_err *err)
{
	char path[512];
	int r = sandbox_path(name, "", path, sizeof(path), err);
	double limit = sfs_opt_get_double("vercel.timeout");
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long delay_ms = 100;
	while (!r) {
		json_t *o = NULL;
		r = vc_call("GET", path, resume ? "resume=true" : NULL, true, NULL, &o, err);
		if (r == -ENOENT)
			r = sfs_errf(err, -ENOENT, "vercel: sandbox %s is gone", name);
		if (r)
			break;
		json_t *session = json_object_get(o, "session");
		const char *st = json_string_value(json_object_get(session, "status"));
		if (st && !strcmp(st, "running")) {
			r = vc_adopt(sb, o, err);
			json_decref(o);
			break;
		}
		if (st && (!strcmp(st, "failed") || !strcmp(st, "aborted"))) {
			r = sfs_errf(err, -EIO, "vercel: sandbox %s: its session %s", name, st);
			json_decref(o);
			break;
		}
		json_decref(o);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - t0.tv_sec) > limit)
			return sfs_errf(
			    err, -ETIMEDOUT,
			    "vercel: sandbox %s did not start within %.0f s (session %s)", name,
			    limit, st ? st : "unknown");
		struct timespec d = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
		nanosleep(&d, NULL);
		if (delay_ms < 1000)
			delay_ms *= 2;
	}
	return r;
}

/* Adopts a create/fork answer, waiting for the session when it is not running yet. */
static int adopt_started(struct sfs_sandbox *sb, json_t *o, struct sfs_err *err)
{
	const char *st =
	    json_string_value(json_object_get(json_object_get(o, "session"), "status"));
	int r = vc_adopt(sb, o, err);
	if (!r && (!st || strcmp(st, "running")))
		r = get_running(sb, sb->id, false, err);
	return r;
}

static void delete_remote(const char *name)
{
	char path[512];
	struct sfs_err err = {0};
	if (sandbox_path(name, "", path, sizeof(path), &err))
		return;
	int r = vc_call("DELETE", path, NULL, true, NULL, NULL, &err);
	if (r && r != -ENOENT)
		sfs_log(SFS_LOG_WARN, "vercel: could not delete sandbox %s: %s", name, err.msg);
}

static int vc_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	struct vc_creds c;
	int r = vc_creds(&c, err);
	if (r)
		return r;
	json_t *body = NULL;
	bool resume = false;
	r = create_body(sb, opts, c.project, &body, &resume, err);
	if (r)
		return r;
	const char *name = json_string_value(json_object_get(body, "name"));
	if (resume) {
		/* an existing named sandbox, its session started if stopped */
		r = get_running(sb, name, true, err);
		json_decref(body);
		if (!r)
			r = sfs_sb_publish(sb, NULL, "default", NULL, err);
		return r;
	}
	const char *img = sfs_kv_get(opts, "image");
	if (!img)
		img = sfs_kv_get(opts, "runtime");
	json_t *o = NULL;
	r = vc_call("POST", "/v2/sandboxes", NULL, false, body, &o, err);
	json_decref(body);
	if (r)
		return r;
	r = adopt_started(sb, o, err);
	json_decref(o);
	if (!r)
		r = sfs_sb_publish(sb, NULL, img ? img : "default", NULL, err);
	if (r && sb->id)
		delete_remote(sb->id);
	return r;
}

static int vc_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "vercel: no sandbox name to resume");
	char *name = strdup(sb->id);
	if (!name)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = get_running(sb, name, true, err);
	free(name);
	if (!r && !sb->image)
		r = sfs_sb_publish(sb, NULL, "default", NULL, err);
	return r;
}

static int vc_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	char path[512];
	char *e = sfs_http_escape_component(snapshot_id);
	if (!e)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int pr = sfs_pathf(path, sizeof(path), "/v2/sandboxes/snapshots/%s", e);
	free(e);
	if (pr < 0)
		return sfs_errf(err, -ENAMETOOLONG, "vercel: snapshot id too long");
	int r = vc_call("DELETE", path, NULL, false, NULL, NULL, err);
	return r == -ENOENT ? 0 : r;
}

static int vc_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	char path[512];
	int r = sandbox_path(sb->id, "", path, sizeof(path), err);
	if (!r)
		r = vc_call("DELETE", path, NULL, true, NULL, NULL, err);
	if (r == -ENOENT)
		r = 0; /* already gone is what we wanted */
	if (!r)
		sfs_sb_delete_snapshots(sb);
	return r;
}

static int vc_stop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	char path[256];
	int r = vc_session_path(sb, "/stop", path, sizeof(path), err);
	return r ? r : vc_call("POST", path, NULL, false, NULL, NULL, err);
}

static int vc_start(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return vc_resume(sb, err);
}

/* A snapshot stops the session (provider-apis.md §2.5): a new one starts
 * from it, so runs alive at that moment end (their status says lost). */
static int vc_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	(void)label; /* Vercel snapshots have no name: the label lives in snapshots/ID/info */
	char path[256];
	int r = vc_session_path(sb, "/snapshot", path, sizeof(path), err);
	json_t *o = NULL;
	if (!r)
		r = vc_call("POST", path, NULL, false, NULL, &o, err);
	if (r)
		return r;
	const char *sid = json_string_value(json_object_get(json_object_get(o, "snapshot"), "id"));
	if (!sid)
		r = sfs_errf(err, -EPROTO, "vercel: the snapshot answer has no id");
	else if (!(*id = strdup(sid)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	if (!r)
		r = vc_resume(sb, err);
	return r;
}

static int vc_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	/* stop, point the sandbox at the snapshot, start a session from it */
	int r = vc_stop(sb, err);
	char path[512];
	json_t *body = json_pack("{s:s}", "currentSnapshotId", snapshot_id);
	if (!r && !body)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r)
		r = sandbox_path(sb->id, "", path, sizeof(path), err);
	if (!r)
		r = vc_call("PATCH", path, NULL, true, body, NULL, err);
	json_decref(body);
	/* whatever happened, the sandbox should run again */
	struct sfs_err e = {0};
	int s = vc_resume(sb, r ? &e : err);
	return r ? r : s;
}

static int vc_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		   struct sfs_err *err)
{
	if (from) {
		struct sfs_kvlist opts = {0};
		int r = sfs_kv_set(&opts, "snapshot", from);
		r = r ? sfs_errf(err, -ENOMEM, "out of memory") : vc_create(dst, &opts, err);
		sfs_kv_free(&opts);
		return r;
	}
	/* a fork boots from the source's current snapshot: make one of now */
	char *sid = NULL;
	int r = vc_snapshot(src, NULL, &sid, err);
	if (r)
		return r;
	char path[512];
	json_t *body = json_pack("{s:s, s:b}", "name", dst->name, "persistent", 1), *o = NULL;
	r = body ? sandbox_path(src->id, "/fork", path, sizeof(path), err)
		 : sfs_errf(err, -ENOMEM, "out of memory");
	if (!r)
		r = vc_call("POST", path, NULL, true, body, &o, err);
	json_decref(body);
	if (!r)
		r = adopt_started(dst, o, err);
	json_decref(o);
	if (!r)
		r = sfs_sb_publish(dst, NULL, src->image ? src->image : "default", NULL, err);
	if (r && dst->id)
		delete_remote(dst->id);
	/* the snapshot only carried the fork */
	struct sfs_err e = {0};
	if (vc_snapshot_delete(src, sid, &e))
		sfs_log(SFS_LOG_WARN, "%s: %s", src->name, e.msg);
	free(sid);
	return r;
}

/* The route of port in an answer's routes, or NULL. */
static const char *route_url(json_t *o, int port)
{
	json_t *routes = json_object_get(o, "routes"), *rt;
	size_t i;
	json_array_foreach(routes, i, rt)
	{
		if (json_integer_value(json_object_get(rt, "port")) == port)
			return json_string_value(json_object_get(rt, "url"));
	}
	return NULL;
}

static int vc_expose(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	char path[512];
	json_t *o = NULL, *ports = NULL, *body = NULL;
	int r = sandbox_path(sb->id, "", path, sizeof(path), err);
	if (!r)
		r = vc_call("GET", path, NULL, true, NULL, &o, err);
	const char *u = r ? NULL : route_url(o, port);
	if (!r && !u) {
		/* declare it beside the ports the sandbox has */
		ports = json_array();
		json_t *rt;
		size_t i;
		json_array_foreach(json_object_get(o, "routes"), i, rt)
		{
			json_array_append(ports, json_object_get(rt, "port"));
		}
		json_array_append_new(ports, json_integer(port));
		body = json_pack("{s:o}", "ports", ports);
		json_decref(o);
		o = NULL;
		r = body ? vc_call("PATCH", path, NULL, true, body, &o, err)
			 : sfs_errf(err, -ENOMEM, "out of memory");
		json_decref(body);
		u = r ? NULL : route_url(o, port);
	}
	if (!r && !u)
		r = sfs_errf(err, -EPROTO, "vercel: no route for port %d", port);
	else if (!r && !(*url = strdup(u)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	return r;
}

static bool vc_configured(char *why, size_t len)
{
	struct vc_creds c;
	struct sfs_err err = {0};
	if (vc_creds(&c, &err)) {
		snprintf(why, len, "%s", err.msg); /* message: may be cut */
		return false;
	}
	char *base = sfs_http_base_url("vercel.api_url", "VERCEL_API_URL", VC_DEFAULT_API);
	snprintf(why, len, "ready: Vercel API at %s (team %s, project %s)",
		 base ? base : VC_DEFAULT_API, c.team, c.project); /* message: may be cut */
	free(base);
	return true;
}

static const struct sfs_provider_ops vercel_ops = {
    .create = vc_create,
    .resume = vc_resume,
    .destroy = vc_destroy,
    .run_start = vc_run_start,
    .run_refresh = vc_run_refresh,
    .journal_read = vc_journal_read,
    .fs_stat = vc_fs_stat,
    .fs_list = vc_fs_list,
    .fs_read = vc_fs_read,
    .fs_read_many = vc_fs_read_many,
    .fs_write = vc_fs_write,
    .fs_put_tree = vc_fs_put_tree,
    .fs_mkdir = vc_fs_mkdir,
    .fs_remove = vc_fs_remove,
    .fs_rename = vc_fs_rename,
    .fs_chmod = vc_fs_chmod,
    .fs_symlink = vc_fs_symlink,
    .snapshot = vc_snapshot,
    .restore = vc_restore,
    .snapshot_delete = vc_snapshot_delete,
    .fork = vc_fork,
    .expose = vc_expose,
    .stop = vc_stop,
    .start = vc_start,
    .state_save = vc_state_save,
    .state_load = vc_state_load,
    .state_free = vc_state_free,
    .configured = vc_configured,
};

static const char *const vercel_credential_env[] = {"VERCEL_TOKEN", "VERCEL_OIDC_TOKEN", NULL};

const struct sfs_provider sfs_provider_vercel = {
    .name = "vercel",
    /* killableProcesses: the command API's kill signals the command it
     * started, here the journal wrapper, not the run's own process group
     * (the wrapper setsid's it), so no test sees a run's group gone: false,
     * journals are polled and `cancel` destroys the sandbox.
     * writableStdin: the command API has no stdin.
     * networkPolicy: network= is passed as networkPolicy, but nothing here
     * has observed it enforced (the emulator only records it). */
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
	    [SFS_CAP_DURABLE_FS] = true,
	    [SFS_CAP_FORK] = true,
	},
    .host_fs = false,
    .credential_env = vercel_credential_env,
    .ops = &vercel_ops,
    .options = sfs_vercel_options,
};
