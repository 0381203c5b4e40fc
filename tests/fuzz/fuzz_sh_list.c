/*
 * libFuzzer harness: the shell kit's listing parser (providers/sh/fs.c
 * sfs_sh_list_parse), which reads what a sandbox's shell prints for vercel,
 * cloudflare, sbx and docker.  Whatever the bytes: no read past the
 * buffer, and every name it gives back is one a path may be joined with
 * (untrusted/name.h): the fuzzer fails on any "..", "a/b" or over-long name
 * let through.
 */
#include "providers/provider.h"
#include "providers/sh/sh.h"
#include "providers/untrusted/name.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact copy: the parser must not read past len */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	struct sfs_rdirent *v = NULL;
	size_t n = 0;
	struct sfs_name_drops d = {0};
	if (sfs_sh_list_parse(buf, size, &v, &n, &d) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (!sfs_name_ok_str(v[i].name))
				abort();
			if (S_ISLNK(v[i].st.mode) != (v[i].st.link != NULL))
				abort(); /* a symlink has its target, nothing else has one */
		}
		if (strnlen(d.first, sizeof(d.first)) == sizeof(d.first))
			abort(); /* the name shown in the warning is a string */
		sfs_rdirents_free(v, n);
	}
	struct sfs_rstat st;
	if (sfs_sh_stat_parse(buf, size, &st) == 0)
		free(st.link);
	free(buf);
	return 0;
}
