/*
 * A run joins its sandbox's namespaces (run wrapper side of isolation=bwrap).
 *
 * What setns gives is not what bwrap gives: a joiner holds every capability
 * in the sandbox's user namespace and, as root, is still host uid 0 for
 * every file check until it changes uid (reference/isolation.md §0 item 4).
 * So the order is: supplementary groups dropped (impossible after the
 * join: bwrap writes "deny" to setgroups), setns into all namespaces at
 * once through a pidfd, the bounding set emptied while CAP_SETPCAP is
 * still held, the sandbox's gid and uid taken (which clears permitted and
 * effective sets), ambient and remaining sets cleared, no_new_privs set,
 * a small seccomp filter (below); then one more fork, because a pid
 * namespace applies only to children.
 */
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int last_cap(void)
{
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	char buf[16] = {0};
	int n = 40;
	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			n = atoi(buf);
		close(fd);
	}
	return n > 0 && n < 64 ? n : 63;
}

#if defined(__x86_64__)
#define JOIN_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define JOIN_ARCH AUDIT_ARCH_AARCH64
#endif

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6; the same number on every arch */
#endif

#define EPERM_RET (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define ARG_LO(i) (offsetof(struct seccomp_data, args[i])) /* little-endian: the low word */

/* Appends "syscall nr with (argument arg & bits) set: EPERM, without: allowed". */
static void refuse_bits(struct sock_filter *f, unsigned *n, unsigned nr, unsigned arg,
			unsigned bits)
{
	struct sock_filter block[] = {
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 4),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, bits, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, EPERM_RET),
	};
	memcpy(f + *n, block, sizeof(block));
	*n += sizeof(block) / sizeof(block[0]);
}

/* What no capability already forbids and a sandbox must not do either
 * (flatpak's list, reference/isolation.md §3.3): push input into a
 * terminal (TIOCSTI, TIOCLINUX), reach the kernel keyrings (not
 * namespaced), perf_event_open.  And no set-user-ID or set-group-ID bit
 * on anything it makes: every isolated sandbox's files are its own uid's,
 * and a set-id program left in a workspace host users can reach (dir=)
 * would give them that uid.  So chmod-family calls and creating calls
 * whose mode has 06000 are EPERM (the workspace is also nosuid inside:
 * bwrap binds are), and the calls whose mode the filter cannot read are
 * refused whole: openat2 (ENOSYS: callers fall back to openat) and
 * io_uring (its IORING_OP_OPENAT takes a mode).  Other architectures'
 * calls and x32 are refused whole.  Returns 0 where no filter is known
 * for this arch. */
static int install_filter(void)
{
#ifdef JOIN_ARCH
	struct sock_filter f[96];
	unsigned n = 0;
	struct sock_filter head[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, JOIN_ARCH, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
	    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 */
	    BPF_STMT(BPF_RET | BPF_K, EPERM_RET),
#endif
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_keyctl, 4, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_add_key, 3, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_request_key, 2, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 1, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, EPERM_RET),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 5),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, EPERM_RET),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	memcpy(f, head, sizeof(head));
	n = sizeof(head) / sizeof(head[0]);
	const unsigned setid = S_ISUID | S_ISGID;
	refuse_bits(f, &n, SYS_fchmod, 1, setid);
	refuse_bits(f, &n, SYS_fchmodat, 2, setid);
	refuse_bits(f, &n, SYS_fchmodat2, 2, setid);
	refuse_bits(f, &n, SYS_openat, 3, setid);
	refuse_bits(f, &n, SYS_mknodat, 2, setid);
#ifdef __x86_64__
	refuse_bits(f, &n, SYS_chmod, 1, setid);
	refuse_bits(f, &n, SYS_open, 2, setid);
	refuse_bits(f, &n, SYS_creat, 1, setid);
	refuse_bits(f, &n, SYS_mknod, 1, setid);
#endif
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
	return 0;
#endif
}

/* The middle process: the wrapper's child, outside the pid namespace.  It
 * leaves signals to the command (the run's process group holds both) and
 * ends the way the command ended, so the wrapper records the command's
 * status. */
static void middle(pid_t child)
{
	static const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE};
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	int st = 0;
	while (waitpid(child, &st, 0) < 0)
		if (errno != EINTR)
			_exit(127);
	if (WIFSIGNALED(st)) {
		signal(WTERMSIG(st), SIG_DFL);
		kill(getpid(), WTERMSIG(st));
		_exit(128 + WTERMSIG(st));
	}
	_exit(WEXITSTATUS(st));
}

int sfs_join_holder(const char *arg)
{
	int target = 0, net = 0;
	unsigned long long start = 0;
	unsigned uid = 0, gid = 0;
	if (sscanf(arg, "%d:%llu:%u:%u:%d", &target, &start, &uid, &gid, &net) != 5 ||
	    target <= 1) {
		dprintf(2, "sandboxfs: bad isolation argument \"%s\"\n", arg);
		return -1;
	}
	int pfd = (int)syscall(SYS_pidfd_open, (pid_t)target, 0);
	/* checked after the open: the pidfd pins the process it names, so a
	 * pid reused before the open shows a different start time */
	if (pfd < 0 || sfs_proc_start_time(target) != start) {
		dprintf(2, "sandboxfs: the sandbox's namespace holder (pid %d) is gone\n", target);
		return -1;
	}
	if (getuid() == 0 && setgroups(0, NULL) < 0) {
		dprintf(2, "sandboxfs: setgroups: %s\n", strerror(errno));
		return -1;
	}
	int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
	if (net)
		flags |= CLONE_NEWNET;
	if (setns(pfd, flags) < 0) {
		dprintf(2, "sandboxfs: joining the sandbox's namespaces: %s\n", strerror(errno));
		return -1;
	}
	close(pfd);
	for (int c = 0; c <= last_cap(); c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
			dprintf(2, "sandboxfs: dropping capability %d: %s\n", c, strerror(errno));
			return -1;
		}
	if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
		dprintf(2, "sandboxfs: taking the sandbox's uid %u: %s\n", uid, strerror(errno));
		return -1;
	}
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    syscall(SYS_capset, &hdr, data) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    install_filter() < 0) {
		dprintf(2, "sandboxfs: dropping privileges: %s\n", strerror(errno));
		return -1;
	}
	pid_t child = fork();
	if (child < 0) {
		dprintf(2, "sandboxfs: fork: %s\n", strerror(errno));
		return -1;
	}
	if (child > 0)
		middle(child);
	return 0;
}
