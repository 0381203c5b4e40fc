/*
 * The run agent: one long-lived shell process per container that starts
 * runs and kills them, so a run costs no Engine API exec (an exec is
 * create + start, and runc's exec setup, tens of milliseconds; the agent's
 * fork of a shell is a fraction of one).
 *
 * Its stream is a FIFO in the container, AGENT_DIR/in, which the daemon
 * opens through the overlay merged dir (the same symlink-free walk as every
 * host access) and writes lines to: "run N" or "kill N", N a run number.
 * What a line does is in a file the daemon put in the run's directory
 * before: RUNDIR/.start, the journal wrapper as one single-quoted command
 * line with the run's environment (the shell kit's string form, so no user
 * value is ever spliced into a script), and RUNDIR/.kill, the kill script's
 * line, whose answer the agent leaves in RUNDIR/.kill.out.  The agent takes
 * a .start by renaming it, so a start the daemon gives up on (it renames it
 * away first) never runs twice.
 *
 * Supervision: a write to the FIFO needs a reader, so a dead agent shows as
 * ENXIO at the next run or kill; the daemon then starts a new one (one
 * exec) and waits for its FIFO.  A new agent replaces the FIFO and ends the
 * old agent if it still lives.  The agent outlives the daemon, so a
 * restarted daemon simply finds it; a container restart ends it and the
 * next run starts another.  Only for containers whose files are reachable
 * from this host and whose execs run as root (runs/ is made from here);
 * otherwise, and whenever the agent fails, runs take the per-exec path.
 */
#include "docker.h"
#include "exec.h"
#include "../sh/sh.h"

#include "../options.h"
#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AGENT_DIR DK_DIR "/agent"
#define AGENT_START_MS 5000 /* a new agent's FIFO appears within this */
#define AGENT_TAKE_MS 3000  /* the agent takes a .start within this */

/*
 * $1 the agent's dir, $2 the runs dir.  Each line is a verb and a run
 * number; anything else is ignored.  Jobs close the FIFO (fd 3): a run
 * holding it would keep a dead agent's FIFO open, and lines would go to
 * nobody instead of failing with ENXIO.  The agent never has a child left
 * to reap: the container's reaper gets them.
 *
 * A run is not started with `&`: a shell without job control starts an
 * asynchronous command with SIGINT and SIGQUIT ignored, which no later shell
 * can undo (POSIX), so `kill N INT` would not reach the run.  It is started
 * in the foreground as `setsid sh -c 'exec setsid …'`: the first setsid
 * makes the shell a session (and group) leader, and setsid run by a group
 * leader forks (busybox and util-linux alike); its parent exits at once,
 * which ends the agent's wait, and the child runs the wrapper with every
 * signal at its default.  No setsid in the container: the agent leaves
 * AGENT_DIR/unusable and the per-exec path is taken.
 */
static const char agent_script[] =
    "set -f\n"
    "d=$1 runs=$2\n"
    "mkdir -p \"$d\" || exit 1\n"
    "for c in setsid mkfifo mv; do\n"
    "  command -v $c >/dev/null 2>&1 || { : >\"$d/unusable\"; exit 1; }\n"
    "done\n"
    "old=$(cat \"$d/pid\" 2>/dev/null)\n"
    "if [ -n \"$old\" ] && [ \"$old\" != $$ ] &&\n"
    "   tr '\\0' '\\n' <\"/proc/$old/cmdline\" 2>/dev/null | grep -qx sfs-agent; then\n"
    "  kill \"$old\" 2>/dev/null\n"
    "fi\n"
    "rm -f \"$d/in\" && mkfifo -m 600 \"$d/in\" || exit 1\n"
    "exec 3<>\"$d/in\" </dev/null >/dev/null 2>&1\n"
    "echo $$ >\"$d/.pid.tmp\" && mv \"$d/.pid.tmp\" \"$d/pid\"\n"
    "while read -r verb n <&3; do\n"
    "  case $n in ''|*[!0-9]*) continue;; esac\n"
    "  r=$runs/$n\n"
    "  case $verb in\n"
    "  run) mv \"$r/.start\" \"$r/.started\" 2>/dev/null &&\n"
    "       setsid sh -c 'exec setsid /bin/sh \"$1\"' sfs-job \"$r/.started\" 3<&- ;;\n"
    "  kill) ( exec 3<&-; mv \"$r/.kill\" \"$r/.killing\" &&\n"
    "          { /bin/sh \"$r/.killing\" >\"$r/.kill.tmp\"; mv \"$r/.kill.tmp\" \"$r/.kill.out\"; "
    "} & ) ;;\n"
    "  esac\n"
    "done\n";

bool dk_agent_enabled(struct sfs_sandbox *sb)
{
	if (!sfs_opt_get_bool("docker.agent") || dk_fs_archive_only())
		return false;
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	bool root = d && d->root_user;
	pthread_mutex_unlock(&dk_mu);
	return root;
}

static void sleep_ms(double ms)
{
	long ns = (long)(ms * 1e6);
	struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
	nanosleep(&ts, NULL);
}

/* The agent's FIFO open for writing, or -errno (-ENXIO: no agent reads). */
static int open_fifo(struct sfs_sandbox *sb)
{
	int dir;
	int r = dk_host_open(sb, AGENT_DIR, O_PATH | O_DIRECTORY, 0, &dir, NULL);
	if (r)
		return r;
	int fd = openat(dir, "in", O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	r = fd < 0 ? -errno : 0;
	close(dir);
	if (r)
		return r;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
		close(fd);
		return -EINVAL; /* planted by the container: never ours */
	}
	return fd;
}

static int start_agent(const char *cid, struct sfs_err *err)
{
	const char *args[] = {AGENT_DIR, DK_RUNS_DIR, NULL};
	struct sfs_sh_cmd c;
	int r = sfs_sh_script(&c, agent_script, "sfs-agent", args, err);
	if (r)
		return r;
	struct dk_exec x = {.cid = cid, .argv = (const char *const *)c.argv, .workdir = "/"};
	char eid[DK_ID_MAX];
	r = dk_exec_create(&x, false, eid, sizeof(eid), err);
	sfs_sh_cmd_free(&c);
	return r ? r : dk_exec_start_detached(eid, err);
}

/* Writes "VERB N\n" to the agent, starting one when none reads; -errno. */
/* Whether the agent said it cannot work in this container. */
static bool unusable(struct sfs_sandbox *sb)
{
	int fd;
	if (dk_host_open(sb, AGENT_DIR "/unusable", O_RDONLY, 0, &fd, NULL) != 0)
		return false;
	close(fd);
	return true;
}

/* Sandboxes whose agent did not come up: the per-exec path for a while,
 * rather than a wait for the agent at every run. */
#define AGENT_BACKOFF_MS 60000
static pthread_mutex_t backoff_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct sfs_sandbox *sb;
	int64_t until;
} backoff[32];

static bool backing_off(struct sfs_sandbox *sb, bool start)
{
	int64_t now = dk_now_ms();
	bool on = false;
	pthread_mutex_lock(&backoff_mu);
	size_t slot = 0;
	for (size_t i = 0; i < sizeof(backoff) / sizeof(backoff[0]); i++) {
		if (backoff[i].sb == sb && backoff[i].until > now)
			on = true;
		if (backoff[i].until < backoff[slot].until)
			slot = i;
	}
	if (start && !on) {
		backoff[slot].sb = sb;
		backoff[slot].until = now + AGENT_BACKOFF_MS;
	}
	pthread_mutex_unlock(&backoff_mu);
	return on;
}

static int send_line(struct sfs_sandbox *sb, const char *cid, const char *verb, int n)
{
	int fd = open_fifo(sb);
	if ((fd == -ENXIO || fd == -ENOENT) && unusable(sb))
		return -EOPNOTSUPP;
	if ((fd == -ENXIO || fd == -ENOENT) && backing_off(sb, false))
		return -EAGAIN;
	if (fd == -ENXIO || fd == -ENOENT) {
		struct sfs_err err = {0};
		int r = start_agent(cid, &err);
		if (r) {
			sfs_log(SFS_LOG_WARN, "docker: %.12s: starting the run agent: %s", cid,
				err.msg);
			return r;
		}
		for (int waited = 0; waited < AGENT_START_MS; waited += 2) {
			fd = open_fifo(sb);
			if (fd >= 0 || (fd != -ENXIO && fd != -ENOENT))
				break;
			if (unusable(sb))
				return -EOPNOTSUPP;
			sleep_ms(2);
		}
		if (fd == -ENXIO || fd == -ENOENT) {
			backing_off(sb, true);
			sfs_log(SFS_LOG_WARN,
				"docker: %.12s: the run agent did not start; runs take one exec "
				"each for a minute",
				cid);
		}
	}
	if (fd < 0)
		return fd;
	char line[48];
	int len = snprintf(line, sizeof(line), "%s %d\n", verb, n);
	/* under PIPE_BUF: one write, whole or not at all */
	ssize_t w = write(fd, line, (size_t)len);
	int r = w == len ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return r;
}

/* Creates RUNDIR/name (0600, new): a line that removes the file and execs
 * c's string form, so the shell that reads it becomes the command; -errno. */
static int put_script(int rundir, const char *name, const struct sfs_sh_cmd *c)
{
	char *line = NULL, *text = NULL;
	int r = sfs_sh_cmd_string(c, &line, NULL);
	/* one line: the shell has read all of it before the rm runs, and the
	 * run's environment (secrets too) is left nowhere on disk */
	if (!r && asprintf(&text, "rm -f -- \"$0\"; exec %s\n", line) < 0)
		r = -ENOMEM;
	free(line);
	if (r)
		return r;
	unlinkat(rundir, name, 0);
	int fd = openat(rundir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	r = fd < 0 ? -errno : sfs_write_all(fd, text, strlen(text));
	if (fd >= 0)
		close(fd);
	free(text);
	return r;
}

int dk_agent_run(struct sfs_sandbox *sb, const char *cid, struct sfs_run *run, json_t *env)
{
	char dir[64];
	dk_run_dir(run->n, dir, sizeof(dir));
	struct sfs_kvlist kv = {0};
	int r = 0;
	size_t i;
	json_t *v;
	json_array_foreach(env, i, v)
	{
		const char *s = json_string_value(v), *eq = s ? strchr(s, '=') : NULL;
		if (!eq) {
			r = -EINVAL;
			break;
		}
		char key[256];
		if ((size_t)(eq - s) >= sizeof(key)) {
			r = -EINVAL;
			break;
		}
		memcpy(key, s, (size_t)(eq - s));
		key[eq - s] = '\0';
		if ((r = sfs_kv_set(&kv, key, eq + 1)))
			break;
	}
	struct sfs_sh_run wrap = {.dir = dir,
				  .workspace = sb->workspace ? sb->workspace : "/",
				  .cmd = run->cmd,
				  .env = &kv};
	struct sfs_sh_cmd c = {0};
	if (!r)
		r = sfs_sh_wrapper(&c, &wrap, NULL);
	sfs_kv_free(&kv);
	int rundir = r ? r : dk_run_dir_open(sb, run->n);
	if (rundir >= 0)
		r = put_script(rundir, ".start", &c);
	sfs_sh_cmd_free(&c);
	if (rundir < 0)
		return rundir;
	if (!r)
		r = send_line(sb, cid, "run", run->n);
	/* taken when .start is gone; one not taken in time is taken back, and
	 * if that rename finds nothing the agent took it after all */
	for (int waited = 0; !r; waited++) {
		if (faccessat(rundir, ".start", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			break;
		if (waited * 0.2 >= AGENT_TAKE_MS) {
			r = renameat(rundir, ".start", rundir, ".start.unused") == 0 ? -ETIMEDOUT
										     : 0;
			break;
		}
		sleep_ms(0.2);
	}
	if (r)
		unlinkat(rundir, ".start", 0);
	close(rundir);
	return r;
}

int dk_agent_kill(struct sfs_sandbox *sb, const char *cid, int n, const struct sfs_sh_cmd *kill,
		  double wait_s, char *out, size_t outlen)
{
	int rundir = dk_run_dir_open(sb, n);
	if (rundir < 0)
		return rundir;
	unlinkat(rundir, ".kill.out", 0);
	int r = put_script(rundir, ".kill", kill);
	if (!r)
		r = send_line(sb, cid, "kill", n);
	if (r) {
		unlinkat(rundir, ".kill", 0);
		close(rundir);
		return r;
	}
	/* the kill script takes up to its grace and a bit: look often at
	 * first, then every 10 ms */
	r = -ETIMEDOUT;
	for (double waited = 0;; waited += waited < 20 ? 0.5 : 10) {
		if (waited >= wait_s * 1000) {
			/* not taken: the per-exec path may kill instead; taken: it
			 * ran late, and a second kill finds what is left */
			renameat(rundir, ".kill", rundir, ".kill.unused");
			break;
		}
		int fd = openat(rundir, ".kill.out", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t got = read(fd, out, outlen - 1);
			close(fd);
			out[got > 0 ? got : 0] = '\0';
			char *nl = strchr(out, '\n');
			if (nl)
				*nl = '\0';
			r = 0;
			break;
		}
		sleep_ms(waited < 20 ? 0.5 : 10);
	}
	close(rundir);
	return r;
}

/*
 * Whether run n's wrapper lives, looked at from this host without an exec
 * (a run the agent started has no exec to inspect): the pid in its wpid file
 * is one of the container's pid namespace, which the container's own /proc
 * shows at /proc/INIT/root/proc (INIT: State.Pid of inspect); it is still
 * the wrapper while its cmdline names the run's directory (pids are reused).
 * 1 yes, 0 no, -errno when this host cannot tell.
 */
int dk_agent_wrapper_alive(struct sfs_sandbox *sb, json_t *inspect, int n)
{
	json_int_t init =
	    json_integer_value(json_object_get(json_object_get(inspect, "State"), "Pid"));
	int rundir = init > 0 ? dk_run_dir_open(sb, n) : -EOPNOTSUPP;
	if (rundir < 0)
		return rundir;
	char buf[4096];
	int fd = openat(rundir, "wpid", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, buf, 31) : -1;
	if (fd >= 0)
		close(fd);
	close(rundir);
	int wpid = got > 0 ? (buf[got] = '\0', atoi(buf)) : 0;
	if (wpid <= 0)
		return -ENOENT; /* not started yet, or gone before it wrote one */
	char path[128];
	snprintf(path, sizeof(path), "/proc/%lld/root/proc/%d/cmdline", (long long)init, wpid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? 0 : -errno;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got < 0)
		return errno == ESRCH ? 0 : -errno;
	char dir[64];
	dk_run_dir(n, dir, sizeof(dir));
	for (ssize_t i = 0; i < got; i += (ssize_t)strlen(buf + i) + 1) {
		buf[got] = '\0';
		if (strcmp(buf + i, dir) == 0)
			return 1;
	}
	return 0;
}
