/*
 * The namespace holder of an isolation=bwrap sandbox (daemon side).
 *
 * bwrap cannot put a second command into a running sandbox's mount, ipc or
 * uts namespace (it always makes a new mount namespace; --userns/--pidns
 * join only those two), so each sandbox gets one long-lived bwrap whose
 * command is `sleep infinity`, and every run joins that process's
 * namespaces with setns (join.c).  bwrap runs as an unprivileged uid: run
 * as root it keeps its capabilities and maps the sandbox uid to host root
 * (reference/isolation.md §0 items 1 and 2).  It is not --die-with-parent:
 * the holder outlives the daemon, and a new daemon finds it again by the
 * pid and start time kept in the sandbox's registry entry.
 */
#include "isolation.h"

#include "../config.h"
#include "../options.h"
#include "../util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <mntent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int sfs_holder_check(const char *bwrap, struct sfs_err *err)
{
	if (access(bwrap, X_OK) < 0)
		return sfs_errf(err, -EOPNOTSUPP,
				"isolation=bwrap: bubblewrap is not usable at %s (%s); install "
				"the bubblewrap package or set local.bwrap=PATH",
				bwrap, strerror(errno));
	char buf[64];
	if (sfs_proc_read("/proc/sys/user/max_user_namespaces", buf, sizeof(buf)) > 0 &&
	    atol(buf) <= 0)
		return sfs_errf(err, -EOPNOTSUPP,
				"isolation=bwrap: user namespaces are disabled "
				"(user.max_user_namespaces is 0)");
	if (sfs_proc_read("/proc/sys/kernel/unprivileged_userns_clone", buf, sizeof(buf)) > 0 &&
	    atol(buf) == 0)
		return sfs_errf(err, -EOPNOTSUPP,
				"isolation=bwrap: unprivileged user namespaces are disabled "
				"(kernel.unprivileged_userns_clone is 0)");
	return 0;
}

struct argv {
	const char *v[96];
	int n;
};

static void add(struct argv *a, const char *s)
{
	if (a->n < (int)(sizeof(a->v) / sizeof(a->v[0])) - 1)
		a->v[a->n++] = s;
}

/* The host's top-level system entries: a merged-/usr symlink is recreated,
 * a real directory bound read-only. */
static void add_system(struct argv *a, char links[][64], int *nl, char real[2][PATH_MAX])
{
	static const char *const tops[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
	add(a, "--ro-bind");
	add(a, "/usr");
	add(a, "/usr");
	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
		struct stat st;
		if (lstat(tops[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(tops[i], links[*nl], 63);
			if (n <= 0)
				continue;
			links[*nl][n] = '\0';
			add(a, "--symlink");
			add(a, links[(*nl)++]);
			add(a, tops[i]);
		} else if (S_ISDIR(st.st_mode)) {
			add(a, "--ro-bind");
			add(a, tops[i]);
			add(a, tops[i]);
		}
	}
	add(a, "--ro-bind");
	add(a, "/etc");
	add(a, "/etc");
	/* sandboxfs's own config may hold provider credentials: masked (a
	 * read gives EACCES: bwrap's binds are nodev).  The file itself, not
	 * a symlink to it: bwrap cannot bind over a symlink (it would fail
	 * every sandbox), and the link's target is what a read would reach. */
	const char *given[] = {"/etc/sandboxfs.conf", sfs_config_get("config", NULL)};
	const char *conf[2] = {NULL, NULL};
	for (size_t i = 0; i < 2; i++)
		if (given[i] && realpath(given[i], real[i]))
			conf[i] = real[i];
	for (size_t i = 0; i < sizeof(conf) / sizeof(conf[0]); i++) {
		struct stat st;
		if (conf[i] && (!strncmp(conf[i], "/etc/", 5) || !strncmp(conf[i], "/usr/", 5)) &&
		    (i == 0 || !conf[0] || strcmp(conf[i], conf[0]) != 0) &&
		    lstat(conf[i], &st) == 0 && S_ISREG(st.st_mode)) {
			add(a, "--ro-bind");
			add(a, "/dev/null");
			add(a, conf[i]);
		}
	}
}

/* The last line bwrap wrote to its log, for an error message. */
static void last_log_line(const char *path, char *out, size_t len)
{
	char buf[4096];
	out[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	char *nl = strrchr(buf, '\n');
	sfs_msgf(out, len, "%s", nl ? nl + 1 : buf);
}

/* Where a root daemon's holder child mounts the workspace (fd 4) and the
 * net directory (fd 5) for bwrap to bind: /tmp of a private mount
 * namespace (bwrap gives the sandbox a /tmp of its own anyway). */
#define STAGE_WS "/tmp/.sandboxfs-workspace"
#define STAGE_NET "/tmp/.sandboxfs-net"

/* The FUSE mounts (this daemon's first) the staging namespace must drop.
 * It is a copy of the daemon's, and the outer bwrap lives in it as long
 * as the sandbox does: a FUSE mount kept there outlives its unmount on
 * the host (where / is not shared, as in containers, nothing propagates),
 * so its daemon is never told and never exits, and a new one finds the
 * state dir in use.  Listed before fork (getmntent allocates); NULL-ended,
 * or NULL when they cannot be listed. */
static char **fuse_mounts(void)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	if (!f)
		return NULL;
	size_t n = 0, cap = 8;
	char **v = calloc(cap, sizeof(*v));
	struct mntent me;
	char buf[8192];
	while (v && getmntent_r(f, &me, buf, sizeof(buf))) {
		if (strncmp(me.mnt_type, "fuse", 4) != 0)
			continue;
		if (n + 2 > cap) {
			char **w = realloc(v, cap * 2 * sizeof(*v));
			if (!w)
				break;
			v = w;
			cap *= 2;
		}
		if (!(v[n] = strdup(me.mnt_dir)))
			break;
		v[++n] = NULL;
	}
	endmntent(f);
	return v;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* In the holder child, as root: syscalls only (after fork). */
static int stage_dirs(bool net, char **drop)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return -1;
	/* best effort: a mount that cannot be detached is only kept */
	for (size_t i = 0; drop && drop[i]; i++)
		umount2(drop[i], MNT_DETACH | UMOUNT_NOFOLLOW);
	if (mount("sandboxfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0 ||
	    mkdir(STAGE_WS, 0755) < 0 ||
	    syscall(SYS_move_mount, 4, "", AT_FDCWD, STAGE_WS, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return -1;
	if (net && (mkdir(STAGE_NET, 0755) < 0 || syscall(SYS_move_mount, 5, "", AT_FDCWD,
							  STAGE_NET, MOVE_MOUNT_F_EMPTY_PATH) < 0))
		return -1;
	return 0;
}

/* The directory as a detached copy of its mount tree (open_tree), which the
 * child attaches in its own namespace (a plain bind cannot take a source
 * from another mount namespace); an O_PATH fd when not staging. */
static int dir_fd(const char *path, bool stage)
{
	if (!stage)
		return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return (int)syscall(SYS_open_tree, AT_FDCWD, path,
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
}

/* Moves fd above the range the child renumbers into (3..9). */
static int high_fd(int fd)
{
	if (fd < 0)
		return fd;
	int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	return h;
}

/* Waits until init's child (the holder command) has exec'd sleep: bwrap
 * reports its pid 1 before the sandbox is set up, and a run that joined
 * then would see half a mount tree. */
static pid_t wait_target(pid_t init, pid_t outer)
{
	char path[96], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init, (int)init);
	struct timespec step = {0, 5 * 1000 * 1000};
	for (int i = 0; i < 2000; i++) {
		if (sfs_proc_read(path, buf, sizeof(buf)) > 0) {
			pid_t t = (pid_t)atol(buf);
			char comm[96], name[64];
			snprintf(comm, sizeof(comm), "/proc/%d/comm", (int)t);
			if (t > 0 && sfs_proc_read(comm, name, sizeof(name)) > 0 &&
			    strcmp(name, "sleep\n") == 0)
				return t;
		}
		if (waitpid(outer, NULL, WNOHANG) == outer)
			return -1;
		nanosleep(&step, NULL);
	}
	return -1;
}

static pid_t parent_of(pid_t pid);

int sfs_holder_start(const struct sfs_holder_spec *spec, struct sfs_holder *h, struct sfs_err *err)
{
	int r = sfs_holder_check(spec->bwrap, err);
	if (r)
		return r;
	struct argv a = {0};
	char links[8][64];
	char real[2][PATH_MAX]; /* the config files add_system masks */
	int nl = 0;
	add(&a, spec->bwrap);
	add(&a, "--unshare-user");
	add(&a, "--unshare-pid");
	add(&a, "--unshare-ipc");
	add(&a, "--unshare-uts");
	add(&a, "--unshare-cgroup-try");
	if (spec->unshare_net)
		add(&a, "--unshare-net");
	/* no nested user namespaces: a run cannot regain capabilities there */
	add(&a, "--disable-userns");
	add(&a, "--new-session");
	add(&a, "--cap-drop");
	add(&a, "ALL");
	add_system(&a, links, &nl, real);
	add(&a, "--tmpfs");
	add(&a, "/tmp");
	add(&a, "--tmpfs");
	add(&a, "/var/tmp");
	add(&a, "--tmpfs");
	add(&a, "/run");
	/* bwrap runs as the sandbox uid, which may not reach the workspace's
	 * path (bwrap 0.8's --bind-fd resolves the path too): a root daemon's
	 * child stages both directories in a mount namespace of its own */
	bool stage = geteuid() == 0;
	add(&a, "--bind");
	add(&a, stage ? STAGE_WS : spec->workspace);
	add(&a, SFS_ISO_WORKSPACE);
	if (spec->proxy_dir) {
		add(&a, "--bind");
		add(&a, stage ? STAGE_NET : spec->proxy_dir);
		add(&a, SFS_ISO_PROXY_DIR);
	}
	add(&a, "--proc");
	add(&a, "/proc");
	add(&a, "--dev");
	add(&a, "/dev");
	add(&a, "--hostname");
	add(&a, spec->hostname);
	add(&a, "--chdir");
	add(&a, SFS_ISO_WORKSPACE);
	add(&a, "--info-fd");
	add(&a, "3");
	add(&a, "--");
	add(&a, "sleep");
	add(&a, "infinity");
	a.v[a.n] = NULL;

	int ws = high_fd(dir_fd(spec->workspace, stage));
	if (ws < 0)
		return sfs_errf(err, -errno, "isolation: workspace %s: %s", spec->workspace,
				strerror(errno));
	int px = -1;
	if (spec->proxy_dir) {
		px = high_fd(dir_fd(spec->proxy_dir, stage));
		if (px < 0) {
			r = -errno;
			close(ws);
			return sfs_errf(err, r, "isolation: %s: %s", spec->proxy_dir, strerror(-r));
		}
	}
	int logfd = high_fd(open(spec->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
	int info[2] = {-1, -1};
	if (logfd < 0 || pipe2(info, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail_fds;
	}
	info[0] = high_fd(info[0]);
	info[1] = high_fd(info[1]);
	if (info[0] < 0 || info[1] < 0) {
		r = -EMFILE;
		goto fail_fds;
	}
	char *const envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", NULL};
	char **drop = stage ? fuse_mounts() : NULL;
	pid_t pid = fork();
	if (pid < 0) {
		r = -errno;
		free_strv(drop);
		goto fail_fds;
	}
	if (pid == 0) {
		/* async-signal-safe only: no message but through the log */
		setsid();
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0 ||
		    dup2(info[1], 3) < 0 || dup2(ws, 4) < 0 || (px >= 0 && dup2(px, 5) < 0))
			_exit(126);
		close_range(px >= 0 ? 6 : 5, ~0U, 0);
		for (int sig = 1; sig < NSIG; sig++)
			signal(sig, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (stage && stage_dirs(px >= 0, drop) < 0) {
			/* async-signal-safe: the errno by hand */
			char msg[] =
			    "sandboxfs: staging the workspace for bwrap failed: errno 000\n";
			int e = errno;
			msg[sizeof(msg) - 5] = (char)('0' + e / 100 % 10);
			msg[sizeof(msg) - 4] = (char)('0' + e / 10 % 10);
			msg[sizeof(msg) - 3] = (char)('0' + e % 10);
			if (write(2, msg, sizeof(msg) - 1) < 0)
				_exit(125);
			_exit(125);
		}
		if (getuid() == 0 || geteuid() == 0) {
			if (setgroups(0, NULL) < 0 ||
			    setresgid(spec->gid, spec->gid, spec->gid) < 0 ||
			    setresuid(spec->uid, spec->uid, spec->uid) < 0) {
				static const char msg[] =
				    "sandboxfs: cannot switch to the sandbox uid\n";
				if (write(2, msg, sizeof(msg) - 1) < 0)
					_exit(126);
				_exit(126);
			}
		}
		if (chdir("/") < 0)
			_exit(126);
		execve(spec->bwrap, (char *const *)a.v, envp);
		_exit(127);
	}
	free_strv(drop);
	close(info[1]);
	info[1] = -1;
	close(ws);
	ws = -1;
	if (px >= 0)
		close(px);
	px = -1;
	close(logfd);
	logfd = -1;

	/* bwrap writes its info JSON and closes the fd; 10 s at most */
	char buf[2048];
	size_t got = 0;
	for (;;) {
		struct pollfd p = {.fd = info[0], .events = POLLIN};
		int pr = poll(&p, 1, 10000);
		if (pr <= 0)
			break;
		ssize_t n = read(info[0], buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got >= sizeof(buf) - 1)
			break;
	}
	close(info[0]);
	buf[got] = '\0';
	json_t *j = got ? json_loads(buf, 0, NULL) : NULL;
	pid_t init = j ? (pid_t)json_integer_value(json_object_get(j, "child-pid")) : 0;
	json_decref(j);
	pid_t target = init > 0 ? wait_target(init, pid) : -1;
	if (target <= 0) {
		char why[512];
		last_log_line(spec->log_path, why, sizeof(why));
		/* init only while it is still the child of bwrap's outer
		 * process, which is ours and unreaped: its number is pinned */
		int ifd = init > 1 ? (int)syscall(SYS_pidfd_open, init, 0) : -1;
		if (ifd >= 0 && parent_of(init) == pid)
			syscall(SYS_pidfd_send_signal, ifd, SIGKILL, NULL, 0);
		if (ifd >= 0)
			close(ifd);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return sfs_errf(err, -EOPNOTSUPP, "isolation=bwrap: the sandbox did not start: %s",
				why[0] ? why : "bwrap gave no reason");
	}
	h->init = init;
	h->target = target;
	h->start = sfs_proc_start_time(target);
	h->outer = pid;
	h->uid = spec->uid;
	h->gid = spec->gid;
	h->unshare_net = spec->unshare_net;
	return 0;

fail_fds:
	if (ws >= 0)
		close(ws);
	if (px >= 0)
		close(px);
	if (logfd >= 0)
		close(logfd);
	if (info[0] >= 0)
		close(info[0]);
	if (info[1] >= 0)
		close(info[1]);
	return sfs_errf(err, r ? r : -EIO, "isolation: %s", strerror(r ? -r : EIO));
}

bool sfs_holder_alive(const struct sfs_holder *h)
{
	return h->target > 0 && h->start && sfs_proc_start_time(h->target) == h->start;
}

/* pid's parent as /proc/PID/stat says, -1 if unreadable. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (sfs_proc_read(path, buf, sizeof(buf)) <= 0)
		return -1;
	char *p = strrchr(buf, ')');
	int ppid = 0;
	return p && sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid > 1 ? ppid : -1;
}

static bool pidfd_running(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 0;
}

/* A pidfd on child's parent, proven: opened, then child (pinned by
 * child_fd, still running) is seen to still have that parent, so the pidfd
 * names the parent and not a process that got its number; -1 if not. */
static int parent_pidfd(pid_t child, int child_fd)
{
	pid_t parent = parent_of(child);
	if (parent <= 1)
		return -1;
	int fd = (int)syscall(SYS_pidfd_open, parent, 0);
	if (fd < 0)
		return -1;
	if (parent_of(child) != parent || !pidfd_running(child_fd) || !pidfd_running(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

int sfs_holder_kill(const struct sfs_holder *h)
{
	if (!sfs_holder_alive(h))
		return 0;
	/* The recorded numbers are only where to look (a pid can be reused):
	 * a pidfd on the target, its start time checked after the open; the
	 * target's parent is bwrap's pid 1, whose pidfd is proven by the
	 * target still having it as its parent. */
	int tfd = (int)syscall(SYS_pidfd_open, h->target, 0);
	if (tfd < 0)
		return errno == ESRCH ? 0 : -errno;
	if (sfs_proc_start_time(h->target) != h->start) {
		close(tfd);
		return 0;
	}
	int ifd = parent_pidfd(h->target, tfd);
	close(tfd);
	if (ifd < 0)
		return sfs_holder_alive(h) ? -ESRCH : 0;
	int r = syscall(SYS_pidfd_send_signal, ifd, SIGKILL, NULL, 0) < 0 && errno != ESRCH ? -errno
											    : 0;
	close(ifd);
	if (r)
		return r;
	struct timespec step = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 500 && sfs_holder_alive(h); i++)
		nanosleep(&step, NULL);
	return sfs_holder_alive(h) ? -EBUSY : 0;
}

int sfs_holder_format(const struct sfs_holder *h, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%d:%llu:%u:%u:%d", (int)h->target, (unsigned long long)h->start,
			 (unsigned)h->uid, (unsigned)h->gid, h->unshare_net ? 1 : 0);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
