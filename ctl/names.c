/* Sandbox names and small integers from ctl words. */
#include "ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 63

static const char *const reserved_names[] = {"ctl", "providers", NULL};

/* ASCII only: isalnum() would let a locale admit more. */
static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_name_char(char c)
{
	return is_alnum(c) || c == '.' || c == '_' || c == '-';
}

static int bad_char(const char *name, size_t i, struct sfs_err *err)
{
	unsigned char c = (unsigned char)name[i];
	if (c > 0x20 && c < 0x7f)
		return sfs_errf(err, -EINVAL,
				"sandbox name \"%s\": bad character '%c' at byte %zu (allowed: "
				"A-Z a-z 0-9 . _ -)",
				name, c, i + 1);
	return sfs_errf(
	    err, -EINVAL,
	    "sandbox name \"%s\": bad byte 0x%02x at byte %zu (allowed: A-Z a-z 0-9 . _ "
	    "-)",
	    name, c, i + 1);
}

int ctl_check_sandbox_name(const char *name, struct sfs_err *err)
{
	if (!name || !name[0])
		return sfs_errf(err, -EINVAL, "sandbox name is empty");
	size_t len = strlen(name);
	if (len > NAME_MAX_LEN)
		return sfs_errf(err, -EINVAL,
				"sandbox name \"%.20s...\" is too long (%zu bytes, at most %d)",
				name, len, NAME_MAX_LEN);
	if (!is_alnum(name[0]))
		return sfs_errf(err, -EINVAL,
				"sandbox name \"%s\" must start with a letter or a digit", name);
	for (size_t i = 1; i < len; i++)
		if (!is_name_char(name[i]))
			return bad_char(name, i, err);
	for (const char *const *r = reserved_names; *r; r++)
		if (strcmp(name, *r) == 0)
			return sfs_errf(err, -EINVAL, "sandbox name \"%s\" is reserved", name);
	return 0;
}

int ctl_parse_int(const char *s, long min, long max, long *out)
{
	if (!s)
		return -EINVAL;
	const char *digits = s[0] == '-' ? s + 1 : s;
	if (*digits < '0' || *digits > '9') /* strtol would take blanks and '+' */
		return -EINVAL;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	if (out)
		*out = v;
	return 0;
}
