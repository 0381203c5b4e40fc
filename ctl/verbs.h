/*
 * The verb tables of the three kinds of ctl file (SPEC §3): data only, so the
 * dispatcher in commands.c and the fuzz harness in tests/fuzz parse against
 * the very same grammar.
 */
#ifndef SFS_VERBS_H
#define SFS_VERBS_H

#include "ctl.h"

enum ctl_verb_id {
	V_NEW,
	V_RESUME,
	V_FORGET,
	V_EXEC,
	V_KILL,
	V_CANCEL,
	V_SNAPSHOT,
	V_RESTORE,
	V_FORK,
	V_EXPOSE,
	V_STOP,
	V_START,
	V_DESTROY,
	V_ENV,
	V_UNSETENV,
	V_SECRET,
	V_RUN_KILL,
	V_RUN_EOF,
	V_POLICY,
};

/* Each is terminated by an entry whose name is NULL. */
extern const struct ctl_verb ctl_mount_verbs[];
extern const struct ctl_verb ctl_sandbox_verbs[];
extern const struct ctl_verb ctl_run_verbs[];

#endif
