/*
 * The in-sandbox shell kit, run for real: every generated command is
 * executed by the host's /bin/sh and, when busybox is installed, by busybox
 * sh with busybox's applets first on PATH (the docker test image is
 * busybox).  The string form is run the way a one-string transport runs
 * it: /bin/sh -c STRING.
 */
#include "check.h"

#include "providers/provider.h"
#include "providers/sh/sh.h"
#include "providers/strbuf.h"
#include "providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmp[] = "/tmp/sfs-sh-kit-XXXXXX";
static char bbdir[256];		      /* busybox applets, or "" */
static const char *shell = "/bin/sh"; /* the shell under test */
static char path_env[4096];

/* Runs argv (argv[0] replaced by the shell under test) with stdout into out
 * (may be NULL); returns the exit status, or 128+signal. */
static pid_t spawn(char **argv, int *outfd)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (chdir(tmp) < 0)
			_exit(125);
		setenv("PATH", path_env, 1);
		setenv("TMPDIR", tmp, 1);
		execv(shell, argv);
		_exit(127);
	}
	close(p[1]);
	if (outfd)
		*outfd = p[0];
	else
		close(p[0]);
	return pid;
}

/* Like a container's init (docker's keepalive): a subreaper that starts
 * argv and reaps everything below it, orphans included, until nothing is
 * left.  Its pid ends once the wrapper and all it left behind are gone. */
static pid_t spawn_in_sandbox(char **argv)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (spawn(argv, NULL) < 0)
		_exit(1);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	_exit(0);
}

static int finish(pid_t pid, int fd, char *out, size_t cap)
{
	size_t got = 0;
	if (fd >= 0) {
		ssize_t n;
		while ((n = read(fd, out + got, cap - 1 - got)) > 0)
			got += (size_t)n;
		close(fd);
	}
	if (out)
		out[got] = '\0';
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run(struct sfs_sh_cmd *c, char *out, size_t cap)
{
	int fd = -1;
	pid_t pid = spawn(c->argv, out ? &fd : NULL);
	return finish(pid, fd, out, cap);
}

/* The string form, through /bin/sh -c. */
static int run_string(struct sfs_sh_cmd *c, char *out, size_t cap)
{
	char *line = NULL;
	CHECK_INT(sfs_sh_cmd_string(c, &line, NULL), 0);
	char *argv[] = {"sh", "-c", line, NULL};
	int fd = -1;
	pid_t pid = spawn(argv, out ? &fd : NULL);
	int r = finish(pid, fd, out, cap);
	free(line);
	return r;
}

static char *slurp(const char *rel)
{
	static char buf[8192];
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/* Whether rel holds a whole line yet (a shell's `echo >f` creates f before
 * it writes: existing is not enough). */
static bool has_line(const char *rel)
{
	const char *s = slurp(rel);
	return s && strchr(s, '\n');
}

static bool exists(const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	return access(p, F_OK) == 0;
}

static void put(const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
		close(fd);
	}
}

static void rm_rf(const char *rel)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/%s'", tmp, rel);
	CHECK_INT(system(cmd), 0);
}

/* Waits up to ms for RUNDIR/status; its text or NULL. */
static char *wait_status(const char *dir, int ms)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "%s/status", dir);
	for (int i = 0; i < ms / 10; i++) {
		if (exists(rel))
			return slurp(rel);
		usleep(10000);
	}
	return NULL;
}

/* A pid that is gone or a zombie nobody reaped yet. */
static bool dead(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	char *rp = strrchr(buf, ')');
	return !rp || rp[2] == 'Z' || rp[2] == 'X';
}

/* ---- cases ------------------------------------------------------------- */

static void test_exit_code_recorded(void)
{
	struct sfs_sh_cmd c;
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/1", tmp);
	CHECK_INT(sfs_sh_prep(&c, abs, "echo hi; exit 7", 0, NULL), 0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/1/cmd"), "echo hi; exit 7\n");
	CHECK_STREQ(slurp("runs/1/journal"), "");
	struct sfs_sh_run r = {
	    .dir = abs, .workspace = tmp, .cmd = "echo hi; echo err >&2; exit 7"};
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/1/status"), "exit 7\n");
	CHECK_STREQ(slurp("runs/1/journal"), "hi\nerr\n");
	CHECK(exists("runs/1/pid"));
	CHECK(exists("runs/1/wpid"));
	CHECK(!exists("runs/1/.status.tmp"));

	/* the status script reads it back; a relative run dir is below TMPDIR */
	CHECK_INT(sfs_sh_status(&c, "runs/1", NULL), 0);
	char out[256];
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "exit 7\n");
	bool sig;
	int code;
	CHECK(sfs_sh_parse_status(out, &sig, &code) && !sig && code == 7);
	CHECK(!sfs_sh_parse_status("running", &sig, &code));
	rm_rf("runs");
}

static void test_workspace_missing(void)
{
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/2", tmp);
	struct sfs_sh_run r = {.dir = abs, .workspace = "/nonexistent/ws", .cmd = "echo no"};
	struct sfs_sh_cmd c;
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/2/status"), "exit 126\n");
	CHECK_STREQ(slurp("runs/2/journal"), "sandboxfs: cannot enter workspace /nonexistent/ws\n");
	rm_rf("runs");
}

static void test_signal_recorded(void)
{
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/3", tmp);
	struct sfs_sh_run r = {.dir = abs, .workspace = tmp, .cmd = "kill -TERM $$"};
	struct sfs_sh_cmd c;
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/3/status"), "signal 15\n");
	/* a real-time signal is still a signal (the old daytona window ended at 31) */
	rm_rf("runs");
	r.cmd = "kill -s RTMIN $$ 2>/dev/null || kill -34 $$";
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/3/status"), "signal 34\n");
	/* an exit status above any signal is an exit */
	rm_rf("runs");
	r.cmd = "exit 200";
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/3/status"), "exit 200\n");
	rm_rf("runs");
}

static void test_group_kill(void)
{
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/4", tmp);
	/* a background grandchild that ignores TERM: only the escalation's
	 * group KILL gets it */
	struct sfs_sh_run r = {.dir = abs,
			       .workspace = tmp,
			       .cmd = "(trap '' TERM; exec sleep 300) & echo $! >grandchild; "
				      "echo started; sleep 300"};
	struct sfs_sh_cmd c;
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	pid_t wrapper = spawn_in_sandbox(c.argv);
	sfs_sh_cmd_free(&c);
	for (int i = 0; i < 500 && !(has_line("grandchild") && has_line("runs/4/pid")); i++)
		usleep(10000);
	char *g = slurp("grandchild");
	pid_t gpid = g ? atoi(g) : 0;
	CHECK(gpid > 0);
	CHECK(gpid > 0 && !dead(gpid));

	CHECK_INT(sfs_sh_kill(&c, abs, SIGTERM, true, 300, NULL), 0);
	char out[256];
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "ok\n");
	CHECK_INT(finish(wrapper, -1, NULL, 0), 0);
	char *st = slurp("runs/4/status");
	CHECK(st && (!strcmp(st, "signal 15\n") || !strcmp(st, "signal 9\n")));
	CHECK(gpid > 0 && dead(gpid));

	/* once the group is gone there is nothing to signal */
	CHECK_INT(sfs_sh_kill(&c, abs, SIGTERM, false, 0, NULL), 0);
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "gone\n");
	struct sfs_err err = {0};
	CHECK_INT(sfs_sh_kill_answer("gone", 4, &err), -ESRCH);
	CHECK_INT(sfs_sh_kill_answer("ok", 4, NULL), 0);
	CHECK_INT(sfs_sh_kill_answer("survived", 4, NULL), -EIO);

	/* the run has ended (status): its pid file's group id, now another's
	 * (a process group of its own reusing the number), is not signalled */
	pid_t foreign = fork();
	if (foreign == 0) {
		setsid();
		pause();
		_exit(0);
	}
	for (int i = 0; i < 500 && getpgid(foreign) != foreign; i++)
		usleep(10000);
	char num[32];
	snprintf(num, sizeof(num), "%d\n", (int)foreign);
	put("runs/4/pid", num);
	CHECK_INT(sfs_sh_kill(&c, abs, SIGKILL, true, 0, NULL), 0);
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "gone\n");
	CHECK(!dead(foreign));
	kill(foreign, SIGKILL);
	waitpid(foreign, NULL, 0);
	rm_rf("runs");
	rm_rf("grandchild");
}

static void test_kill_interrupt(void)
{
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/5", tmp);
	struct sfs_sh_run r = {.dir = abs, .workspace = tmp, .cmd = "sleep 300"};
	struct sfs_sh_cmd c;
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	pid_t wrapper = spawn_in_sandbox(c.argv);
	sfs_sh_cmd_free(&c);
	CHECK_INT(sfs_sh_kill(&c, abs, SIGINT, false, 0, NULL), 0);
	char out[256];
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "ok\n");
	CHECK_INT(finish(wrapper, -1, NULL, 0), 0);
	CHECK_STREQ(wait_status("runs/5", 5000), "signal 2\n");
	rm_rf("runs");
}

static void test_bounded_read(void)
{
	put("file", "0123456789");
	char abs[512], out[256];
	snprintf(abs, sizeof(abs), "%s/file", tmp);
	struct sfs_sh_cmd c;
	struct {
		off_t off;
		size_t max;
		const char *want;
	} cases[] = {{0, 100, "0123456789"},
		     {3, 4, "3456"},
		     {8, 10, "89"},
		     {10, 5, ""},
		     {20, 5, ""},
		     {0, 0, ""}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_INT(sfs_sh_read(&c, abs, cases[i].off, cases[i].max, false, NULL), 0);
		CHECK_INT(run(&c, out, sizeof(out)), 0);
		sfs_sh_cmd_free(&c);
		CHECK_STREQ(out, cases[i].want);
		/* base64-framed, through the string form */
		CHECK_INT(sfs_sh_read(&c, abs, cases[i].off, cases[i].max, true, NULL), 0);
		CHECK_INT(run_string(&c, out, sizeof(out)), 0);
		sfs_sh_cmd_free(&c);
		char bytes[64];
		long n = sfs_sh_read_decode(out, bytes, sizeof(bytes) - 1);
		CHECK_INT(n, strlen(cases[i].want));
		bytes[n < 0 ? 0 : n] = '\0';
		CHECK_STREQ(bytes, cases[i].want);
	}
	/* decode never writes more than asked */
	char small[3];
	CHECK_INT(sfs_sh_read_decode("junk\nsfs-b64:MDEyMzQ1\n", small, sizeof(small)), 3);
	CHECK_INT(sfs_sh_read_decode("no frame", small, sizeof(small)), -EIO);
	CHECK_INT(sfs_sh_read_decode("sfs-b64:M!==", small, sizeof(small)), -EIO);
	/* a missing file: exit 3 */
	CHECK_INT(sfs_sh_read(&c, "/nonexistent/file", 0, 10, false, NULL), 0);
	CHECK_INT(run(&c, out, sizeof(out)), 3);
	sfs_sh_cmd_free(&c);
	CHECK_INT(sfs_sh_read(&c, abs, -1, 10, false, NULL), -EINVAL);
	unlink(abs);
}

#define HOSTILE                                                                                    \
	"printf '%s|' \"it's\" 'a\"b' \"$(echo sub)\" '`x`' '\\$HOME' ; echo\n"                    \
	"echo 'line two' ; exit 3"

static void test_hostile_quoting(void)
{
	/* a run dir and a command full of shell syntax, through both forms:
	 * the files must hold exactly the bytes given, and nothing runs that
	 * was not the command */
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/it's $(touch canary) `touch canary2`\n\"x\"", tmp);
	struct sfs_sh_cmd c;
	for (int form = 0; form < 2; form++) {
		CHECK_INT(sfs_sh_prep(&c, abs, HOSTILE, 0, NULL), 0);
		CHECK_INT(form ? run_string(&c, NULL, 0) : run(&c, NULL, 0), 0);
		sfs_sh_cmd_free(&c);
		struct sfs_sh_run r = {.dir = abs, .workspace = tmp, .cmd = HOSTILE};
		CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
		CHECK_INT(form ? run_string(&c, NULL, 0) : run(&c, NULL, 0), 0);
		sfs_sh_cmd_free(&c);
		char rel[512];
		snprintf(rel, sizeof(rel), "%s/cmd", abs + strlen(tmp) + 1);
		CHECK_STREQ(slurp(rel), HOSTILE "\n");
		snprintf(rel, sizeof(rel), "%s/journal", abs + strlen(tmp) + 1);
		CHECK_STREQ(slurp(rel), "it's|a\"b|sub|`x`|\\$HOME|\nline two\n");
		snprintf(rel, sizeof(rel), "%s/status", abs + strlen(tmp) + 1);
		CHECK_STREQ(slurp(rel), "exit 3\n");
		CHECK(!exists("canary") && !exists("canary2"));
		rm_rf("runs");
	}
	/* the quoting itself */
	struct sfs_buf b = {0};
	CHECK_INT(sfs_sh_quote(&b, "it's", 4), 0);
	CHECK_STREQ(b.buf, "'it'\\''s'");
	sfs_buf_free(&b);
	CHECK_INT(sfs_sh_quote(&b, "a\0b", 3), -EINVAL);
	sfs_buf_free(&b);
	/* NUL bytes cannot cross argv or a command line: refused */
	struct sfs_err err = {0};
	CHECK_INT(sfs_sh_prep(&c, abs, "echo a\0rm -rf /", 15, &err), -EINVAL);
	CHECK(strstr(err.msg, "NUL") != NULL);
	CHECK(c.argv == NULL);
	struct sfs_sh_run r = {.dir = abs, .workspace = tmp, .cmd = "echo a\0b", .cmd_len = 8};
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), -EINVAL);
	CHECK_INT(sfs_sh_follow(&c, abs, 0, "../x", NULL), -EINVAL);
	CHECK_INT(sfs_sh_unfollow(&c, abs, 0, "a b", NULL), -EINVAL);
}

static void test_environment(void)
{
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/6", tmp);
	struct sfs_kvlist env = {0};
	/* names the wrapper itself uses, a value with quotes and a newline */
	sfs_kv_set(&env, "d", "/elsewhere");
	sfs_kv_set(&env, "c", "exit 99");
	sfs_kv_set(&env, "FOO", "it's \"q\"\nnext $(x)");
	struct sfs_sh_run r = {.dir = abs,
			       .workspace = tmp,
			       .cmd = "printf '%s|%s|%s\\n' \"$d\" \"$c\" \"$FOO\"",
			       .env = &env};
	struct sfs_sh_cmd c;
	for (int form = 0; form < 2; form++) {
		CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
		CHECK_INT(form ? run_string(&c, NULL, 0) : run(&c, NULL, 0), 0);
		sfs_sh_cmd_free(&c);
		CHECK_STREQ(slurp("runs/6/journal"), "/elsewhere|exit 99|it's \"q\"\nnext $(x)\n");
		CHECK_STREQ(slurp("runs/6/status"), "exit 0\n");
		rm_rf("runs");
	}
	sfs_kv_set(&env, "A=B", "x");
	struct sfs_err err = {0};
	CHECK_INT(sfs_sh_wrapper(&c, &r, &err), -EINVAL);
	CHECK(strstr(err.msg, "A=B") != NULL);
	sfs_kv_free(&env);
}

/* The wrapper run with text on its stdin. */
static int run_with_stdin(struct sfs_sh_cmd *c, const char *text)
{
	int in[2];
	if (pipe(in) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		close(in[0]);
		close(in[1]);
		if (chdir(tmp) < 0)
			_exit(125);
		setenv("PATH", path_env, 1);
		setenv("TMPDIR", tmp, 1);
		execv(shell, c->argv);
		_exit(127);
	}
	close(in[0]);
	CHECK(write(in[1], text, strlen(text)) == (ssize_t)strlen(text));
	close(in[1]);
	return finish(pid, -1, NULL, 0);
}

static void test_stdin(void)
{
	/* by default a run reads /dev/null; keep_stdin hands the wrapper's on
	 * (for transports with a writable stdin) */
	struct sfs_sh_run r = {.dir = "runs/9", .workspace = tmp, .cmd = "cat"};
	struct sfs_sh_cmd c;
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	CHECK_INT(run_with_stdin(&c, "typed\n"), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/9/journal"), "");
	CHECK_STREQ(slurp("runs/9/status"), "exit 0\n");
	rm_rf("runs");
	r.keep_stdin = true;
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	CHECK_INT(run_with_stdin(&c, "typed\n"), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(slurp("runs/9/journal"), "typed\n");
	rm_rf("runs");
}

/* Bytes in a run directory's journal so far (0 when there is none). */
static long journal_bytes(const char *rundir)
{
	char path[700];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/journal", tmp, rundir);
	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

static void test_follow(void)
{
	char abs[512];
	snprintf(abs, sizeof(abs), "%s/runs/7", tmp);
	/* the run ends after its second line; the wrapper then stops followers */
	put("go", "");
	struct sfs_sh_run r = {.dir = abs,
			       .workspace = tmp,
			       .cmd = "echo one; while [ -e go ]; do sleep 0.05; done; echo two"};
	struct sfs_sh_cmd c;
	CHECK_INT(sfs_sh_wrapper(&c, &r, NULL), 0);
	pid_t wrapper = spawn_in_sandbox(c.argv);
	sfs_sh_cmd_free(&c);
	/* the engine follows from an offset the journal already has (what it
	 * mirrored so far): wait for "one\n" before following from byte 2 */
	for (int i = 0; i < 500 && !(exists("runs/7/pid") && journal_bytes("runs/7") >= 4); i++)
		usleep(10000);
	CHECK_INT(sfs_sh_follow(&c, abs, 2, "tok-1", NULL), 0);
	int fd;
	pid_t follower = spawn(c.argv, &fd);
	sfs_sh_cmd_free(&c);
	for (int i = 0; i < 500 && !exists("runs/7/follow.tok-1"); i++)
		usleep(10000);
	CHECK(exists("runs/7/follow.tok-1"));
	/* from byte 2 of "one\n": the follower sends "e\n" while the run goes on */
	char out[256];
	size_t got = 0;
	for (int i = 0; i < 500 && got < 2; i++) {
		ssize_t n = read(fd, out + got, 2 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	CHECK_STREQ(out, "e\n");
	char go[600];
	snprintf(go, sizeof(go), "%s/go", tmp);
	unlink(go);
	/* EOF once the wrapper stops tail at the run's end.  "two\n" may not
	 * have been sent by then (busybox tail -f looks once a second): the
	 * journal engine fetches what is left with a bounded read. */
	finish(follower, fd, out, sizeof(out));
	CHECK(!strncmp("two\n", out, strlen(out)));
	CHECK_INT(finish(wrapper, -1, NULL, 0), 0);
	CHECK(!exists("runs/7/follow.tok-1"));

	/* a follower of an ended run ends at once */
	CHECK_INT(sfs_sh_follow(&c, abs, 0, "tok-2", NULL), 0);
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "");
	CHECK(!exists("runs/7/follow.tok-2"));

	/* unfollow stops one by its token file */
	CHECK_INT(sfs_sh_script(&c, "sleep 300 & echo $! >\"$1\"", "t",
				(const char *[]){"runs/7/follow.tok-3", NULL}, NULL),
		  0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	pid_t sleeper = atoi(slurp("runs/7/follow.tok-3"));
	CHECK(sleeper > 0 && !dead(sleeper));
	CHECK_INT(sfs_sh_unfollow(&c, abs, 0, "tok-3", NULL), 0);
	CHECK_INT(run(&c, NULL, 0), 0);
	sfs_sh_cmd_free(&c);
	for (int i = 0; i < 200 && !dead(sleeper); i++)
		usleep(10000);
	CHECK(dead(sleeper));
	CHECK(!exists("runs/7/follow.tok-3"));
	rm_rf("runs");
}

static void test_status_lost_and_none(void)
{
	char abs[512], out[256];
	snprintf(abs, sizeof(abs), "%s/runs/8", tmp);
	struct sfs_sh_cmd c;
	CHECK_INT(sfs_sh_status(&c, abs, NULL), 0);
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "none\n");
	char mk[700];
	CHECK_INT(sfs_pathf(mk, sizeof(mk), "mkdir -p '%s' && echo 999999 >'%s/wpid'", abs, abs),
		  0);
	CHECK_INT(system(mk), 0);
	CHECK_INT(sfs_sh_status(&c, abs, NULL), 0);
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "lost\n");
	CHECK_INT(sfs_sh_alive(&c, abs, NULL), 0);
	CHECK_INT(run(&c, out, sizeof(out)), 0);
	sfs_sh_cmd_free(&c);
	CHECK_STREQ(out, "no\n");
	rm_rf("runs");
}

/* A wrapper just starting (its directory made, its wpid not yet) is
 * "running" whenever the status script looks, never "lost": a wpid that
 * appeared between the script's two looks at it made it say lost, and the
 * run's journal ended empty before the command had printed anything
 * (daytona's git-in-workspace conformance body, once in CI).  The run
 * directory is named through a long chain of "./" so that each of the
 * script's looks takes a while and the wpid lands between two of them. */
static void test_status_while_the_wrapper_starts(void)
{
	static char slow[4096];
	size_t len = (size_t)snprintf(slow, sizeof(slow), "%s", tmp);
	while (len < 3800)
		len += (size_t)snprintf(slow + len, sizeof(slow) - len, "/.");
	char mk[600];
	snprintf(mk, sizeof(mk), "mkdir -p '%s/runs'", tmp);
	CHECK_INT(system(mk), 0);
	int lost = 0, looks = 0;
	for (int i = 0; i < 40 && !lost; i++) {
		char real[600], dir[4200], out[256];
		snprintf(real, sizeof(real), "%s/runs/w%d", tmp, i);
		snprintf(dir, sizeof(dir), "%s/runs/w%d", slow, i);
		CHECK_INT(mkdir(real, 0755), 0);
		/* the wrapper: its directory now, its wpid (itself, alive) soon */
		pid_t w = fork();
		if (w == 0) {
			char tmpw[700], wpid[700], text[32];
			snprintf(tmpw, sizeof(tmpw), "%s/.wpid.tmp", real);
			snprintf(wpid, sizeof(wpid), "%s/wpid", real);
			usleep((useconds_t)(500 + (i * 337) % 2500));
			int fd = open(tmpw, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			int n = snprintf(text, sizeof(text), "%d\n", (int)getpid());
			if (fd < 0 || write(fd, text, (size_t)n) != n || close(fd) < 0 ||
			    rename(tmpw, wpid) < 0)
				_exit(1);
			pause();
			_exit(0);
		}
		CHECK(w > 0);
		char rel[64];
		snprintf(rel, sizeof(rel), "runs/w%d/wpid", i);
		for (int k = 0; k < 400; k++) {
			bool had = exists(rel);
			struct sfs_sh_cmd c;
			CHECK_INT(sfs_sh_status(&c, dir, NULL), 0);
			CHECK_INT(run(&c, out, sizeof(out)), 0);
			sfs_sh_cmd_free(&c);
			looks++;
			if (strcmp(out, "running\n") != 0) {
				printf("wrapper %d starting: status said %s", i, out);
				lost++;
			}
			if (had)
				break; /* looked once more after the wpid came */
		}
		kill(w, SIGKILL);
		waitpid(w, NULL, 0);
	}
	printf("%d looks at starting wrappers, %d not \"running\"\n", looks, lost);
	CHECK_INT(lost, 0);
	rm_rf("runs");
}

static void all_cases(void)
{
	test_exit_code_recorded();
	test_workspace_missing();
	test_signal_recorded();
	test_group_kill();
	test_kill_interrupt();
	test_bounded_read();
	test_hostile_quoting();
	test_environment();
	test_stdin();
	test_follow();
	test_status_lost_and_none();
	test_status_while_the_wrapper_starts();
}

static void with_host_sh(void)
{
	shell = "/bin/sh";
	snprintf(path_env, sizeof(path_env), "%s", getenv("PATH") ? getenv("PATH") : "/bin");
	all_cases();
}

static void with_busybox(void)
{
	if (!bbdir[0]) {
		printf("busybox not found: busybox sh cases skipped\n");
		return;
	}
	char sh[300];
	snprintf(sh, sizeof(sh), "%s/sh", bbdir);
	shell = sh;
	snprintf(path_env, sizeof(path_env), "%s:%s", bbdir,
		 getenv("PATH") ? getenv("PATH") : "/bin");
	all_cases();
}

/* The status script's answer applied to a run: last line wins. */
static void test_status_apply(void)
{
	struct sfs_run run = {.n = 4, .started = time(NULL)};
	struct sfs_err err = {0};
	CHECK_INT(sfs_sh_status_apply("noise on stderr\nexit 3\n", &run, "p", &err), 0);
	CHECK(run.state == SFS_RUN_EXITED && run.code == 3);
	CHECK_INT(sfs_sh_status_apply("signal 9\n", &run, "p", &err), 0);
	CHECK(run.state == SFS_RUN_KILLED && run.code == 9);
	CHECK_INT(sfs_sh_status_apply("running\n", &run, "p", &err), 0);
	CHECK(run.state == SFS_RUN_RUNNING);
	CHECK_INT(sfs_sh_status_apply("none\n", &run, "p", &err), 0);
	CHECK(run.state == SFS_RUN_RUNNING); /* a wrapper just starting */
	run.started -= 120;
	CHECK_INT(sfs_sh_status_apply("none\n", &run, "p", &err), 0);
	CHECK(run.state == SFS_RUN_LOST);
	CHECK_INT(sfs_sh_status_apply("lost", &run, "p", &err), 0);
	CHECK(run.state == SFS_RUN_LOST);
	CHECK_INT(sfs_sh_status_apply("what\n", &run, "p", &err), -EPROTO);
	CHECK(strstr(err.msg, "p: run 4: unexpected status \"what") != NULL);
	CHECK_INT(sfs_sh_status_apply(NULL, &run, "p", &err), -EPROTO);
}

static void setup(void)
{
	CHECK(mkdtemp(tmp) != NULL);
	char cmd[600];
	snprintf(bbdir, sizeof(bbdir), "%s.bb", tmp);
	snprintf(cmd, sizeof(cmd),
		 "command -v busybox >/dev/null && mkdir -p '%s' && busybox --install -s '%s'",
		 bbdir, bbdir);
	if (system(cmd) != 0)
		bbdir[0] = '\0';
}

static void teardown(void)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s.bb'", tmp, tmp);
	CHECK_INT(system(cmd), 0);
}

CHECK_MAIN(CHECK_CASE(test_status_apply), CHECK_CASE(setup), CHECK_CASE(with_host_sh),
	   CHECK_CASE(with_busybox), CHECK_CASE(teardown))
