/*
 * libFuzzer harness: the redactor (providers/redact.c), which every message,
 * log line, status file and registry entry passes.  It must keep the buffer
 * a terminated string within its capacity and never leave a registered
 * secret in the text, whatever surrounds it; the growing variant
 * (sfs_redact_dup) gives the same text, never cut short.
 */
#include "providers/redact.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "s3cr3t-planted-credential"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once) {
		once = sfs_redact_add_secret(SECRET) == 0 ? 1 : -1;
		if (once < 0)
			abort();
	}
	if (size < 1)
		return 0;
	size_t cap = 1 + data[0] % 255 + (size - 1); /* room, sometimes to spare */
	char *buf = malloc(cap);
	if (!buf)
		goto out;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	/* sfs_redact_dup never cuts: its text is sfs_redact's whenever that fits */
	char *dup = sfs_redact_dup(buf);
	int r = sfs_redact(buf, cap);
	if (!memchr(buf, '\0', cap))
		abort();
	if (strstr(buf, SECRET) || (dup && strstr(dup, SECRET)))
		abort();
	if (dup && r == 0 && strcmp(dup, buf) != 0)
		abort();
	if (dup && r == -ENOSPC && (strlen(dup) < cap - 1 || strncmp(dup, buf, strlen(buf)) != 0))
		abort(); /* -ENOSPC only when it did not fit, and then a prefix */
	free(dup);
out:
	free(buf);
	return 0;
}
