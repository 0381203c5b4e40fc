/*
 * libFuzzer harness: the S3 XML the aws provider reads (providers/aws/s3.c):
 * a ListObjectsV2 page and an error's Code/Message.  Whatever the bytes,
 * no read past the buffer, every key and prefix a string, a truncated page
 * accepted only with a continuation token, a token only on a page
 * whose IsTruncated reads true, and every name aws_fs_list would make of a
 * key or a prefix (sfs_store_entry) one a path may be joined with
 * (untrusted/name.h).
 */
#include "providers/aws/aws.h"
#include "providers/provider.h"
#include "providers/untrusted/name.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A listing's entry for rest: what sfs_store_entry lets through. */
static void check_store(const char *rest, bool prefix)
{
	size_t len;
	if (sfs_store_entry(rest, prefix, &len) == 1 && !sfs_name_ok(rest, len))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* answers arrive NUL-terminated from the HTTP kit */
	char *xml = malloc(size + 1);
	if (!xml)
		return 0;
	memcpy(xml, data, size);
	xml[size] = 0;
	struct aws_s3_list l = {0};
	if (aws_s3_parse_list(xml, size, &l) == 0) {
		for (size_t i = 0; i < l.nobjs; i++)
			if (!l.objs[i].key || strlen(l.objs[i].key) > size)
				abort();
			else
				check_store(l.objs[i].key, false);
		for (size_t i = 0; i < l.nprefixes; i++)
			if (!l.prefixes[i] || strlen(l.prefixes[i]) > size)
				abort();
			else
				check_store(l.prefixes[i], true);
		/* a token only for a page that says it is truncated: the flag's
		 * text as the parser reads it (`&#116;rue` is "true" too) */
		char *trunc = aws_xml_text(xml, size, "IsTruncated");
		if (l.next_token && !(trunc && strcmp(trunc, "true") == 0))
			abort();
		free(trunc);
	}
	aws_s3_list_free(&l);
	free(aws_xml_text(xml, size, "Code"));
	free(xml);
	return 0;
}
