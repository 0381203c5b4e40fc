/* sandboxfs: option parsing, the mount, and an orderly shutdown. */
#include "fs.h"
#include "remote/remote.h"

#include "../ctl/tree.h"
#include "../providers/config.h"
#include "../providers/http/http.h"
#include "../providers/provider.h"
#include "../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: sandboxfs [options] MOUNTPOINT\n"
	    "\n"
	    "Presents sandboxes as a directory tree: mkdir MOUNTPOINT/NAME makes one,\n"
	    "`echo 'exec CMD' > NAME/ctl` runs a command, `cat NAME/journal` streams it.\n"
	    "\n"
	    "options (each also as -o key=value, and as `key = value` in the config file):\n"
	    "  --provider NAME     default provider for new sandboxes (default: local)\n"
	    "  --state DIR         registry, journals, workspaces (default: /var/lib/sandboxfs\n"
	    "                      for root, else $XDG_STATE_HOME/sandboxfs)\n"
	    "  --config FILE       config file (default: /etc/sandboxfs.conf for root, else\n"
	    "                      $XDG_CONFIG_HOME/sandboxfs/config)\n"
	    "  --log-level N       0 errors .. 3 debug (default 1)\n"
	    "  -o log=FILE         where a daemonized sandboxfs logs (default "
	    "STATE/sandboxfs.log)\n"
	    "  -o attr_timeout=S   workspace attribute cache, seconds (default 86400;\n"
	    "                      changes made behind the mount are pushed within ms)\n"
	    "  -o entry_timeout=S  workspace name cache, seconds (default 86400)\n"
	    "  -o symlinks=raw     show sandbox symlink targets unrewritten (SPEC §5)\n"
	    "  -o writeback        kernel writeback cache for the workspace\n"
	    "  -o max_threads=N    FUSE worker threads (default 16)\n"
	    "  -o local.scrub_env=A,B   env names removed from every local run\n"
	    "  -o local.kill_grace=S    seconds between TERM and KILL (default 2)\n"
	    "  -o allow_other      let other users in (permissions are then enforced)\n"
	    "  -f                  stay in the foreground\n"
	    "  -d                  debug: foreground, FUSE request log\n"
	    "  -h, --help          this text\n"
	    "  -V, --version       the version\n"
	    "\n"
	    "Unmount with `fusermount3 -u MOUNTPOINT`; sandboxes and runs go on.\n");
}

struct cli {
	bool foreground, debug;
	const char *mountpoint;
	const char *state, *config, *provider;
	char fuse_opts[4096];
	int max_threads;
};

/* Our own -o keys go to the config table; the rest goes to libfuse. */
static int take_o(struct cli *c, char *opts)
{
	char *save = NULL;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(o, '=');
		size_t klen = eq ? (size_t)(eq - o) : strlen(o);
		char key[256];
		if (klen >= sizeof(key))
			return -EINVAL;
		memcpy(key, o, klen);
		key[klen] = '\0';
		const char *val = eq ? eq + 1 : "true";
		bool ours = strchr(key, '.') != NULL || !strcmp(key, "provider") ||
			    !strcmp(key, "state") || !strcmp(key, "config") ||
			    !strcmp(key, "log_level") || !strcmp(key, "log") ||
			    !strcmp(key, "attr_timeout") || !strcmp(key, "entry_timeout") ||
			    !strcmp(key, "writeback") || !strcmp(key, "max_threads") ||
			    !strcmp(key, "symlinks");
		if (ours) {
			if (sfs_config_set(key, val))
				return -ENOMEM;
			continue;
		}
		if (!strcmp(key, "allow_other"))
			strncat(c->fuse_opts, ",default_permissions",
				sizeof(c->fuse_opts) - strlen(c->fuse_opts) - 1);
		strncat(c->fuse_opts, ",", sizeof(c->fuse_opts) - strlen(c->fuse_opts) - 1);
		strncat(c->fuse_opts, o, sizeof(c->fuse_opts) - strlen(c->fuse_opts) - 1);
	}
	return 0;
}

static int parse_cli(int argc, char **argv, struct cli *c)
{
	const char *positional[2];
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *next = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 1;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("sandboxfs %s (libfuse %d.%d)\n", SFS_VERSION, FUSE_MAJOR_VERSION,
			       FUSE_MINOR_VERSION);
			return 1;
		} else if (!strcmp(a, "-f")) {
			c->foreground = true;
		} else if (!strcmp(a, "-d")) {
			c->debug = c->foreground = true;
		} else if (!strcmp(a, "-o") && next) {
			char *copy = strdup(next);
			int r = copy ? take_o(c, copy) : -ENOMEM;
			free(copy);
			if (r) {
				fprintf(stderr, "sandboxfs: bad -o %s\n", next);
				return -1;
			}
			i++;
		} else if (!strncmp(a, "-o", 2) && a[2]) {
			char *copy = strdup(a + 2);
			int r = copy ? take_o(c, copy) : -ENOMEM;
			free(copy);
			if (r)
				return -1;
		} else if ((!strcmp(a, "--provider") || !strcmp(a, "--state") ||
			    !strcmp(a, "--config") || !strcmp(a, "--log-level")) &&
			   next) {
			const char *key = !strcmp(a, "--log-level") ? "log_level" : a + 2;
			if (sfs_config_set(key, next))
				return -1;
			i++;
		} else if (a[0] == '-') {
			fprintf(stderr, "sandboxfs: unknown option %s (see --help)\n", a);
			return -1;
		} else if (npos < 2) {
			positional[npos++] = a;
		} else {
			fprintf(stderr, "sandboxfs: too many arguments (see --help)\n");
			return -1;
		}
	}
	if (npos == 0) {
		fprintf(stderr, "sandboxfs: no mountpoint given (see --help)\n");
		return -1;
	}
	/* `mount -t fuse.sandboxfs SOURCE DIR` runs us as `sandboxfs SOURCE DIR -o ...` */
	c->mountpoint = positional[npos - 1];
	return 0;
}

static char *default_path(const char *root_path, const char *xdg, const char *fallback,
			  const char *leaf)
{
	char *out = NULL;
	if (geteuid() == 0)
		return strdup(root_path);
	const char *base = getenv(xdg);
	if (base && *base) {
		if (asprintf(&out, "%s/%s", base, leaf) < 0)
			return NULL;
		return out;
	}
	const char *home = getenv("HOME");
	if (asprintf(&out, "%s/%s/%s", home ? home : "/tmp", fallback, leaf) < 0)
		return NULL;
	return out;
}

static int lock_state(const char *statedir)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/lock", statedir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -EBUSY;
	}
	return fd; /* held until exit */
}

int main(int argc, char **argv)
{
	int helper = sfs_provider_helper_main(argc, argv);
	if (helper >= 0)
		return helper;

	ssize_t n = readlink("/proc/self/exe", sfs_self_exe, sizeof(sfs_self_exe) - 1);
	if (n <= 0) {
		perror("sandboxfs: /proc/self/exe");
		return 1;
	}
	sfs_self_exe[n] = '\0';

	struct cli c = {.max_threads = 16};
	snprintf(c.fuse_opts, sizeof(c.fuse_opts), "fsname=sandboxfs,subtype=sandboxfs");
	int r = parse_cli(argc, argv, &c);
	if (r)
		return r > 0 ? 0 : 2;

	struct sfs_err err = {0};
	char *config = sfs_config_get("config", NULL)
			   ? strdup(sfs_config_get("config", NULL))
			   : default_path("/etc/sandboxfs.conf", "XDG_CONFIG_HOME", ".config",
					  "sandboxfs/config");
	if (!config || sfs_config_load(config, sfs_config_get("config", NULL) != NULL, &err)) {
		fprintf(stderr, "sandboxfs: %s\n", config ? err.msg : "out of memory");
		free(config);
		return 1;
	}
	free(config);
	sfs_log_level = (int)sfs_config_get_double("log_level", c.debug ? 3 : 1);

	const char *pname = sfs_config_get("provider", getenv("SANDBOXFS_PROVIDER"));
	const struct sfs_provider *provider = pname ? sfs_provider_find(pname) : sfs_providers[0];
	if (!provider) {
		fprintf(stderr, "sandboxfs: unknown provider \"%s\"\n", pname);
		return 2;
	}

	char *state =
	    sfs_config_get("state", NULL)
		? strdup(sfs_config_get("state", NULL))
		: default_path("/var/lib/sandboxfs", "XDG_STATE_HOME", ".local/state", "sandboxfs");
	char statedir[PATH_MAX];
	if (!state || sfs_mkdir_p(state, 0700) < 0 || !realpath(state, statedir)) {
		fprintf(stderr, "sandboxfs: state dir %s: %s\n", state ? state : "?",
			strerror(errno));
		free(state);
		return 1;
	}
	free(state);
	int lockfd = lock_state(statedir);
	if (lockfd < 0) {
		fprintf(stderr, "sandboxfs: state dir %s: %s\n", statedir,
			lockfd == -EBUSY ? "in use by another sandboxfs" : strerror(-lockfd));
		return 1;
	}

	/* Long: the workspace watcher pushes outside changes into the kernel
	 * (fs/workspace/watcher.c "Coherence"), and falls back to 1 s without inotify. */
	sfs_fs_opts.ws.attr_timeout = sfs_config_get_double("attr_timeout", 86400.0);
	sfs_fs_opts.ws.entry_timeout = sfs_config_get_double("entry_timeout", 86400.0);
	/* never exactly 0: the kernel would re-look-up every entry */
	if (sfs_fs_opts.ws.attr_timeout <= 0)
		sfs_fs_opts.ws.attr_timeout = 0.001;
	if (sfs_fs_opts.ws.entry_timeout <= 0)
		sfs_fs_opts.ws.entry_timeout = 0.001;
	sfs_fs_opts.ws.writeback = !strcmp(sfs_config_get("writeback", "false"), "true");
	c.max_threads = (int)sfs_config_get_double("max_threads", 16);

	if (tree_init(statedir, provider, &err) < 0) {
		fprintf(stderr, "sandboxfs: %s\n", err.msg);
		return 1;
	}
	if (ws_init(&sfs_fs_opts.ws) < 0) {
		fprintf(stderr, "sandboxfs: workspace layer failed to start\n");
		tree_shutdown();
		return 1;
	}
	if (rws_init() < 0) {
		fprintf(stderr, "sandboxfs: remote workspace layer failed to start\n");
		ws_shutdown();
		tree_shutdown();
		return 1;
	}

	char *fargv[] = {argv[0], "-o", c.fuse_opts, c.debug ? "-d" : NULL, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(c.debug ? 4 : 3, fargv);
	int rc = 1;
	struct fuse_session *se = fuse_session_new(&args, &sfs_ops, sizeof(sfs_ops), NULL);
	if (!se)
		goto out_tree;
	sfs_session = se;
	ws_set_session(se);
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, c.mountpoint) != 0)
		goto out_signals;
	if (fuse_daemonize(c.foreground) != 0)
		goto out_unmount;
	if (!c.foreground) {
		/* a daemon's stderr is /dev/null: the log goes to a file */
		char logpath[PATH_MAX + 32];
		snprintf(logpath, sizeof(logpath), "%s", sfs_config_get("log", ""));
		if (!logpath[0])
			snprintf(logpath, sizeof(logpath), "%s/sandboxfs.log", statedir);
		int lfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (lfd >= 0) {
			dup2(lfd, 2);
			close(lfd);
		}
	}
	/* threads start after the fork of daemonizing */
	if (sfs_fs_start(&err) < 0) {
		sfs_log(SFS_LOG_ERR, "%s", err.msg);
		goto out_unmount;
	}
	sfs_log(SFS_LOG_INFO, "mounted on %s, state in %s, default provider %s", c.mountpoint,
		statedir, provider->name);

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc) {
		sfs_fs_stop();
		goto out_unmount;
	}
	fuse_loop_cfg_set_max_threads(lc, (unsigned)c.max_threads);
	rc = fuse_session_loop_mt(se, lc) != 0;
	fuse_loop_cfg_destroy(lc);
	sfs_fs_stop();
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_tree:
	rws_shutdown();
	ws_shutdown();
	for (size_t i = 0; i < sfs_nproviders; i++)
		if (sfs_providers[i]->ops->shutdown)
			sfs_providers[i]->ops->shutdown();
	tree_shutdown();
	sfs_http_shutdown();
	sfs_kv_free(&sfs_config);
	close(lockfd);
	fuse_opt_free_args(&args);
	return rc;
}
