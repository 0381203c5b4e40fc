# Shared fixtures for the mounted tests: each test gets its own state dir and
# mount, and teardown unmounts and kills whatever the test left, even when
# the test failed.

# `run ! CMD` (a negated assertion that can fail mid-test) needs bats 1.5.
bats_require_minimum_version 1.5.0

SFS_ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
SFS_BIN="${SFS_BIN:-$SFS_ROOT/build/sandboxfs}"

# sfs_need REASON: skips the test for REASON (a Docker engine or bwrap this
# machine lacks), but in CI (CI=true) fails it: there a missing engine is a
# broken machine, and a skip would pass with less tested.  SFS_WAIVE=1 lets
# a person skip in CI too.
sfs_need() {
	if [ "${CI:-}" = true ] && [ -z "${SFS_WAIVE:-}" ]; then
		echo "required in CI (CI=true): $1 (SFS_WAIVE=1 skips instead)" >&2
		return 1
	fi
	skip "$1"
}

# sfs_mount [sandboxfs options...]: mounts on $MNT with state in $STATE.
# SFS_WRAP, if set, is a command (split on spaces) that execs the daemon,
# e.g. "prlimit --nofile=4096:4096": $SFS_PID is then still the daemon's.
sfs_mount() {
	STATE="${STATE:-$BATS_TEST_TMPDIR/state}"
	MNT="${MNT:-$BATS_TEST_TMPDIR/mnt}"
	mkdir -p "$STATE" "$MNT"
	# 3>&-: bats reports on fd 3; a daemon holding it would stall bats
	# shellcheck disable=SC2086 # SFS_WRAP is words on purpose
	${SFS_WRAP:-} "$SFS_BIN" -f --state "$STATE" "$@" "$MNT" 2>>"$BATS_TEST_TMPDIR/daemon.log" 3>&- &
	SFS_PID=$!
	echo "$SFS_PID" >>"$BATS_TEST_TMPDIR/daemon.pids"
	local i
	for i in $(seq 1 100); do
		if mountpoint -q "$MNT" && [ -e "$MNT/ctl" ]; then
			return 0
		fi
		kill -0 "$SFS_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "mount failed:" >&2
	cat "$BATS_TEST_TMPDIR/daemon.log" >&2
	return 1
}

# sfs_unmount: unmounts $MNT and waits for the daemon to exit.
sfs_unmount() {
	[ -n "${MNT:-}" ] || return 0
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	local i
	for i in $(seq 1 100); do
		kill -0 "${SFS_PID:-0}" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -9 "$SFS_PID" 2>/dev/null || true
}

# Kills every process a run of this test started: they carry the state dir
# in their environment (SANDBOXFS_RUN_DIR) or were started under it.
sfs_kill_runs() {
	local st="${STATE:-$BATS_TEST_TMPDIR/state}"
	local p
	for p in $(sfs_run_pids "$st"); do
		kill -9 "$p" 2>/dev/null || true
	done
}

# Prints the pids of live (non-zombie) processes whose environment names
# a run directory under state dir $1.
sfs_run_pids() {
	local st="$1" f p
	# one grep over every environ: a tr and a grep per process took seconds
	# on a busy machine, long enough for a short run to end meanwhile
	for f in $(grep -lsz -- "^SANDBOXFS_RUN_DIR=$st/" /proc/[0-9]*/environ 2>/dev/null); do
		p=${f#/proc/}
		p=${p%/environ}
		[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
		echo "$p"
	done
}

sfs_teardown() {
	sfs_unmount
	sfs_kill_runs
	if [ -f "$BATS_TEST_TMPDIR/daemon.pids" ]; then
		local p
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/daemon.pids"
	fi
	if [ -n "${MNT:-}" ] && mountpoint -q "$MNT" 2>/dev/null; then
		umount -l "$MNT" 2>/dev/null || true
	fi
	sfs_unmount_below_state
}

# sfs_unmount_below_state: the overlays (base=) a test left mounted below
# its state dir: a daemon leaves them on purpose, since runs outlive it,
# and a mount left there makes bats's removal of its temp dir fail.
# Lazy, so a container still holding one does not keep it.
sfs_unmount_below_state() {
	[ -n "${STATE:-}" ] || return 0
	local m
	for m in $(awk -v s="$STATE/" 'index($5, s) == 1 { print $5 }' /proc/self/mountinfo); do
		umount -l "$m" 2>/dev/null || true
	done
}

# no_tsan_reports: fails, showing them, when the daemon wrote any
# ThreadSanitizer report (a test tagged `tsan` exports
# TSAN_OPTIONS=log_path=$BATS_TEST_TMPDIR/tsan before it mounts).
no_tsan_reports() {
	local f found=0
	for f in "$BATS_TEST_TMPDIR"/tsan*; do
		[ -e "$f" ] || continue
		found=1
		echo "----- $f"
		head -n 60 "$f"
	done
	[ "$found" -eq 0 ]
}

# wait_for CMD...: retries CMD for up to 10 s.
wait_for() {
	local i
	for i in $(seq 1 200); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

# trace_daemon FILE SYSCALLS: strace -f of the daemon's SYSCALLS (fds shown
# with their paths) into FILE, in the background; TRACER is its pid.
# Returns once every thread is traced: strace attaches them one by one, and
# the main thread shows a tracer before the others are.
trace_daemon() {
	strace -f -qq -y -e "trace=$2" -o "$1" -p "$SFS_PID" &
	TRACER=$!
	wait_for eval '! grep -l "TracerPid:[[:space:]]*0$" /proc/$SFS_PID/task/*/status'
}

# wait_exec_later_done: what the daemon does a moment after an exec
# (providers/later.c: the cmd's flush, then the next run's directory) is
# done, for the one sandbox in $STATE.
wait_exec_later_done() {
	wait_for eval 'test -p "$(ls -d "$STATE"/sandboxes/*/runs)/.next/stdin"'
}

# wait_sleep_running RUNDIR: the run whose state is RUNDIR (its runs/N on
# the host) has a `sleep` going in its process group: its shell is past
# the fork, where a single INT would be held until the command ends (dash).
wait_sleep_running() {
	wait_for bash -c "pgrep -x sleep -g \"\$(cut -d' ' -f1 '$1/pid')\" >/dev/null"
}

# blocked_reading PID FILE: PID is inside read(2) (x86_64 syscall 0) on an
# fd open on FILE (symlinks resolved), i.e. parked, not merely started.
blocked_reading() {
	local sc fd
	read -r sc fd _ <"/proc/$1/syscall" 2>/dev/null || return 1
	[ "$sc" = 0 ] || return 1
	[ "$(readlink "/proc/$1/fd/$((fd))")" = "$(readlink -f "$2")" ]
}

# ctl_write FILE LINE: writes LINE to FILE on one fd and prints what a read of
# the same fd returns (the result or the error), like `exec 7<>ctl`.
ctl_write() {
	local f="$1"
	shift
	exec 7<>"$f"
	local rc=0
	printf '%s\n' "$*" >&7 || rc=$?
	cat <&7
	exec 7>&-
	return $rc
}
