/* The local provider's options (-o local.KEY=VALUE, or the config file). */
#include "../options.h"
#include "local.h"

const struct sfs_opt sfs_local_options[] = {
    {.key = "local.scrub_env",
     .type = SFS_OPT_STRING,
     .arg = "A,B",
     .help = "env names removed from every local run (commas or spaces; write a comma as \\, "
	     "inside -o); provider credentials such as DAYTONA_API_KEY are always removed"},
    {.key = "local.kill_grace",
     .type = SFS_OPT_DOUBLE,
     .def = "2",
     .min = 0,
     .max = 3600,
     .help = "seconds between TERM and KILL of a run's process group"},
    {.key = "local.isolation",
     .type = SFS_OPT_ENUM,
     .def = "none",
     .choices = "none|bwrap",
     .help = "default isolation= of new local sandboxes: bwrap runs them in namespaces of their "
	     "own (user, pid, ipc, uts, mount; docs/architecture.md)"},
    {.key = "local.network",
     .type = SFS_OPT_STRING,
     .def = "none",
     .arg = "POLICY",
     .help = "default network= of new isolation=bwrap sandboxes: none (loopback only), host or "
	     "allow:HOST[,HOST...]"},
    {.key = "local.bwrap",
     .type = SFS_OPT_STRING,
     .def = "/usr/bin/bwrap",
     .arg = "PATH",
     .help = "the bubblewrap binary isolation=bwrap uses"},
    {.key = "local.isolation_uid",
     .type = SFS_OPT_INT,
     .def = "65534",
     .min = 1,
     .max = 4294967294.0,
     .help = "host uid isolated sandboxes run as when the daemon is root (never 0: root in a "
	     "sandbox must not be host root)"},
    {.key = "local.isolation_gid",
     .type = SFS_OPT_INT,
     .def = "65534",
     .min = 1,
     .max = 4294967294.0,
     .help = "host gid isolated sandboxes run as when the daemon is root"},
    {0},
};
