/*
 * Running the sbx CLI (providers/sbx/cli.c) with a stand-in script at
 * sbx.cli: argv arrives element by element, stdin goes in, stdout and
 * stderr come back apart, a CLI that runs over its timeout is killed with
 * the processes it started, and nothing (child, fd) is left behind.
 */
#include "check.h"

#include "providers/config.h"
#include "providers/provider.h"
#include "providers/sbx/sbx.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/sfs-sbx-cli-XXXXXX";
static char cli[256];

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void write_cli(const char *body)
{
	FILE *f = fopen(cli, "w");
	fprintf(f, "#!/bin/sh\n%s", body);
	fclose(f);
	chmod(cli, 0755);
}

static void test_argv_stdin_stdout_stderr(void)
{
	/* each argument on a line of its own, then stdin, and a complaint */
	write_cli("for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\ncat\necho 'oops  ' >&2\n"
		  "exit 3\n");
	int fds = open_fds();
	const char *args[] = {"exec", "a b", "'q\"$(x);\n", NULL};
	struct sbx_result r;
	struct sfs_err err = {0};
	CHECK_INT(sbx_cli(args, "in-data", 7, 5000, &r, &err), 0);
	CHECK_STREQ(r.out, "[exec]\n[a b]\n['q\"$(x);\n]\nin-data");
	CHECK_STREQ(r.errtxt, "oops");
	CHECK_INT(r.code, 3);
	CHECK_INT(sbx_cli_fail(&r, "exec", &err), -EIO);
	CHECK_STREQ(err.msg, "sbx exec: oops");
	sbx_result_free(&r);
	CHECK_INT(open_fds(), fds);
	CHECK_INT(waitpid(-1, NULL, WNOHANG), -1); /* no child left */
}

static void test_timeout_kills_the_group(void)
{
	char pidfile[300];
	snprintf(pidfile, sizeof(pidfile), "%s/bg.pid", dir);
	char body[600];
	snprintf(body, sizeof(body), "sleep 60 & echo $! > %s\nsleep 60\n", pidfile);
	write_cli(body);
	int fds = open_fds();
	const char *args[] = {"ls", NULL};
	struct sbx_result r;
	struct sfs_err err = {0};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_INT(sbx_cli(args, NULL, 0, 300, &r, &err), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(t1.tv_sec - t0.tv_sec < 5);
	CHECK(strstr(err.msg, "no answer in 0.3 s") != NULL);
	FILE *f = fopen(pidfile, "r");
	int bg = 0;
	CHECK(f && fscanf(f, "%d", &bg) == 1);
	if (f)
		fclose(f);
	/* the CLI's background child went with it (a zombie at most, briefly) */
	bool gone = false;
	for (int i = 0; i < 100 && !gone; i++) {
		char st[64] = "", path[64];
		snprintf(path, sizeof(path), "/proc/%d/stat", bg);
		FILE *s = fopen(path, "r");
		if (!s || !fgets(st, sizeof(st), s) || strstr(st, ") Z "))
			gone = true;
		if (s)
			fclose(s);
		if (!gone)
			usleep(20000);
	}
	CHECK(bg > 0 && gone);
	CHECK_INT(open_fds(), fds);
	CHECK_INT(waitpid(-1, NULL, WNOHANG), -1);
}

static void test_missing_cli(void)
{
	char missing[300];
	snprintf(missing, sizeof(missing), "%s/none", dir);
	sfs_config_set("sbx.cli", missing);
	const char *args[] = {"ls", NULL};
	struct sbx_result r;
	struct sfs_err err = {0};
	CHECK_INT(sbx_cli(args, NULL, 0, 1000, &r, &err), -ENOENT);
	CHECK(strstr(err.msg, "no sbx CLI") != NULL);
	sfs_config_set("sbx.cli", cli);
}

static void setup(void)
{
	if (!mkdtemp(dir))
		abort();
	snprintf(cli, sizeof(cli), "%s/sbx", dir);
	sfs_config_set("sbx.cli", cli);
}

int main(void)
{
	setup();
	test_argv_stdin_stdout_stderr();
	test_timeout_kills_the_group();
	test_missing_cli();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	printf("%d checks, %d failed\n", check_count, check_failed);
	return check_failed != 0;
}
