/* The docker provider's options (-o docker.KEY=VALUE, or the config file). */
#include "../options.h"
#include "docker.h"

const struct sfs_opt sfs_docker_options[] = {
    {.key = "docker.host",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "Docker Engine endpoint, unix:///PATH or tcp://HOST:PORT (default $DOCKER_HOST, else "
	     "unix:///var/run/docker.sock)"},
    {.key = "docker.image",
     .type = SFS_OPT_STRING,
     .arg = "IMAGE",
     .help = "image of a new sandbox that names none (`new N image=IMG`)"},
    {.key = "docker.fs",
     .type = SFS_OPT_ENUM,
     .def = "auto",
     .choices = "auto|archive",
     .help = "workspace access: auto uses the container's overlay directory when this host can "
	     "reach it; archive always goes through the Engine's archive API"},
    {.key = "docker.agent",
     .type = SFS_OPT_BOOL,
     .def = "true",
     .help = "start and kill runs through one agent process per container (providers/docker/"
	     "agent.c) where the container's files are reachable from this host; false: one "
	     "Engine API exec per run and per kill"},
    {.key = "docker.kill_grace",
     .type = SFS_OPT_DOUBLE,
     .def = "2",
     .min = 0,
     .max = 3600,
     .help = "seconds between TERM and KILL of a run's process group"},
    {0},
};
