#!/usr/bin/env bats
# A sandbox's life under hostile use (issue 10): a daemon killed in the
# middle of `exec`, `rmdir` with runs that ignore TERM or on a full state
# disk, open handles of a forgotten sandbox, adopted host directories.

load helpers

setup() {
	sfs_mount
}

teardown() {
	sfs_teardown
	if [ -n "${SMALL_FS:-}" ] && mountpoint -q "$SMALL_FS" 2>/dev/null; then
		umount -l "$SMALL_FS" 2>/dev/null || true
	fi
}

run_cmd() {
	ctl_write "$MNT/$1/ctl" "exec $2"
}

# sb_dir NAME: the state directory (STATE/sandboxes/KEY) of a sandbox that
# owns its workspace (STATE/sandboxes/KEY/workspace).
sb_dir() {
	dirname "$(awk '$1=="workspace"{print $2}' "$MNT/$1/status")"
}

# kill_daemon: kill -9 of the daemon, and the mount let go.
kill_daemon() {
	kill -9 "$SFS_PID"
	wait "$SFS_PID" 2>/dev/null || true
	umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null || true
}

# ---- item 2: run numbers and half-created runs -------------------------------

# bats test_tags=core
@test "a half-created run found at startup is adopted, and its number is never reused" {
	mkdir "$MNT/demo"
	[ "$(run_cmd demo 'echo one')" = 1 ]
	cat "$MNT/demo/runs/1/wait"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	d=$(sb_dir demo)
	sfs_unmount
	# What a daemon killed between starting a run and naming its cmd left:
	# run 2 has .cmd but no cmd and its wrapper goes on; run 3 is a bare
	# directory (killed right after numbering it).
	r2="$d/runs/2"
	mkdir "$r2"
	orphan='echo orphan-out; while [ ! -e go ]; do sleep 0.1; done; exit 42'
	printf '%s' "$orphan" >"$r2/.cmd"
	SANDBOXFS_RUN_DIR="$r2" setsid "$SFS_BIN" __local-run-wrapper "$r2" "$ws" 9 "$orphan" \
		9>/dev/null </dev/null >/dev/null 2>&1 3>&- &
	wait_for grep -qs orphan-out "$r2/journal"
	mkdir "$d/runs/3"
	sfs_mount
	[ "$(ls "$MNT/demo/runs" | sort -n | tr '\n' ' ')" = "1 2 3 " ]
	[ "$(cat "$MNT/demo/runs/2/cmd")" = "$orphan" ]
	[ "$(cat "$MNT/demo/runs/2/status")" = running ]
	[ "$(head -n1 "$MNT/demo/runs/2/journal")" = orphan-out ]
	[ "$(cat "$MNT/demo/runs/3/status")" = lost ]
	[ "$(timeout 5 cat "$MNT/demo/runs/3/wait")" = lost ]
	# a new run gets a new number, and the orphan's end is the orphan's
	[ "$(run_cmd demo 'echo fresh; exit 7')" = 4 ]
	[ "$(cat "$MNT/demo/runs/4/wait")" = "exited 7" ]
	touch "$ws/go"
	[ "$(timeout 10 cat "$MNT/demo/runs/2/wait")" = "exited 42" ]
	[ "$(cat "$MNT/demo/runs/4/status")" = "exited 7" ]
	[ "$(cat "$MNT/demo/runs/4/journal")" = fresh ]
	[ "$(cat "$MNT/demo/runs/2/journal")" = orphan-out ]
	# and the adopted run is killable
	[ "$(run_cmd demo 'sleep 30')" = 5 ]
	sfs_unmount
	sfs_mount
	echo "kill 5" >"$MNT/demo/ctl"
	[ "$(timeout 10 cat "$MNT/demo/runs/5/wait")" = "killed TERM" ]
}

# bats test_tags=core
@test "an adopted half-created run can be killed" {
	mkdir "$MNT/demo"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	d=$(sb_dir demo)
	sfs_unmount
	r1="$d/runs/1"
	mkdir -p "$r1"
	printf '%s' 'echo up; sleep 300' >"$r1/.cmd"
	SANDBOXFS_RUN_DIR="$r1" setsid "$SFS_BIN" __local-run-wrapper "$r1" "$ws" 9 "$(cat "$r1/.cmd")" \
		9>/dev/null </dev/null >/dev/null 2>&1 3>&- &
	wait_for grep -qs up "$r1/journal"
	sfs_mount
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
	echo "kill 1" >"$MNT/demo/ctl"
	[ "$(timeout 10 cat "$MNT/demo/runs/1/wait")" = "killed TERM" ]
	wait_for test -z "$(sfs_run_pids "$STATE")"
}

@test "kill -9 of the daemon while 4 writers exec: every run dir is a listed run, no number is reused" {
	mkdir "$MNT/demo"
	d=$(sb_dir demo)
	for w in 1 2 3 4; do
		(
			for i in $(seq 1 60); do
				ctl_write "$MNT/demo/ctl" "exec echo w$w-$i; sleep 2; exit 42" >/dev/null 2>&1 || exit 0
			done
		) 3>&- &
		echo $! >>"$BATS_TEST_TMPDIR/writers"
	done
	wait_for test -d "$d/runs/12"
	kill_daemon
	while read -r p; do wait "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/writers"
	sfs_mount
	ondisk=$(ls "$d/runs" | grep -E '^[0-9]+$' | sort -n | tr '\n' ' ')
	listed=$(ls "$MNT/demo/runs" | sort -n | tr '\n' ' ')
	[ "$ondisk" = "$listed" ]
	last=$(ls "$d/runs" | grep -E '^[0-9]+$' | sort -n | tail -n1)
	n=$(run_cmd demo 'echo fresh; exit 7')
	[ "$n" -eq $((last + 1)) ]
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "exited 7" ]
	# every earlier run ends with its own status, and the new one keeps its own
	for i in $(seq 1 "$last"); do
		st=$(timeout 20 cat "$MNT/demo/runs/$i/wait")
		[ "$st" = "exited 42" ] || [ "$st" = lost ]
		if [ "$st" = "exited 42" ]; then
			grep -q '^w[1-4]-[0-9]*$' "$MNT/demo/runs/$i/journal"
		fi
	done
	[ "$(cat "$MNT/demo/runs/$n/status")" = "exited 7" ]
	[ "$(cat "$MNT/demo/runs/$n/journal")" = fresh ]
}
