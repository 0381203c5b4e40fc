/* hide= patterns of base workspaces (providers/cow/hide.c): gitignore's
 * subset, matched against paths relative to the base. */
#include "check.h"

#include "providers/cow/cow.h"

#include <errno.h>
#include <stdlib.h>

static void test_glob(void)
{
	CHECK(sfs_cow_glob("*.pem", "k.pem"));
	CHECK(!sfs_cow_glob("*.pem", "k.pem.bak"));
	CHECK(!sfs_cow_glob("*.pem", "a/k.pem")); /* * never crosses a slash */
	CHECK(sfs_cow_glob("a?c", "abc"));
	CHECK(!sfs_cow_glob("a?c", "a/c"));
	CHECK(sfs_cow_glob("[a-c]x", "bx"));
	CHECK(!sfs_cow_glob("[a-c]x", "dx"));
	CHECK(sfs_cow_glob("[!a-c]x", "dx"));
	CHECK(!sfs_cow_glob("[!a-c]x", "ax"));
	CHECK(sfs_cow_glob("[^a]", "b"));
	CHECK(sfs_cow_glob("[abc", "[abc")); /* unterminated: a literal */
	CHECK(sfs_cow_glob("\\*x", "*x"));
	CHECK(!sfs_cow_glob("\\*x", "ax"));
	CHECK(sfs_cow_glob("**/x", "x"));
	CHECK(sfs_cow_glob("**/x", "a/b/x"));
	CHECK(!sfs_cow_glob("**/x", "a/bx"));
	CHECK(sfs_cow_glob("a/**/b", "a/b"));
	CHECK(sfs_cow_glob("a/**/b", "a/x/y/b"));
	CHECK(!sfs_cow_glob("a/**/b", "ab"));
	CHECK(sfs_cow_glob("a/**", "a/x/y"));
	CHECK(!sfs_cow_glob("a/**", "a"));
	CHECK(sfs_cow_glob("a**b", "axxb")); /* not a whole component: one star */
	CHECK(!sfs_cow_glob("a**b", "ax/xb"));
	CHECK(sfs_cow_glob("", ""));
	CHECK(!sfs_cow_glob("", "a"));
	/* many stars against a long name stay quick (no blow-up on misses) */
	CHECK(!sfs_cow_glob("*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
	char pat[400], name[256];
	for (int i = 0; i < 199; i++)
		pat[2 * i] = '*', pat[2 * i + 1] = 'a';
	pat[398] = 'b', pat[399] = 0;
	memset(name, 'a', 255);
	name[255] = 0;
	CHECK(!sfs_cow_glob(pat, name));
	CHECK(sfs_cow_glob("*a*", "xxaxx"));
	CHECK(sfs_cow_glob("a*b*c", "aXbYc"));
	CHECK(!sfs_cow_glob("a*b*c", "aXbY"));
}

static struct sfs_cow_hide *parse(const char *list)
{
	struct sfs_cow_hide *h = NULL;
	struct sfs_err err = {0};
	CHECK_INT(sfs_cow_hide_parse(list, false, &h, &err), 0);
	return h;
}

static struct sfs_cow_hide *parse_nocase(const char *list)
{
	struct sfs_cow_hide *h = NULL;
	struct sfs_err err = {0};
	CHECK_INT(sfs_cow_hide_parse(list, true, &h, &err), 0);
	return h;
}

static void test_match(void)
{
	struct sfs_cow_hide *h = parse(".env,*.pem,secrets/,/build,docs/**/*.key,**/cache");
	CHECK(sfs_cow_hide_match(h, ".env", false));
	CHECK(sfs_cow_hide_match(h, "a/b/.env", false)); /* a name at any depth */
	CHECK(!sfs_cow_hide_match(h, ".envrc", false));
	CHECK(sfs_cow_hide_match(h, "k.pem", false));
	CHECK(sfs_cow_hide_match(h, "x/y/k.pem", false));
	CHECK(sfs_cow_hide_match(h, "secrets", true));
	CHECK(!sfs_cow_hide_match(h, "secrets", false));	/* trailing slash: dirs only */
	CHECK(sfs_cow_hide_match(h, "secrets/inner/f", false)); /* below a hidden dir */
	CHECK(sfs_cow_hide_match(h, "app/secrets/f", false));
	CHECK(sfs_cow_hide_match(h, "build", true));
	CHECK(sfs_cow_hide_match(h, "build/out.o", false));
	CHECK(!sfs_cow_hide_match(h, "src/build", true)); /* leading / anchors */
	CHECK(sfs_cow_hide_match(h, "docs/k.key", false));
	CHECK(sfs_cow_hide_match(h, "docs/a/b/k.key", false));
	CHECK(!sfs_cow_hide_match(h, "src/docs/k.key", false)); /* a slash anchors */
	CHECK(sfs_cow_hide_match(h, "cache", true));
	CHECK(sfs_cow_hide_match(h, "a/b/cache/x", false));
	CHECK(!sfs_cow_hide_match(h, "src/main.c", false));
	CHECK(!sfs_cow_hide_match(NULL, ".env", false));
	sfs_cow_hide_free(h);
}

static void test_parse_errors(void)
{
	const char *bad[] = {
	    "!keep", "a,,b", ",", "/", "a/../b", "./a", "a//b", "**/a/**/b/**/c/**", NULL};
	for (const char **b = bad; *b; b++) {
		struct sfs_cow_hide *h = (void *)1;
		struct sfs_err err = {0};
		CHECK_INT(sfs_cow_hide_parse(*b, false, &h, &err), -EINVAL);
		CHECK(h == NULL);
		CHECK(strstr(err.msg, "hide=") != NULL);
	}
	struct sfs_cow_hide *h = (void *)1;
	struct sfs_err err = {0};
	CHECK_INT(sfs_cow_hide_parse("", false, &h, &err), 0);
	CHECK(h == NULL);
}

/* hide.case: by default a name differing only in case is not hidden;
 * insensitive folds ASCII letters, in literals, classes and ranges. */
static void test_case(void)
{
	const char *list = ".env,*.pem,secrets/,/Build,[a-c]x.key,**/cache";
	struct sfs_cow_hide *cs = parse(list), *ci = parse_nocase(list);
	const char *names[] = {".ENV",	 "a/.Env", "K.PEM",	"Secrets/f", "build/o",
			       "BX.KEY", "Cx.key", "a/CACHE/x", NULL};
	for (const char **n = names; *n; n++) {
		CHECK(!sfs_cow_hide_match(cs, *n, false));
		CHECK(sfs_cow_hide_match(ci, *n, false));
	}
	/* exact case still matches; other names still do not */
	CHECK(sfs_cow_hide_match(ci, ".env", false));
	CHECK(sfs_cow_hide_match(ci, "Build", true));
	CHECK(!sfs_cow_hide_match(ci, ".envrc", false));
	CHECK(!sfs_cow_hide_match(ci, "src/build", true)); /* still anchored */
	CHECK(!sfs_cow_hide_match(ci, "dx.key", false));
	CHECK(!sfs_cow_hide_match(ci, "secrets", false)); /* still dirs only */
	/* [!a]: insensitive hides what either reading matches, so turning it
	 * on never shows what the exact reading hid: A stays hidden, a not */
	struct sfs_cow_hide *neg = parse_nocase("[!a]");
	CHECK(sfs_cow_hide_match(neg, "A", false));
	CHECK(!sfs_cow_hide_match(neg, "a", false));
	CHECK(sfs_cow_hide_match(neg, "b", false));
	/* bytes that are not ASCII letters match exactly */
	CHECK(sfs_cow_glob_nocase("\xc3\xa9*", "\xc3\xa9t\xc3\xa9"));
	CHECK(!sfs_cow_glob_nocase("\xc3\xa9", "\xc3\x89"));
	CHECK(!sfs_cow_glob_nocase("1_", "1-"));
	sfs_cow_hide_free(cs);
	sfs_cow_hide_free(ci);
	sfs_cow_hide_free(neg);

	bool nocase = true;
	struct sfs_err err = {0};
	CHECK_INT(sfs_cow_hide_case(NULL, &nocase, &err), 0);
	CHECK(!nocase);
	CHECK_INT(sfs_cow_hide_case("sensitive", &nocase, &err), 0);
	CHECK(!nocase);
	CHECK_INT(sfs_cow_hide_case("insensitive", &nocase, &err), 0);
	CHECK(nocase);
	CHECK_INT(sfs_cow_hide_case("Insensitive", &nocase, &err), -EINVAL);
	CHECK(strstr(err.msg, "hide.case=Insensitive") != NULL);
}

CHECK_MAIN(CHECK_CASE(test_glob), CHECK_CASE(test_match), CHECK_CASE(test_parse_errors),
	   CHECK_CASE(test_case))
