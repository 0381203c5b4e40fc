/*
 * Secrets (SPEC §12): `new ... secret.NAME=env:VAR|file:PATH` and the
 * sandbox ctl's `secret NAME=REF` (`secret NAME=` removes one).  The daemon
 * reads the value when the sandbox is made, loaded at startup or the secret
 * set, registers it with the redactor, and gives it to every run as NAME
 * (sfs_sb_run_env).  The record keeps the reference (sb->secrets, saved in
 * the registry) and the value (sb->secret_vals, memory only).
 */
#ifndef SFS_CTL_SECRETS_H
#define SFS_CTL_SECRETS_H

#include "../providers/provider.h"

#include <stdbool.h>

/* A value longer than this is refused: an environment variable is not a
 * place for files, and exec(2) refuses strings over 128 KiB anyway. */
#define SECRET_MAX (64 * 1024)
/* Shorter values are refused: the redactor would hide every such byte
 * sequence in ordinary text, and a value that short is guessable. */
#define SECRET_MIN 4

/* An environment variable's name as sh can use it: [A-Za-z_][A-Za-z0-9_]*. */
bool ctl_env_name_ok(const char *name);

/* Checks a reference's form without reading it: "env:VAR" with VAR a
 * variable name, or "file:PATH" with PATH absolute.  0 or -EINVAL. */
int secret_ref_check(const char *name, const char *ref, struct sfs_err *err);

/* Reads the value ref names into *val (malloc'd) and registers it with the
 * redactor.  A file's one trailing newline ("\n" or "\r\n") is dropped.
 * -ENOENT (unset variable, missing file), -EACCES, -EINVAL (not a regular
 * file, a NUL byte, shorter than SECRET_MIN), -EFBIG (over SECRET_MAX),
 * -EPERM (a file, or a directory or symlink on its path, that a user other
 * than the caller, sandboxfs's user or root owns or may write). */
int secret_read(const char *name, const char *ref, char **val, struct sfs_err *err);

/* `new`: every secret.NAME= option of opts read into sb (not yet listed),
 * or nothing and an error. */
int secrets_from_opts(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err);

/* At startup: reads every reference of a loaded sb again; one that cannot
 * be read is logged and left without a value (its runs fail, saying so). */
void secrets_load(struct sfs_sandbox *sb);

/* The ctl verb: sets (or, with an empty reference, removes) each NAME=REF
 * of changes and saves the registry, all or nothing. */
int secrets_set(struct sfs_sandbox *sb, const struct sfs_kvlist *changes, struct sfs_err *err);

/* "NAME1 NAME2 ..." (sorted as set) for status; "" when none.  Callers hold
 * sfs_records_mu.  malloc'd, NULL on ENOMEM. */
char *secrets_names_locked(const struct sfs_sandbox *sb);

#endif
