/*
 * libFuzzer harness: the JSON listings of remote workspaces.
 * sfs_rdirents_from_json (providers/provider.c: daytona's array, e2b's and
 * sprites' "entries") and a GCS objects list (providers/gcp/gcs.c
 * gcs_parse_list) with sfs_store_entry's view of each name, as
 * gcp_fs_list makes a listing of it.  Whatever the bytes: every name a
 * listing gives back is one a path may be joined with (untrusted/name.h),
 * so the fuzzer fails on any "..", "a/b", NUL or over-long name let through.
 */
#include "providers/gcp/gcp.h"
#include "providers/provider.h"
#include "providers/untrusted/name.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int no_attrs(json_t *o, struct sfs_rstat *st)
{
	(void)o;
	st->mode = 0100644;
	return 0;
}

static void check_entries(json_t *arr)
{
	struct sfs_rdirent *v = NULL;
	size_t n = 0;
	struct sfs_name_drops d = {0};
	if (sfs_rdirents_from_json(arr, no_attrs, &v, &n, &d))
		return;
	if (n + d.n > json_array_size(arr))
		abort();
	for (size_t i = 0; i < n; i++)
		if (!sfs_name_ok_str(v[i].name))
			abort();
	sfs_rdirents_free(v, n);
}

/* A store listing's entry for rest: what sfs_store_entry lets through. */
static void check_store(const char *rest, bool prefix)
{
	size_t len;
	if (sfs_store_entry(rest, prefix, &len) == 1 && !sfs_name_ok(rest, len))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *o = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
	if (!o)
		return 0;
	check_entries(o);
	check_entries(json_object_get(o, "entries"));
	struct gcs_list l = {0};
	char *next = NULL;
	if (gcs_parse_list(o, &l, &next) == 0) {
		for (size_t i = 0; i < l.nobjs; i++)
			check_store(l.objs[i].name, false);
		for (size_t i = 0; i < l.nprefixes; i++)
			check_store(l.prefixes[i], true);
	}
	free(next);
	gcs_list_free(&l);
	json_decref(o);
	return 0;
}
