/*
 * The archive API's X-Docker-Container-Path-Stat header: base64 of a JSON
 * object {name, size, mode (Go os.FileMode), mtime, linkTarget}.  Pure, so
 * the fuzz harness in tests/fuzz feeds it hostile headers directly.
 */
#include "docker.h"

#include "../http/http.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Go's os.FileMode bits, as the archive API reports them. */
#define GO_DIR (1u << 31)
#define GO_SYMLINK (1u << 27)
#define GO_DEVICE (1u << 26)
#define GO_PIPE (1u << 25)
#define GO_SOCKET (1u << 24)
#define GO_SETUID (1u << 23)
#define GO_SETGID (1u << 22)
#define GO_CHARDEV (1u << 21)
#define GO_STICKY (1u << 20)

static mode_t from_go_mode(uint32_t g)
{
	mode_t m = g & 0777;
	if (g & GO_SETUID)
		m |= S_ISUID;
	if (g & GO_SETGID)
		m |= S_ISGID;
	if (g & GO_STICKY)
		m |= S_ISVTX;
	if (g & GO_DIR)
		return m | S_IFDIR;
	if (g & GO_SYMLINK)
		return m | S_IFLNK;
	if (g & GO_PIPE)
		return m | S_IFIFO;
	if (g & GO_SOCKET)
		return m | S_IFSOCK;
	if (g & GO_DEVICE)
		return m | (g & GO_CHARDEV ? S_IFCHR : S_IFBLK);
	return m | S_IFREG;
}

static int64_t parse_time(const char *s)
{
	struct tm tm = {0};
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (int64_t)timegm(&tm);
}

int dk_path_stat_decode(const char *header, struct sfs_rstat *st, struct sfs_err *err)
{
	memset(st, 0, sizeof(*st));
	size_t n = strlen(header);
	unsigned char *raw = malloc(3 * (n / 4) + 3);
	if (!raw)
		return sfs_errf(err, -ENOMEM, "out of memory");
	long len = sfs_base64_decode(header, n, raw);
	json_t *j = len >= 0 ? json_loadb((const char *)raw, (size_t)len, 0, NULL) : NULL;
	free(raw);
	if (!json_is_object(j)) {
		json_decref(j);
		return sfs_errf(err, -EIO, "unreadable stat header");
	}
	json_int_t mode = json_integer_value(json_object_get(j, "mode"));
	json_int_t size = json_integer_value(json_object_get(j, "size"));
	st->mode = from_go_mode((uint32_t)mode);
	st->size = size < 0 ? 0 : (off_t)size;
	st->mtime = parse_time(json_string_value(json_object_get(j, "mtime")));
	const char *link = json_string_value(json_object_get(j, "linkTarget"));
	int r = 0;
	if (S_ISLNK(st->mode) && link && !(st->link = strdup(link)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(j);
	return r;
}
