/*
 * Running the sbx CLI: posix_spawn with an argv array (no shell ever sees
 * a value), stdin/stdout/stderr on pipes, the child in a process group of
 * its own so a CLI that runs over its timeout is KILLed with everything it
 * started, then reaped.  Every pipe end is closed on every path.
 */
#include "sbx.h"

#include "../options.h"
#include "../spawn_attr.h"
#include "../strbuf.h"
#include "../util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static bool is_exe(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

bool sbx_cli_path(char *buf, size_t len)
{
	const char *cfg = sfs_opt_get("sbx.cli");
	if (cfg && *cfg) {
		return sfs_pathf(buf, len, "%s", cfg) == 0 && is_exe(cfg);
	}
	const char *path = getenv("PATH");
	for (const char *p = path ? path : ""; *p;) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n && (size_t)snprintf(buf, len, "%.*s/sbx", (int)n, p) < len && is_exe(buf))
			return true;
		p += n + (e ? 1 : 0);
	}
	snprintf(buf, len, "sbx");
	return false;
}

void sbx_result_free(struct sbx_result *r)
{
	free(r->out);
	free(r->errtxt);
	r->out = r->errtxt = NULL;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

/* What of the daemon's environment the CLI gets: what any program needs
 * (PATH, HOME, locale, temp dir, proxies, CA files), where a CLI keeps its
 * config and login (XDG_*, the docker client's DOCKER_*), and its own
 * SBX_*.  Never the rest: the daemon's environment holds every other
 * provider's credentials (AWS_*, E2B_API_KEY, DAYTONA_API_KEY...). */
static bool cli_env_allowed(const char *kv)
{
	static const char *const names[] = {
	    "PATH",
	    "HOME",
	    "USER",
	    "LOGNAME",
	    "LANG",
	    "LANGUAGE",
	    "TZ",
	    "TMPDIR",
	    "TERM",
	    "SSL_CERT_FILE",
	    "SSL_CERT_DIR",
	    "HTTP_PROXY",
	    "HTTPS_PROXY",
	    "NO_PROXY",
	    "http_proxy",
	    "https_proxy",
	    "no_proxy",
	    "DOCKER_HOST",
	    "DOCKER_CONFIG",
	    "DOCKER_CONTEXT",
	    "DOCKER_CERT_PATH",
	    "DOCKER_TLS_VERIFY",
	};
	static const char *const prefixes[] = {"LC_", "XDG_", "SBX_"};
	const char *eq = strchr(kv, '=');
	if (!eq)
		return false;
	size_t n = (size_t)(eq - kv);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !strncmp(kv, names[i], n))
			return true;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(kv, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* The CLI's environment (cli_env_allowed), pointing into environ: free
 * the array only. */
static char **cli_env(void)
{
	size_t n = 0;
	for (char **e = environ; e && *e; e++)
		n++;
	char **env = calloc(n + 1, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (char **e = environ; e && *e; e++)
		if (cli_env_allowed(*e))
			env[k++] = *e;
	return env;
}

static int spawn(const char *cli, const char *const *args, int pin[2], int pout[2], int perr[2],
		 pid_t *pid)
{
	size_t n = 0;
	while (args[n])
		n++;
	char **argv = calloc(n + 2, sizeof(*argv));
	if (!argv)
		return -ENOMEM;
	argv[0] = (char *)cli;
	for (size_t i = 0; i < n; i++)
		argv[i + 1] = (char *)args[i];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int r = posix_spawn_file_actions_init(&fa);
	if (r) {
		free(argv);
		return -r;
	}
	if ((r = sfs_spawn_attr_clean(&attr, POSIX_SPAWN_SETPGROUP))) {
		posix_spawn_file_actions_destroy(&fa);
		free(argv);
		return -r;
	}
	/* the pipes are O_CLOEXEC: only the dup2'd copies reach the CLI */
	r = pin[0] >= 0 ? posix_spawn_file_actions_adddup2(&fa, pin[0], 0)
			: posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!r)
		r = posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
	if (!r)
		r = perr[1] >= 0
			? posix_spawn_file_actions_adddup2(&fa, perr[1], 2)
			: posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	/* nothing else of the daemon's, whatever lacks close-on-exec */
	if (!r)
		r = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	char **envp = r ? NULL : cli_env();
	if (!r && !envp)
		r = ENOMEM;
	if (!r)
		r = posix_spawn(pid, cli, &fa, &attr, argv, envp);
	free(envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(argv);
	return -r;
}

static void trim(struct sfs_buf *b)
{
	while (b->len && (b->buf[b->len - 1] == '\n' || b->buf[b->len - 1] == ' ' ||
			  b->buf[b->len - 1] == '\r'))
		b->buf[--b->len] = '\0';
}

int sbx_cli(const char *const *args, const void *in, size_t inlen, long timeout_ms,
	    struct sbx_result *res, struct sfs_err *err)
{
	memset(res, 0, sizeof(*res));
	char cli[4096];
	if (!sbx_cli_path(cli, sizeof(cli)))
		return sfs_errf(err, -ENOENT,
				"sbx: no sbx CLI: %s is not an executable (set sbx.cli)", cli);
	int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
	if ((in && pipe2(pin, O_CLOEXEC)) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) {
		int e = errno;
		close_pair(pin);
		close_pair(pout);
		close_pair(perr);
		return sfs_errf(err, -e, "sbx: pipe: %s", strerror(e));
	}
	pid_t pid = 0;
	int r = spawn(cli, args, pin, pout, perr, &pid);
	/* the child's ends */
	if (pin[0] >= 0)
		close(pin[0]);
	pin[0] = -1;
	close(pout[1]);
	close(perr[1]);
	pout[1] = perr[1] = -1;
	if (r) {
		close_pair(pin);
		close_pair(pout);
		close_pair(perr);
		return sfs_errf(err, r, "sbx: cannot run %s: %s", cli, strerror(-r));
	}
	if (pin[1] >= 0)
		fcntl(pin[1], F_SETFL, O_NONBLOCK);
	struct sfs_buf out = {0}, etx = {0};
	size_t sent = 0;
	long deadline = now_ms() + timeout_ms;
	bool timed_out = false, nomem = false;
	if (pin[1] >= 0 && !inlen) {
		close(pin[1]); /* empty input: EOF at once */
		pin[1] = -1;
	}
	while (pout[0] >= 0 || perr[0] >= 0) {
		struct pollfd pf[3] = {{.fd = pout[0], .events = POLLIN},
				       {.fd = perr[0], .events = POLLIN},
				       {.fd = pin[1], .events = POLLOUT}};
		long left = deadline - now_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		int k = poll(pf, 3, (int)(left > 1000 ? 1000 : left));
		if (k < 0 && errno != EINTR)
			break;
		if (k <= 0)
			continue;
		if (pin[1] >= 0 && pf[2].revents) {
			ssize_t w = write(pin[1], (const char *)in + sent, inlen - sent);
			if (w > 0)
				sent += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == inlen) {
				close(pin[1]); /* EOF (or the CLI stopped reading) */
				pin[1] = -1;
			}
		}
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &perr[0] : &pout[0];
			if (*fd < 0 || !pf[i].revents)
				continue;
			char chunk[65536];
			ssize_t g = read(*fd, chunk, sizeof(chunk));
			if (g < 0 && errno == EINTR)
				continue;
			if (g <= 0) {
				close(*fd);
				*fd = -1;
			} else if (sfs_buf_add(i ? &etx : &out, chunk, (size_t)g)) {
				nomem = true;
			}
		}
	}
	close_pair(pin);
	close_pair(pout);
	close_pair(perr);
	int st = 0;
	if (timed_out || nomem)
		kill(-pid, SIGKILL); /* the CLI's whole group: nothing it started stays */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		sfs_buf_free(&out);
		sfs_buf_free(&etx);
		return sfs_errf(err, -ETIMEDOUT, "sbx %s: no answer in %.1f s (the CLI was killed)",
				args[0], timeout_ms / 1000.0);
	}
	if (nomem || sfs_buf_add(&out, "", 1) || sfs_buf_add(&etx, "", 1)) {
		sfs_buf_free(&out);
		sfs_buf_free(&etx);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	out.len--;
	etx.len--;
	trim(&etx);
	res->out = out.buf;
	res->len = out.len;
	res->errtxt = etx.buf;
	res->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

int sbx_cli_fail(const struct sbx_result *r, const char *what, struct sfs_err *err)
{
	const char *e = r->errtxt && *r->errtxt ? r->errtxt : NULL;
	/* the last line says why; earlier ones are progress */
	const char *last = e ? strrchr(e, '\n') : NULL;
	if (last && last[1])
		e = last + 1;
	int code = -EIO;
	if (e && (strstr(e, "not found") || strstr(e, "no such") || strstr(e, "No such")))
		code = -ENOENT;
	if (e)
		return sfs_errf(err, code, "sbx %s: %s", what, e);
	return sfs_errf(err, code, "sbx %s: exit status %d", what, r->code);
}

int sbx_cli_spawn(const char *const *args, pid_t *pid, int *outfd, struct sfs_err *err)
{
	char cli[4096];
	if (!sbx_cli_path(cli, sizeof(cli)))
		return sfs_errf(err, -ENOENT,
				"sbx: no sbx CLI: %s is not an executable (set sbx.cli)", cli);
	int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
	if (pipe2(pout, O_CLOEXEC))
		return sfs_errf(err, -errno, "sbx: pipe: %s", strerror(errno));
	int r = spawn(cli, args, pin, pout, perr, pid);
	close(pout[1]);
	if (r) {
		close(pout[0]);
		return sfs_errf(err, r, "sbx: cannot run %s: %s", cli, strerror(-r));
	}
	*outfd = pout[0];
	return 0;
}

void sbx_cli_reap(pid_t pid, long grace_ms)
{
	int st;
	for (long waited = 0;; waited += 20) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR))
			return;
		if (waited >= grace_ms)
			break;
		usleep(20000);
	}
	kill(-pid, SIGKILL); /* its whole group */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}
