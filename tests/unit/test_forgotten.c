/* What forget keeps and how resume finds it (ctl/forgotten.c), without a
 * mount: a state dir is kept only when it holds something, and a resume
 * finds a forgotten one by provider and id (ATTACK.md finding 4). */
#include "check.h"
#include "ctl/forgotten.h"
#include "ctl/sandbox.h"
#include "providers/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char statedir[256];

static void fresh_statedir(void)
{
	if (statedir[0])
		sfs_rm_rf(statedir);
	snprintf(statedir, sizeof(statedir), "/tmp/sfs-forgotten-XXXXXX");
	if (!mkdtemp(statedir))
		abort();
}

/* statedir/sandboxes/KEY/REL: a directory (text NULL) or a file. */
static void plant(const char *key, const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/sandboxes/%s/%s", statedir, key, rel);
	char *slash = text ? strrchr(path, '/') : NULL;
	if (slash)
		*slash = '\0';
	if (sfs_mkdir_p(path, 0700))
		abort();
	if (!slash)
		return;
	*slash = '/';
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

static bool keeps(const char *key)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/sandboxes/%s", statedir, key);
	return forgotten_worth_keeping(path);
}

static void test_worth_keeping(void)
{
	fresh_statedir();
	plant("empty", "", NULL);
	plant("markers", "destroying", "");
	plant("markers", "forgotten", "{}");
	plant("norun", "runs", NULL);
	plant("run", "runs/1/journal", "out");
	plant("ws", "workspace", NULL);
	plant("clean", "rcache/1", "cached");
	plant("unsaved", "rcache/1.pending", "/f");
	plant("unknown", "something-else", "");
	CHECK(!keeps("empty"));
	CHECK(!keeps("markers"));
	CHECK(!keeps("norun"));
	CHECK(keeps("run"));
	CHECK(keeps("ws"));
	CHECK(!keeps("clean"));
	CHECK(keeps("unsaved"));
	CHECK(keeps("unknown"));
	CHECK(!keeps("absent"));
}

static const char *listed_key;
static bool listed(const char *key)
{
	return listed_key && strcmp(key, listed_key) == 0;
}

static void test_mark_and_find(void)
{
	fresh_statedir();
	const struct sfs_provider *local = sfs_provider_find("local");
	struct sfs_sandbox *a = sandbox_new(statedir, "a", "ka", local);
	struct sfs_sandbox *b = sandbox_new(statedir, "b", "kb", local);
	if (!a || !b)
		abort();
	CHECK_INT(sandbox_set_str(&a->id, "/the/dir"), 0);
	CHECK_INT(sandbox_set_str(&b->id, "/other"), 0);
	plant("ka", "runs/1", NULL);
	plant("kb", "runs/1", NULL);
	struct sfs_err err = {0};
	CHECK_INT(forgotten_mark(a, &err), 0);
	CHECK_INT(forgotten_mark(b, &err), 0);
	char key[40] = "";
	CHECK(forgotten_find(statedir, "local", "/the/dir", listed, key));
	CHECK_STREQ(key, "ka");
	CHECK(forgotten_find(statedir, "local", "/other", listed, key));
	CHECK_STREQ(key, "kb");
	CHECK(!forgotten_find(statedir, "local", "/the", listed, key));
	CHECK(!forgotten_find(statedir, "docker", "/the/dir", listed, key));
	/* a listed record's leftover marker (crash after resume) is skipped */
	listed_key = "ka";
	CHECK(!forgotten_find(statedir, "local", "/the/dir", listed, key));
	listed_key = NULL;
	/* unmarked: not found any more */
	forgotten_unmark(a);
	CHECK(!forgotten_find(statedir, "local", "/the/dir", listed, key));
	/* destroy markers go */
	plant("kb", "destroying", "");
	plant("kb", "destroyed", "");
	forgotten_clear_destroy_markers(b);
	char path[512];
	snprintf(path, sizeof(path), "%s/sandboxes/kb/destroying", statedir);
	CHECK(access(path, F_OK) != 0);
	snprintf(path, sizeof(path), "%s/sandboxes/kb/destroyed", statedir);
	CHECK(access(path, F_OK) != 0);
	sandbox_free(a);
	sandbox_free(b);
	sfs_rm_rf(statedir);
}

CHECK_MAIN(CHECK_CASE(test_worth_keeping), CHECK_CASE(test_mark_and_find))
