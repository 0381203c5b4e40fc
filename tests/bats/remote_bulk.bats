#!/usr/bin/env bats
# Remote workspaces walked cold (issue 15): directories listed once for
# many lookups, small files fetched in bulk beside the one opened, and a
# prefetched copy never served once a run or the mount changed the file.
# Against the daytona emulator (its bulk-download route); no time asserted.

load helpers
load daytona_helpers

setup() {
	dt_setup
	dt_new b1 >/dev/null
	W=$MNT/b1/workspace
}

teardown() {
	dt_teardown
}

# mkfiles DIR N: N small files DIR/f1..fN holding "v1 DIR I", made by a run
mkfiles() {
	dt_run b1 "mkdir -p $1 && for i in \$(seq 1 $2); do echo \"v1 $1 \$i\" > $1/f\$i; done" >/dev/null
}

# (the small files beside an opened one coming in its call: the conformance
# suite's conf_test_bulk_siblings, run by daytona.bats and vercel.bats)

@test "bulk: a file a run changed after the prefetch is read again, never from the prefetched copy" {
	mkfiles e 10
	ls "$W/e" >/dev/null
	[ "$(cat "$W/e/f1")" = "v1 e 1" ]
	# same size, so only the run's end can tell the copies apart
	dt_run b1 'echo "v2 e 2" > e/f2' >/dev/null
	[ "$(cat "$W/e/f2")" = "v2 e 2" ]
	[ "$(cat "$W/e/f3")" = "v1 e 3" ]
}

@test "bulk: a file changed or renamed through the mount after the prefetch shows the change" {
	mkfiles g 10
	ls "$W/g" >/dev/null
	[ "$(cat "$W/g/f1")" = "v1 g 1" ]
	echo "v9 g 2" >"$W/g/f2"
	[ "$(cat "$W/g/f2")" = "v9 g 2" ]
	# renamed over a prefetched sibling of the same size
	mv "$W/g/f4" "$W/g/f3"
	[ "$(cat "$W/g/f3")" = "v1 g 4" ]
	[ "$(cat "$W/g/f5")" = "v1 g 5" ]
	# and what the sandbox sees
	[ "$(dt_run b1 'cat g/f2 g/f3')" = "$(printf 'v9 g 2\nv1 g 4')" ]
}

@test "bulk: many lookups in a directory never listed cost one listing, missing names included" {
	mkfiles h 30
	c0=$(conf_calls b1)
	for i in $(seq 1 30); do
		[ -e "$W/h/f$i" ]
		[ ! -e "$W/h/nope$i" ]
	done
	# 60 names: the directory itself, its first name (a stat), then one
	# listing answers every other name, present or not (was: one stat each)
	[ "$(conf_calls b1)" -le $((c0 + 5)) ]
}
