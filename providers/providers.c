/* The built-in provider table.  Adding a provider is one folder and one line here. */
#include "provider.h"

extern const struct sfs_provider sfs_provider_local;
extern const struct sfs_provider sfs_provider_docker;
extern const struct sfs_provider sfs_provider_daytona;
extern const struct sfs_provider sfs_provider_e2b;
extern const struct sfs_provider sfs_provider_sprites;
extern const struct sfs_provider sfs_provider_vercel;
extern const struct sfs_provider sfs_provider_cloudflare;
extern const struct sfs_provider sfs_provider_sbx;
extern const struct sfs_provider sfs_provider_aws;
extern const struct sfs_provider sfs_provider_gcp;

const struct sfs_provider *const sfs_providers[] = {
    &sfs_provider_local,
    &sfs_provider_docker,
    &sfs_provider_daytona,
    &sfs_provider_e2b,
    &sfs_provider_sprites,
    &sfs_provider_vercel,
    &sfs_provider_cloudflare,
    &sfs_provider_sbx,
    &sfs_provider_aws,
    &sfs_provider_gcp,
};
const size_t sfs_nproviders = sizeof(sfs_providers) / sizeof(sfs_providers[0]);

#include "local/local.h"

#include <string.h>

int sfs_provider_helper_main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], SFS_LOCAL_WRAP_ARG) == 0)
		return sfs_local_wrapper_main(argc, argv);
	return -1;
}
