/*
 * The allow-list proxy (proxy.h).
 *
 * One acceptor thread polls every sandbox's listeners and a wake pipe; each
 * accepted connection gets a thread that reads the request head, checks the
 * host against the sandbox's allow-list, resolves it (proxy.resolve first,
 * then DNS, whose private and loopback answers are refused), connects and
 * relays bytes both ways.  Listener fds are closed only by the acceptor
 * (a detach marks its sandbox dead and wakes it), so poll never sees a
 * reused fd number.  Locks: P.mu is a leaf; no I/O is done under it.
 *
 * A sandbox is a hostile client: it may open connections without end or
 * send its head a byte at a time.  Each connection costs the daemon a
 * thread and two fds, and the daemon's fds are also every mount user's
 * (a workspace open, a ctl write), so a sandbox holds at most
 * proxy.max_connections at once, the proxy as a whole at most a quarter
 * of the fd limit, and a head must arrive within proxy.head_timeout.
 */
#include "proxy.h"

#include "../config.h"
#include "../util.h"
#include "policy.h"
#include "request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct psb {
	char key[40];
	char name[64];
	struct sfs_netpolicy policy;
	int unix_fd, tcp_fd;
	pid_t target; /* the holder the tcp listener lives in */
	uint64_t start;
	bool dead;   /* detached: the acceptor closes its fds and frees it */
	bool warned; /* "too many connections" logged (again below half) */
	struct psb *next;
};

struct pconn {
	pthread_t th;
	int client;
	char key[40];
	bool done; /* the thread has finished: join it */
	struct pconn *next;
};

static struct {
	pthread_mutex_t mu;
	struct psb *sbs;
	struct pconn *conns;
	pthread_t acceptor;
	bool running, stopping;
	int wake[2];
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}};

static void wake_acceptor(void)
{
	if (P.wake[1] >= 0 && write(P.wake[1], "x", 1) < 0) {
		/* full: it is awake already */
	}
}

/* ---- listeners -------------------------------------------------------- */

static int unix_listener(const char *netdir, uid_t uid, gid_t gid, struct sfs_err *err)
{
	int dfd = open(netdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sfs_errf(err, -errno, "proxy: %s: %s", netdir, strerror(errno));
	/* through the directory's fd: a state dir's path may be longer than
	 * sun_path's 108 bytes */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/proxy.sock", dfd);
	unlinkat(dfd, "proxy.sock", 0);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int r = 0;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    /* never through a symlink: the sandbox may write where docker
	     * binds the directory, and the name could be swapped after bind */
	    fchownat(dfd, "proxy.sock", uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		r = sfs_errf(err, -errno, "proxy: %s/proxy.sock: %s", netdir, strerror(errno));
	close(dfd);
	if (r && fd >= 0)
		close(fd);
	return r ? r : fd;
}

struct ns_listen {
	pid_t target;
	uint64_t start;
	int fd, err;
};

/* A thread of its own enters the sandbox's network namespace, makes the
 * listener there and ends: the socket stays in that namespace, so runs
 * reach it on their loopback and the host cannot. */
static void *ns_listen_thread(void *arg)
{
	struct ns_listen *l = arg;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)l->target);
	int ns = open(path, O_RDONLY | O_CLOEXEC);
	l->fd = -1;
	if (ns < 0 || sfs_proc_start_time(l->target) != l->start) {
		l->err = ns < 0 ? errno : ESRCH;
		if (ns >= 0)
			close(ns);
		return NULL;
	}
	if (setns(ns, CLONE_NEWNET) < 0) {
		l->err = errno;
		close(ns);
		return NULL;
	}
	close(ns);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(SFS_PROXY_PORT)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		l->err = errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	l->fd = fd;
	return NULL;
}

static int ns_listener(const struct sfs_holder *h, struct sfs_err *err)
{
	struct ns_listen l = {.target = h->target, .start = h->start, .fd = -1};
	pthread_t th;
	int r = pthread_create(&th, NULL, ns_listen_thread, &l);
	if (r)
		return sfs_errf(err, -r, "proxy: thread: %s", strerror(r));
	pthread_join(th, NULL);
	if (l.fd < 0)
		return sfs_errf(err, -l.err,
				"proxy: listening on 127.0.0.1:%d in the sandbox's network: %s",
				SFS_PROXY_PORT, strerror(l.err));
	return l.fd;
}

/* ---- one connection --------------------------------------------------- */

static void reply(int fd, const char *status, const char *why)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %s\r\nX-Proxy-Error: %s\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
			 status, why, strlen(why) + 1, why);
	if (n > 0 && write(fd, msg, (size_t)n) < 0) {
		/* the client went away */
	}
}

/* proxy.resolve's address for host ("NAME=ADDR NAME=ADDR ..."), or NULL. */
static bool override(const char *host, char *addr, size_t len)
{
	const char *list = sfs_config_get("proxy.resolve", "");
	/* as the policy matched it: any case, one trailing dot or none */
	size_t hl = strlen(host);
	if (hl > 1 && host[hl - 1] == '.')
		hl--;
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ';' || *p == '\t')
			p++;
		const char *end = p + strcspn(p, " ;\t");
		const char *eq = memchr(p, '=', (size_t)(end - p));
		if (eq && (size_t)(eq - p) == hl && strncasecmp(p, host, hl) == 0) {
			/* an address too long for addr is none: never a cut one */
			return sfs_pathf(addr, len, "%.*s", (int)(end - eq - 1), eq + 1) == 0;
		}
		p = end;
	}
	return false;
}

/* Whether a name DNS resolved may not lead to sa: the networks behind the
 * host (policy.c) and the host's own addresses, whatever they are (a
 * public address of eth0 reaches every service bound to 0.0.0.0). */
static bool addr_refused(const struct sockaddr *sa)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0)
		return true; /* cannot tell: refused */
	size_t n = 0;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
		n++;
	const struct sockaddr **own = calloc(n + 1, sizeof(*own));
	bool refused = true;
	if (own) {
		n = 0;
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
			if (i->ifa_addr)
				own[n++] = i->ifa_addr;
		refused = sfs_netpolicy_addr_refused(sa, own, n);
		free(own);
	}
	freeifaddrs(ifs);
	return refused;
}

static bool is_literal(const char *host)
{
	unsigned char buf[16];
	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* Connects to host:port within 10 s; the fd, or -errno with why in why. */
static int dial(const char *host, int port, char *why, size_t wlen)
{
	char addr[256], portstr[8];
	bool forced = override(host, addr, sizeof(addr));
	snprintf(portstr, sizeof(portstr), "%d", port);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	if (forced)
		hints.ai_flags = AI_NUMERICHOST;
	int g = getaddrinfo(forced ? addr : host, portstr, &hints, &res);
	if (g) {
		snprintf(why, wlen, "cannot resolve %s: %s", host,
			 gai_strerror(g)); /* message: may be cut */
		return -EHOSTUNREACH;
	}
	int fd = -1, e = EHOSTUNREACH;
	snprintf(why, wlen, "no address of %s may be reached", host); /* message: may be cut */
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		/* the override and an allowed address literal are the user's own
		 * word; a name DNS resolved must lead outside */
		if (!forced && !is_literal(host) && addr_refused(ai->ai_addr)) {
			snprintf(why, wlen, "%s resolves to a private, loopback or own address",
				 host); /* message: may be cut */
			continue;
		}
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
			e = errno;
		} else {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			int soerr = ETIMEDOUT;
			socklen_t sl = sizeof(soerr);
			if (poll(&p, 1, 10000) == 1)
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			if (soerr == 0) {
				fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
				freeaddrinfo(res);
				return fd;
			}
			e = soerr;
		}
		snprintf(why, wlen, "connecting to %s:%d: %s", host, port,
			 strerror(e)); /* message: may be cut */
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return -e;
}

/* Copies bytes both ways until both sides are done (a side's EOF becomes a
 * half-close of the other) or the proxy stops. */
static void relay(int a, int b)
{
	bool open_a = true, open_b = true;
	char buf[16384];
	while (open_a || open_b) {
		struct pollfd p[2] = {{.fd = open_a ? a : -1, .events = POLLIN},
				      {.fd = open_b ? b : -1, .events = POLLIN}};
		int r = poll(p, 2, 500);
		pthread_mutex_lock(&P.mu);
		bool stop = P.stopping;
		pthread_mutex_unlock(&P.mu);
		if (stop || (r < 0 && errno != EINTR))
			return;
		for (int i = 0; i < 2; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int from = i ? b : a, to = i ? a : b;
			ssize_t n = read(from, buf, sizeof(buf));
			if (n > 0 && sfs_write_all(to, buf, (size_t)n) == 0)
				continue;
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return;
			shutdown(to, SHUT_WR);
			if (i)
				open_b = false;
			else
				open_a = false;
		}
	}
}

/* The sandbox's decision for host:port: true when allowed; name gets the
 * sandbox's name for the log. */
static bool decide(const char *key, const char *host, int port, char name[64])
{
	pthread_mutex_lock(&P.mu);
	bool ok = false;
	snprintf(name, 64, "%s", key); /* message: may be cut (a name for the log) */
	for (struct psb *s = P.sbs; s; s = s->next)
		if (!s->dead && strcmp(s->key, key) == 0) {
			ok = sfs_netpolicy_allows(&s->policy, host, port);
			memcpy(name, s->name, 64); /* the same size */
			break;
		}
	pthread_mutex_unlock(&P.mu);
	return ok;
}

static void serve(struct pconn *c)
{
	char buf[SFS_PROXY_HEAD_MAX];
	size_t got = 0;
	struct sfs_proxy_req req;
	int pr = 0;
	/* one deadline for the whole head, not per read: a client sending a
	 * byte now and then would hold the thread for hours */
	int64_t deadline =
	    sfs_now_ms() + (int64_t)(sfs_config_get_double("proxy.head_timeout", 10) * 1000);
	while (pr == 0) {
		struct pollfd p = {.fd = c->client, .events = POLLIN};
		int64_t left = deadline - sfs_now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) != 1) {
			if (left <= 0 || p.revents == 0)
				reply(c->client, "408 Request Timeout", "head-timeout");
			return;
		}
		ssize_t n = read(c->client, buf + got, sizeof(buf) - got);
		if (n <= 0)
			return;
		got += (size_t)n;
		pr = sfs_proxy_parse(buf, got, &req);
	}
	char name[64];
	if (pr < 0) {
		reply(c->client, pr == -EPROTONOSUPPORT ? "501 Not Implemented" : "400 Bad Request",
		      pr == -EPROTONOSUPPORT ? "https-needs-connect" : "bad-request");
		return;
	}
	/* the head a server gets is the proxy's reading of it, or nothing */
	char head[SFS_PROXY_HEAD_MAX + 512];
	int hn = req.connect ? 0 : sfs_proxy_origin_head(buf, &req, head, sizeof(head));
	if (hn < 0) {
		reply(c->client, "400 Bad Request", "bad-request");
		return;
	}
	if (!decide(c->key, req.host, req.port, name)) {
		sfs_log(SFS_LOG_WARN, "%s: network: refused %s %s:%d (not in the allow-list)", name,
			req.method, req.host, req.port);
		reply(c->client, "403 Forbidden", "blocked-by-allowlist");
		return;
	}
	char why[300];
	int up = dial(req.host, req.port, why, sizeof(why));
	if (up < 0) {
		sfs_log(SFS_LOG_WARN, "%s: network: %s %s:%d allowed but failed: %s", name,
			req.method, req.host, req.port, why);
		reply(c->client, "502 Bad Gateway", "upstream-unreachable");
		return;
	}
	sfs_log(SFS_LOG_INFO, "%s: network: allowed %s %s:%d", name, req.method, req.host,
		req.port);
	bool ok;
	if (req.connect) {
		static const char est[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
		ok = sfs_write_all(c->client, est, sizeof(est) - 1) == 0 &&
		     sfs_write_all(up, buf + req.head_len, got - req.head_len) == 0;
	} else {
		/* origin form upstream, Host the URI's (checked before dialing) */
		ok = sfs_write_all(up, head, (size_t)hn) == 0 &&
		     sfs_write_all(up, buf + req.head_len, got - req.head_len) == 0;
	}
	if (ok)
		relay(c->client, up);
	close(up);
}

static void *conn_thread(void *arg)
{
	struct pconn *c = arg;
	serve(c);
	pthread_mutex_lock(&P.mu);
	shutdown(c->client, SHUT_RDWR);
	c->done = true;
	pthread_mutex_unlock(&P.mu);
	wake_acceptor();
	return NULL;
}

/* ---- the acceptor ----------------------------------------------------- */

static void free_psb(struct psb *s)
{
	if (s->unix_fd >= 0)
		close(s->unix_fd);
	if (s->tcp_fd >= 0)
		close(s->tcp_fd);
	sfs_netpolicy_free(&s->policy);
	free(s);
}

/* Joins finished connections; with all, every one (at shutdown). */
static void reap_conns(bool all)
{
	for (;;) {
		pthread_mutex_lock(&P.mu);
		struct pconn **pp = &P.conns, *c = NULL;
		for (; *pp; pp = &(*pp)->next)
			if (all || (*pp)->done) {
				c = *pp;
				*pp = c->next;
				break;
			}
		pthread_mutex_unlock(&P.mu);
		if (!c)
			return;
		pthread_join(c->th, NULL);
		close(c->client);
		free(c);
	}
}

/* The most connections the proxy holds at once: each takes two fds, and
 * together they may take a quarter of the daemon's limit. */
static int proxy_cap(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / 8 > 65536)
		return 65536;
	return rl.rlim_cur < 8 ? 1 : (int)(rl.rlim_cur / 8);
}

/* Whether sandbox key may open one more connection; logs the first refusal
 * (and again after its count fell below half the limit). */
static bool admit(const char *key)
{
	int per = (int)sfs_config_get_double("proxy.max_connections", 128);
	int all = proxy_cap();
	int mine = 0, total = 0;
	char name[64];
	bool log = false;
	snprintf(name, sizeof(name), "%s", key); /* message: may be cut (a name for the log) */
	pthread_mutex_lock(&P.mu);
	for (struct pconn *o = P.conns; o; o = o->next)
		if (!o->done) {
			total++;
			mine += strcmp(o->key, key) == 0;
		}
	bool over = mine >= per || total >= all;
	for (struct psb *s = P.sbs; s; s = s->next)
		if (!s->dead && strcmp(s->key, key) == 0) {
			memcpy(name, s->name, sizeof(name)); /* the same size */
			if (over && !s->warned)
				log = s->warned = true;
			else if (!over && mine < per / 2)
				s->warned = false;
			break;
		}
	pthread_mutex_unlock(&P.mu);
	if (log)
		sfs_log(SFS_LOG_WARN,
			"%s: network: refusing connections: %d open (proxy.max_connections %d), "
			"%d in all (the proxy's limit %d)",
			name, mine, per, total, all);
	return !over;
}

/* 0, or -errno when accept failed (-EMFILE: the daemon is out of fds). */
static int accept_one(int lfd, const char *key)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!admit(key)) {
		/* never blocks: a fresh socket's buffer takes the short answer */
		fcntl(fd, F_SETFL, O_NONBLOCK);
		reply(fd, "503 Service Unavailable", "too-many-connections");
		close(fd);
		return 0;
	}
	struct pconn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->client = fd;
	if (sfs_pathf(c->key, sizeof(c->key), "%s", key) < 0) {
		close(fd);
		free(c);
		return -ENAMETOOLONG; /* keys are < 40: never */
	}
	pthread_mutex_lock(&P.mu);
	int r = pthread_create(&c->th, NULL, conn_thread, c);
	if (!r) {
		c->next = P.conns;
		P.conns = c;
	}
	pthread_mutex_unlock(&P.mu);
	if (r) {
		close(fd);
		free(c);
		return -r;
	}
	return 0;
}

/* The acceptor's poll set: the wake pipe, then two listeners per sandbox,
 * each with its sandbox's key; grown as sandboxes come (never shrunk). */
struct pollset {
	struct pollfd *fds;
	char (*keys)[40];
	size_t cap;
};

static bool pollset_room(struct pollset *ps, size_t need)
{
	if (need <= ps->cap)
		return true;
	size_t cap = ps->cap ? ps->cap : 64;
	while (cap < need)
		cap *= 2;
	struct pollfd *f = realloc(ps->fds, cap * sizeof(*f));
	if (f)
		ps->fds = f;
	char(*k)[40] = f ? realloc(ps->keys, cap * sizeof(*k)) : NULL;
	if (k)
		ps->keys = k;
	if (!f || !k)
		return false;
	ps->cap = cap;
	return true;
}

static void *acceptor(void *arg)
{
	(void)arg;
	struct pollset ps = {0};
	for (;;) {
		nfds_t n = 0;
		pthread_mutex_lock(&P.mu);
		if (P.stopping) {
			pthread_mutex_unlock(&P.mu);
			break;
		}
		size_t live = 0;
		for (struct psb *s = P.sbs; s; s = s->next)
			live++;
		/* out of memory: the sandboxes that fit are served this round */
		if (!pollset_room(&ps, 1 + 2 * live) && ps.cap == 0) {
			pthread_mutex_unlock(&P.mu);
			struct timespec pause = {0, 100 * 1000 * 1000};
			nanosleep(&pause, NULL);
			continue;
		}
		struct pollfd *fds = ps.fds;
		char(*keys)[40] = ps.keys;
		fds[n++] = (struct pollfd){.fd = P.wake[0], .events = POLLIN};
		for (struct psb **pp = &P.sbs; *pp;) {
			struct psb *s = *pp;
			if (s->dead) {
				*pp = s->next;
				free_psb(s);
				continue;
			}
			int lfds[2] = {s->unix_fd, s->tcp_fd};
			for (int i = 0; i < 2 && n < ps.cap; i++)
				if (lfds[i] >= 0) {
					memcpy(keys[n], s->key,
					       sizeof(keys[n])); /* the same size */
					fds[n++] = (struct pollfd){.fd = lfds[i], .events = POLLIN};
				}
			pp = &s->next;
		}
		pthread_mutex_unlock(&P.mu);
		if (poll(fds, n, 1000) < 0 && errno != EINTR)
			break;
		if (fds[0].revents & POLLIN) {
			char drain[64];
			while (read(P.wake[0], drain, sizeof(drain)) > 0)
				;
		}
		/* the fds polled stay open: only this thread closes them */
		int starved = 0;
		for (nfds_t i = 1; i < n; i++)
			if (fds[i].revents & POLLIN) {
				int r = accept_one(fds[i].fd, keys[i]);
				if (r == -EMFILE || r == -ENFILE || r == -ENOMEM || r == -EAGAIN ||
				    r == -ENOBUFS)
					starved = r;
			}
		reap_conns(false);
		if (starved) {
			/* the pending connection keeps its listener readable: without a
			 * pause this loop would spin until an fd is free */
			static int64_t logged;
			if (sfs_now_ms() - logged > 60000) {
				logged = sfs_now_ms();
				sfs_log(SFS_LOG_WARN, "network: proxy cannot accept: %s",
					strerror(-starved));
			}
			struct timespec pause = {0, 100 * 1000 * 1000};
			nanosleep(&pause, NULL);
		}
	}
	free(ps.fds);
	free(ps.keys);
	return NULL;
}

static int start_locked(struct sfs_err *err)
{
	if (P.running)
		return 0;
	if (pipe2(P.wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return sfs_errf(err, -errno, "proxy: pipe: %s", strerror(errno));
	P.stopping = false;
	int r = pthread_create(&P.acceptor, NULL, acceptor, NULL);
	if (r) {
		close(P.wake[0]);
		close(P.wake[1]);
		P.wake[0] = P.wake[1] = -1;
		return sfs_errf(err, -r, "proxy: thread: %s", strerror(r));
	}
	P.running = true;
	return 0;
}

/* ---- the interface ---------------------------------------------------- */

void sfs_proxy_detach_sandbox(const char *key)
{
	pthread_mutex_lock(&P.mu);
	for (struct psb **pp = &P.sbs; *pp;) {
		struct psb *s = *pp;
		if (strcmp(s->key, key) == 0 && !s->dead) {
			if (P.running) {
				s->dead = true; /* the acceptor closes and frees it */
			} else {
				*pp = s->next;
				free_psb(s);
				continue;
			}
		}
		pp = &s->next;
	}
	pthread_mutex_unlock(&P.mu);
	wake_acceptor();
}

/* One attach at a time (a run's start and the first tick may attach the
 * same sandbox): the second finds the first's listeners.  Taken before
 * P.mu, held across the listeners' creation. */
static pthread_mutex_t attach_mu = PTHREAD_MUTEX_INITIALIZER;

static int attach_locked(const char *key, const char *name, const struct sfs_holder *h,
			 const char *netdir, const char *policy, struct sfs_err *err);

int sfs_proxy_attach_sandbox(const char *key, const char *name, const struct sfs_holder *h,
			     const char *netdir, const char *policy, struct sfs_err *err)
{
	pthread_mutex_lock(&attach_mu);
	int r = attach_locked(key, name, h, netdir, policy, err);
	pthread_mutex_unlock(&attach_mu);
	return r;
}

static int attach_locked(const char *key, const char *name, const struct sfs_holder *h,
			 const char *netdir, const char *policy, struct sfs_err *err)
{
	struct sfs_netpolicy pol;
	int r = sfs_netpolicy_parse(policy, &pol, err);
	if (r)
		return r;
	if (pol.mode != SFS_NET_ALLOW) {
		sfs_netpolicy_free(&pol);
		sfs_proxy_detach_sandbox(key);
		return 0;
	}
	/* the same holder: only the allow-list changes */
	pthread_mutex_lock(&P.mu);
	for (struct psb *s = P.sbs; s; s = s->next)
		if (!s->dead && strcmp(s->key, key) == 0 && s->target == h->target &&
		    s->start == h->start) {
			sfs_netpolicy_free(&s->policy);
			s->policy = pol;
			snprintf(s->name, sizeof(s->name), "%s",
				 name); /* message: may be cut (log only) */
			pthread_mutex_unlock(&P.mu);
			return 0;
		}
	pthread_mutex_unlock(&P.mu);
	sfs_proxy_detach_sandbox(key);
	/* the old listeners' port inside the namespace is free only once the
	 * acceptor has closed them (at once: the detach woke it) */
	for (int i = 0; i < 400; i++) {
		bool old = false;
		pthread_mutex_lock(&P.mu);
		for (struct psb *o = P.sbs; o; o = o->next)
			old |= o->dead && strcmp(o->key, key) == 0;
		pthread_mutex_unlock(&P.mu);
		if (!old)
			break;
		struct timespec step = {0, 5 * 1000 * 1000};
		nanosleep(&step, NULL);
	}
	struct psb *s = calloc(1, sizeof(*s));
	if (!s) {
		sfs_netpolicy_free(&pol);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (sfs_pathf(s->key, sizeof(s->key), "%s", key) < 0) {
		sfs_netpolicy_free(&pol);
		free(s);
		return sfs_errf(err, -ENAMETOOLONG, "proxy: key too long");
	}
	snprintf(s->name, sizeof(s->name), "%s", name); /* message: may be cut (log only) */
	s->policy = pol;
	s->target = h->target;
	s->start = h->start;
	s->unix_fd = unix_listener(netdir, h->uid, h->gid, err);
	s->tcp_fd = s->unix_fd >= 0 ? ns_listener(h, err) : -1;
	if (s->unix_fd < 0 || s->tcp_fd < 0) {
		r = s->unix_fd < 0 ? s->unix_fd : s->tcp_fd;
		s->unix_fd = s->unix_fd < 0 ? -1 : s->unix_fd;
		s->tcp_fd = -1;
		free_psb(s);
		return r;
	}
	pthread_mutex_lock(&P.mu);
	r = start_locked(err);
	if (!r) {
		s->next = P.sbs;
		P.sbs = s;
	}
	pthread_mutex_unlock(&P.mu);
	if (r)
		free_psb(s);
	wake_acceptor();
	return r;
}

void sfs_proxy_shutdown(void)
{
	pthread_mutex_lock(&P.mu);
	bool running = P.running;
	P.stopping = true;
	/* wake every connection thread out of its blocking read or poll */
	for (struct pconn *c = P.conns; c; c = c->next)
		shutdown(c->client, SHUT_RDWR);
	pthread_mutex_unlock(&P.mu);
	if (running) {
		wake_acceptor();
		pthread_join(P.acceptor, NULL);
	}
	reap_conns(true);
	pthread_mutex_lock(&P.mu);
	while (P.sbs) {
		struct psb *s = P.sbs;
		P.sbs = s->next;
		free_psb(s);
	}
	if (running) {
		close(P.wake[0]);
		close(P.wake[1]);
		P.wake[0] = P.wake[1] = -1;
	}
	P.running = false;
	pthread_mutex_unlock(&P.mu);
}
