#!/usr/bin/env bats
# Remote workspaces walked cold (issue 15): directories listed once for
# many lookups, small files fetched in bulk beside the one opened, and a
# prefetched copy never served once a run or the mount changed the file.
# Against the daytona emulator (its bulk-download route); no time asserted.

load helpers
load daytona_helpers

setup() {
	# "(TTL 60 s)" in a test's name: caches that outlive a slow step on a
	# loaded machine, so its call counts do not depend on timing
	case "$BATS_TEST_DESCRIPTION" in
	*"(TTL 60 s)"*) dt_setup -o remote.attr_timeout=60 ;;
	*) dt_setup ;;
	esac
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

@test "bulk: the first lookup in a small directory lists it; its other names, there or not, cost no call (TTL 60 s)" {
	mkfiles k 3
	ls "$W" >/dev/null # the root's listing gives k's size: small
	c0=$(conf_calls b1)
	[ -e "$W/k/f1" ]
	[ "$(conf_calls b1)" -eq $((c0 + 1)) ]
	[ -e "$W/k/f2" ]
	[ ! -e "$W/k/alternates" ]
	[ "$(conf_calls b1)" -eq $((c0 + 1)) ]
}

@test "bulk: a name a cached listing answered as missing is there at once when a run or the mount creates it (TTL 60 s)" {
	mkfiles n 3
	[ -e "$W/n/f1" ]
	[ ! -e "$W/n/probe" ] # from n's listing, cached for a minute
	dt_run b1 'echo made > n/probe' >/dev/null
	[ "$(cat "$W/n/probe")" = made ]
	[ ! -e "$W/n/probe2" ]
	echo mine >"$W/n/probe2"
	[ "$(cat "$W/n/probe2")" = mine ]
	[ "$(ls "$W/n" | grep -c probe)" = 2 ]
	[ "$(dt_run b1 'cat n/probe2')" = mine ]
}

@test "bulk: a change through the mount elsewhere keeps a directory's prefetched files; one to a prefetched file drops its copy (TTL 60 s)" {
	mkfiles p 10
	mkfiles q 1
	ls "$W/p" "$W/q" >/dev/null
	[ "$(cat "$W/p/f1")" = "v1 p 1" ] # f2..f10 come in the same call
	echo new >"$W/q/new"
	c0=$(conf_calls b1)
	[ "$(cat "$W/p/f2")" = "v1 p 2" ]
	[ "$(conf_calls b1)" -eq "$c0" ]
	# same size as the prefetched copy: only the change itself can tell
	echo "v9 p 3" >"$W/p/f3"
	[ "$(cat "$W/p/f3")" = "v9 p 3" ]
	mv "$W/p/f5" "$W/p/f4"
	[ "$(cat "$W/p/f4")" = "v1 p 5" ]
	[ "$(dt_run b1 'cat p/f3 p/f4')" = "$(printf 'v9 p 3\nv1 p 5')" ]
}
