# bats file_tags=core
#
# Paths grow, they are never cut: a path too long for what the daemon builds
# from it is refused with ENAMETOOLONG and a message, never shortened into
# one that names another file.

load helpers

teardown() {
	cd "$BATS_TEST_TMPDIR"
	sfs_teardown
}

# deep_dir BYTES: makes and prints a directory whose absolute path is about
# BYTES long, of nested 200-byte names (each under NAME_MAX).
deep_dir() {
	local d="$BATS_TEST_TMPDIR/deep" seg
	seg=$(printf 'p%.0s' $(seq 1 200))
	while [ $((${#d} + 201)) -le "$1" ]; do d="$d/$seg"; done
	[ $(($1 - ${#d})) -lt 2 ] || d="$d/${seg:0:$(($1 - ${#d} - 1))}"
	mkdir -p "$d"
	echo "$d"
}

@test "a state dir too deep for the paths below it is refused at start, not cut" {
	DEEP=$(deep_dir 4000)
	[ "${#DEEP}" -gt 3900 ]
	M2="$BATS_TEST_TMPDIR/m2"
	mkdir -p "$M2"
	run timeout -k 5 20 "$SFS_BIN" -f --state "$DEEP" "$M2" 3>&-
	fusermount3 -uz "$M2" 2>/dev/null || true
	[ "$status" -ne 0 ]
	[ "$status" -ne 124 ] # refused, not served until the timeout
	[[ "$output" == *"path too long"* ]]
	# nothing was made below it, at its own path or a cut one
	[ ! -e "$DEEP/sandboxes" ]
	[ -z "$(find "$BATS_TEST_TMPDIR/deep" -mindepth 1 -name sandboxes -print -quit)" ]
	# a daemon with an ordinary state dir still serves
	sfs_mount
	mkdir "$MNT/ok"
	n=$(ctl_write "$MNT/ok/ctl" "exec echo served")
	timeout 10 cat "$MNT/ok/runs/$n/wait" >/dev/null
	[ "$(cat "$MNT/ok/runs/$n/journal")" = served ]
}

@test "a state dir at the longest accepted depth: new, exec, snapshot and rmdir all work" {
	STATE=$(deep_dir 3000)
	sfs_mount
	mkdir "$MNT/s"
	echo data >"$MNT/s/workspace/f"
	n=$(ctl_write "$MNT/s/ctl" "exec cat f")
	timeout 10 cat "$MNT/s/runs/$n/wait" >/dev/null
	[ "$(cat "$MNT/s/runs/$n/journal")" = data ]
	run ctl_write "$MNT/s/ctl" "snapshot first"
	[ "$status" -eq 0 ]
	[ "$output" = first ]
	[ "$(cat "$MNT/s/snapshots/first/tree/f")" = data ]
	rmdir "$MNT/s"
	[ ! -e "$MNT/s" ]
	# whatever was made went below the state dir, under its full path
	[ -d "$STATE/sandboxes" ]
	mkdir "$MNT/t"
	[ -d "$MNT/t/workspace" ]
}
