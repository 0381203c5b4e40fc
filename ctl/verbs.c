#include "verbs.h"

#include <stddef.h>

static const char *const new_keys[] = {"provider", "image",  "source", "ref",	    "depth",
				       "setup*",   "base",   "hide",   "hide.case", "env.",
				       "secret.",  "redact", NULL};
static const char *const resume_keys[] = {"provider", "id", NULL};
static const char *const fork_keys[] = {"from", NULL};
static const char *const snapshot_keys[] = {"kind", NULL};

const struct ctl_verb ctl_mount_verbs[] = {
    {V_NEW, "new", 1, 1, CTL_OPTS | CTL_ANY_KEYS, new_keys,
     "new NAME [provider=P] [image=I] [source=URL [ref=REF] [depth=N]] [setup=CMD]... "
     "[base=HOSTDIR [hide=PATTERN,...] [hide.case=insensitive]] [env.K=V]... "
     "[secret.K=env:VAR|file:PATH]... "
     "[redact=journal]"},
    {V_RESUME, "resume", 1, 1, CTL_OPTS, resume_keys, "resume NAME provider=P id=REMOTE-ID"},
    {V_FORGET, "forget", 1, 1, 0, NULL, "forget NAME"},
    {0, NULL, 0, 0, 0, NULL, NULL},
};

const struct ctl_verb ctl_sandbox_verbs[] = {
    {V_EXEC, "exec", 1, 1, CTL_REST, NULL, "exec CMD..."},
    {V_KILL, "kill", 0, 2, 0, NULL, "kill [RUN] [SIGNAL]"},
    {V_CANCEL, "cancel", 0, 1, 0, NULL, "cancel [RUN]"},
    {V_SNAPSHOT, "snapshot", 0, 1, CTL_OPTS, snapshot_keys,
     "snapshot [LABEL] [kind=native|workspace]"},
    {V_RESTORE, "restore", 1, 1, 0, NULL, "restore SNAPSHOT"},
    {V_FORK, "fork", 1, 1, CTL_OPTS, fork_keys, "fork NEWNAME [from=SNAPSHOT]"},
    {V_EXPOSE, "expose", 1, 1, 0, NULL, "expose PORT"},
    {V_STOP, "stop", 0, 0, 0, NULL, "stop"},
    {V_START, "start", 0, 0, 0, NULL, "start"},
    {V_DESTROY, "destroy", 0, 0, 0, NULL, "destroy"},
    {V_ENV, "env", 0, -1, CTL_OPTS | CTL_ANY_KEYS, NULL, "env K=V..."},
    {V_UNSETENV, "unsetenv", 1, -1, 0, NULL, "unsetenv K..."},
    {V_SECRET, "secret", 0, -1, CTL_OPTS | CTL_ANY_KEYS, NULL,
     "secret K=env:VAR|file:PATH|(empty: remove)..."},
    {V_POLICY, "policy", 2, 2, 0, NULL, "policy network none|host|allow:HOST[,HOST...]"},
    {0, NULL, 0, 0, 0, NULL, NULL},
};

const struct ctl_verb ctl_run_verbs[] = {
    {V_RUN_KILL, "kill", 0, 1, 0, NULL, "kill [SIGNAL]"},
    {V_RUN_EOF, "eof", 0, 0, 0, NULL, "eof"},
    {0, NULL, 0, 0, 0, NULL, NULL},
};
