/* The registry (ctl/registry.c) and the record's owner functions
 * (providers/provider.c), without a mount. */
#include "check.h"
#include "ctl/registry.h"
#include "ctl/sandbox.h"
#include "providers/redact.h"
#include "providers/util.h"

#include <errno.h>
#include <jansson.h>
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
	snprintf(statedir, sizeof(statedir), "/tmp/sfs-registry-XXXXXX");
	if (!mkdtemp(statedir))
		abort();
}

static char *slurp(const char *name)
{
	char path[512], *text = NULL;
	snprintf(path, sizeof(path), "%s/%s", statedir, name);
	if (sfs_read_file(path, &text, NULL) < 0)
		return NULL;
	return text;
}

static void spit(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", statedir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

static struct sfs_sandbox *make(const char *name, const char *key, const char *provider)
{
	struct sfs_sandbox *sb = sandbox_new(statedir, name, key, sfs_provider_find(provider));
	if (!sb)
		abort();
	sb->state = SFS_SB_RUNNING;
	snprintf(sb->created, sizeof(sb->created), "2026-11-30T19:00:00Z");
	return sb;
}

static void free_all(struct sfs_sandbox **sbs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sandbox_free(sbs[i]);
	free(sbs);
}

static struct sfs_sandbox *find(struct sfs_sandbox **sbs, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(sbs[i]->name, name) == 0)
			return sbs[i];
	return NULL;
}

static void test_round_trip(void)
{
	fresh_statedir();
	struct sfs_sandbox *a = make("alpha", "k1", "local");
	struct sfs_err err = {0};
	CHECK_INT(sfs_sb_publish(a, "/srv/a", "host", "/srv/a", &err), 0);
	json_t *ld = json_pack("{s:s, s:b}", "dir", "/srv/a", "owned", 0);
	CHECK_INT(a->provider->ops->state_load(a, ld, &err), 0);
	json_decref(ld);
	CHECK_INT(sfs_kv_set(&a->env, "GREETING", "hello world"), 0);
	CHECK_INT(sandbox_snapshot_add_locked(a, strdup("s-1"), strdup("before"), 100), 0);
	CHECK_INT(sandbox_snapshot_add_locked(a, strdup("s-2"), NULL, 200), 0);
	a->ports = calloc(1, sizeof(*a->ports));
	a->ports[0] = (struct sfs_port){8080, strdup("http://127.0.0.1:8080")};
	a->nports = 1;
	struct sfs_sandbox *b = make("beta", "k2", "daytona");
	CHECK_INT(sfs_sb_publish(b, "dt-123", "default", "/home/daytona", &err), 0);
	json_t *dt = json_pack("{s:s}", "toolbox", "http://127.0.0.1:1/toolbox/dt-123");
	CHECK_INT(b->provider->ops->state_load(b, dt, &err), 0);
	json_decref(dt);
	struct sfs_sandbox *c = make("gamma", "k3", "local");
	c->state = SFS_SB_CREATING; /* not usable yet: not saved */
	/* but one new or fork is making is saved as creating (a crash then
	 * leaves a record the next start acts on) */
	struct sfs_sandbox *e = make("epsilon", "k5", "local");
	e->state = SFS_SB_CREATING;
	e->saved_while_creating = true;
	/* docker keeps its container, spec, fork image and doomed images behind its hooks */
	struct sfs_sandbox *d = make("delta", "k4", "docker");
	json_t *dd = json_pack("{s:s, s:{s:s, s:s, s:s, s:f, s:I, s:[i]}, s:s, s:[s]}", "container",
			       "c0ffee", "spec", "image", "busybox:latest", "workdir", "/workspace",
			       "network", "", "cpus", 0.5, "memory", (json_int_t)1 << 20, "ports",
			       8080, "fork_image", "sha256:f0", "doomed", "abc123");
	CHECK_INT(d->provider->ops->state_load(d, dd, &err), 0);

	struct sfs_sandbox *all[] = {a, b, c, d, e};
	CHECK_INT(registry_save(statedir, all, 5, NULL, &err), 0);

	struct sfs_sandbox **got = NULL;
	size_t n = 0;
	json_t *kept = NULL;
	CHECK_INT(registry_load(statedir, &got, &n, &kept, &err), 0);
	CHECK_INT(n, 4);
	CHECK_INT(json_array_size(kept), 0);
	struct sfs_sandbox *ga = find(got, n, "alpha"), *gb = find(got, n, "beta");
	struct sfs_sandbox *gd = find(got, n, "delta");
	struct sfs_sandbox *ge = find(got, n, "epsilon");
	CHECK(ga && gb && gd && ge && !find(got, n, "gamma"));
	CHECK(ge && ge->state == SFS_SB_CREATING && ge->id == NULL);
	if (ga && gb && gd) {
		CHECK_STREQ(ga->key, "k1");
		CHECK_STREQ(ga->provider->name, "local");
		CHECK_STREQ(ga->id, "/srv/a");
		CHECK_STREQ(ga->image, "host");
		CHECK_STREQ(ga->workspace, "/srv/a");
		CHECK_STREQ(ga->created, "2026-11-30T19:00:00Z");
		CHECK_INT(ga->state, SFS_SB_RUNNING);
		CHECK_STREQ(sfs_kv_get(&ga->env, "GREETING"), "hello world");
		json_t *lsaved = ga->provider->ops->state_save(ga);
		CHECK_STREQ(json_string_value(json_object_get(lsaved, "dir")), "/srv/a");
		CHECK(json_is_false(json_object_get(lsaved, "owned")));
		json_decref(lsaved);
		json_t *dsaved = gd->provider->ops->state_save(gd);
		CHECK(json_equal(dsaved, dd));
		json_decref(dsaved);
		CHECK_INT(ga->nsnapshots, 2);
		if (ga->nsnapshots == 2) {
			CHECK_STREQ(ga->snapshots[0].id, "s-1");
			CHECK_STREQ(ga->snapshots[0].label, "before");
			CHECK_INT(ga->snapshots[0].created, 100);
			CHECK_STREQ(ga->snapshots[1].id, "s-2");
			CHECK(ga->snapshots[1].label == NULL);
		}
		CHECK_INT(ga->nports, 1);
		if (ga->nports == 1) {
			CHECK_INT(ga->ports[0].port, 8080);
			CHECK_STREQ(ga->ports[0].url, "http://127.0.0.1:8080");
		}
		char path[512];
		snprintf(path, sizeof(path), "%s/sandboxes/k1", statedir);
		CHECK_STREQ(ga->statedir, path);
		/* daytona's private state came back through its load hook, not pdata */
		CHECK_STREQ(gb->id, "dt-123");
		json_t *saved = gb->provider->ops->state_save(gb);
		CHECK_STREQ(json_string_value(json_object_get(saved, "toolbox")),
			    "http://127.0.0.1:1/toolbox/dt-123");
		json_decref(saved);
	}
	free_all(got, n);
	json_decref(kept);
	json_decref(dd);
	sandbox_free(a);
	sandbox_free(b);
	sandbox_free(c);
	sandbox_free(d);
	sandbox_free(e);
}

static void test_first_start(void)
{
	fresh_statedir();
	struct sfs_sandbox **got = (void *)1;
	size_t n = 7;
	json_t *kept = (void *)1;
	struct sfs_err err = {0};
	CHECK_INT(registry_load(statedir, &got, &n, &kept, &err), 0);
	CHECK(got == NULL && n == 0 && kept == NULL);
}

/* A file that is not a registry: a clear error, nothing loaded, the file as
 * it was (the caller refuses to start, so no save can overwrite it). */
static void test_corrupt(void)
{
	static const char *const bad[] = {
	    "{\"version\": 1, \"sandboxes\": [{\"name\": \"a\",", /* cut short */
	    "",							  /* empty */
	    "[1, 2, 3]\n",					  /* not an object */
	    "{\"version\": 1}\n",				  /* no list */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fresh_statedir();
		spit("registry.json", bad[i]);
		struct sfs_sandbox **got = NULL;
		size_t n = 0;
		json_t *kept = NULL;
		struct sfs_err err = {0};
		CHECK_INT(registry_load(statedir, &got, &n, &kept, &err), -EINVAL);
		CHECK(got == NULL && n == 0 && kept == NULL);
		CHECK(strstr(err.msg, "registry.json is not readable (line ") != NULL);
		CHECK(strstr(err.msg, "the file is left as it is") != NULL);
		char *after = slurp("registry.json");
		CHECK_STREQ(after, bad[i]);
		free(after);
	}
}

/* Entries that cannot become records (a provider this build lacks) are
 * carried through the next save unchanged. */
static void test_unknown_entries_kept(void)
{
	fresh_statedir();
	spit("registry.json", "{\"version\": 1, \"sandboxes\": ["
			      "{\"name\": \"x\", \"local_id\": \"kx\", \"provider\": \"martian\", "
			      "\"id\": \"m-1\", \"pdata\": {\"v\": 42}},"
			      "{\"name\": \"y\", \"local_id\": \"ky\", \"provider\": \"local\", "
			      "\"id\": \"/tmp\", \"state\": \"stopped\"}]}");
	struct sfs_sandbox **got = NULL;
	size_t n = 0;
	json_t *kept = NULL;
	struct sfs_err err = {0};
	CHECK_INT(registry_load(statedir, &got, &n, &kept, &err), 0);
	CHECK_INT(n, 1);
	CHECK_INT(json_array_size(kept), 1);
	if (n == 1)
		CHECK_INT(got[0]->state, SFS_SB_STOPPED);
	CHECK_INT(registry_save(statedir, got, n, kept, &err), 0);
	free_all(got, n);
	json_decref(kept);

	json_error_t jerr;
	char path[512];
	snprintf(path, sizeof(path), "%s/registry.json", statedir);
	json_t *root = json_load_file(path, 0, &jerr);
	json_t *arr = json_object_get(root, "sandboxes");
	CHECK_INT(json_array_size(arr), 2);
	bool found = false;
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o)
	{
		if (strcmp(json_string_value(json_object_get(o, "provider")), "martian") == 0) {
			found = true;
			CHECK_STREQ(json_string_value(json_object_get(o, "id")), "m-1");
			CHECK_INT(
			    json_integer_value(json_object_get(json_object_get(o, "pdata"), "v")),
			    42);
		}
	}
	CHECK(found);
	json_decref(root);
}

/* Markers are longer than short values: the redacted registry grows, and
 * must neither be cut short nor stop being JSON.  Registered values are
 * hidden; a value is not hidden for its name. */
static void test_many_secrets_never_truncated(void)
{
	fresh_statedir();
	CHECK_INT(sfs_redact_add_secret("s3kr1t"), 0);
	enum { NSB = 3, NENV = 700 };
	struct sfs_sandbox *sbs[NSB];
	for (int s = 0; s < NSB; s++) {
		char name[16], key[16];
		snprintf(name, sizeof(name), "s%d", s);
		snprintf(key, sizeof(key), "key%d", s);
		sbs[s] = make(name, key, "local");
		for (int i = 0; i < NENV; i++) {
			char k[32];
			snprintf(k, sizeof(k), "API_TOKEN_%d", i);
			CHECK_INT(sfs_kv_set(&sbs[s]->env, k, "s3kr1t"), 0);
		}
		CHECK_INT(sfs_kv_set(&sbs[s]->env, "PLAIN", "visible"), 0);
		CHECK_INT(sfs_kv_set(&sbs[s]->env, "TOKENIZERS_PARALLELISM", "false"), 0);
		CHECK_INT(sfs_kv_set(&sbs[s]->env, "KEYBOARD", "us"), 0);
	}
	struct sfs_err err = {0};
	CHECK_INT(registry_save(statedir, sbs, NSB, NULL, &err), 0);
	char *text = slurp("registry.json");
	CHECK(text && strstr(text, "s3kr1t") == NULL);
	CHECK(text && strstr(text, "\"API_TOKEN_1\": \"[redacted]\"") != NULL);
	CHECK(text && strstr(text, "\"TOKENIZERS_PARALLELISM\": \"false\"") != NULL);
	free(text);
	struct sfs_sandbox **got = NULL;
	size_t n = 0;
	json_t *kept = NULL;
	CHECK_INT(registry_load(statedir, &got, &n, &kept, &err), 0);
	CHECK_INT(n, NSB);
	for (size_t s = 0; s < n; s++) {
		/* registered secret values are not persisted; names say nothing */
		CHECK_INT(got[s]->env.n, 3);
		CHECK_STREQ(sfs_kv_get(&got[s]->env, "PLAIN"), "visible");
		CHECK_STREQ(sfs_kv_get(&got[s]->env, "TOKENIZERS_PARALLELISM"), "false");
		CHECK_STREQ(sfs_kv_get(&got[s]->env, "KEYBOARD"), "us");
	}
	free_all(got, n);
	json_decref(kept);
	for (int s = 0; s < NSB; s++)
		sandbox_free(sbs[s]);
}

static void test_redact_reports(void)
{
	char small[24] = "token=abc and more";
	CHECK_INT(sfs_redact(small, sizeof(small)), -ENOSPC);
	CHECK(strstr(small, "abc") == NULL);
	CHECK(strncmp(small, "token=[redacted]", 16) == 0);
	char fits[64] = "token=abc and more";
	CHECK_INT(sfs_redact(fits, sizeof(fits)), 0);
	CHECK_STREQ(fits, "token=[redacted] and more");
	char *d = sfs_redact_dup("a token=1 b secret: \"2\" c");
	CHECK_STREQ(d, "a token=[redacted] b secret: \"2\" c");
	free(d);
	CHECK_INT(sfs_redact_add_secret("hunter2hunter2"), 0);
	d = sfs_redact_dup("x hunter2hunter2 y hunter2hunter2");
	CHECK_STREQ(d, "x [redacted] y [redacted]");
	free(d);
}

/* Snapshot serials name inode numbers: a deletion must not shift them. */
static void test_snapshot_serials_stable(void)
{
	fresh_statedir();
	struct sfs_sandbox *sb = make("snaps", "ks", "local");
	CHECK_INT(sandbox_snapshot_add_locked(sb, strdup("A"), NULL, 1), 0);
	CHECK_INT(sandbox_snapshot_add_locked(sb, strdup("B"), NULL, 2), 0);
	CHECK_INT(sandbox_snapshot_add_locked(sb, strdup("C"), NULL, 3), 0);
	uint32_t b = sb->snapshots[1].serial, c = sb->snapshots[2].serial;
	CHECK(sb->snapshots[0].serial != b && b != c);
	CHECK_INT(sandbox_snapshot_remove_locked(sb, "A"), 0);
	CHECK_INT(sandbox_snapshot_remove_locked(sb, "A"), -ENOENT);
	CHECK_INT(sb->nsnapshots, 2);
	CHECK_INT(sandbox_snapshot_find_locked(sb, "B"), 0);
	CHECK_INT(sb->snapshots[0].serial, b);
	CHECK_INT(sb->snapshots[1].serial, c);
	/* a new one never reuses A's number */
	CHECK_INT(sandbox_snapshot_add_locked(sb, strdup("D"), NULL, 4), 0);
	CHECK(sb->snapshots[2].serial > c);
	sb->last_snapshot_serial = 0xffffff;
	char *e = strdup("E");
	CHECK_INT(sandbox_snapshot_add_locked(sb, e, NULL, 5), -ENOSPC);
	free(e);
	CHECK_INT(sb->nsnapshots, 3);
	sandbox_free(sb);
}

static void test_owner_functions(void)
{
	fresh_statedir();
	struct sfs_sandbox *sb = make("o", "ko", "local");
	struct sfs_err err = {0};
	CHECK_INT(sfs_sb_publish(sb, "id-1", "img", "/ws", &err), 0);
	/* NULL leaves a field alone */
	CHECK_INT(sfs_sb_publish(sb, "id-2", NULL, NULL, &err), 0);
	CHECK_STREQ(sb->id, "id-2");
	CHECK_STREQ(sb->image, "img");
	char *ws = sfs_sb_dup_workspace(sb), *id = sfs_sb_dup_id(sb);
	CHECK_STREQ(ws, "/ws");
	CHECK_STREQ(id, "id-2");
	CHECK(ws != sb->workspace);
	free(ws);
	free(id);
	sfs_sb_set_state(sb, SFS_SB_STOPPED);
	CHECK_INT(sfs_sb_get_state(sb), SFS_SB_STOPPED);
	sfs_sb_set_progress(sb, "pulling");
	CHECK_STREQ(sb->progress, "pulling");
	sfs_sb_set_progress(sb, NULL);
	CHECK(sb->progress == NULL);
	sandbox_free(sb);
	sfs_rm_rf(statedir);
}

/* providers' option-name lists */
static void test_word_in(void)
{
	const char *keys = "provider bucket prefix image";
	CHECK(sfs_word_in(keys, "provider"));
	CHECK(sfs_word_in(keys, "prefix"));
	CHECK(sfs_word_in(keys, "image"));
	CHECK(!sfs_word_in(keys, "pre"));     /* a word's start only */
	CHECK(!sfs_word_in(keys, "fix"));     /* a word's end only */
	CHECK(!sfs_word_in(keys, "ket pre")); /* across words */
	CHECK(!sfs_word_in(keys, ""));
	CHECK(!sfs_word_in("", "a"));
	CHECK(sfs_word_in("xa a", "a")); /* a later whole match after a partial one */
}

CHECK_MAIN(CHECK_CASE(test_word_in), CHECK_CASE(test_round_trip), CHECK_CASE(test_first_start),
	   CHECK_CASE(test_corrupt), CHECK_CASE(test_unknown_entries_kept),
	   CHECK_CASE(test_many_secrets_never_truncated), CHECK_CASE(test_redact_reports),
	   CHECK_CASE(test_snapshot_serials_stable), CHECK_CASE(test_owner_functions))
