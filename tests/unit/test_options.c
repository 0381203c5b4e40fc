/* providers/options.c: the option tables, value checks, suggestions, the
 * config file's line errors, and the shape of every built-in table. */
#include "check.h"
#include "providers/config.h"
#include "providers/options.h"
#include "providers/provider.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A small table of every type, so each check is tested apart from the
 * built-in rows (which change). */
static const struct sfs_opt t_opts[] = {
    {.key = "t.name", .type = SFS_OPT_STRING, .help = "a string"},
    {.key = "t.flag", .type = SFS_OPT_BOOL, .def = "false", .help = "a bool"},
    {.key = "t.count", .type = SFS_OPT_INT, .def = "4", .min = 1, .max = 10, .help = "an int"},
    {.key = "t.delay", .type = SFS_OPT_DOUBLE, .min = 0, .max = 60, .help = "seconds"},
    {.key = "t.mode",
     .type = SFS_OPT_ENUM,
     .def = "auto",
     .choices = "auto|archive|none",
     .help = "an enum"},
    {.key = "t.perm", .type = SFS_OPT_MODE, .help = "a mode"},
    {.key = "t.rperm", .type = SFS_OPT_MODE, .max = 0444, .help = "read bits only"},
    {.key = "t.secret_token", .type = SFS_OPT_INT, .min = 0, .max = 9, .help = "secret"},
    {0},
};
static const struct sfs_opt_table T[] = {{"t", t_opts}};

/* Expects key=val to pass and canonicalize to want. */
static void ok(const char *key, const char *val, const char *want)
{
	struct sfs_err err = {0};
	const char *canon = NULL;
	int r = sfs_opt_check(T, 1, key, val, &canon, &err);
	CHECK_INT(r, 0);
	if (r)
		fprintf(stderr, "    %s=%s: %s\n", key, val ? val : "(bare)", err.msg);
	else
		CHECK_STREQ(canon, want);
}

/* Expects key=val to fail with -EINVAL and a message containing each of
 * the NULL-terminated fragments. */
static void bad(const char *key, const char *val, ...)
{
	struct sfs_err err = {0};
	const char *canon = NULL;
	CHECK_INT(sfs_opt_check(T, 1, key, val, &canon, &err), -EINVAL);
	va_list ap;
	va_start(ap, val);
	for (const char *f; (f = va_arg(ap, const char *));) {
		CHECK(strstr(err.msg, f) != NULL);
		if (!strstr(err.msg, f))
			fprintf(stderr, "    message [%s] lacks [%s]\n", err.msg, f);
	}
	va_end(ap);
}

static void test_parse_ok(void)
{
	ok("t.name", "anything at all", "anything at all");
	ok("t.name", "", "");
	ok("t.flag", NULL, "true"); /* bare -o t.flag */
	ok("t.flag", "yes", "true");
	ok("t.flag", "ON", "true");
	ok("t.flag", "0", "false");
	ok("t.flag", "false", "false");
	ok("t.count", "1", "1");
	ok("t.count", "10", "10");
	ok("t.delay", "0.25", "0.25");
	ok("t.delay", "60", "60");
	ok("t.mode", "archive", "archive");
	ok("t.perm", "0750", "0750");
	ok("t.perm", "644", "644");
	ok("t.rperm", "0440", "0440");
	ok("t.rperm", "0", "0");
}

static void test_unknown_key_suggests(void)
{
	bad("t.nmae", "x", "unknown option \"t.nmae\"", "did you mean t.name?", NULL);
	bad("t.counts", "1", "did you mean t.count?", NULL);
	bad("t.mod", "auto", "did you mean t.mode?", NULL);
	/* a key without its table's prefix names the row that ends in it */
	bad("delay", "1", "did you mean t.delay?", NULL);
	/* libfuse's options are candidates too */
	bad("allow_othr", NULL, "did you mean allow_other?", NULL);
	/* nothing near: no guess, a pointer to --help */
	bad("completely.different", "1", "unknown option", "--help", NULL);
	struct sfs_err err = {0};
	const char *canon;
	sfs_opt_check(T, 1, "completely.different", "1", &canon, &err);
	CHECK(strstr(err.msg, "did you mean") == NULL);
	CHECK_STREQ(sfs_opt_nearest(T, 1, "zzzzzzzz"), NULL);
}

static void test_bad_int(void)
{
	bad("t.count", "abc", "t.count", "\"abc\" is not an integer", NULL);
	bad("t.count", "3x", "not an integer", NULL);
	bad("t.count", "", "not an integer", NULL);
	bad("t.count", "1.5", "not an integer", NULL);
	bad("t.count", "0", "t.count", "out of range (1 .. 10)", NULL);
	bad("t.count", "11", "out of range", NULL);
	bad("t.count", "99999999999999999999", "not an integer", NULL);
	bad("t.count", NULL, "t.count needs a value", "t.count=N", NULL);
	bad("t.delay", "soon", "\"soon\" is not a number", NULL);
	bad("t.delay", "nan", "not a number", NULL);
	bad("t.delay", "inf", "not a number", NULL);
	bad("t.delay", "-1", "out of range", NULL);
	bad("t.perm", "0999", "not an octal mode", NULL);
	bad("t.perm", "17777", "not an octal mode", NULL);
	/* a bit the key does not use is refused, not dropped */
	bad("t.rperm", "0777", "t.rperm", "0777 sets bits outside 0444", NULL);
	bad("t.rperm", "0644", "outside 0444", NULL);
}

static void test_bad_bool(void)
{
	bad("t.flag", "maybe", "t.flag", "\"maybe\" is not a boolean", NULL);
	bad("t.flag", "", "is not a boolean", NULL);
	bad("t.flag", "2", "is not a boolean", NULL);
}

static void test_bad_enum(void)
{
	bad("t.mode", "archiv", "t.mode", "\"archiv\" is not one of auto|archive|none",
	    "did you mean archive?", NULL);
	bad("t.mode", "nothing-like-it", "is not one of auto|archive|none", NULL);
	bad("t.mode", NULL, "t.mode needs a value", "auto|archive|none", NULL);
}

static void test_secret_value_not_echoed(void)
{
	struct sfs_err err = {0};
	const char *canon;
	CHECK_INT(sfs_opt_check(T, 1, "t.secret_token", "hunter2hunter2", &canon, &err), -EINVAL);
	CHECK(strstr(err.msg, "t.secret_token") != NULL);
	CHECK(strstr(err.msg, "hunter2") == NULL);
}

static void test_fuse_options(void)
{
	CHECK(sfs_opt_is_fuse("allow_other"));
	CHECK(sfs_opt_is_fuse("default_permissions"));
	CHECK(sfs_opt_is_fuse("fsname"));
	CHECK(sfs_opt_is_fuse("ro"));
	CHECK(!sfs_opt_is_fuse("allow_others"));
	CHECK(!sfs_opt_is_fuse("writeback"));
	CHECK(!sfs_opt_is_fuse("docker.fs"));
}

/* Writes text to a fresh file and returns its path (static buffer). */
static const char *conf(const char *text)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/sfs-test-options.XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return "/nonexistent";
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* Loads text as a config file against T; returns the result, message in err. */
static int load(const char *text, struct sfs_err *err)
{
	const char *p = conf(text);
	sfs_kv_free(&sfs_config);
	int r = sfs_config_load_with(p, 1, T, 1, err);
	unlink(p);
	return r;
}

static void test_config_file(void)
{
	struct sfs_err err = {0};
	CHECK_INT(load("# comment\n\nt.name = a b c\nt.flag=yes\n  t.count = 7  \n", &err), 0);
	CHECK_STREQ(sfs_config_get("t.name", NULL), "a b c");
	CHECK_STREQ(sfs_config_get("t.flag", NULL), "true"); /* one spelling */
	CHECK_STREQ(sfs_config_get("t.count", NULL), "7");

	/* each error names the file's line */
	CHECK_INT(load("t.name = x\n# fine\nt.cuont = 3\n", &err), -EINVAL);
	CHECK(strstr(err.msg, ":3: unknown option \"t.cuont\" (did you mean t.count?)") != NULL);
	CHECK_INT(load("t.count = 3\nt.count = many\n", &err), -EINVAL);
	CHECK(strstr(err.msg, ":2: option t.count: \"many\" is not an integer") != NULL);
	CHECK_INT(load("\n\n\n\nt.flag = perhaps\n", &err), -EINVAL);
	CHECK(strstr(err.msg, ":5: option t.flag") != NULL);
	CHECK_INT(load("t.mode = archve\n", &err), -EINVAL);
	CHECK(strstr(err.msg, ":1: option t.mode: \"archve\" is not one of") != NULL);
	CHECK_INT(load("t.name = x\njust words\n", &err), -EINVAL);
	CHECK(strstr(err.msg, ":2: expected a `name = value` line") != NULL);
	CHECK_INT(load("allow_other = true\n", &err), -EINVAL);
	CHECK(strstr(err.msg, ":1: allow_other is a libfuse mount option") != NULL);

	/* a value set on the command line wins, but a bad line still fails */
	sfs_kv_free(&sfs_config);
	sfs_config_set("t.count", "2");
	const char *p = conf("t.count = 9\n");
	CHECK_INT(sfs_config_load_with(p, 1, T, 1, &err), 0);
	unlink(p);
	CHECK_STREQ(sfs_config_get("t.count", NULL), "2");
	p = conf("t.count = nine\n");
	CHECK_INT(sfs_config_load_with(p, 1, T, 1, &err), -EINVAL);
	unlink(p);
	sfs_kv_free(&sfs_config);
}

static void test_defaults(void)
{
	sfs_kv_free(&sfs_config);
	sfs_config_set("t.count", "9");
	CHECK_INT(sfs_opt_apply_defaults(T, 1), 0);
	CHECK_STREQ(sfs_config_get("t.count", NULL), "9"); /* given: kept */
	CHECK_STREQ(sfs_config_get("t.mode", NULL), "auto");
	CHECK_STREQ(sfs_config_get("t.flag", NULL), "false");
	CHECK_STREQ(sfs_config_get("t.name", NULL), NULL); /* no default: unset */
	sfs_kv_free(&sfs_config);
}

/* Readers get a row's default without restating it, and a set value over it. */
static void test_opt_get(void)
{
	sfs_kv_free(&sfs_config);
	CHECK_STREQ(sfs_opt_get("symlinks"), "rewrite");
	CHECK(sfs_opt_get_double("http.attempts") == 4);
	CHECK(!sfs_opt_get_bool("writeback"));
	CHECK_STREQ(sfs_opt_get("no.such.key"), NULL);
	CHECK(sfs_opt_get_double("no.such.key") == 0);
	sfs_config_set("writeback", "true");
	sfs_config_set("http.attempts", "7");
	CHECK(sfs_opt_get_bool("writeback"));
	CHECK(sfs_opt_get_double("http.attempts") == 7);
	sfs_kv_free(&sfs_config);
}

/* The built-in tables: the core's and every provider's, each row sound. */
static void test_builtin_tables(void)
{
	size_t n;
	const struct sfs_opt_table *t = sfs_opt_tables(&n);
	CHECK_INT(n, 1 + sfs_nproviders);
	CHECK_STREQ(t[0].title, "core");
	for (size_t i = 1; i < n; i++)
		CHECK_STREQ(t[i].title, sfs_providers[i - 1]->name);
	for (size_t i = 0; i < n; i++)
		for (const struct sfs_opt *o = t[i].opts; o->key; o++) {
			/* a provider's keys carry its name */
			if (i > 0) {
				size_t pl = strlen(t[i].title);
				CHECK(!strncmp(o->key, t[i].title, pl) && o->key[pl] == '.');
			}
			CHECK(o->help && *o->help);
			CHECK(sfs_opt_find(t, n, o->key) == o); /* no key twice */
			CHECK(!sfs_opt_is_fuse(o->key));
			if (o->type == SFS_OPT_INT || o->type == SFS_OPT_DOUBLE)
				CHECK(o->min < o->max);
			if (o->type == SFS_OPT_ENUM)
				CHECK(o->choices && *o->choices);
			if (o->def) {
				/* every default passes its own row's check */
				struct sfs_err err = {0};
				const char *canon;
				int r = sfs_opt_check(t, n, o->key, o->def, &canon, &err);
				CHECK_INT(r, 0);
				if (r)
					fprintf(stderr, "    %s: %s\n", o->key, err.msg);
			}
		}
	/* the keys the issue names */
	CHECK(sfs_opt_find(t, n, "docker.fs") != NULL);
	CHECK(sfs_opt_find(t, n, "daytona.api_key") != NULL);
	CHECK(sfs_opt_find(t, n, "local.scrub_env") != NULL);
	CHECK_STREQ(sfs_opt_nearest(t, n, "docker.fss"), "docker.fs");
	CHECK_STREQ(sfs_opt_nearest(t, n, "writebak"), "writeback");
	/* runs_mode uses read bits only: 0777 is refused, not cut to 0444 */
	struct sfs_err merr = {0};
	const char *mcanon;
	CHECK_INT(sfs_opt_check(t, n, "runs_mode", "0777", &mcanon, &merr), -EINVAL);
	CHECK(strstr(merr.msg, "runs_mode") != NULL);
	CHECK_INT(sfs_opt_check(t, n, "runs_mode", "0444", &mcanon, &merr), 0);
}

static void test_help_lists_every_row(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	size_t n;
	const struct sfs_opt_table *t = sfs_opt_tables(&n);
	sfs_opt_print_help(f, t, n);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		for (const struct sfs_opt *o = t[i].opts; o->key; o++) {
			char want[128];
			snprintf(want, sizeof(want), "-o %s", o->key);
			CHECK(strstr(buf, want) != NULL);
		}
	CHECK(strstr(buf, "docker options:") != NULL);
	CHECK(strstr(buf, "daytona options:") != NULL);
	CHECK(strstr(buf, "(default auto)") != NULL);
	/* no line wider than a terminal */
	for (char *l = buf; *l;) {
		size_t w = strcspn(l, "\n");
		CHECK(w <= 80);
		l += w + (l[w] == '\n');
	}
	free(buf);
}

CHECK_MAIN(CHECK_CASE(test_parse_ok), CHECK_CASE(test_unknown_key_suggests),
	   CHECK_CASE(test_bad_int), CHECK_CASE(test_bad_bool), CHECK_CASE(test_bad_enum),
	   CHECK_CASE(test_secret_value_not_echoed), CHECK_CASE(test_fuse_options),
	   CHECK_CASE(test_config_file), CHECK_CASE(test_defaults), CHECK_CASE(test_opt_get),
	   CHECK_CASE(test_builtin_tables), CHECK_CASE(test_help_lists_every_row))
