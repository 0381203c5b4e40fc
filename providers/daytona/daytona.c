/* The Daytona provider: lifecycle, snapshots, forks, ports, and the op table. */
#include "daytona.h"

#include "../config.h"
#include "../redact.h"
#include "../util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char create_keys[] =
    "provider image snapshot autostop ephemeral network network_allow cpu memory disk "
    "target public";

static bool known_option(const char *k)
{
	if (!strncmp(k, "env.", 4) || !strncmp(k, "label.", 6))
		return true;
	return sfs_word_in(create_keys, k);
}

static int parse_int_opt(const char *k, const char *v, long lo, long hi, json_t *body,
			 const char *field, struct sfs_err *err)
{
	char *end;
	long n = strtol(v, &end, 10);
	if (!*v || *end || n < lo || n > hi)
		return sfs_errf(err, -EINVAL, "daytona: %s=%s: expected a number from %ld to %ld",
				k, v, lo, hi);
	return json_object_set_new(body, field, json_integer(n)) ? -ENOMEM : 0;
}

static bool truthy(const char *v)
{
	return !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes");
}

/* The CreateSandbox body for `new ... provider=daytona` options. */
static int create_body(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, const char *snapshot,
		       json_t **out, struct sfs_err *err)
{
	json_t *body = json_object(), *env = json_object(), *labels = json_object();
	char name[80];
	snprintf(name, sizeof(name), "sandboxfs-%s", sb->key); /* may be cut: never, a key < 40 */
	int r = (!body || !env || !labels) ? -ENOMEM : 0;
	for (size_t i = 0; !r && i < sb->env.n; i++)
		r = json_object_set_new(env, sb->env.v[i].key, json_string(sb->env.v[i].val));
	if (!r)
		r = json_object_set_new(labels, "sandboxfs.name", json_string(sb->name));
	if (!r)
		r = json_object_set_new(body, "name", json_string(name));
	if (r) {
		r = sfs_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; opts && i < opts->n && !r; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (!known_option(k)) {
			r = sfs_errf(err, -EINVAL,
				     "daytona: unknown option \"%s\" (known: %s env.K= label.K=)",
				     k, create_keys);
		} else if (!strncmp(k, "label.", 6)) {
			r = json_object_set_new(labels, k + 6, json_string(v)) ? -ENOMEM : 0;
		} else if (!strcmp(k, "image") && !snapshot) {
			char *df = NULL;
			if (asprintf(&df, "FROM %s\n", v) < 0)
				r = -ENOMEM;
			else
				r = json_object_set_new(body, "buildInfo",
							json_pack("{s:s, s:[]}",
								  "dockerfileContent", df,
								  "contextHashes"))
					? -ENOMEM
					: 0;
			free(df);
		} else if (!strcmp(k, "snapshot")) {
			snapshot = v;
		} else if (!strcmp(k, "autostop")) {
			r = parse_int_opt(k, v, 0, 1 << 20, body, "autoStopInterval", err);
		} else if (!strcmp(k, "ephemeral")) {
			if (truthy(v))
				r = json_object_set_new(body, "autoDeleteInterval", json_integer(0))
					? -ENOMEM
					: 0;
		} else if (!strcmp(k, "network")) {
			if (strcmp(v, "block") && strcmp(v, "open"))
				r = sfs_errf(err, -EINVAL,
					     "daytona: network=%s: expected block or open", v);
			else
				r = json_object_set_new(body, "networkBlockAll",
							json_boolean(!strcmp(v, "block")))
					? -ENOMEM
					: 0;
		} else if (!strcmp(k, "network_allow")) {
			r = json_object_set_new(body, "networkAllowList", json_string(v)) ? -ENOMEM
											  : 0;
		} else if (!strcmp(k, "cpu") || !strcmp(k, "memory") || !strcmp(k, "disk")) {
			r = parse_int_opt(k, v, 1, 1024, body, k, err);
		} else if (!strcmp(k, "target")) {
			r = json_object_set_new(body, "target", json_string(v)) ? -ENOMEM : 0;
		} else if (!strcmp(k, "public")) {
			r = json_object_set_new(body, "public", json_boolean(truthy(v))) ? -ENOMEM
											 : 0;
		}
		if (r == -ENOMEM)
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (!r && snapshot && json_object_set_new(body, "snapshot", json_string(snapshot)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r && (json_object_set(body, "env", env) || json_object_set(body, "labels", labels)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
out:
	json_decref(env);
	json_decref(labels);
	if (r) {
		json_decref(body);
		return r;
	}
	*out = body;
	return 0;
}

static void delete_remote(const char *id)
{
	char path[256];
	struct sfs_err err = {0};
	if (sfs_pathf(path, sizeof(path), "/sandbox/%s", id) < 0)
		return; /* never a DELETE of a cut id */
	int r = dt_api("DELETE", path, NULL, NULL, NULL, &err);
	if (r && r != -ENOENT)
		sfs_log(SFS_LOG_WARN, "daytona: could not delete sandbox %s: %s", id, err.msg);
}

/* POSTs body to path (a new sandbox), waits for it and fills sb; on any
 * failure the new sandbox is deleted again. */
static int make_sandbox(struct sfs_sandbox *sb, const char *path, json_t *body, const char *image,
			struct sfs_err *err)
{
	json_t *o = NULL;
	int r = dt_api("POST", path, body, &o, NULL, err);
	if (r)
		return r;
	r = dt_adopt(sb, o, err);
	json_decref(o);
	if (!r)
		r = dt_wait_state(sb, "started", err);
	if (!r)
		r = dt_fetch_workdir(sb, err);
	if (!r)
		r = sfs_sb_publish(sb, NULL, image, NULL, err);
	if (r && sb->id)
		delete_remote(sb->id);
	return r;
}

static int dt_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	json_t *body = NULL;
	int r = create_body(sb, opts, NULL, &body, err);
	if (r)
		return r;
	const char *image = sfs_kv_get(opts, "snapshot");
	if (!image)
		image = sfs_kv_get(opts, "image");
	r = make_sandbox(sb, "/sandbox", body, image ? image : "default", err);
	json_decref(body);
	return r;
}

static int dt_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "daytona: no sandbox id to resume");
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandbox/%s", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "daytona: sandbox id too long");
	json_t *o = NULL;
	int r = dt_api("GET", path, NULL, &o, NULL, err);
	if (r == -ENOENT)
		return sfs_errf(err, -ENOENT, "daytona: sandbox %s is gone", sb->id);
	if (r)
		return r;
	const char *state = json_string_value(json_object_get(o, "state"));
	char st[32];
	snprintf(st, sizeof(st), "%s",
		 state ? state : ""); /* may be cut: compared with short words only */
	r = dt_adopt(sb, o, err);
	json_decref(o);
	if (r)
		return r;
	if (!strcmp(st, "stopped") || !strcmp(st, "archived") || !strcmp(st, "paused")) {
		if (sfs_pathf(path, sizeof(path), "/sandbox/%s/start", sb->id) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "daytona: sandbox id too long");
		r = dt_api("POST", path, NULL, NULL, NULL, err);
		if (r)
			return r;
	}
	if (strcmp(st, "started"))
		r = dt_wait_state(sb, "started", err);
	if (!r && !sb->workspace)
		r = dt_fetch_workdir(sb, err);
	if (!r && !sb->image)
		r = sfs_sb_publish(sb, NULL, "default", NULL, err);
	return r;
}

static int dt_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandbox/%s", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "daytona: sandbox id too long");
	int r = dt_api("DELETE", path, NULL, NULL, NULL, err);
	if (r == -ENOENT)
		r = 0; /* already gone is what we wanted */
	if (!r)
		sfs_sb_delete_snapshots(sb);
	return r;
}

static int lifecycle(struct sfs_sandbox *sb, const char *verb, const char *want,
		     struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandbox/%s/%s", sb->id, verb) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "daytona: sandbox id too long");
	int r = dt_api("POST", path, NULL, NULL, NULL, err);
	return r ? r : dt_wait_state(sb, want, err);
}

static int dt_stop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return lifecycle(sb, "stop", "stopped", err);
}

static int dt_start(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return lifecycle(sb, "start", "started", err);
}

static int dt_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	char rnd[9], name[128], lab[48] = "";
	if (sfs_random_hex(rnd, 8))
		return sfs_errf(err, -EIO, "random: out of entropy");
	size_t k = 0;
	for (const char *p = label ? label : ""; *p && k < sizeof(lab) - 1; p++)
		lab[k++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '-';
	lab[k] = '\0';
	snprintf(name, sizeof(name), "sandboxfs-%.8s-%s%s%s", sb->key, lab, k ? "-" : "",
		 rnd); /* may be cut: never, 8 + 48 + 9 < 128 */
	json_t *body = json_pack("{s:s}", "name", name);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char path[256];
	int r = sfs_pathf(path, sizeof(path), "/sandbox/%s/snapshot", sb->id) < 0
		    ? sfs_errf(err, -ENAMETOOLONG, "daytona: sandbox id too long")
		    : dt_api("POST", path, body, NULL, NULL, err);
	json_decref(body);
	if (!r)
		r = dt_wait_state(sb, "started", err); /* snapshotting -> started */
	if (!r && !(*id = strdup(name)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	return r;
}

static int dt_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	/* a new sandbox from the snapshot takes this one's place */
	struct sfs_sandbox fresh;
	memset(&fresh, 0, sizeof(fresh));
	memcpy(fresh.name, sb->name, sizeof(fresh.name));
	memcpy(fresh.key, sb->key, sizeof(fresh.key));
	fresh.provider = sb->provider;
	fresh.env = sb->env;
	json_t *body = NULL;
	int r = create_body(&fresh, NULL, snapshot_id, &body, err);
	if (!r)
		r = make_sandbox(&fresh, "/sandbox", body, snapshot_id, err);
	json_decref(body);
	bool made = !r; /* make_sandbox deletes what it made when it fails */
	/* we hold sb->op_mutex: sb->id cannot change under us */
	char *old = r ? NULL : (sb->id ? strdup(sb->id) : NULL);
	if (!r && sb->id && !old)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r)
		r = sfs_sb_publish(sb, fresh.id, fresh.image, fresh.workspace, err);
	if (r) {
		if (made && fresh.id)
			delete_remote(fresh.id);
	} else {
		/* the new sandbox's toolbox goes with its id */
		dt_state_take(sb, &fresh);
	}
	free(fresh.id);
	free(fresh.workspace);
	free(fresh.image);
	dt_state_free(&fresh);
	if (old)
		delete_remote(old);
	free(old);
	return r;
}

static int dt_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	char path[512];
	if (sfs_pathf(path, sizeof(path), "/snapshots/%s", snapshot_id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "daytona: snapshot id too long");
	int r = dt_api("DELETE", path, NULL, NULL, NULL, err);
	return r == -ENOENT ? 0 : r;
}

static int dt_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		   struct sfs_err *err)
{
	json_t *body = NULL;
	int r;
	if (from) {
		r = create_body(dst, NULL, from, &body, err);
		if (!r)
			r = make_sandbox(dst, "/sandbox", body, from, err);
	} else {
		char name[80], path[256];
		snprintf(name, sizeof(name), "sandboxfs-%s",
			 dst->key); /* may be cut: never, a key < 40 */
		body = sfs_pathf(path, sizeof(path), "/sandbox/%s/fork", src->id) < 0
			   ? NULL
			   : json_pack("{s:s}", "name", name);
		r = body ? make_sandbox(dst, path, body, src->image ? src->image : "default", err)
			 : sfs_errf(err, -ENOMEM, "out of memory");
	}
	json_decref(body);
	return r;
}

static int dt_expose(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandbox/%s/ports/%d/preview-url", sb->id, port) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "daytona: sandbox id too long");
	json_t *o = NULL;
	int r = dt_api("GET", path, NULL, &o, NULL, err);
	if (r)
		return r;
	const char *u = json_string_value(json_object_get(o, "url"));
	const char *token = json_string_value(json_object_get(o, "token"));
	/* the preview token opens the port to anyone: a secret like the key */
	if (token)
		sfs_redact_add_secret(token);
	if (!u)
		r = sfs_errf(err, -EPROTO, "daytona: no preview URL for port %d", port);
	else if (!(*url = strdup(u)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	return r;
}

static bool dt_configured(char *why, size_t len)
{
	if (!dt_api_key()) {
		snprintf(why, len,
			 "no API key: set DAYTONA_API_KEY in the environment or daytona.api_key "
			 "in the config file");
		return false;
	}
	char *base = sfs_http_base_url("daytona.api_url", "DAYTONA_API_URL", DT_DEFAULT_API);
	snprintf(why, len, "ready: Daytona API at %s",
		 base ? base : DT_DEFAULT_API); /* message: may be cut */
	free(base);
	return true;
}

static const struct sfs_provider_ops daytona_ops = {
    .create = dt_create,
    .resume = dt_resume,
    .destroy = dt_destroy,
    .run_start = dt_run_start,
    .run_refresh = dt_run_refresh,
    .journal_read = dt_journal_read,
    .fs_stat = dt_fs_stat,
    .fs_list = dt_fs_list,
    .fs_read = dt_fs_read,
    .fs_read_many = dt_fs_read_many,
    .fs_read_many_max = 1024,
    .fs_write = dt_fs_write,
    .fs_put_tree = dt_fs_put_tree,
    .fs_mkdir = dt_fs_mkdir,
    .fs_remove = dt_fs_remove,
    .fs_rename = dt_fs_rename,
    .fs_chmod = dt_fs_chmod,
    .fs_symlink = dt_fs_symlink,
    .snapshot = dt_snapshot,
    .restore = dt_restore,
    .state_save = dt_state_save,
    .state_load = dt_state_load,
    .state_free = dt_state_free,
    .snapshot_delete = dt_snapshot_delete,
    .fork = dt_fork,
    .expose = dt_expose,
    .stop = dt_stop,
    .start = dt_start,
    .configured = dt_configured,
};

static const char *const daytona_credential_env[] = {"DAYTONA_API_KEY", NULL};

const struct sfs_provider sfs_provider_daytona = {
    .name = "daytona",
    /* killableProcesses: there is no per-command kill (provider-apis.md
     * §1.3), so journals are polled and `cancel` destroys the sandbox.
     * writableStdin: false: stdin of a daytona session is not wired here.
     * networkPolicy: network=block and network_allow= are passed to create,
     * but nothing here has observed them enforced (the emulator only records
     * them), so the flag stays false until a test against the real service
     * proves it. */
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
    .credential_env = daytona_credential_env,
    .ops = &daytona_ops,
    .options = sfs_daytona_options,
};
