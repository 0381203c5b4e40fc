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
    {.key = "local.umask",
     .type = SFS_OPT_MODE,
     .max = 0777,
     .help = "umask of runs of new local sandboxes without umask= (unset: 0077 with "
	     "isolation=bwrap, 0022 without)"},
    {.key = "local.bwrap",
     .type = SFS_OPT_STRING,
     .def = "/usr/bin/bwrap",
     .arg = "PATH",
     .help = "the bubblewrap binary isolation=bwrap uses"},
    {.key = "local.isolation_ids",
     .type = SFS_OPT_STRING,
     .def = "2147000000:65536",
     .arg = "FIRST:COUNT",
     .help = "host uids (and gids, the same numbers) isolated sandboxes get one each of when the "
	     "daemon is root, like a subordinate id range: none of them may be a host user's; "
	     "daemons sharing a host need ranges of their own"},
    {0},
};
