/*
 * The file operations of providers whose API has no route for them (docker
 * in archive mode, vercel): short sh scripts run through the provider's
 * exec, and the parsers of what they print.
 */
#include "sh.h"

#include "../provider.h"
#include "../untrusted/name.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXISTS "{ [ -e \"$1\" ] || [ -L \"$1\" ]; }"
#define IS_DIR "{ [ -d \"$1\" ] && [ ! -L \"$1\" ]; }"

/* Names NUL-separated, an empty name; one `stat` line per name in the same
 * order; then each symlink's target, NUL-terminated. */
const char sfs_sh_fs_list[] =
    "cd -- \"$1\" 2>/dev/null || { " EXISTS " || exit 2; exit 20; }\n"
    "set --\n"
    "for f in * .[!.]* ..?*; do [ -e \"$f\" ] || [ -L \"$f\" ] && set -- \"$@\" \"$f\"; "
    "done\n"
    "[ $# -eq 0 ] && exit 0\n"
    "printf '%s\\0' \"$@\"; printf '\\0'\n"
    "stat -c '%f %s %Y' -- \"$@\" || exit 5\n"
    "for f; do [ -L \"$f\" ] && printf '%s\\0' \"$(readlink -- \"$f\")\"; done; exit 0";

/* One `stat` line, then a symlink's target NUL-terminated. */
const char sfs_sh_fs_stat[] =
    EXISTS " || exit 2\n"
	   "stat -c '%f %s %Y' -- \"$1\" || exit 5\n"
	   "[ -L \"$1\" ] && printf '%s\\0' \"$(readlink -- \"$1\")\"; exit 0";

const char sfs_sh_fs_readlink[] = "readlink -- \"$1\" || exit 2";

const char sfs_sh_fs_mkdir[] = EXISTS " && exit 17; [ -d \"$(dirname -- \"$1\")\" ] || exit 2; "
				      "mkdir -m \"$2\" -- \"$1\" || exit 5";

const char sfs_sh_fs_rmdir[] = EXISTS " || exit 2; " IS_DIR " || exit 20; "
				      "[ -z \"$(ls -A -- \"$1\")\" ] || exit 39; "
				      "rmdir -- \"$1\" || exit 5";

const char sfs_sh_fs_unlink[] =
    EXISTS " || exit 2; " IS_DIR " && exit 21; rm -f -- \"$1\" || exit 5";

/* rename(2): a directory replaces only an empty directory, a file never
 * replaces a directory */
const char sfs_sh_fs_rename[] =
    EXISTS " || exit 2\n"
	   "if [ -d \"$2\" ] && [ ! -L \"$2\" ]; then\n"
	   "  " IS_DIR " || exit 21\n"
	   "  [ -z \"$(ls -A -- \"$2\")\" ] || exit 39\n"
	   "  rmdir -- \"$2\" || exit 5\n"
	   "elif " IS_DIR " && { [ -e \"$2\" ] || [ -L \"$2\" ]; }; then exit 20\n"
	   "fi\n"
	   "mv -f -T -- \"$1\" \"$2\" || exit 5";

const char sfs_sh_fs_chmod[] =
    EXISTS " || exit 2; [ -L \"$1\" ] && exit 0; chmod \"$2\" -- \"$1\" || exit 5";

const char sfs_sh_fs_symlink[] = EXISTS " && exit 17; ln -s -- \"$2\" \"$1\" || exit 5";

int sfs_sh_fs_errno(int code)
{
	return code > 0 && code < 126 ? -code : -EIO;
}

/* One "MODE-hex SIZE MTIME" line at *pos; moves *pos past it. */
static bool stat_line(const char *buf, size_t len, size_t *pos, struct sfs_rstat *st)
{
	unsigned mode;
	long long size, mtime;
	const char *nl = *pos < len ? memchr(buf + *pos, '\n', len - *pos) : NULL;
	/* sscanf on a copy of the line: it would read the buffer to a NUL,
	 * past len when there is none */
	char line[128];
	size_t n = nl ? (size_t)(nl - (buf + *pos)) : 0;
	if (!nl || n >= sizeof(line))
		return false;
	memcpy(line, buf + *pos, n);
	line[n] = '\0';
	if (sscanf(line, "%x %lld %lld", &mode, &size, &mtime) != 3)
		return false;
	st->mode = (mode_t)mode;
	st->size = (off_t)size;
	st->mtime = mtime;
	*pos = (size_t)(nl - buf) + 1;
	return true;
}

/* A NUL-terminated string at *pos (the buffer must end in one). */
static int take_string(const char *buf, size_t len, size_t *pos, char **out)
{
	if (*pos >= len || !memchr(buf + *pos, '\0', len - *pos))
		return -EAGAIN;
	if (!(*out = strdup(buf + *pos)))
		return -ENOMEM;
	*pos += strlen(*out) + 1;
	return 0;
}

int sfs_sh_list_parse(const char *buf, size_t len, struct sfs_rdirent **ents, size_t *n,
		      struct sfs_name_drops *drops)
{
	*ents = NULL;
	*n = 0;
	if (!len)
		return 0;
	/* names up to the empty one */
	size_t count = 0, pos = 0;
	while (pos < len && buf[pos]) {
		const char *z = memchr(buf + pos, '\0', len - pos);
		if (!z)
			return -EAGAIN;
		pos = (size_t)(z - buf) + 1;
		count++;
	}
	if (pos >= len)
		return -EAGAIN;
	struct sfs_rdirent *v = calloc(count ? count : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	int r = 0;
	pos = 0;
	for (size_t i = 0; !r && i < count; i++)
		r = take_string(buf, len, &pos, &v[i].name);
	pos++; /* the empty name */
	for (size_t i = 0; !r && i < count; i++)
		if (!stat_line(buf, len, &pos, &v[i].st))
			r = -EAGAIN;
	for (size_t i = 0; !r && i < count; i++)
		if (S_ISLNK(v[i].st.mode))
			r = take_string(buf, len, &pos, &v[i].st.link);
	if (r) {
		sfs_rdirents_free(v, count);
		return r;
	}
	/* the names the sandbox gave that cannot be one here are left out */
	size_t k = 0;
	for (size_t i = 0; i < count; i++) {
		if (sfs_name_ok_str(v[i].name)) {
			v[k++] = v[i];
			continue;
		}
		sfs_name_drop(drops, v[i].name, strlen(v[i].name));
		free(v[i].name);
		free(v[i].st.link);
	}
	*ents = v;
	*n = k;
	return 0;
}

int sfs_sh_stat_parse(const char *buf, size_t len, struct sfs_rstat *st)
{
	memset(st, 0, sizeof(*st));
	size_t pos = 0;
	if (!stat_line(buf, len, &pos, st))
		return -EAGAIN;
	if (S_ISLNK(st->mode))
		return take_string(buf, len, &pos, &st->link);
	return 0;
}
