/*
 * main() of sandboxfs-run-wrapper, the run wrapper as a program of its own.
 * It links nothing but libc: the sandboxfs binary, re-executed as the
 * wrapper, spends about 5 ms loading libcurl, libgit2, GnuTLS and their
 * constructors before the run can start, which was most of a local run's
 * latency.  The daemon execs this file when it sits beside its own binary
 * (local.c), and falls back to re-executing itself with the same argv.
 */
#include "local.h"

int main(int argc, char **argv)
{
	return sfs_local_wrapper_main(argc, argv);
}
