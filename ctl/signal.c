/* Signal names for `kill` and run status ("killed TERM"). */
#include "ctl.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <strings.h>

#define SIG_MAX 64 /* Linux _NSIG - 1; glibc names only 1..31 */

/* Names glibc's sigabbrev_np does not give: it says POLL for IO, ABRT for IOT. */
static const struct {
	const char *name;
	int sig;
} aliases[] = {{"IO", SIGIO}, {"IOT", SIGIOT}, {"CLD", SIGCHLD}};

static int signal_by_name(const char *name)
{
	if (strncasecmp(name, "SIG", 3) == 0)
		name += 3;
	if (!name[0])
		return -EINVAL;
	for (int sig = 1; sig <= SIG_MAX; sig++) {
		const char *abbrev = sigabbrev_np(sig);
		if (abbrev && strcasecmp(name, abbrev) == 0)
			return sig;
	}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcasecmp(name, aliases[i].name) == 0)
			return aliases[i].sig;
	return -EINVAL;
}

int ctl_parse_signal(const char *s)
{
	if (!s || !s[0])
		return -EINVAL;
	if (s[0] >= '0' && s[0] <= '9') {
		long sig;
		if (ctl_parse_int(s, 1, SIG_MAX, &sig))
			return -EINVAL;
		return (int)sig;
	}
	return signal_by_name(s);
}

const char *ctl_signal_name(int sig)
{
	if (sig < 1 || sig > SIG_MAX)
		return NULL;
	return sigabbrev_np(sig);
}
