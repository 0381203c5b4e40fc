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
    {0},
};
