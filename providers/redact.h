/*
 * Redaction (SPEC §3): every message, log line, status file and registry entry
 * passes through here.  Hides the value after any key whose name contains
 * token, secret, key, password, credential or authorization
 * (case-insensitive), in `key=value`, `key: value`, `"key": "value"` and
 * `key value` forms, and every registered credential value wherever it appears.
 */
#ifndef SFS_REDACT_H
#define SFS_REDACT_H

#include <stddef.h>

#define SFS_REDACTED "[redacted]"

/* The redacted copy of s, never cut short (a marker may be longer than the
 * value it hides); NULL on ENOMEM.  free() it. */
char *sfs_redact_dup(const char *s);
/* Only the registered values hidden (not the values of secret-looking
 * keys): for text whose keys are known not to precede a value, such as
 * status's list of secret names.  NULL on ENOMEM. */
char *sfs_redact_values_dup(const char *s);
/* Rewrites buf (NUL-terminated, capacity cap) in place.  0, or -ENOSPC when
 * the redacted text did not fit and buf holds a prefix of it (cut, never
 * leaking), or -ENOMEM when buf was replaced by the marker alone.  Callers
 * that must not lose text use sfs_redact_dup. */
int sfs_redact(char *buf, size_t cap);
/* Registers a credential value to hide everywhere (values shorter than 4 bytes are ignored). */
int sfs_redact_add_secret(const char *value);
/*
 * Streams read in pieces (journal reads with redact=journal): each byte of
 * a registered value's occurrence is replaced in place, so offsets stay the
 * raw stream's (providers/redact_stream.c says how, and why a window of
 * longest-1 bytes on each side of a piece decides it exactly).
 */
/* The longest registered value's length (0: none). */
size_t sfs_redact_longest(void);
/* How many of buf's last bytes could begin a registered value (a proper
 * prefix of one): not to be shown until more bytes or the end arrive. */
size_t sfs_redact_holdback(const char *buf, size_t n);
/* Masks every registered value in buf[0..n) (all of it on ENOMEM). */
void sfs_redact_mask(char *buf, size_t n);
/* Changes whenever a value is registered (cached holdbacks go stale). */
unsigned long sfs_redact_generation(void);
/* The same over an explicit list of values (pure; unit tests, fuzzing).
 * mask returns 0, or -1 on ENOMEM with buf partly masked. */
size_t sfs_redact_stream_longest(const char *const *vals, size_t nvals);
size_t sfs_redact_stream_holdback(const char *const *vals, size_t nvals, const char *buf, size_t n);
int sfs_redact_stream_mask(const char *const *vals, size_t nvals, char *buf, size_t n);

/* True when a key name is secret-looking. */
int sfs_redact_key_is_secret(const char *key);

#endif
