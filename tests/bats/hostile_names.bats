#!/usr/bin/env bats
# bats file_tags=core
# Names from a hostile sandbox's listing: a remote workspace whose listing
# answers "../../../…/tmp/x" or ".." (the fake sbx CLI's and the daytona
# emulator's hostile_names fault).  Such names are left out of every listing
# (a warning in the log names the sandbox and the name); nothing outside the
# workspace is created or changed by ls, snapshot, diff or restore, and the
# daemon keeps serving.  Each test picks its provider, starts its emulator
# and daemon; teardown stops both and removes what an attack could have made.

load helpers
load remote_helpers

setup() {
	# a path outside everything, and the name that reaches it from the
	# remote snapshot mirror (STATE/sandboxes/KEY/wsnap-mirror) and from
	# any cache directory: more ../ than any of them is deep
	OUTSIDE="/tmp/sfs-hostile-$$-$RANDOM"
	UP=$(printf '../%.0s' $(seq 1 40))
	EVIL="$UP${OUTSIDE#/}"
}

teardown() {
	conf_teardown
	rm -rf "${OUTSIDE:?}" "$OUTSIDE-f"
}

# start PROVIDER: its emulator and a daemon.
start() {
	conf_provider "$1"
	conf_setup
	emu_require
}

# nothing_outside: no attack left a trace outside the workspace.
nothing_outside() {
	[ ! -e "$OUTSIDE" ] && [ ! -L "$OUTSIDE" ] && [ ! -e "$OUTSIDE-f" ] && [ ! -L "$OUTSIDE-f" ]
}

# still_serving NAME: the daemon lives, and a new sandbox NAME runs a command.
still_serving() {
	kill -0 "$SFS_PID"
	run conf_new "$1"
	[ "$status" -eq 0 ]
	[ "$(conf_run "$1" echo alive)" = alive ]
	grep -qx "provider $PROVIDER" "$MNT/$1/status"
}

# listing_clean DIR: DIR lists, with no name of the attack in it.
listing_clean() {
	run ls -a "$1"
	[ "$status" -eq 0 ]
	[[ "$output" != *sfs-hostile* ]]
	[ "$(grep -cx '\.\.' <<<"$output")" = 1 ]
	[ "$(grep -cx '\.' <<<"$output")" = 1 ]
}

@test "hostile names: an sbx listing's ../ names and .. reach nothing outside through ls, snapshot, diff, restore" {
	start sbx
	run conf_new h
	[ "$status" -eq 0 ]
	W="$MNT/h/workspace"
	mkdir "$W/sub"
	echo one >"$W/a.txt"
	echo bee >"$W/sub/b.txt"
	emu_faults "{\"hostile_names\": [{\"name\": \"$EVIL\", \"mode\": \"41ed\"},
		{\"name\": \"$EVIL-f\", \"mode\": \"81a4\"}, {\"name\": \"..\", \"mode\": \"41ed\"},
		{\"name\": \".\", \"mode\": \"41ed\"}, {\"name\": \"a/b\", \"mode\": \"81a4\"}]}"
	# a directory made in the sandbox: its listing comes from there
	conf_run h mkdir fresh >/dev/null
	listing_clean "$W/fresh"
	run ls "$W/fresh"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run ctl_write "$MNT/h/ctl" "snapshot s kind=workspace"
	[ "$status" -eq 0 ]
	nothing_outside
	[ "$(cat "$MNT/h/snapshots/s/tree/sub/b.txt")" = bee ]
	run ls -a "$MNT/h/snapshots/s/tree"
	[ "$status" -eq 0 ]
	[[ "$output" != *sfs-hostile* ]]
	echo two >"$W/a.txt"
	cat "$MNT/h/snapshots/s/diff" >"$BATS_TEST_TMPDIR/patch"
	grep -qx '+two' "$BATS_TEST_TMPDIR/patch"
	run grep -c sfs-hostile "$BATS_TEST_TMPDIR/patch"
	[ "$output" = 0 ]
	run ctl_write "$MNT/h/ctl" "restore s"
	[ "$status" -eq 0 ]
	[ "$(conf_run h cat a.txt)" = one ]
	nothing_outside
	# the log names the sandbox and the name, escaped, once per listing
	grep -q "sbx: h: the listing of .* leaves out .* the first \"\.\./\.\./" \
		"$BATS_TEST_TMPDIR/daemon.log"
	still_serving other
	nothing_outside
}

@test "hostile names: a daytona (JSON) listing's ../ names and .. reach nothing outside through ls, snapshot, diff, restore" {
	start daytona
	run conf_new h
	[ "$status" -eq 0 ]
	W="$MNT/h/workspace"
	echo one >"$W/a.txt"
	emu_faults "{\"hostile_names\": [\"$EVIL\", \"..\", \".\", \"a/b\", \"\"]}"
	conf_run h mkdir fresh >/dev/null
	listing_clean "$W/fresh"
	run ctl_write "$MNT/h/ctl" "snapshot s kind=workspace"
	[ "$status" -eq 0 ]
	nothing_outside
	[ "$(cat "$MNT/h/snapshots/s/tree/a.txt")" = one ]
	echo two >"$W/a.txt"
	cat "$MNT/h/snapshots/s/diff" >"$BATS_TEST_TMPDIR/patch"
	grep -qx '+two' "$BATS_TEST_TMPDIR/patch"
	run ctl_write "$MNT/h/ctl" "restore s"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/a.txt")" = one ]
	nothing_outside
	grep -q "daytona: h: the listing of .* leaves out .* the first \"\.\./\.\./" \
		"$BATS_TEST_TMPDIR/daemon.log"
	still_serving other
	nothing_outside
}

@test "hostile names: a sandbox's NAME.sfs-fetch beside NAME (symlink, directory) neither blocks a snapshot nor is followed" {
	start sbx
	run conf_new h
	[ "$status" -eq 0 ]
	conf_run h "echo hi >c.txt; ln -s $OUTSIDE c.txt.sfs-fetch; echo d >d.txt; mkdir d.txt.sfs-fetch" >/dev/null
	run ctl_write "$MNT/h/ctl" "snapshot s kind=workspace"
	[ "$status" -eq 0 ]
	nothing_outside
	[ "$(cat "$MNT/h/snapshots/s/tree/c.txt")" = hi ]
	[ "$(readlink "$MNT/h/snapshots/s/tree/c.txt.sfs-fetch")" = "$OUTSIDE" ]
	[ "$(cat "$MNT/h/snapshots/s/tree/d.txt")" = d ]
	# and again, with the mirror already there
	conf_run h "echo hello >c.txt" >/dev/null
	run ctl_write "$MNT/h/ctl" "snapshot t kind=workspace"
	[ "$status" -eq 0 ]
	[ "$(cat "$MNT/h/snapshots/t/tree/c.txt")" = hello ]
	nothing_outside
	still_serving other
}
