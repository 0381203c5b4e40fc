/* sandboxfs: option parsing, the mount, and an orderly shutdown. */
#include "fs.h"
#include "kernel_io.h"
#include "remote/remote.h"

#include "../ctl/tree.h"
#include "../providers/config.h"
#include "../providers/http/http.h"
#include "../providers/options.h"
#include "../providers/provider.h"
#include "../providers/util.h"

#include "sfs_revision.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The version, the revision it was built from, and the versions of the
 * libraries it runs with now (not those it was built against). */
static void print_version(void)
{
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	int gmaj = 0, gmin = 0, grev = 0, fv = fuse_version();
	git_libgit2_version(&gmaj, &gmin, &grev);
	printf("sandboxfs %s (%s)\n", SFS_VERSION, SFS_REVISION);
	printf("libfuse %d.%d, libcurl %s, libgit2 %d.%d.%d, jansson %s\n", fv / 100, fv % 100,
	       cv && cv->version ? cv->version : "?", gmaj, gmin, grev, jansson_version_str());
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: sandboxfs [options] MOUNTPOINT\n"
		"\n"
		"Presents sandboxes as a directory tree: mkdir MOUNTPOINT/NAME makes one,\n"
		"`echo 'exec CMD' > NAME/ctl` runs a command, `cat NAME/journal` streams it.\n"
		"\n"
		"  --provider NAME     same as -o provider=NAME\n"
		"  --state DIR         same as -o state=DIR\n"
		"  --config FILE       same as -o config=FILE\n"
		"  --log-level N       same as -o log_level=N\n"
		"  -o KEY[=VALUE],...  an option below; each is also a `KEY = VALUE` line of\n"
		"                      the config file (the command line wins)\n"
		"  -f                  stay in the foreground\n"
		"  -d                  debug: foreground, FUSE request log\n"
		"  -h, --help          this text\n"
		"  -V, --version       the version, the git revision it was built from, and the\n"
		"                      versions of libfuse, libcurl, libgit2 and jansson\n");
	size_t n;
	const struct sfs_opt_table *t = sfs_opt_tables(&n);
	sfs_opt_print_help(out, t, n);
	fprintf(out,
		"\nlibfuse mount options, passed on to libfuse (-o only):\n"
		"  allow_other (implies default_permissions: permissions are enforced),\n"
		"  allow_root, auto_unmount, default_permissions, ro, rw, [no]suid, [no]dev,\n"
		"  [no]exec, [no]atime, fsname=, subtype=, max_read=, ... (see mount.fuse3(8));\n"
		"  fstab's x-* options are ignored\n"
		"\n"
		"Unmount with `fusermount3 -u MOUNTPOINT`; sandboxes and runs go on.\n");
}

struct cli {
	bool foreground, debug;
	const char *mountpoint;
	char fuse_opts[4096];
};

static int fuse_opt_append(struct cli *c, const char *opt, struct sfs_err *err)
{
	size_t used = strlen(c->fuse_opts), len = strlen(opt);
	if (used + 1 + len >= sizeof(c->fuse_opts))
		return sfs_errf(err, -E2BIG, "too many libfuse mount options");
	c->fuse_opts[used] = ',';
	memcpy(c->fuse_opts + used + 1, opt, len + 1);
	return 0;
}

/* One option: libfuse's own go to libfuse as written (raw, still escaped);
 * every other key must be a row of the option tables. */
static int take_one(struct cli *c, char *key, const char *val, const char *raw, struct sfs_err *err)
{
	/* fstab's userspace-only options (mount(8) "x-*"): nothing for us */
	if (!strncmp(key, "x-", 2) || !strncmp(key, "X-", 2))
		return 0;
	if (sfs_opt_is_fuse(key)) {
		/* the kernel's checks on top of ours once others may enter */
		if (!strcmp(key, "allow_other") && fuse_opt_append(c, "default_permissions", err))
			return err->code;
		return fuse_opt_append(c, raw, err);
	}
	size_t n;
	const struct sfs_opt_table *t = sfs_opt_tables(&n);
	const char *canon;
	int r = sfs_opt_check(t, n, key, val, &canon, err);
	if (r)
		return r;
	if (sfs_config_set(key, canon))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return 0;
}

/* The argument of -o: options separated by commas; `\,` is a comma inside a
 * value and `\\` a backslash, as libfuse reads it. */
static int take_o(struct cli *c, const char *opts, struct sfs_err *err)
{
	size_t len = strlen(opts);
	char *raw = malloc(len + 1), *key = malloc(len + 1);
	if (!raw || !key) {
		free(raw);
		free(key);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	int r = 0;
	for (const char *p = opts; !r;) {
		size_t rl = 0, kl = 0;
		while (*p && *p != ',') {
			if (*p == '\\' && p[1]) {
				raw[rl++] = *p++;
				key[kl++] = *p;
				raw[rl++] = *p++;
				continue;
			}
			raw[rl++] = key[kl++] = *p++;
		}
		raw[rl] = key[kl] = '\0';
		if (kl) {
			char *eq = strchr(key, '=');
			if (eq)
				*eq = '\0';
			r = take_one(c, key, eq ? eq + 1 : NULL, raw, err);
		}
		if (!*p)
			break;
		p++;
	}
	free(raw);
	free(key);
	return r;
}

static int parse_cli(int argc, char **argv, struct cli *c)
{
	const char *positional[2];
	int npos = 0;
	struct sfs_err err = {0};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *next = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 1;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			print_version();
			return 1;
		} else if (!strcmp(a, "-f")) {
			c->foreground = true;
		} else if (!strcmp(a, "-d")) {
			c->debug = c->foreground = true;
		} else if (!strncmp(a, "-o", 2)) {
			/* `-o X` and `-oX` are one option, with one message when bad */
			const char *opts = a[2] ? a + 2 : next;
			if (!opts) {
				fprintf(stderr, "sandboxfs: -o needs an argument (see --help)\n");
				return -1;
			}
			if (take_o(c, opts, &err)) {
				fprintf(stderr, "sandboxfs: %s\n", err.msg);
				return -1;
			}
			if (!a[2])
				i++;
		} else if (!strcmp(a, "--provider") || !strcmp(a, "--state") ||
			   !strcmp(a, "--config") || !strcmp(a, "--log-level")) {
			if (!next) {
				fprintf(stderr, "sandboxfs: %s needs an argument (see --help)\n",
					a);
				return -1;
			}
			char key[16];
			if (sfs_pathf(key, sizeof(key), "%s",
				      !strcmp(a, "--log-level") ? "log_level" : a + 2) < 0) {
				fprintf(stderr, "sandboxfs: %s: unknown option (see --help)\n", a);
				return -1;
			}
			if (take_one(c, key, next, NULL, &err)) {
				fprintf(stderr, "sandboxfs: %s: %s\n", a, err.msg);
				return -1;
			}
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

/* The state directory (resolved: no symlinks left in it) is the daemon's
 * own: the registry, run directories and the files a root daemon writes
 * there are trusted.  So, as ssh's StrictModes does for ~/.ssh, it must be
 * owned by the daemon's user and not writable by group or others, and no
 * directory above it may let anyone else rename it away or swap it: each
 * is owned by root or us and not writable by others unless sticky.  0, or
 * -1 with the reason printed. */
static int check_state_dir(const char *statedir)
{
	uid_t me = geteuid();
	struct stat st;
	if (lstat(statedir, &st) < 0) {
		fprintf(stderr, "sandboxfs: state dir %s: %s\n", statedir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "sandboxfs: state dir %s: not a directory\n", statedir);
		return -1;
	}
	if (st.st_uid != me) {
		fprintf(stderr,
			"sandboxfs: state dir %s belongs to uid %u, not to sandboxfs's user (uid "
			"%u): refused, since whoever owns it controls what this daemon reads and "
			"writes there; chown it or give another --state\n",
			statedir, (unsigned)st.st_uid, (unsigned)me);
		return -1;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		fprintf(stderr,
			"sandboxfs: state dir %s may be written by others (mode %04o): refused; "
			"`chmod go-w` it\n",
			statedir, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	char up[PATH_MAX];
	if (sfs_pathf(up, sizeof(up), "%s", statedir) < 0) {
		fprintf(stderr, "sandboxfs: state dir %s: path too long\n", statedir);
		return -1;
	}
	for (char *slash = strrchr(up, '/'); slash; slash = strrchr(up, '/')) {
		if (slash == up)
			slash[1] = '\0'; /* "/" itself, last */
		else
			*slash = '\0';
		if (lstat(up, &st) < 0) {
			fprintf(stderr, "sandboxfs: state dir %s: %s: %s\n", statedir, up,
				strerror(errno));
			return -1;
		}
		bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX);
		if ((st.st_uid != 0 && st.st_uid != me) || others_write) {
			fprintf(stderr,
				"sandboxfs: state dir %s is inside %s (uid %u, mode %04o), which "
				"someone other than root or sandboxfs's user may change: refused\n",
				statedir, up, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			return -1;
		}
		if (slash == up)
			break;
	}
	return 0;
}

static int lock_state(const char *statedir)
{
	char path[PATH_MAX + 16];
	if (sfs_pathf(path, sizeof(path), "%s/lock", statedir) < 0)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
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

	struct cli c = {0};
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
	/* The config file by its real path, resolved now (the daemon's working
	 * directory becomes /): an isolated sandbox masks that file, and bwrap
	 * cannot bind over a symlink. */
	const char *given_config = sfs_config_get("config", NULL);
	char config_real[PATH_MAX];
	if (given_config && realpath(given_config, config_real) &&
	    sfs_config_set("config", config_real) < 0) {
		fprintf(stderr, "sandboxfs: out of memory\n");
		return 1;
	}
	/* Every key the code reads now has its table default unless given. */
	size_t ntables;
	const struct sfs_opt_table *tables = sfs_opt_tables(&ntables);
	if (sfs_opt_apply_defaults(tables, ntables) < 0) {
		fprintf(stderr, "sandboxfs: out of memory\n");
		return 1;
	}
	sfs_log_level = (int)sfs_config_get_double("log_level", c.debug ? 3 : 1);

	const char *pname = sfs_config_get("provider", getenv("SANDBOXFS_PROVIDER"));
	const struct sfs_provider *provider = pname ? sfs_provider_find(pname) : sfs_providers[0];
	if (!provider) {
		/* only $SANDBOXFS_PROVIDER gets here: -o and the config file checked theirs */
		const char *canon;
		sfs_opt_check(tables, ntables, "provider", pname, &canon, &err);
		fprintf(stderr, "sandboxfs: $SANDBOXFS_PROVIDER: %s\n", err.msg);
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
	if (check_state_dir(statedir) < 0)
		return 1;
	int lockfd = lock_state(statedir);
	if (lockfd < 0) {
		fprintf(stderr, "sandboxfs: state dir %s: %s\n", statedir,
			lockfd == -EBUSY ? "in use by another sandboxfs" : strerror(-lockfd));
		return 1;
	}

	/* A daemon's stderr is /dev/null: the log goes to a file, opened now
	 * so that a failure is still told.  STATE/sandboxfs.log is never a
	 * symlink followed as root; a log= path is the administrator's. */
	int logfd = -1;
	if (!c.foreground) {
		const char *logopt = sfs_config_get("log", "");
		char logpath[PATH_MAX + 32];
		if (sfs_pathf(logpath, sizeof(logpath), "%s", logopt) < 0 ||
		    (!logpath[0] &&
		     sfs_pathf(logpath, sizeof(logpath), "%s/sandboxfs.log", statedir) < 0)) {
			fprintf(stderr, "sandboxfs: log %s: path too long\n", logopt);
			close(lockfd);
			return 1;
		}
		logfd = open(logpath,
			     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY |
				 (logopt[0] ? 0 : O_NOFOLLOW | O_NONBLOCK),
			     0600);
		struct stat lst;
		int e = logfd < 0 ? errno : 0;
		/* a symlink, a FIFO (ENXIO without a reader), a hard link to
		 * another file ... */
		if (!logopt[0] && (logfd < 0 ? lstat(logpath, &lst) == 0 && !S_ISREG(lst.st_mode)
					     : fstat(logfd, &lst) < 0 || !S_ISREG(lst.st_mode) ||
						   lst.st_nlink != 1))
			e = -1;
		if (e) {
			if (logfd >= 0)
				close(logfd);
			fprintf(stderr, "sandboxfs: log %s: %s\n", logpath,
				e < 0 ? "not a regular file of its own (a symlink, a hard link, "
					"a FIFO ...): remove it, or give -o log=FILE"
				      : strerror(e));
			close(lockfd);
			return 1;
		}
	}

	/* Long: the workspace watcher pushes outside changes into the kernel
	 * (fs/workspace/watcher.c "Coherence"), and falls back to 1 s without inotify. */
	sfs_fs_opts.ws.attr_timeout = sfs_opt_get_double("attr_timeout");
	sfs_fs_opts.ws.entry_timeout = sfs_opt_get_double("entry_timeout");
	/* never exactly 0: the kernel would re-look-up every entry */
	if (sfs_fs_opts.ws.attr_timeout <= 0)
		sfs_fs_opts.ws.attr_timeout = 0.001;
	if (sfs_fs_opts.ws.entry_timeout <= 0)
		sfs_fs_opts.ws.entry_timeout = 0.001;
	sfs_fs_opts.ws.writeback = sfs_opt_get_bool("writeback");
	/* checked octal by its option row; only the read bits mean anything */
	sfs_fs_opts.runs_mode = (mode_t)strtol(sfs_opt_get("runs_mode"), NULL, 8) & 0444;
	int max_threads = (int)sfs_opt_get_double("max_threads");

	/* base= may not lie inside it; resolved now, while nothing is mounted
	 * there (later a lookup would be a request to this very daemon) */
	static char mount_real[PATH_MAX];
	sfs_mount_dir = realpath(c.mountpoint, mount_real) ? mount_real : c.mountpoint;
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
	__atomic_store_n(&sfs_mount_live, true, __ATOMIC_RELEASE);
	r = kio_install(se, sfs_opt_get_bool("killpriv_v2"),
			sfs_opt_get_bool("passthrough") && !sfs_opt_get_bool("writeback"));
	if (r < 0) {
		sfs_log(SFS_LOG_ERR, "fuse_session_custom_io: %s", strerror(-r));
		goto out_unmount;
	}
	if (fuse_daemonize(c.foreground) != 0)
		goto out_unmount;
	if (logfd >= 0) {
		dup2(logfd, 2);
		close(logfd);
		logfd = -1;
	}
	/* threads start after the fork of daemonizing: a thread does not
	 * survive fork, and a lock it held then would stay held in the child */
	if (sfs_fs_start(&err) < 0) {
		sfs_log(SFS_LOG_ERR, "%s", err.msg);
		goto out_unmount;
	}
	r = rws_start();
	if (r < 0) {
		sfs_log(SFS_LOG_ERR, "remote workspace retry thread: %s", strerror(-r));
		sfs_fs_stop();
		goto out_unmount;
	}
	sfs_log(SFS_LOG_INFO, "mounted on %s, state in %s, default provider %s", c.mountpoint,
		statedir, provider->name);

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc) {
		sfs_fs_stop();
		goto out_unmount;
	}
	fuse_loop_cfg_set_max_threads(lc, (unsigned)max_threads);
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
	if (logfd >= 0)
		close(logfd);
	close(lockfd);
	fuse_opt_free_args(&args);
	return rc;
}
