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
	CHECK_INT(sfs_cow_hide_parse(list, &h, &err), 0);
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
		CHECK_INT(sfs_cow_hide_parse(*b, &h, &err), -EINVAL);
		CHECK(h == NULL);
		CHECK(strstr(err.msg, "hide=") != NULL);
	}
	struct sfs_cow_hide *h = (void *)1;
	struct sfs_err err = {0};
	CHECK_INT(sfs_cow_hide_parse("", &h, &err), 0);
	CHECK(h == NULL);
}

CHECK_MAIN(CHECK_CASE(test_glob), CHECK_CASE(test_match), CHECK_CASE(test_parse_errors))
