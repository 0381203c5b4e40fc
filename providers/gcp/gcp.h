/*
 * The gcp provider (issue 16), first layer: OAuth access tokens for the
 * Google APIs.  A service-account JSON key (GOOGLE_APPLICATION_CREDENTIALS)
 * gives an RS256-signed JWT that is exchanged at the key's token_uri
 * (RFC 7523 bearer grant); or, with no key file, the metadata server
 * (GCE_METADATA_HOST or gcp.metadata_url) hands out the token.  Tokens are
 * cached until shortly before they expire.  FUSE-free: part of sfs_core.
 * Options are passed in by the caller (this file reads no configuration).
 */
#ifndef SFS_GCP_H
#define SFS_GCP_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "../err.h"
#include "../options.h"

#define GCP_TOKEN_AUD "https://oauth2.googleapis.com/token"
#define GCP_SCOPE_CLOUD "https://www.googleapis.com/auth/cloud-platform"
/* a JWT lives this long (Google's maximum) */
#define GCP_JWT_LIFETIME 3600
/* a token counts as stale this long before it expires (google-auth: 3 min 45 s) */
#define GCP_TOKEN_EARLY 225

extern const struct sfs_opt sfs_gcp_options[];

/* ---- the service-account key ------------------------------------------------ */

struct gcp_key {
	char *client_email, *private_key_id, *token_uri, *project_id; /* project_id may be NULL */
	void *pkey;						      /* EVP_PKEY * */
};

/* Parses a key file's text; origin names it in messages (never the key
 * material).  -EINVAL naming the missing field, a type other than
 * service_account, or a private_key that is not an RSA PEM. */
int gcp_key_parse(const char *text, const char *origin, struct gcp_key *k, struct sfs_err *err);
/* Reads and parses the file at path (-ENOENT/-EACCES when unreadable). */
int gcp_key_load(const char *path, struct gcp_key *k, struct sfs_err *err);
void gcp_key_free(struct gcp_key *k);

/* The signed assertion header.claims.signature (base64url, no padding) with
 * iss = client_email, the scope, aud, iat = now, exp = now + 1 h; malloc'd. */
int gcp_jwt_build(const struct gcp_key *k, const char *scope, const char *aud, time_t now,
		  char **out, struct sfs_err *err);

/* ---- the token source with its cache ---------------------------------------- */

struct gcp_auth {
	pthread_mutex_t lock; /* held across a refresh: one exchange at a time */
	bool have_key;
	struct gcp_key key;
	char *token_url;    /* where the JWT is exchanged (gcp.oauth_url, else token_uri) */
	char *metadata_url; /* metadata server root, e.g. http://127.0.0.1:8080; NULL: none */
	char *scope;
	char *token;	       /* the cached access token, NULL: none */
	time_t stale_at;       /* when to fetch a new one */
	unsigned long fetches; /* tokens obtained so far (tests) */
	time_t (*now)(void);   /* the cache's clock; tests replace it (a JWT's iat
				* is always the wall clock: the server checks it) */
};

/*
 * Chooses the source: the key file at key_path (GOOGLE_APPLICATION_CREDENTIALS
 * when NULL), else the metadata server at metadata_url (when NULL:
 * http://$GCE_METADATA_HOST).  token_url (gcp.oauth_url, may be NULL)
 * overrides the key's token_uri.  -ENOENT naming both when there is neither;
 * a bad key file is its own error.  Fetches nothing yet.
 */
int gcp_auth_init(struct gcp_auth *a, const char *key_path, const char *token_url,
		  const char *metadata_url, struct sfs_err *err);
/* A valid access token (malloc'd), from the cache or freshly fetched.
 * Thread-safe.  Errors name the endpoint and Google's error, never the key
 * or the assertion; the token is registered with the redactor. */
int gcp_auth_token(struct gcp_auth *a, char **out, struct sfs_err *err);
/* Drops the cached token (after a 401 from an API). */
void gcp_auth_invalidate(struct gcp_auth *a);
void gcp_auth_free(struct gcp_auth *a);
/* When a token fetched at now with expires_in seconds counts as stale:
 * GCP_TOKEN_EARLY before expiry, or halfway for short-lived tokens. */
time_t gcp_token_stale_at(time_t now, long expires_in);

#endif
