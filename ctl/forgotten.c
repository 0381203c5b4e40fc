#include "forgotten.h"
#include "quota.h"
#include "runs.h"

#include "../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARK "forgotten"

int forgotten_mark(const struct sfs_sandbox *sb, struct sfs_err *err)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "provider", sb->provider->name, "id",
			      sb->id ? sb->id : "", "name", sb->name);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char path[4300];
	int r = sfs_pathf(path, sizeof(path), "%s/" MARK, sb->statedir);
	if (r)
		sfs_errf(err, r, "%s/" MARK ": path too long", sb->statedir);
	else
		r = sfs_write_file_atomic(path, text, strlen(text), err);
	free(text);
	return r;
}

static void unlink_in(const struct sfs_sandbox *sb, const char *name)
{
	char path[4300];
	if (sfs_pathf(path, sizeof(path), "%s/%s", sb->statedir, name) < 0)
		return;
	if (unlink(path) < 0 && errno != ENOENT)
		sfs_log(SFS_LOG_WARN, "%s: %s", path, strerror(errno));
}

void forgotten_unmark(const struct sfs_sandbox *sb)
{
	unlink_in(sb, MARK);
}

void forgotten_clear_destroy_markers(const struct sfs_sandbox *sb)
{
	unlink_in(sb, "destroying");
	unlink_in(sb, "destroyed");
}

/* Whether dir has an entry for which keep(name) is true. */
static bool any_entry(const char *dir, bool (*keep)(const char *name))
{
	DIR *d = opendir(dir);
	if (!d)
		return errno != ENOENT; /* unreadable: keep rather than guess */
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d)))
		found = strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && keep(e->d_name);
	closedir(d);
	return found;
}

/* a run's directory or its status being written; not the spare made
 * ahead of any run (ctl/runs.h) */
static bool run_entry(const char *name)
{
	return !runs_is_spare(name);
}

static bool pending_file(const char *name)
{
	size_t n = strlen(name);
	return n >= 8 && strcmp(name + n - 8, ".pending") == 0;
}

bool forgotten_worth_keeping(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno != ENOENT;
	bool keep = false;
	struct dirent *e;
	char path[4400];
	while (!keep && (e = readdir(d))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, MARK) ||
		    !strcmp(n, "destroying") || !strcmp(n, "destroyed") ||
		    /* the audit of a sandbox with nothing else here goes with it:
		     * whether its last lines were written yet must not decide */
		    !strcmp(n, "audit") || !strcmp(n, "audit.1"))
			continue;
		if (sfs_pathf(path, sizeof(path), "%s/%s", dir, n) < 0) {
			keep = true; /* what cannot be looked at is kept */
			break;
		}
		if (!strcmp(n, "runs"))
			keep = any_entry(path, run_entry);
		else if (!strcmp(n, "rcache"))
			keep = any_entry(path, pending_file);
		else
			keep = true; /* the workspace, or something not ours to judge */
	}
	closedir(d);
	return keep;
}

/* Whether STATE/sandboxes/KEY/forgotten names pname and id; *mtime gets
 * when it was written. */
static bool marks(const char *path, const char *pname, const char *id, time_t *mtime)
{
	json_error_t jerr;
	json_t *o = json_load_file(path, 0, &jerr);
	if (!o)
		return false;
	const char *p = json_string_value(json_object_get(o, "provider"));
	const char *i = json_string_value(json_object_get(o, "id"));
	bool same = p && i && *i && !strcmp(p, pname) && !strcmp(i, id);
	json_decref(o);
	struct stat st;
	if (same && stat(path, &st) == 0)
		*mtime = st.st_mtime;
	return same;
}

bool forgotten_find(const char *statedir, const char *pname, const char *id,
		    bool (*listed)(const char *key), char key[40])
{
	char dir[4200];
	if (sfs_pathf(dir, sizeof(dir), "%s/sandboxes", statedir) < 0)
		return false;
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	time_t newest = 0;
	struct dirent *e;
	char path[4400];
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= 40)
			continue;
		if (sfs_pathf(path, sizeof(path), "%s/%s", dir, e->d_name) < 0)
			continue;
		/* its mark is on its quota's file system, if it has one and a
		 * reboot unmounted it */
		struct sfs_err qerr = {0};
		if (quota_attach(statedir, e->d_name, path, &qerr))
			sfs_log(SFS_LOG_WARN, "forgotten %s: %s", e->d_name, qerr.msg);
		if (sfs_pathf(path, sizeof(path), "%s/%s/" MARK, dir, e->d_name) < 0)
			continue;
		time_t t = 0;
		if (!marks(path, pname, id, &t) || (listed && listed(e->d_name)))
			continue;
		if (!found || t >= newest) {
			memcpy(key, e->d_name, strlen(e->d_name) + 1); /* < 40, above */
			newest = t;
			found = true;
		}
	}
	closedir(d);
	return found;
}
