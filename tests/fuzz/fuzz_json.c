/*
 * libFuzzer harness: what sandboxfs decodes from a provider's answers and
 * from its own registry.  The first byte picks the decoder; the rest is the
 * body as it would arrive: daytona's FileInfo objects, docker's path-stat
 * header (base64 of JSON), docker's sandbox spec (registry), the error
 * text extracted from an HTTP error body, and e2b's EntryInfo (proto3 JSON:
 * int64 size as a string).
 */
#include "providers/daytona/daytona.h"
#include "providers/docker/docker.h"
#include "providers/e2b/e2b.h"
#include "providers/http/http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void check_rstat(const struct sfs_rstat *st)
{
	if (st->link && !S_ISLNK(st->mode))
		abort(); /* only a symlink carries a target */
	if (st->size < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *body = (const char *)data + 1;
	size_t n = size - 1;
	struct sfs_err err = {0};
	switch (data[0] % 5) {
	case 0: {
		json_t *j = json_loadb(body, n, JSON_DECODE_ANY, NULL);
		if (!j)
			return 0;
		struct sfs_rstat st;
		if (dt_file_info_from_json(j, &st) == 0)
			free(st.link);
		json_decref(j);
		break;
	}
	case 1: {
		char *header = strndup(body, n);
		if (!header)
			return 0;
		struct sfs_rstat st;
		if (dk_path_stat_decode(header, &st, &err) == 0) {
			check_rstat(&st);
			free(st.link);
		}
		free(header);
		break;
	}
	case 2: {
		json_t *j = json_loadb(body, n, JSON_DECODE_ANY, NULL);
		if (!j)
			return 0;
		struct dk_spec spec;
		memset(&spec, 0, sizeof(spec));
		if (dk_spec_from_json(j, &spec) == 0) {
			if (spec.nports > DK_MAX_PORTS)
				abort();
			if (!memchr(spec.image, '\0', sizeof(spec.image)) ||
			    !memchr(spec.workdir, '\0', sizeof(spec.workdir)) ||
			    !memchr(spec.network, '\0', sizeof(spec.network)))
				abort();
		}
		json_decref(j);
		break;
	}
	case 4: {
		json_t *j = json_loadb(body, n, JSON_DECODE_ANY, NULL);
		if (!j)
			return 0;
		struct sfs_rstat st;
		if (e2b_entry_from_json(j, &st) == 0) {
			check_rstat(&st);
			free(st.link);
		}
		json_decref(j);
		break;
	}
	default: {
		char text[256];
		sfs_http_error_text(body, n, text, sizeof(text));
		if (!memchr(text, '\0', sizeof(text)))
			abort();
		break;
	}
	}
	return 0;
}
