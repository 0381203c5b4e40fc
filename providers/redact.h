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
/* True when a key name is secret-looking. */
int sfs_redact_key_is_secret(const char *key);

#endif
