/*
 * libFuzzer harness: hide= patterns of base workspaces (providers/cow/hide.c).
 * The first line is a hide= list, each further line a path matched against
 * it (as a file and as a directory).  Besides memory safety: a literal
 * pattern (no * ? [ \) matches exactly its own text; a lone `*` matches
 * exactly the names without a slash; and no input may be slow (libFuzzer's
 * timeout: the matcher backtracks only to the last star of a component).
 * The same list with hide.case=insensitive parses alike and hides at least
 * what the case-sensitive one does.
 */
#include "providers/cow/cow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *nl = strchr(text, '\n');
	char *paths = nl ? nl + 1 : text + size;
	if (nl)
		*nl = '\0';
	struct sfs_cow_hide *h = NULL, *hi = NULL;
	struct sfs_err err = {0};
	int r = sfs_cow_hide_parse(text, false, &h, &err);
	if (r && (h || !err.msg[0] || !memchr(err.msg, 0, sizeof(err.msg))))
		abort(); /* a refusal leaves nothing and says why */
	if ((sfs_cow_hide_parse(text, true, &hi, &err) != 0) != (r != 0))
		abort(); /* hide.case changes matching, never what parses */
	bool literal = !strpbrk(text, "*?[\\");
	for (char *p = paths, *e; *p; p = e ? e + 1 : p + strlen(p)) {
		e = strchr(p, '\n');
		if (e)
			*e = '\0';
		/* folding case only ever hides more */
		for (int dir = 0; dir < 2; dir++)
			if (sfs_cow_hide_match(h, p, dir) && !sfs_cow_hide_match(hi, p, dir))
				abort();
		if (literal && sfs_cow_glob(text, p) != (strcmp(text, p) == 0))
			abort();
		if (sfs_cow_glob("*", p) != (strchr(p, '/') == NULL))
			abort();
		if (!e)
			break;
	}
	sfs_cow_hide_free(h);
	sfs_cow_hide_free(hi);
	free(text);
	return 0;
}
