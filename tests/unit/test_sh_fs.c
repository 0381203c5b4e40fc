/*
 * The shell kit's file scripts (providers/sh/fs.c), run by the host's
 * /bin/sh on a scratch directory, and their output parsers.
 */
#include "check.h"

#include "providers/provider.h"
#include "providers/sh/sh.h"
#include "providers/tar.h"
#include "providers/untrusted/name.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[] = "/tmp/sfs-sh-fs-XXXXXX";

/* Runs script with args; stdout into *out (malloc'd, *len bytes); returns
 * the exit status. */
static int run(const char *script, const char *a1, const char *a2, char **out, size_t *len)
{
	const char *args[] = {a1, a2, NULL};
	struct sfs_sh_cmd c;
	struct sfs_err err = {0};
	if (sfs_sh_script(&c, script, "sandboxfs-fs", args, &err))
		return -1;
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(c.argv[0], c.argv);
		_exit(127);
	}
	close(p[1]);
	char *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n + 4096 > cap && !(buf = realloc(buf, cap = cap * 2 + 8192)))
			abort();
		ssize_t k = read(p[0], buf + n, cap - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(p[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	sfs_sh_cmd_free(&c);
	if (out) {
		*out = buf;
		*len = n;
	} else {
		free(buf);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *at(const char *name)
{
	static char p[4][512];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", tmp, name);
	return p[i];
}

static void test_list_and_stat(void)
{
	FILE *f = fopen(at("a file"), "w");
	fputs("hello", f);
	fclose(f);
	CHECK_INT(mkdir(at(".hidden"), 0700), 0);
	CHECK_INT(symlink("../t", at("ln")), 0);
	char *out;
	size_t len;
	CHECK_INT(run(sfs_sh_fs_list, tmp, NULL, &out, &len), 0);
	struct sfs_rdirent *v;
	size_t n;
	CHECK_INT(sfs_sh_list_parse(out, len, &v, &n, NULL), 0);
	CHECK_INT(n, 3);
	int seen = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i].name, "a file") && S_ISREG(v[i].st.mode) && v[i].st.size == 5)
			seen |= 1;
		if (!strcmp(v[i].name, ".hidden") && S_ISDIR(v[i].st.mode) &&
		    (v[i].st.mode & 0777) == 0700)
			seen |= 2;
		if (!strcmp(v[i].name, "ln") && S_ISLNK(v[i].st.mode) && v[i].st.link &&
		    !strcmp(v[i].st.link, "../t"))
			seen |= 4;
	}
	CHECK_INT(seen, 7);
	sfs_rdirents_free(v, n);
	/* cut short: the directory changed meanwhile */
	CHECK_INT(sfs_sh_list_parse(out, len - 3, &v, &n, NULL), -EAGAIN);
	free(out);

	struct sfs_rstat st;
	CHECK_INT(run(sfs_sh_fs_stat, at("ln"), NULL, &out, &len), 0);
	CHECK_INT(sfs_sh_stat_parse(out, len, &st), 0);
	CHECK(S_ISLNK(st.mode));
	CHECK_STREQ(st.link, "../t");
	free(st.link);
	free(out);
	CHECK_INT(run(sfs_sh_fs_stat, at("none"), NULL, NULL, NULL), ENOENT);
	CHECK_INT(sfs_sh_fs_errno(ENOENT), -ENOENT);
	CHECK_INT(sfs_sh_fs_errno(127), -EIO);
}

static void test_changes(void)
{
	CHECK_INT(run(sfs_sh_fs_mkdir, at("d"), "750", NULL, NULL), 0);
	struct stat st;
	CHECK_INT(stat(at("d"), &st), 0);
	CHECK_INT(st.st_mode & 0777, 0750);
	CHECK_INT(run(sfs_sh_fs_mkdir, at("d"), "750", NULL, NULL), EEXIST);
	CHECK_INT(run(sfs_sh_fs_mkdir, at("no/d"), "750", NULL, NULL), ENOENT);
	FILE *f = fopen(at("d/x"), "w");
	fclose(f);
	CHECK_INT(run(sfs_sh_fs_rmdir, at("d"), NULL, NULL, NULL), ENOTEMPTY);
	CHECK_INT(run(sfs_sh_fs_unlink, at("d"), NULL, NULL, NULL), EISDIR);
	CHECK_INT(run(sfs_sh_fs_rename, at("d/x"), at("y"), NULL, NULL), 0);
	CHECK_INT(run(sfs_sh_fs_rename, at("y"), at("d"), NULL, NULL), EISDIR);
	CHECK_INT(run(sfs_sh_fs_chmod, at("y"), "600", NULL, NULL), 0);
	CHECK_INT(stat(at("y"), &st), 0);
	CHECK_INT(st.st_mode & 0777, 0600);
	CHECK_INT(run(sfs_sh_fs_symlink, at("s"), "y", NULL, NULL), 0);
	CHECK_INT(run(sfs_sh_fs_symlink, at("s"), "y", NULL, NULL), EEXIST);
	CHECK_INT(run(sfs_sh_fs_unlink, at("y"), NULL, NULL, NULL), 0);
	CHECK_INT(run(sfs_sh_fs_rmdir, at("d"), NULL, NULL, NULL), 0);
}

static void setup(void)
{
	if (!mkdtemp(tmp))
		abort();
}

static void cleanup(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd)) {
	}
}

/* A hostile sandbox's list answer, as its shell would print it: names
 * that would leave the directory are left out, their stat lines and
 * symlink targets with them, and the rest keep their own. */
static void test_list_hostile(void)
{
	static const char out[] = "../../../../../../tmp/x\0ok\0..\0.\0a/b\0ln\0"
				  "\0"
				  "81a4 3 100\n41ed 0 100\n41ed 0 100\n41ed 0 100\n81a4 1 100\n"
				  "a1ff 3 100\n"
				  "../t\0";
	struct sfs_rdirent *v;
	size_t n;
	struct sfs_name_drops d = {0};
	CHECK_INT(sfs_sh_list_parse(out, sizeof(out) - 1, &v, &n, &d), 0);
	CHECK_INT(n, 2);
	CHECK_STREQ(n > 0 ? v[0].name : NULL, "ok");
	CHECK(n > 0 && S_ISDIR(v[0].st.mode));
	CHECK_STREQ(n > 1 ? v[1].name : NULL, "ln");
	CHECK(n > 1 && S_ISLNK(v[1].st.mode));
	CHECK_STREQ(n > 1 ? v[1].st.link : NULL, "../t");
	CHECK_INT(d.n, 4);
	CHECK_STREQ(d.first, "../../../../../../tmp/x");
	for (size_t i = 0; i < n; i++)
		CHECK(sfs_name_ok_str(v[i].name));
	sfs_rdirents_free(v, n);
	/* a name over NAME_MAX */
	char big[300 + 32];
	memset(big, 'a', 300);
	memcpy(big + 300,
	       "\0\0"
	       "81a4 0 1\n",
	       12);
	CHECK_INT(sfs_sh_list_parse(big, 311, &v, &n, NULL), 0);
	CHECK_INT(n, 0);
	sfs_rdirents_free(v, n);
}

static int bulk_seen(const char *path, const void *data, size_t len, void *arg)
{
	char *seen = arg;
	strcat(seen, path);
	strcat(seen, "|");
	return 0;
}

/* A bulk read's tar from a sandbox: only regular files under checked
 * names reach the caller ("a/./b", "a//b" do not, nor a symlink). */
static void test_bulk_names(void)
{
	static unsigned char tar[SFS_TAR_BLOCK * 12];
	memset(tar, 0, sizeof(tar));
	const char *names[] = {"ok", "a/./b", "a//b", "ln", "d/e"};
	const char types[] = {'0', '0', '0', '2', '0'};
	size_t off = 0;
	for (size_t i = 0; i < 5; i++) {
		sfs_tar_header(tar + off, names[i], types[i], 1, 0644, 1);
		off += SFS_TAR_BLOCK;
		if (types[i] == '0') {
			tar[off] = 'x';
			off += SFS_TAR_BLOCK;
		}
	}
	char seen[256] = "";
	struct sfs_err err = {0};
	CHECK_INT(sfs_sh_bulk_each(tar, off + 2 * SFS_TAR_BLOCK, bulk_seen, seen, &err), 0);
	CHECK_STREQ(seen, "ok|d/e|");
}

static void test_all(void)
{
	test_bulk_names();
	test_list_hostile();
	setup();
	test_list_and_stat();
	test_changes();
	cleanup();
}

CHECK_MAIN(CHECK_CASE(test_all))
