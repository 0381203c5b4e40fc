/*
 * What happens to our containers while the daemon runs, and whether the
 * engine can be reached at all.
 *
 * One thread, started from the provider's tick once a docker sandbox exists
 * (so after fuse_daemonize, and never on a mount that does not use docker),
 * holds the engine's event stream (GET /events, filtered to destroy events
 * of containers labelled with this state dir).  A container removed behind
 * our back puts its sandbox in state `error` with the reason; its runs read
 * as `lost` at their next refresh and their journals end.  Each time the
 * stream is (re)established the thread first looks at every known container
 * (events missed while it was down) and kills journal followers that could
 * not be stopped while the engine was out of reach.  While the engine cannot
 * be reached, every docker sandbox's status says so (DK_OUTAGE_TEXT).
 */
#include "docker.h"
#include "engine.h"

#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RETRY_MS 1000
#define MAX_WATCHED 256
#define EXPECTED_MAX 32
#define LINE_MAX_BYTES 65536

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool started;
	int stop;  /* read atomically by dk_stream */
	bool down; /* the outage is shown in status */
	/* containers we remove ourselves (a ring) */
	char expected[EXPECTED_MAX][DK_ID_MAX];
	size_t next_expected;
} ev = {.mu = PTHREAD_MUTEX_INITIALIZER};

void dk_events_expect_removal(const char *cid)
{
	pthread_mutex_lock(&ev.mu);
	if (sfs_pathf(ev.expected[ev.next_expected], DK_ID_MAX, "%s", cid) < 0) {
		pthread_mutex_unlock(&ev.mu);
		return; /* no container has such an id: none is expected */
	}
	ev.next_expected = (ev.next_expected + 1) % EXPECTED_MAX;
	pthread_mutex_unlock(&ev.mu);
}

static bool expected_removal(const char *cid)
{
	bool found = false;
	pthread_mutex_lock(&ev.mu);
	for (size_t i = 0; i < EXPECTED_MAX && !found; i++)
		found = ev.expected[i][0] && strcmp(ev.expected[i], cid) == 0;
	pthread_mutex_unlock(&ev.mu);
	return found;
}

/* cid is gone: its sandbox (if it is still one of ours) says so. */
void dk_container_gone(const char *cid)
{
	if (expected_removal(cid))
		return;
	struct sfs_sandbox *sb = dk_mark_gone(cid);
	if (!sb)
		return;
	char msg[160];
	snprintf(msg, sizeof(msg), "docker: container %.12s " DK_GONE_TEXT, cid);
	sfs_log(SFS_LOG_WARN, "%s: %s", sb->name, msg);
	sfs_sb_set_failed(sb, msg);
}

/* Shows or clears the outage in every docker sandbox's status (never over
 * the error of a sandbox whose container is gone). */
static void show_outage(const char *why)
{
	struct sfs_sandbox *sbs[MAX_WATCHED];
	char(*cids)[DK_ID_MAX] = malloc(MAX_WATCHED * sizeof(*cids));
	if (!cids)
		return;
	size_t n = dk_list(sbs, cids, MAX_WATCHED);
	char msg[512];
	if (why)
		snprintf(msg, sizeof(msg),
			 "docker: " DK_OUTAGE_TEXT " (%s); journals and status resume when it is "
			 "back",
			 why); /* message: may be cut */
	for (size_t i = 0; i < n; i++) {
		if (dk_is_gone(sbs[i]))
			continue;
		if (why) {
			sfs_sb_set_error(sbs[i], msg);
			continue;
		}
		pthread_mutex_lock(&sfs_records_mu);
		bool ours = sbs[i]->error && strstr(sbs[i]->error, DK_OUTAGE_TEXT);
		pthread_mutex_unlock(&sfs_records_mu);
		if (ours)
			sfs_sb_set_error(sbs[i], NULL);
	}
	free(cids);
}

static void set_down(const char *why)
{
	pthread_mutex_lock(&ev.mu);
	bool was = ev.down;
	ev.down = why != NULL;
	pthread_mutex_unlock(&ev.mu);
	if (why) {
		if (!was)
			sfs_log(SFS_LOG_WARN, "docker: %s: %s", DK_OUTAGE_TEXT, why);
		show_outage(why); /* also for sandboxes made meanwhile */
	} else if (was) {
		sfs_log(SFS_LOG_INFO, "docker: the engine connection is back");
		show_outage(NULL);
	}
}

/* Events missed while the stream was down: looks at every known container. */
static void resync(void)
{
	struct sfs_sandbox *sbs[MAX_WATCHED];
	char(*cids)[DK_ID_MAX] = malloc(MAX_WATCHED * sizeof(*cids));
	if (!cids)
		return;
	size_t n = dk_list(sbs, cids, MAX_WATCHED);
	for (size_t i = 0; i < n && !__atomic_load_n(&ev.stop, __ATOMIC_ACQUIRE); i++) {
		if (dk_is_gone(sbs[i]))
			continue;
		struct dk_info info;
		struct sfs_err err = {0};
		int r = dk_inspect(cids[i], &info, &err);
		if (r == -ENOENT)
			dk_container_gone(cids[i]);
		else if (r == 0)
			dk_info_free(&info);
	}
	free(cids);
}

struct stream {
	char *line;
	size_t len;
	bool overflow;
};

static void on_event(const char *text, size_t len)
{
	json_t *j = json_loadb(text, len, 0, NULL);
	const char *action = json_string_value(json_object_get(j, "Action"));
	const char *id = json_string_value(json_object_get(json_object_get(j, "Actor"), "ID"));
	if (action && id && strcmp(action, "destroy") == 0)
		dk_container_gone(id);
	json_decref(j);
}

static bool on_bytes(void *arg, const char *data, size_t len)
{
	struct stream *s = arg;
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			if (!s->overflow && s->len)
				on_event(s->line, s->len);
			s->len = 0;
			s->overflow = false;
		} else if (s->len < LINE_MAX_BYTES) {
			s->line[s->len++] = data[i];
		} else {
			s->overflow = true; /* not an event of ours: skipped */
		}
	}
	return true;
}

static void pause_ms(int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&ev.mu);
	while (!__atomic_load_n(&ev.stop, __ATOMIC_ACQUIRE))
		if (pthread_cond_timedwait(&ev.cv, &ev.mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&ev.mu);
}

static void *events_main(void *arg)
{
	(void)arg;
	char path[8400];
	char label[4200 + 32];
	if (sfs_pathf(label, sizeof(label), "sandboxfs.state=%s",
		      sfs_state_dir ? sfs_state_dir : "") < 0) {
		sfs_log(SFS_LOG_ERR, "docker: cannot watch engine events: state dir path too long");
		return NULL;
	}
	json_t *f = json_pack("{s:[s], s:[s], s:[s]}", "type", "container", "event", "destroy",
			      "label", label);
	char *ftext = f ? json_dumps(f, JSON_COMPACT) : NULL;
	json_decref(f);
	char *enc = ftext ? sfs_http_escape_component(ftext) : NULL;
	free(ftext);
	struct stream s = {.line = malloc(LINE_MAX_BYTES)};
	if (!enc || !s.line ||
	    snprintf(path, sizeof(path), "/events?filters=%s", enc) >= (int)sizeof(path)) {
		sfs_log(SFS_LOG_ERR, "docker: cannot watch engine events: out of memory");
		free(enc);
		free(s.line);
		return NULL;
	}
	free(enc);
	while (!__atomic_load_n(&ev.stop, __ATOMIC_ACQUIRE)) {
		struct dk_resp resp;
		struct sfs_err err = {0};
		if (dk_request("GET", "/_ping", NULL, NULL, 0, 5, &resp, &err) == 0) {
			long status = resp.status;
			dk_resp_free(&resp);
			if (status != 200)
				snprintf(err.msg, sizeof(err.msg),
					 "%s answers /_ping with HTTP %ld", dk_where(),
					 status); /* message: may be cut */
			else
				err.msg[0] = '\0';
		}
		if (err.msg[0]) {
			set_down(err.msg);
			pause_ms(RETRY_MS);
			continue;
		}
		set_down(NULL);
		/* events from just before the look at every container on: a
		 * removal in between is replayed, never missed (twice is harmless) */
		char url[8500];
		snprintf(url, sizeof(url), "%s&since=%lld", path,
			 (long long)time(NULL) - 1); /* may be cut: never, path has 8400 */
		resync();
		dk_followers_reap(NULL);
		int64_t since = dk_now_ms();
		s.len = 0;
		s.overflow = false;
		struct sfs_err serr = {0};
		int r = dk_stream("GET", url, NULL, on_bytes, &s, &ev.stop, &serr);
		if (__atomic_load_n(&ev.stop, __ATOMIC_ACQUIRE))
			break;
		if (r < 0)
			sfs_log(SFS_LOG_DEBUG, "docker: events stream: %s", serr.msg);
		/* the next ping tells an outage from a stream the engine closed */
		if (dk_now_ms() - since < RETRY_MS)
			pause_ms(RETRY_MS);
	}
	free(s.line);
	return NULL;
}

void dk_events_tick(void)
{
	pthread_mutex_lock(&ev.mu);
	bool started = ev.started;
	pthread_mutex_unlock(&ev.mu);
	if (started)
		return;
	struct sfs_sandbox *sb;
	char cid[1][DK_ID_MAX];
	if (dk_list(&sb, cid, 1) == 0)
		return; /* no docker sandbox: nothing to watch */
	pthread_mutex_lock(&ev.mu);
	if (!ev.started) {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&ev.cv, &ca);
		pthread_condattr_destroy(&ca);
		__atomic_store_n(&ev.stop, 0, __ATOMIC_RELEASE);
		int r = pthread_create(&ev.thread, NULL, events_main, NULL);
		if (r) {
			pthread_cond_destroy(&ev.cv);
			sfs_log(SFS_LOG_ERR, "docker: events thread: %s", strerror(r));
		}
		ev.started = r == 0;
	}
	pthread_mutex_unlock(&ev.mu);
}

void dk_events_stop(void)
{
	pthread_mutex_lock(&ev.mu);
	bool started = ev.started;
	__atomic_store_n(&ev.stop, 1, __ATOMIC_RELEASE);
	if (started)
		pthread_cond_broadcast(&ev.cv);
	pthread_mutex_unlock(&ev.mu);
	if (!started)
		return;
	pthread_join(ev.thread, NULL); /* dk_stream sees stop within about a second */
	pthread_cond_destroy(&ev.cv);
	pthread_mutex_lock(&ev.mu);
	ev.started = false;
	ev.down = false;
	pthread_mutex_unlock(&ev.mu);
}
