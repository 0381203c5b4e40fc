/* What changed in a base workspace (providers/cow/diff.c), and the diff the
 * snapshots' writer makes of those paths: the copy (no privileges needed),
 * and overlayfs when this process may mount. */
#include "check.h"

#include "fs/snapshots/snapshots.h"
#include "providers/config.h"
#include "providers/cow/cow.h"
#include "providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static void put(const char *dir, const char *rel, const char *text)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void make_base(const char *base)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/src", base);
	CHECK_INT(sfs_mkdir_p(p, 0755), 0);
	put(base, "src/main.c", "one\ntwo\nthree\n");
	put(base, "gone.txt", "bye\n");
	put(base, ".env", "KEY=secret-value\n");
	put(base, "same.txt", "unchanged\n");
	put(base, "tool.sh", "run\n");
}

static void change(const char *ws)
{
	char p[600];
	put(ws, "src/main.c", "one\ntwo\nthree\nfour\n");
	CHECK_INT(sfs_pathf(p, sizeof(p), "%s/gone.txt", ws), 0);
	CHECK_INT(unlink(p), 0);
	put(ws, "added.txt", "new\n");
	put(ws, ".env", "made in the sandbox\n"); /* hidden path: never in the diff */
	CHECK_INT(sfs_pathf(p, sizeof(p), "%s/tool.sh", ws), 0);
	CHECK_INT(chmod(p, 0755), 0);
	CHECK_INT(sfs_pathf(p, sizeof(p), "%s/same.txt", ws), 0);
	FILE *f = fopen(p, "a"); /* opened for writing, nothing changed */
	if (f)
		fclose(f);
}

static void one_mode(const char *mode)
{
	char base[300], state[300], merged[4096];
	snprintf(base, sizeof(base), "%s/%s-base", root, mode);
	snprintf(state, sizeof(state), "%s/%s-state", root, mode);
	make_base(base);
	CHECK_INT(sfs_mkdir_p(state, 0700), 0);
	CHECK_INT(sfs_config_set("cow.mode", strcmp(mode, "copy") == 0 ? "copy" : "auto"), 0);
	struct sfs_err err = {0};
	CHECK_INT(sfs_cow_create(state, base, ".env", NULL, merged, &err), 0);
	char b[4096], m[32];
	CHECK_INT(sfs_cow_describe(state, b, sizeof(b), m, sizeof(m), &err), 0);
	if (strcmp(mode, "overlay") == 0 && strcmp(m, "overlay") != 0) {
		fprintf(stderr, "test_cow_diff: overlayfs cannot be mounted here: skipped\n");
		sfs_cow_remove(state, &err);
		return;
	}
	CHECK_STREQ(m, mode);
	char p[4200];
	snprintf(p, sizeof(p), "%s/.env", merged);
	CHECK(access(p, F_OK) < 0); /* hidden */
	int fd;
	char **paths;
	size_t n;
	/* nothing changed yet: no paths (the UBSan build once stopped here) */
	CHECK_INT(sfs_cow_changed_paths(state, &fd, &paths, &n, &err), 0);
	CHECK_INT(n, 0);
	free(paths);
	close(fd);
	change(merged);
	CHECK_INT(sfs_cow_changed_paths(state, &fd, &paths, &n, &err), 0);
	struct sfs_buf out = {0};
	int mfd = open(merged, O_RDONLY | O_DIRECTORY);
	CHECK_INT(snap_diff_paths(fd, mfd, (const char *const *)paths, n, &out, &err), 0);
	close(mfd);
	const char *d = out.buf ? out.buf : "";
	CHECK(strstr(d, "diff --git a/src/main.c b/src/main.c\n") != NULL);
	CHECK(strstr(d, "+four\n") != NULL);
	CHECK(strstr(d, "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n") != NULL);
	CHECK(strstr(d, "+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n") != NULL);
	CHECK(strstr(d, "diff --git a/added.txt b/added.txt\nnew file mode 100644\n") != NULL);
	CHECK(strstr(d, "--- /dev/null\n+++ b/added.txt\n") != NULL);
	CHECK(strstr(d, "diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n") !=
	      NULL);
	CHECK(strstr(d, "same.txt") == NULL);
	CHECK(strstr(d, ".env") == NULL && strstr(d, "secret-value") == NULL);
	sfs_buf_free(&out);
	const char *want[] = {"added.txt", "gone.txt", "src/main.c", "tool.sh"};
	CHECK_INT(n, 4 + (strcmp(mode, "overlay") == 0)); /* overlay: same.txt copied up */
	for (size_t i = 0, k = 0; i < n; i++) {
		if (strcmp(paths[i], "same.txt") == 0)
			continue;
		CHECK_STREQ(paths[i], k < 4 ? want[k] : "");
		k++;
	}
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	if (fd >= 0)
		close(fd);
	CHECK_INT(sfs_cow_remove(state, &err), 0);
	snprintf(p, sizeof(p), "%s/cow", state);
	CHECK(access(p, F_OK) < 0);
	/* the base as it was */
	char *text = NULL;
	snprintf(p, sizeof(p), "%s/src/main.c", base);
	CHECK_INT(sfs_read_file(p, &text, NULL), 0);
	CHECK_STREQ(text, "one\ntwo\nthree\n");
	free(text);
	snprintf(p, sizeof(p), "%s/gone.txt", base);
	CHECK(access(p, F_OK) == 0);
	struct stat st;
	snprintf(p, sizeof(p), "%s/tool.sh", base);
	CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644);
}

static void test_copy(void)
{
	one_mode("copy");
}

static void test_overlay(void)
{
	one_mode("overlay");
}

static void test_not_a_base(void)
{
	struct sfs_err err = {0};
	int fd;
	char **paths;
	size_t n;
	CHECK_INT(sfs_cow_changed_paths(root, &fd, &paths, &n, &err), -ENOENT);
	CHECK(!sfs_cow_present(root));
	CHECK_INT(sfs_cow_remove(root, &err), 0); /* nothing to remove */
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/test_cow_diff.XXXXXX");
	if (!mkdtemp(root))
		abort();
	char store[300];
	snprintf(store, sizeof(store), "%s/store", root);
	struct sfs_err err = {0};
	CHECK_INT(sfs_mkdir_p(store, 0700), 0);
	CHECK_INT(snap_store_init(store, &err), 0); /* the writer's blobs go there */
}

static void cleanup(void)
{
	snap_store_shutdown();
	sfs_rm_rf(root);
}

CHECK_MAIN(CHECK_CASE(setup), CHECK_CASE(test_copy), CHECK_CASE(test_overlay),
	   CHECK_CASE(test_not_a_base), CHECK_CASE(cleanup))
