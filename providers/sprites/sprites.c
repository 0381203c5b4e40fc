/* The Sprites provider: lifecycle, checkpoints, network policy, URL, op table. */
#include "sprites.h"

#include "../config.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char create_keys[] = "provider sprite network public";

/* Sprite names: lowercase letters, digits and '-', 1..63, not starting with '-'. */
static bool sprite_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 63 || s[0] == '-')
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return false;
	return true;
}

/* network=none|host|allow:H,... (SPEC §11) as policy rules: allow each
 * host, then deny everything (DNS-based, §3.2). */
static int network_rules(const char *v, json_t **out, struct sfs_err *err)
{
	json_t *rules = json_array();
	if (!rules)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = 0;
	if (!strcmp(v, "host")) {
		r = json_array_append_new(
		    rules, json_pack("{s:s, s:s}", "domain", "*", "action", "allow"));
	} else if (!strcmp(v, "none") || !strncmp(v, "allow:", 6)) {
		if (v[0] == 'a') {
			char *list = strdup(v + 6), *save = NULL;
			if (!list) {
				json_decref(rules);
				return sfs_errf(err, -ENOMEM, "out of memory");
			}
			for (char *h = strtok_r(list, ",", &save); h && !r;
			     h = strtok_r(NULL, ",", &save))
				r = json_array_append_new(
				    rules, json_pack("{s:s, s:s}", "domain", h, "action", "allow"));
			free(list);
			if (!r && json_array_size(rules) == 0) {
				json_decref(rules);
				return sfs_errf(
				    err, -EINVAL,
				    "sprites: network=%s: allow: needs at least one host", v);
			}
		}
		if (!r)
			r = json_array_append_new(
			    rules, json_pack("{s:s, s:s}", "domain", "*", "action", "deny"));
	} else {
		json_decref(rules);
		return sfs_errf(err, -EINVAL,
				"sprites: network=%s: expected none, host or allow:HOST,...", v);
	}
	if (r) {
		json_decref(rules);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	*out = json_pack("{s:o}", "rules", rules);
	return *out ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
}

static int set_network(struct sfs_sandbox *sb, json_t *policy, struct sfs_err *err)
{
	char path[256];
	if (sp_path(path, sizeof path, sb->id, "/policy/network") < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sprites: %s: name too long", sb->id);
	int r = sp_api("POST", path, policy, NULL, NULL, err);
	json_decref(policy);
	return r;
}

/* `policy network P` (P checked by providers/netpolicy): the same rules
 * as network= on new, on the sprite's policy route. */
static int sp_set_network(struct sfs_sandbox *sb, const char *policy, struct sfs_err *err)
{
	json_t *rules = NULL;
	int r = network_rules(policy, &rules, err);
	return r ? r : set_network(sb, rules, err);
}

static void delete_sprite(const char *name)
{
	char path[256];
	struct sfs_err err = {0};
	if (sp_path(path, sizeof path, name, NULL) < 0)
		return; /* never a DELETE of a cut name */
	int r = sp_api("DELETE", path, NULL, NULL, NULL, &err);
	if (r && r != -ENOENT)
		sfs_log(SFS_LOG_WARN, "sprites: could not delete sprite %s: %s", name, err.msg);
}

/* $HOME in the sprite: the workspace root. */
static int fetch_home(struct sfs_sandbox *sb, struct sfs_err *err)
{
	const char *argv[] = {"/bin/sh", "-c", "printf '%s' \"$HOME\"", NULL};
	int code = -1;
	char *out = NULL;
	int r = sp_exec_capture(sb, argv, 60000, &code, &out, NULL, err);
	if (!r && (code != 0 || !out || out[0] != '/'))
		r = sfs_errf(err, -EIO, "sprites: sprite %s has no $HOME to work in", sb->id);
	if (!r)
		r = sfs_sb_publish(sb, NULL, NULL, out, err);
	free(out);
	return r;
}

static int sp_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *name = sb->name, *network = NULL;
	bool pub = false;
	for (size_t i = 0; opts && i < opts->n; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (!strncmp(k, "env.", 4))
			continue;
		if (!strcmp(k, "sprite"))
			name = v;
		else if (!strcmp(k, "network"))
			network = v;
		else if (!strcmp(k, "public"))
			pub = !strcmp(v, "true");
		else if (strcmp(k, "provider"))
			return sfs_errf(err, -EINVAL,
					"sprites: unknown option \"%s\" (known: %s env.K=)", k,
					create_keys);
	}
	if (!sprite_name_ok(name))
		return sfs_errf(err, -EINVAL,
				"sprites: \"%s\" is not a sprite name (lowercase letters, digits "
				"and '-'): give one with sprite=NAME",
				name);
	json_t *policy = NULL;
	int r = network ? network_rules(network, &policy, err) : 0;
	if (r)
		return r;
	json_t *body = json_pack("{s:s, s:{s:s}}", "name", name, "url_settings", "auth",
				 pub ? "public" : "sprite");
	if (!body) {
		json_decref(policy);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	r = sp_api("POST", "/v1/sprites", body, NULL, NULL, err);
	json_decref(body);
	if (r) {
		json_decref(policy);
		return r;
	}
	r = sfs_sb_publish(sb, name, "sprite", NULL, err);
	if (!r && policy) {
		r = set_network(sb, policy, err);
		policy = NULL;
	}
	json_decref(policy);
	if (!r)
		r = fetch_home(sb, err);
	if (r)
		delete_sprite(name);
	return r;
}

static int sp_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "sprites: no sprite name to resume");
	char path[256];
	if (sp_path(path, sizeof path, sb->id, NULL) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sprites: %s: name too long", sb->id);
	/* any call wakes a sleeping sprite; GET says whether it exists */
	int r = sp_api("GET", path, NULL, NULL, NULL, err);
	if (r == -ENOENT)
		return sfs_errf(err, -ENOENT, "sprites: sprite %s is gone", sb->id);
	if (!r && !sb->image)
		r = sfs_sb_publish(sb, NULL, "sprite", NULL, err);
	if (!r && !sb->workspace)
		r = fetch_home(sb, err);
	return r;
}

static int sp_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	char path[256];
	if (sp_path(path, sizeof path, sb->id, NULL) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sprites: %s: name too long", sb->id);
	int r = sp_api("DELETE", path, NULL, NULL, NULL, err); /* checkpoints go with it */
	return r == -ENOENT ? 0 : r;
}

static int sp_stop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return sfs_errf(err, -EOPNOTSUPP,
			"sprites: no stop or start: a sprite sleeps by itself when idle and "
			"wakes on the next call");
}

/* "Checkpoint v8 created" -> "v8". */
struct cp_done {
	char id[64];
};

static int on_checkpoint(json_t *v, void *arg)
{
	struct cp_done *c = arg;
	const char *type = json_string_value(json_object_get(v, "type"));
	const char *data = json_string_value(json_object_get(v, "data"));
	if (type && !strcmp(type, "complete") && data) {
		const char *p = strstr(data, "Checkpoint ");
		if (p && sscanf(p + 11, "%63s", c->id) != 1)
			c->id[0] = '\0';
	}
	return 0;
}

static int sp_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	char path[256];
	if (sp_path(path, sizeof path, sb->id, "/checkpoint") < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sprites: %s: name too long", sb->id);
	json_t *body = json_pack("{s:s}", "comment", label ? label : "sandboxfs");
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct cp_done c = {{0}};
	int r = sp_api_ndjson("POST", path, body, on_checkpoint, &c, err);
	json_decref(body);
	if (r)
		return r;
	if (!c.id[0])
		return sfs_errf(err, -EPROTO, "sprites: the checkpoint finished without its id");
	if (!(*id = strdup(c.id)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return 0;
}

/* "/v1/sprites/NAME/checkpoints/ID" + suffix into path[512]. */
static int checkpoint_path(struct sfs_sandbox *sb, const char *id, const char *suffix,
			   char path[512], struct sfs_err *err)
{
	char *e = sfs_http_escape_component(id), rest[256];
	if (!e)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = sfs_pathf(rest, sizeof rest, "/checkpoints/%s%s", e, suffix);
	free(e);
	if (r < 0 || sp_path(path, 512, sb->id, rest) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sprites: checkpoint %s: name too long", id);
	return 0;
}

static int sp_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	char path[512];
	int r = checkpoint_path(sb, snapshot_id, "/restore", path, err);
	return r ? r : sp_api_ndjson("POST", path, NULL, NULL, NULL, err);
}

static int sp_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	char path[512];
	int r = checkpoint_path(sb, snapshot_id, "", path, err);
	if (!r)
		r = sp_api("DELETE", path, NULL, NULL, NULL, err);
	return r == -ENOENT ? 0 : r;
}

static int sp_expose(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	if (port != 8080)
		return sfs_errf(err, -EOPNOTSUPP,
				"sprites: only port 8080 has a URL (a sprite's URL routes HTTP to "
				"8080); port %d cannot be exposed",
				port);
	char path[256];
	if (sp_path(path, sizeof path, sb->id, NULL) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sprites: %s: name too long", sb->id);
	json_t *o = NULL;
	int r = sp_api("GET", path, NULL, &o, NULL, err);
	if (r)
		return r;
	const char *u = json_string_value(json_object_get(o, "url"));
	if (!u || !*u)
		r = sfs_errf(err, -EPROTO, "sprites: sprite %s has no URL", sb->id);
	else if (!(*url = strdup(u)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	return r;
}

static bool sp_configured(char *why, size_t len)
{
	if (!sp_token()) {
		snprintf(why, len,
			 "no token: set SPRITES_TOKEN (or SPRITE_TOKEN) in the environment or "
			 "sprites.token in the config file");
		return false;
	}
	char *base = sfs_http_base_url("sprites.api_url", "SPRITES_API_URL", SP_DEFAULT_API);
	snprintf(why, len, "ready: Sprites API at %s",
		 base ? base : SP_DEFAULT_API); /* message: may be cut */
	free(base);
	return true;
}

static const struct sfs_provider_ops sprites_ops = {
    .create = sp_create,
    .resume = sp_resume,
    .destroy = sp_destroy,
    .run_start = sp_run_start,
    .run_refresh = sp_run_refresh,
    .journal_read = sp_journal_read,
    .journal_follow = sp_journal_follow,
    .journal_unfollow = sp_journal_unfollow,
    .fs_stat = sp_fs_stat,
    .fs_list = sp_fs_list,
    .fs_read = sp_fs_read,
    .fs_read_many = sp_fs_read_many,
    .fs_write = sp_fs_write,
    .fs_put_tree = sp_fs_put_tree,
    .fs_mkdir = sp_fs_mkdir,
    .fs_remove = sp_fs_remove,
    .fs_rename = sp_fs_rename,
    .fs_chmod = sp_fs_chmod,
    .fs_symlink = sp_fs_symlink,
    .run_kill = sp_run_kill,
    .run_stdin_write = sp_stdin_write,
    .run_stdin_close = sp_stdin_close,
    .snapshot = sp_snapshot,
    .restore = sp_restore,
    .snapshot_delete = sp_snapshot_delete,
    .expose = sp_expose,
    .set_network = sp_set_network,
    .stop = sp_stop,
    .start = sp_stop,
    .configured = sp_configured,
};

static const char *const sprites_credential_env[] = {"SPRITES_TOKEN", "SPRITE_TOKEN", NULL};

const struct sfs_provider sfs_provider_sprites = {
    .name = "sprites",
    /* Each flag below is proven by tests/bats/sprites.bats against the
     * emulator (no test has run against the real service here).
     * networkPolicy: network= reaches the policy route, but nothing here
     * has seen a sprite refuse or allow a connection, so it stays false. */
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    [SFS_CAP_PORTS] = true,
	    [SFS_CAP_BACKGROUND] = true,
	    [SFS_CAP_WRITABLE_STDIN] = true,
	    [SFS_CAP_KILLABLE] = true,
	    [SFS_CAP_SNAPSHOTS] = true,
	    [SFS_CAP_NETWORK_POLICY] = false,
	    [SFS_CAP_DURABLE_FS] = true,
	    [SFS_CAP_FORK] = false,
	},
    .host_fs = false,
    .credential_env = sprites_credential_env,
    .ops = &sprites_ops,
    .options = sfs_sprites_options,
};
