/* `sbx exec` of the shell kit's commands, run to their end. */
#include "sbx.h"

#include "../options.h"
#include "../sh/sh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long sbx_timeout_ms(void)
{
	return (long)(sfs_opt_get_double("sbx.timeout") * 1000);
}

char *sbx_abs_path(struct sfs_sandbox *sb, const char *rel)
{
	const char *ws = sb->workspace ? sb->workspace : "/";
	size_t wl = strlen(ws);
	while (wl > 1 && ws[wl - 1] == '/')
		wl--;
	char *p = NULL;
	if (asprintf(&p, "%.*s%s%s", (int)wl, ws, rel[0] && !(wl == 1 && ws[0] == '/') ? "/" : "",
		     rel) < 0)
		return NULL;
	return p;
}

/* A CLI failure worth another attempt: not one that says the sandbox, the
 * login or the hypervisor is missing (those stay so). */
static bool transient(const struct sbx_result *res)
{
	const char *t = res->errtxt ? res->errtxt : "";
	return !strstr(t, "not found") && !strstr(t, "no such") && !strcasestr(t, "login") &&
	       !strcasestr(t, "logged in") && !strcasestr(t, "hypervisor");
}

int sbx_exec(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, const void *in, size_t inlen,
	     long timeout_ms, int *code, char **out, size_t *outlen, struct sfs_err *err)
{
	int attempts = (int)sfs_opt_get_double("sbx.attempts");
	return sbx_exec_n(sb, c, in, inlen, timeout_ms, attempts < 1 ? 1 : attempts, code, out,
			  outlen, err);
}

int sbx_exec_n(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, const void *in, size_t inlen,
	       long timeout_ms, int attempts, int *code, char **out, size_t *outlen,
	       struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "sbx: the sandbox has no name yet");
	const char **args = calloc(c->argc + 5, sizeof(*args));
	if (!args)
		return sfs_errf(err, -ENOMEM, "out of memory");
	size_t k = 0;
	args[k++] = "exec";
	if (in)
		args[k++] = "-i";
	args[k++] = "--";
	args[k++] = sb->id;
	for (size_t i = 0; i < c->argc; i++)
		args[k++] = c->argv[i];
	struct sbx_result res;
	int r;
	for (int i = 1;; i++) {
		r = sbx_cli(args, in, inlen, timeout_ms ? timeout_ms : sbx_timeout_ms(), &res, err);
		if (r || res.code != SBX_EXEC_CLI_FAILED || i >= attempts || !transient(&res))
			break;
		sfs_log(SFS_LOG_INFO, "sbx exec: attempt %d of %d failed: %s", i, attempts,
			res.errtxt);
		sbx_result_free(&res);
		usleep(50000u * (unsigned)i); /* a short backoff */
	}
	free(args);
	if (r)
		return r;
	if (res.code == SBX_EXEC_CLI_FAILED) {
		r = sbx_cli_fail(&res, "exec", err);
		sbx_result_free(&res);
		return r;
	}
	*code = res.code;
	if (res.code && err && res.errtxt[0]) /* the command's complaint, for the caller */
		snprintf(err->msg, sizeof(err->msg), "%s", res.errtxt); /* message: may be cut */
	if (out) {
		*out = res.out;
		res.out = NULL;
		if (outlen)
			*outlen = res.len;
	}
	sbx_result_free(&res);
	return 0;
}
