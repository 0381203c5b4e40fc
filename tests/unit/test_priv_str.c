/* One string as a provider's private state (providers/priv_str.c). */
#include "check.h"

#include "providers/priv_str.h"
#include "providers/provider.h"

#include <stdlib.h>
#include <string.h>

static void test_set_dup_save_load(void)
{
	struct sfs_sandbox a = {0}, b = {0};
	CHECK(sfs_priv_str_dup(&a) == NULL);
	CHECK(sfs_priv_str_save(&a, "k") == NULL); /* nothing to save */
	CHECK_INT(sfs_priv_str_set(&a, "one"), 0);
	CHECK_INT(sfs_priv_str_set(&a, "two"), 0); /* replaced, the old one freed */
	char *s = sfs_priv_str_dup(&a);
	CHECK_STREQ(s, "two");
	free(s);
	json_t *saved = sfs_priv_str_save(&a, "session");
	CHECK_STREQ(json_string_value(json_object_get(saved, "session")), "two");
	struct sfs_err err = {0};
	CHECK_INT(sfs_priv_str_load(&b, saved, "toolbox", &err), 0); /* other key: nothing */
	CHECK(b.priv == NULL);
	CHECK_INT(sfs_priv_str_load(&b, saved, "session", &err), 0);
	CHECK_STREQ(b.priv, "two");
	json_decref(saved);
	sfs_priv_str_free(&b);
	CHECK(b.priv == NULL);
	sfs_priv_str_free(&a);
}

static void test_take(void)
{
	struct sfs_sandbox dst = {0}, src = {0};
	CHECK_INT(sfs_priv_str_set(&dst, "old"), 0);
	CHECK_INT(sfs_priv_str_set(&src, "new"), 0);
	sfs_priv_str_take(&dst, &src);
	CHECK_STREQ(dst.priv, "new");
	CHECK(src.priv == NULL);
	sfs_priv_str_free(&dst);
}

CHECK_MAIN(CHECK_CASE(test_set_dup_save_load), CHECK_CASE(test_take))
