/* The git kit's pure rules: what a source URL is, what a ref may be, progress text. */
#include "git.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
	const char *prefix;
	enum sfs_git_url_kind kind;
} schemes[] = {
    {"https://", SFS_GIT_URL_HTTPS}, {"http://", SFS_GIT_URL_HTTP},
    {"git://", SFS_GIT_URL_GIT},     {"ssh://", SFS_GIT_URL_SSH},
    {"git+ssh://", SFS_GIT_URL_SSH}, {"ssh+git://", SFS_GIT_URL_SSH},
    {"file://", SFS_GIT_URL_FILE},
};

const char *sfs_git_url_kind_name(enum sfs_git_url_kind k)
{
	static const char *const names[] = {"https", "http", "git", "ssh", "file", "path"};
	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

int sfs_git_url_classify(const char *src, struct sfs_err *err)
{
	if (!src || !*src)
		return sfs_errf(err, -EINVAL, "source: empty URL");
	for (const unsigned char *p = (const unsigned char *)src; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return sfs_errf(err, -EINVAL,
					"source: \"%s\": blanks or control characters in a URL",
					src);
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i].prefix);
		if (strncasecmp(src, schemes[i].prefix, n) != 0)
			continue;
		const char *rest = src + n;
		if (schemes[i].kind == SFS_GIT_URL_FILE) {
			if (rest[0] != '/' || !rest[1])
				return sfs_errf(err, -EINVAL,
						"source: \"%s\": a file URL needs an absolute path "
						"(file:///path)",
						src);
			return SFS_GIT_URL_FILE;
		}
		/* [user[:password]@]host[:port]/path: the host must be there */
		const char *slash = strchr(rest, '/');
		size_t authority = slash ? (size_t)(slash - rest) : strlen(rest);
		const char *at = memchr(rest, '@', authority);
		const char *host = at ? at + 1 : rest;
		size_t hostlen = authority - (size_t)(host - rest);
		if (hostlen == 0 || host[0] == ':')
			return sfs_errf(err, -EINVAL, "source: \"%s\": no host", src);
		if (!slash || !slash[1])
			return sfs_errf(err, -EINVAL, "source: \"%s\": no repository path", src);
		return (int)schemes[i].kind;
	}
	const char *sep = strstr(src, "://");
	if (sep) {
		int n = (int)(sep - src);
		return sfs_errf(err, -EINVAL,
				"source: \"%s\": unknown scheme \"%.*s\" (https, http, git, ssh, "
				"file, or an absolute host path)",
				src, n, src);
	}
	if (src[0] == '/')
		return SFS_GIT_URL_PATH;
	/* scp-like: [user@]host:path, with the ':' before any '/' */
	const char *colon = strchr(src, ':');
	const char *slash = strchr(src, '/');
	if (colon && colon > src && (!slash || colon < slash)) {
		if (!colon[1])
			return sfs_errf(err, -EINVAL, "source: \"%s\": no repository path", src);
		if (colon[-1] == '@')
			return sfs_errf(err, -EINVAL, "source: \"%s\": no host", src);
		return SFS_GIT_URL_SSH;
	}
	return sfs_errf(err, -EINVAL,
			"source: \"%s\": a host path must be absolute (or a URL: https, http, git, "
			"ssh, file)",
			src);
}

int sfs_git_url_port(const char *url)
{
	const char *sep = strstr(url, "://");
	if (!sep)
		return 22; /* scp-like user@host:path has no port */
	const char *auth = sep + 3, *slash = strchr(auth, '/');
	size_t n = slash ? (size_t)(slash - auth) : strlen(auth);
	const char *at = memchr(auth, '@', n);
	if (at) {
		n -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	const char *colon = memchr(auth, ':', n);
	if (auth[0] == '[') { /* [v6addr]:port */
		const char *close = memchr(auth, ']', n);
		colon = close && close + 1 < auth + n && close[1] == ':' ? close + 1 : NULL;
	}
	if (!colon)
		return 22;
	int port = 0;
	for (const char *c = colon + 1; c < auth + n; c++) {
		if (*c < '0' || *c > '9' || port > 65535)
			return 22;
		port = port * 10 + (*c - '0');
	}
	return port > 0 && port <= 65535 ? port : 22;
}

int sfs_git_ref_check(const char *ref, struct sfs_err *err)
{
	const char *why = NULL;
	size_t n = ref ? strlen(ref) : 0;
	if (!n)
		why = "empty";
	else if (ref[0] == '-')
		why = "starts with '-'";
	else if (ref[0] == '/' || ref[n - 1] == '/')
		why = "starts or ends with '/'";
	else if (ref[n - 1] == '.')
		why = "ends with '.'";
	else if (strcmp(ref, "@") == 0)
		why = "is \"@\"";
	else if (strstr(ref, "..") || strstr(ref, "//") || strstr(ref, "@{"))
		why = "contains \"..\", \"//\" or \"@{\"";
	for (const unsigned char *p = (const unsigned char *)ref; !why && *p; p++)
		if (*p < 0x20 || *p == 0x7f || strchr(" ~^:?*[\\", *p))
			why = "contains a blank, a control character or one of ~^:?*[\\";
	/* each component: not starting with '.', not ending with ".lock" */
	for (const char *c = ref; !why && c && *c;) {
		const char *end = strchr(c, '/');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		if (c[0] == '.')
			why = "has a component starting with '.'";
		else if (len >= 5 && strncmp(c + len - 5, ".lock", 5) == 0)
			why = "has a component ending with \".lock\"";
		c = end ? end + 1 : NULL;
	}
	if (why)
		return sfs_errf(err, -EINVAL, "ref: \"%s\" is not a valid ref name (%s)",
				ref ? ref : "", why);
	return 0;
}

size_t sfs_git_ref_candidates(const char *ref, char (*names)[256], size_t max, bool *maybe_sha)
{
	size_t n = 0, len = strlen(ref);
	bool hex = len >= 4 && len <= 40;
	for (size_t i = 0; hex && i < len; i++)
		hex = strchr("0123456789abcdefABCDEF", ref[i]) != NULL;
	*maybe_sha = hex;
	if (strncmp(ref, "refs/", 5) == 0) {
		if (n < max && sfs_pathf(names[n], 256, "%s", ref) == 0)
			n++; /* a name too long is no candidate: never a cut one */
		return n;
	}
	static const char *const prefixes[] = {"refs/heads/", "refs/tags/"};
	for (size_t i = 0; i < 2 && n < max; i++)
		if (sfs_pathf(names[n], 256, "%s%s", prefixes[i], ref) == 0)
			n++;
	return n;
}

void sfs_git_progress_text(char *buf, size_t len, const char *phase, size_t done, size_t total,
			   uint64_t bytes)
{
	unsigned pct = total ? (unsigned)((done >= total ? total : done) * 100 / total) : 0;
	int w = snprintf(buf, len, "%s %u%% %zu/%zu %s", phase, pct, done, total,
			 strcmp(phase, "checkout") == 0 ? "files" : "objects");
	if (bytes == 0 || w < 0 || (size_t)w >= len)
		return;
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf + w, len - (size_t)w, " %llu B", (unsigned long long)bytes);
	else
		snprintf(buf + w, len - (size_t)w, " %.1f %s", v, units[u]); /* message: may be cut */
}
