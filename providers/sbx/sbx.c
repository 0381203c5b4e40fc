/* The sbx provider: options, lifecycle, network policy, status, the op table. */
#include "sbx.h"

#include "../config.h"
#include "../netpolicy/policy.h"
#include "../sh/sh.h"
#include "../util.h"

#include <errno.h>
#include <git2.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const create_keys[] = {"provider", "name",	 "clone", "cpus",
					  "memory",   "network", NULL};

static bool known_option(const char *k)
{
	if (!strncmp(k, "env.", 4))
		return true;
	for (size_t i = 0; create_keys[i]; i++)
		if (!strcmp(k, create_keys[i]))
			return true;
	return false;
}

/* Runs `sbx ARGS...` to its end: 0, or its failure as an error. */
static int cli_ok(const char *what, const char *const *args, struct sfs_err *err)
{
	struct sbx_result res;
	int r = sbx_cli(args, NULL, 0, sbx_timeout_ms(), &res, err);
	if (!r && res.code)
		r = sbx_cli_fail(&res, what, err);
	sbx_result_free(&res);
	return r;
}

/* network= / `policy network`: the sandbox's rules through `sbx policy`.
 * host: allow everything; none: deny everything; allow:H,...: deny
 * everything but the hosts. */
static int set_network(struct sfs_sandbox *sb, const char *text, struct sfs_err *err)
{
	struct sfs_netpolicy p;
	int r = sfs_netpolicy_parse(text, &p, err);
	if (r)
		return r;
	const char *action = p.mode == SFS_NET_HOST ? "allow" : "deny";
	const char *all[] = {"policy", action, "network", "--sandbox", sb->id, "**", NULL};
	r = cli_ok("policy", all, err);
	for (size_t i = 0; !r && i < p.n; i++) {
		char host[300];
		/* a rule cut would allow another host: refused instead */
		if (p.rules[i].port
			? sfs_pathf(host, sizeof(host), "%s%s:%d",
				    p.rules[i].subdomains ? "*." : "", p.rules[i].host,
				    p.rules[i].port) < 0
			: sfs_pathf(host, sizeof(host), "%s%s", p.rules[i].subdomains ? "*." : "",
				    p.rules[i].host) < 0) {
			r = sfs_errf(err, -ENAMETOOLONG, "sbx: network rule %.64s...: too long",
				     p.rules[i].host);
			break;
		}
		const char *one[] = {"policy", "allow", "network", "--sandbox", sb->id, host, NULL};
		r = cli_ok("policy", one, err);
	}
	sfs_netpolicy_free(&p);
	return r;
}

static int sbx_set_network(struct sfs_sandbox *sb, const char *policy, struct sfs_err *err)
{
	return set_network(sb, policy, err);
}

static void remove_sandbox(const char *name)
{
	const char *args[] = {"rm", "--force", name, NULL};
	struct sfs_err e = {0};
	if (cli_ok("rm", args, &e))
		sfs_log(SFS_LOG_WARN, "sbx: could not remove sandbox %s: %s", name, e.msg);
}

/* The VM's working directory (where exec starts: the clone) as the
 * workspace root; with seeded, the seed repository's .git goes (no clone=
 * means an empty workspace). */
static int fetch_workspace(struct sfs_sandbox *sb, bool seeded, struct sfs_err *err)
{
	struct sfs_sh_cmd c;
	const char *args[] = {seeded ? "seeded" : "cloned", NULL};
	int r = sfs_sh_script(&c, "[ \"$1\" = seeded ] && rm -rf .git; pwd", "sandboxfs-pwd", args,
			      err);
	if (r)
		return r;
	int code = 0;
	char *out = NULL;
	r = sbx_exec(sb, &c, NULL, 0, 0, &code, &out, NULL, err);
	sfs_sh_cmd_free(&c);
	if (!r && (code || !out || out[0] != '/'))
		r = sfs_errf(err, -EPROTO, "sbx: no working directory in sandbox %s (exit %d)",
			     sb->id, code);
	if (!r) {
		out[strcspn(out, "\n")] = '\0';
		r = sfs_sb_publish(sb, NULL, NULL, out, err);
	}
	free(out);
	return r;
}

/* An empty git repository in the state directory: what `--clone` copies
 * when no clone= was given (sbx clones a host git workspace, nothing else). */
static int seed_repo(struct sfs_sandbox *sb, char *buf, size_t len, struct sfs_err *err)
{
	if (sfs_pathf(buf, len, "%s/sbx-seed", sb->statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "sbx: %s: path too long", sb->statedir);
	git_libgit2_init();
	git_repository *repo = NULL;
	int rc = git_repository_init(&repo, buf, 0);
	git_repository_free(repo);
	git_libgit2_shutdown();
	if (rc < 0) {
		const git_error *e = git_error_last();
		return sfs_errf(err, -EIO, "sbx: cannot make a git workspace at %s: %s", buf,
				e ? e->message : "libgit2 error");
	}
	return 0;
}

static int sbx_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *name = NULL, *clone = NULL, *cpus = NULL, *mem = NULL, *net = NULL;
	for (size_t i = 0; i < opts->n; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (!known_option(k))
			return sfs_errf(err, -EINVAL,
					"sbx: unknown option \"%s\" (known: name clone cpus memory "
					"network env.NAME)",
					k);
		if (!strcmp(k, "name"))
			name = v;
		else if (!strcmp(k, "clone"))
			clone = v;
		else if (!strcmp(k, "cpus"))
			cpus = v;
		else if (!strcmp(k, "memory"))
			mem = v;
		else if (!strcmp(k, "network"))
			net = v;
	}
	if (net) {
		struct sfs_netpolicy p;
		int r = sfs_netpolicy_parse(net, &p, err);
		if (r)
			return r;
		sfs_netpolicy_free(&p);
	}
	char seed[4200], dflt[64];
	struct stat st;
	if (clone) {
		char git[4200];
		if (sfs_pathf(git, sizeof(git), "%s/.git", clone) < 0 || clone[0] != '/' ||
		    stat(git, &st))
			return sfs_errf(err, -EINVAL,
					"sbx: clone=%s: not a git repository on this host (an "
					"absolute path with .git)",
					clone);
	} else {
		int r = seed_repo(sb, seed, sizeof(seed), err);
		if (r)
			return r;
		clone = seed;
	}
	if (!name) {
		snprintf(dflt, sizeof(dflt), "sandboxfs-%s",
			 sb->key); /* may be cut: never, a key < 40 */
		name = dflt;
	}
	const char *args[16];
	size_t k = 0;
	args[k++] = "create";
	args[k++] = "--name";
	args[k++] = name;
	args[k++] = "--clone";
	args[k++] = "--quiet";
	if (cpus) {
		args[k++] = "--cpus";
		args[k++] = cpus;
	}
	if (mem) {
		args[k++] = "--memory";
		args[k++] = mem;
	}
	args[k++] = "shell";
	args[k++] = clone;
	args[k] = NULL;
	sfs_log(SFS_LOG_DEBUG, "sbx: create --name %s", name);
	int r = cli_ok("create", args, err);
	if (r)
		return r;
	r = sfs_sb_publish(sb, name, "sbx", NULL, err);
	if (!r)
		r = fetch_workspace(sb, clone == seed, err);
	if (!r && net)
		r = set_network(sb, net, err);
	if (r)
		remove_sandbox(name);
	return r;
}

/* Whether `sbx ls --json` lists name: 0, -ENOENT, or the CLI's error. */
static int find_sandbox(const char *name, struct sfs_err *err)
{
	const char *args[] = {"ls", "--json", NULL};
	struct sbx_result res;
	int r = sbx_cli(args, NULL, 0, sbx_timeout_ms(), &res, err);
	if (r)
		return r;
	if (res.code) {
		r = sbx_cli_fail(&res, "ls", err);
		sbx_result_free(&res);
		return r;
	}
	json_error_t je;
	json_t *o = json_loadb(res.out, res.len, 0, &je), *list = o, *it;
	sbx_result_free(&res);
	if (json_is_object(o))
		list = json_object_get(o, "sandboxes");
	if (!json_is_array(list)) {
		json_decref(o);
		return sfs_errf(err, -EPROTO, "sbx ls --json: not a list of sandboxes");
	}
	r = sfs_errf(err, -ENOENT, "sbx: no sandbox named %s", name);
	size_t i;
	json_array_foreach(list, i, it)
	{
		const char *n = json_string_value(json_object_get(it, "name"));
		if (n && !strcmp(n, name)) {
			sfs_err_clear(err);
			r = 0;
		}
	}
	json_decref(o);
	return r;
}

static int sbx_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "sbx: no sandbox name to resume");
	int r = find_sandbox(sb->id, err);
	if (!r && !sb->image)
		r = sfs_sb_publish(sb, NULL, "sbx", NULL, err);
	if (!r && !sb->workspace)
		r = fetch_workspace(sb, false, err);
	return r;
}

static int sbx_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	const char *args[] = {"rm", "--force", sb->id, NULL};
	int r = cli_ok("rm", args, err);
	return r == -ENOENT ? 0 : r; /* already gone is what we wanted */
}

static int no_stop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	(void)sb;
	return sfs_errf(err, -EOPNOTSUPP,
			"sbx: stop and start are not supported (the sbx CLI sandboxfs drives has "
			"create, exec, ls, rm and policy only)");
}

/* Which of CLI, login and hypervisor is missing.  `sbx ls --json` needs
 * all three: a refusal naming a login or a hypervisor says which. */
static bool sbx_configured(char *why, size_t len)
{
	char cli[4096];
	if (!sbx_cli_path(cli, sizeof(cli))) {
		snprintf(why, len, "missing cli: no sbx CLI on PATH (or at sbx.cli): %s",
			 cli); /* message: may be cut */
		return false;
	}
	const char *args[] = {"ls", "--json", NULL};
	struct sbx_result res;
	struct sfs_err e = {0};
	int r = sbx_cli(args, NULL, 0, 5000, &res, &e);
	if (r) {
		snprintf(why, len, "missing cli: %s", e.msg); /* message: may be cut */
		return false;
	}
	bool ok = res.code == 0;
	if (ok) {
		snprintf(why, len, "ready: sbx CLI at %s (logged in, hypervisor available)",
			 cli); /* message: may be cut */
	} else {
		const char *t = res.errtxt;
		const char *what = "cli";
		if (strcasestr(t, "login") || strcasestr(t, "logged in") ||
		    strcasestr(t, "sign in") || strcasestr(t, "authenticat"))
			what = "login";
		else if (strcasestr(t, "hypervisor") || strcasestr(t, "virtualization") ||
			 strcasestr(t, "kvm"))
			what = "hypervisor";
		snprintf(why, len, "missing %s: sbx ls: %s", what,
			 t[0] ? t : "failed"); /* message: may be cut */
		for (char *p = why; *p; p++)
			if (*p == '\n')
				*p = ' ';
	}
	sbx_result_free(&res);
	return ok;
}

static const struct sfs_provider_ops sbx_ops = {
    .create = sbx_create,
    .resume = sbx_resume,
    .destroy = sbx_destroy,
    .run_start = sbx_run_start,
    .run_refresh = sbx_run_refresh,
    .journal_read = sbx_journal_read,
    .journal_follow = sbx_journal_follow,
    .journal_unfollow = sbx_journal_unfollow,
    .run_kill = sbx_run_kill,
    .fs_stat = sbx_fs_stat,
    .fs_list = sbx_fs_list,
    .fs_read = sbx_fs_read,
    .fs_read_many = sbx_fs_read_many,
    .fs_write = sbx_fs_write,
    .fs_put_tree = sbx_fs_put_tree,
    .fs_mkdir = sbx_fs_mkdir,
    .fs_remove = sbx_fs_remove,
    .fs_rename = sbx_fs_rename,
    .fs_chmod = sbx_fs_chmod,
    .fs_symlink = sbx_fs_symlink,
    .stop = no_stop,
    .start = no_stop,
    .set_network = sbx_set_network,
    .configured = sbx_configured,
};

const struct sfs_provider sfs_provider_sbx = {
    .name = "sbx",
    /* killableProcesses: the kit's group kill through `sbx exec`; true
     * because sbx.bats sees the run's group gone (against the fake CLI).
     * networkPolicy false: network= becomes `sbx policy` calls, but nothing
     * here has observed it enforced (the fake only records them).
     * No snapshots, fork, ports or stdin in the commands sandboxfs drives. */
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    [SFS_CAP_PORTS] = false,
	    [SFS_CAP_BACKGROUND] = true,
	    [SFS_CAP_WRITABLE_STDIN] = false,
	    [SFS_CAP_KILLABLE] = true,
	    [SFS_CAP_SNAPSHOTS] = false,
	    [SFS_CAP_NETWORK_POLICY] = false,
	    [SFS_CAP_DURABLE_FS] = true,
	    [SFS_CAP_FORK] = false,
	},
    .host_fs = false,
    .ops = &sbx_ops,
    .options = sfs_sbx_options,
};
