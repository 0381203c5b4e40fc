/*
 * libFuzzer harness: the S3 XML the aws provider reads (providers/aws/s3.c):
 * a ListObjectsV2 page and an error's Code/Message.  Whatever the bytes,
 * no read past the buffer, every key and prefix a string, a truncated page
 * accepted only with a continuation token, and a token only on a page
 * whose IsTruncated reads true.
 */
#include "providers/aws/aws.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
		for (size_t i = 0; i < l.nprefixes; i++)
			if (!l.prefixes[i] || strlen(l.prefixes[i]) > size)
				abort();
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
