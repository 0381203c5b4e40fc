#!/usr/bin/env bats
# The fast paths of runs and journals (issue 15): what they must keep doing.
# No test here asserts a time; bench/runs.sh measures.

load helpers
load docker_helpers

teardown() {
	docker_teardown
}

# wrapper_exe RUNDIR: the executable of the run's wrapper, while it lives
wrapper_exe() {
	local wpid
	wpid=$(cat "$1/wpid")
	readlink "/proc/$wpid/exe"
}

# bats test_tags=core
@test "local: runs start through sandboxfs-run-wrapper when it sits beside the binary" {
	[ -x "$(dirname "$SFS_BIN")/sandboxfs-run-wrapper" ] || skip "no sandboxfs-run-wrapper beside $SFS_BIN"
	sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" "exec echo started; sleep 30")
	rundir=$(ls -d "$STATE"/sandboxes/*/runs/"$n")
	wait_for grep -q started "$MNT/demo/runs/$n/journal"
	[ "$(wrapper_exe "$rundir")" = "$(cd "$(dirname "$SFS_BIN")" && pwd -P)/sandboxfs-run-wrapper" ]
	# the wrapper's own files, and kill through them
	[ -s "$rundir/pid" ]
	[ -s "$rundir/wpid" ]
	ctl_write "$MNT/demo/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "killed TERM" ]
	[ "$(cat "$rundir/status")" = "signal 15" ]
	n=$(ctl_write "$MNT/demo/ctl" 'exec echo "out $SANDBOXFS_RUN_DIR"; exit 4')
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "exited 4" ]
	[ "$(cat "$MNT/demo/runs/$n/journal")" = "out $STATE/sandboxes/$(basename "$(dirname "$(dirname "$rundir")")")/runs/$n" ]
}

# bats test_tags=core
@test "local: without sandboxfs-run-wrapper beside it, sandboxfs runs as the wrapper itself" {
	mkdir "$BATS_TEST_TMPDIR/bin"
	cp "$SFS_BIN" "$BATS_TEST_TMPDIR/bin/sandboxfs"
	SFS_BIN=$BATS_TEST_TMPDIR/bin/sandboxfs sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" "exec echo started; sleep 30")
	rundir=$(ls -d "$STATE"/sandboxes/*/runs/"$n")
	wait_for grep -q started "$MNT/demo/runs/$n/journal"
	[ "$(wrapper_exe "$rundir")" = "$BATS_TEST_TMPDIR/bin/sandboxfs" ]
	ctl_write "$MNT/demo/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "killed TERM" ]
	n=$(ctl_write "$MNT/demo/ctl" "exec echo two; exit 2")
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "exited 2" ]
	[ "$(cat "$MNT/demo/runs/$n/journal")" = two ]
}

# bats test_tags=core
@test "local: readers parked before the run's end get every line, then EOF and the status" {
	sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" 'exec for i in 1 2 3 4 5; do echo "line $i"; sleep 0.2; done')
	cat "$MNT/demo/runs/$n/wait" >"$BATS_TEST_TMPDIR/wait" &
	w=$!
	cat "$MNT/demo/runs/$n/journal" >"$BATS_TEST_TMPDIR/journal" &
	j=$!
	wait "$w" "$j"
	[ "$(cat "$BATS_TEST_TMPDIR/wait")" = "exited 0" ]
	[ "$(cat "$BATS_TEST_TMPDIR/journal")" = "$(printf 'line %s\n' 1 2 3 4 5)" ]
	wait_for grep -qx 'followers 0' "$MNT/demo/status"
}

@test "docker: a reader parked in a journal read gets each line the container writes, then EOF; wait the status" {
	docker_setup
	dk_new d1 >/dev/null
	n=$(dk_exec d1 'for i in 1 2 3 4 5; do echo "line $i"; sleep 0.2; done; exit 6')
	cat "$MNT/d1/runs/$n/wait" >"$BATS_TEST_TMPDIR/wait" &
	w=$!
	cat "$MNT/d1/runs/$n/journal" >"$BATS_TEST_TMPDIR/journal" &
	j=$!
	wait_for grep -q 'line 1' "$BATS_TEST_TMPDIR/journal"
	# the watch on the run's directory in the container's overlay
	grep -qx 'followers 1' "$MNT/d1/status"
	wait "$w" "$j"
	[ "$(cat "$BATS_TEST_TMPDIR/wait")" = "exited 6" ]
	[ "$(cat "$BATS_TEST_TMPDIR/journal")" = "$(printf 'line %s\n' 1 2 3 4 5)" ]
	wait_for grep -qx 'followers 0' "$MNT/d1/status"
}
