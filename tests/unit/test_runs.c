/* Run numbers on disk (ctl/runs.c), without a mount: every numbered run
 * directory is a run, half-made ones included, and a number is never handed
 * out twice (issue 10 item 2). */
#include "check.h"
#include "ctl/runs.h"
#include "ctl/sandbox.h"
#include "journal/journal.h"
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
	snprintf(statedir, sizeof(statedir), "/tmp/sfs-runs-XXXXXX");
	if (!mkdtemp(statedir))
		abort();
}

static struct sfs_sandbox *make(void)
{
	struct sfs_sandbox *sb = sandbox_new(statedir, "r", "kr", sfs_provider_find("local"));
	if (!sb)
		abort();
	sb->state = SFS_SB_RUNNING;
	return sb;
}

static void plant(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/sandboxes/kr/%s", statedir, rel);
	if (!text) {
		if (sfs_mkdir_p(path, 0700))
			abort();
		return;
	}
	char *slash = strrchr(path, '/');
	*slash = '\0';
	if (sfs_mkdir_p(path, 0700))
		abort();
	*slash = '/';
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

static bool exists(const char *rel)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/sandboxes/kr/%s", statedir, rel);
	return access(path, F_OK) == 0;
}

static void done(struct sfs_sandbox *sb)
{
	journal_detach_sandbox(sb);
	sandbox_free(sb);
	sfs_rm_rf(statedir);
}

static void test_load_takes_every_numbered_dir(void)
{
	fresh_statedir();
	plant("runs/1/cmd", "echo one");
	plant("runs/2/.cmd", "echo half"); /* killed between start and naming cmd */
	plant("runs/4", NULL);		   /* killed right after numbering */
	plant("runs/notanumber", NULL);
	plant("runs/007", NULL); /* not a number this code writes */
	struct sfs_sandbox *sb = make();
	runs_load(sb);
	CHECK_INT((int)sb->nruns, 4);
	for (size_t i = 0; i < sb->nruns; i++)
		CHECK_INT(sb->runs[i]->n, (int)i + 1);
	CHECK_STREQ(sb->runs[0]->cmd, "echo one");
	CHECK_STREQ(sb->runs[1]->cmd, "echo half");
	CHECK(exists("runs/2/cmd")); /* adopted: named now */
	CHECK(!exists("runs/2/.cmd"));
	CHECK_STREQ(sb->runs[2]->cmd, ""); /* no directory at all */
	CHECK_STREQ(sb->runs[3]->cmd, "");
	/* nothing holds their locks and nothing left a status: lost */
	for (size_t i = 0; i < sb->nruns; i++)
		CHECK_INT(sb->runs[i]->state, SFS_RUN_LOST);
	done(sb);
}

static void test_reserve_never_reuses(void)
{
	fresh_statedir();
	struct sfs_sandbox *sb = make();
	struct sfs_err err = {0};
	struct sfs_run *run = NULL;
	CHECK_INT(runs_reserve(sb, "first", &run, &err), 0);
	CHECK_INT(run->n, 1);
	CHECK(exists("runs/1"));
	CHECK_STREQ(run->cmd, "first");
	CHECK_INT(sandbox_add_run_locked(sb, run), 0);
	/* another daemon's leftovers at 2 and 3: adopted, and 4 is ours */
	plant("runs/2/.cmd", "theirs");
	plant("runs/3", NULL);
	CHECK_INT(runs_reserve(sb, "second", &run, &err), 0);
	CHECK_INT(run->n, 4);
	CHECK_INT((int)sb->nruns, 3);
	CHECK_STREQ(sb->runs[1]->cmd, "theirs");
	sandbox_run_free(run);
	done(sb);
}

CHECK_MAIN(CHECK_CASE(test_load_takes_every_numbered_dir), CHECK_CASE(test_reserve_never_reuses))
