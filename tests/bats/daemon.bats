#!/usr/bin/env bats
# A daemonized sandboxfs (no -f), as `mount -t fuse.sandboxfs` and a plain
# `sandboxfs MNT` run it: every thread must start after fuse_daemonize()
# forks (issue 9), or the daemon has none and may hang at unmount.

load helpers
load daytona_helpers

# sfs_mount_daemon [sandboxfs options...]: mounts daemonized on $MNT, logging
# to daemon.log; returns once the daemon answers.  The daemon's pid is kept
# for teardown.
sfs_mount_daemon() {
	STATE="${STATE:-$BATS_TEST_TMPDIR/state}"
	MNT="${MNT:-$BATS_TEST_TMPDIR/mnt}"
	mkdir -p "$STATE" "$MNT"
	"$SFS_BIN" --state "$STATE" -o log="$BATS_TEST_TMPDIR/daemon.log" "$@" "$MNT" 3>&- || return 1
	[ -e "$MNT/ctl" ] || return 1
	SFS_PID=$(daemon_pids)
	echo "$SFS_PID" >>"$BATS_TEST_TMPDIR/daemon.pids"
}

# daemon_pids: the sandboxfs processes serving this test's state dir (one
# pgrep: a loop over /proc is slow under bats on a loaded machine).
daemon_pids() {
	pgrep -f -- "--state $STATE " || true
}

# sfs_mount_daemon_quick: the same, without looking for the pid (the state
# lock tells whether the daemon is alive).
sfs_mount_daemon_quick() {
	"$SFS_BIN" --state "$STATE" -o log="$BATS_TEST_TMPDIR/daemon.log" "$MNT" 3>&- &&
		[ -e "$MNT/ctl" ]
}

no_pending() {
	if ls "$STATE"/sandboxes/*/rcache/*.pending >/dev/null 2>&1; then
		return 1
	fi
}

# Unmounts, kills the daemons and the load, stops the emulator; even on failure.
# (Not sfs_teardown: these tests start no runs, and its walk over /proc for
# them is slow under load.)
teardown() {
	local p
	if [ -f "$BATS_TEST_TMPDIR/load.pids" ]; then
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/load.pids"
	fi
	if [ -n "${MNT:-}" ] && mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	[ -z "${STATE:-}" ] || daemon_pids >>"$BATS_TEST_TMPDIR/daemon.pids"
	if [ -f "$BATS_TEST_TMPDIR/daemon.pids" ]; then
		while read -r p; do
			[ -z "$p" ] || kill -9 "$p" 2>/dev/null || true
		done <"$BATS_TEST_TMPDIR/daemon.pids"
	fi
	emu_stop
}

@test "daemon: a daemonized instance retries a failed write-back once the remote heals" {
	dt_require
	emu_require
	emu_start
	# long attribute times: only the write-back meets the outage, not a lookup
	sfs_mount_daemon --log-level 3 -o remote.retry_interval=0.2 -o remote.attr_timeout=60
	[ -n "$SFS_PID" ]
	dt_new d1 >/dev/null
	W="$MNT/d1/workspace"
	echo before >"$W/keep.txt"
	emu_faults '{"fail_rate": 1.0}'
	run write_checked "$W/keep.txt" "precious data"
	[ "$status" -eq 5 ] # EIO from close, the data kept
	grep -rqx 'keep.txt' "$STATE"/sandboxes/*/rcache/*.pending
	emu_faults '{"fail_rate": 0}'
	# nothing touches the file again: only the daemon's retry thread can save it
	wait_for no_pending
	grep -q 'keep.txt saved after a retry' "$BATS_TEST_TMPDIR/daemon.log"
	[ "$(dt_run d1 'cat keep.txt')" = "precious data" ]
}

@test "daemon: 300 mount/unmount cycles under CPU load all exit and release the state lock" {
	local cycles=${SFS_DAEMON_CYCLES:-300} i p t
	# load both cores, so a thread is preempted at any instruction
	for i in 1 2; do
		(while :; do :; done) 3>&- &
		echo $! >>"$BATS_TEST_TMPDIR/load.pids"
		disown # no "Killed" job notice at teardown
	done
	STATE="$BATS_TEST_TMPDIR/state"
	MNT="$BATS_TEST_TMPDIR/mnt"
	mkdir -p "$STATE" "$MNT"
	local start=$SECONDS
	for ((i = 1; i <= cycles; i++)); do
		if ! sfs_mount_daemon_quick; then
			echo "cycle $i: mount failed" >&2
			tail -5 "$BATS_TEST_TMPDIR/daemon.log" >&2
			false
		fi
		fusermount3 -u "$MNT"
		# the lock is held for the daemon's whole life: free means it exited
		if ! flock -w 10 "$STATE/lock" true; then
			echo "cycle $i: the daemon still holds the state lock 10 s after unmount" >&2
			for p in $(daemon_pids); do
				echo "$p" >>"$BATS_TEST_TMPDIR/daemon.pids"
				for t in /proc/"$p"/task/*; do
					echo "pid $p thread ${t##*/}: $(cat "$t/wchan" 2>/dev/null)" >&2
				done
			done
			false
		fi
	done
	# each closed its lock just before returning from main: all gone soon
	wait_for eval 'test -z "$(daemon_pids)"'
	echo "$cycles cycles in $((SECONDS - start)) s" >&3
}
