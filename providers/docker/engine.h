/*
 * A small Docker Engine API client (v1.41) on libcurl: the unix socket of
 * DOCKER_HOST (default /var/run/docker.sock) or tcp://, with client
 * certificates when DOCKER_TLS_VERIFY is set.  Requests go through the HTTP
 * kit (providers/http), whose pool of easy handles keeps the connection to
 * the daemon open between calls.
 */
#ifndef SFS_DOCKER_ENGINE_H
#define SFS_DOCKER_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../err.h"
#include "../http/http.h"

#define DK_API "/v1.41"
/* How a vanished container is described (see dk_gone). */
#define DK_GONE_TEXT "is gone (removed outside sandboxfs?)"

struct dk_resp {
	long status;
	char *body; /* NUL-terminated, possibly empty */
	size_t len;
	char *path_stat; /* the X-Docker-Container-Path-Stat header, or NULL */
};

/* Where the engine is, for messages: "/var/run/docker.sock" or "tcp://h:p". */
const char *dk_where(void);

/* One request; path is below the version prefix ("/containers/json").  Only
 * transport failures are errors here (-EIO: "docker: cannot reach ...");
 * the HTTP status is in resp->status.  timeout_s 0 means none. */
int dk_request(const char *method, const char *path, const char *ctype, const void *body,
	       size_t len, long timeout_s, struct dk_resp *resp, struct sfs_err *err);
void dk_resp_free(struct dk_resp *resp);

/* A request whose body comes from read (curl's CURLOPT_READFUNCTION
 * contract), size bytes long: an archive upload. */
typedef size_t (*dk_source)(char *buf, size_t size, size_t nmemb, void *arg);
int dk_upload(const char *method, const char *path, const char *ctype, dk_source read, void *arg,
	      size_t size, long timeout_s, struct dk_resp *resp, struct sfs_err *err);

/* A JSON request.  HTTP statuses >= 400 become a negative errno and
 * "docker: WHAT: <the daemon's message>".  body may be NULL, out may be NULL
 * (else *out is the parsed reply or NULL when empty).  Returns the status. */
int dk_json(const char *method, const char *path, json_t *body, long timeout_s, json_t **out,
	    const char *what, struct sfs_err *err);

/* A streamed request: sink gets the body as it arrives and returns false to
 * stop.  *stop (may be NULL) aborts the transfer within about a second once
 * set.  Returns the HTTP status or a negative errno. */
typedef bool (*dk_sink)(void *arg, const char *data, size_t len);
int dk_stream(const char *method, const char *path, json_t *body, dk_sink sink, void *arg,
	      const int *stop, struct sfs_err *err);

/* The "message" of an error reply, or the raw body. */
void dk_reply_message(const struct dk_resp *resp, char *buf, size_t len);

#endif
