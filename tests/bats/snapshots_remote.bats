#!/usr/bin/env bats
# bats file_tags=snapshots
# Workspace snapshots of a remote workspace (SPEC §8 `snapshot
# kind=workspace`): daytona, against its emulator (tests/emulators/daytona),
# through the provider's file calls into a mirror on this host.

load helpers
load remote_helpers
conf_provider daytona

setup() {
	conf_setup
}

teardown() {
	conf_teardown
}

# one_commit_repo DIR: a repository whose main has a.txt ("one")
one_commit_repo() {
	git -c init.defaultBranch=main init -q "$1"
	echo one >"$1/a.txt"
	git -C "$1" add -A
	git -C "$1" -c user.email=t@example.org -c user.name=t commit -qm one
}

@test "daytona: snapshot kind=workspace, its tree/ and diff, and a restore that writes the changes back" {
	run conf_new r
	[ "$status" -eq 0 ]
	grep -qx 'snapshots native' "$MNT/r/status"
	W="$MNT/r/workspace"
	mkdir "$W/sub" "$W/gone"
	echo one >"$W/a.txt"
	echo bee >"$W/sub/b.txt"
	echo g >"$W/gone/g.txt"
	ln -s a.txt "$W/l"
	run ctl_write "$MNT/r/ctl" "snapshot w kind=workspace"
	[ "$status" -eq 0 ]
	[ "$output" = w ]
	grep -qx 'kind workspace' "$MNT/r/snapshots/w/info"
	grep -qx 'files 4' "$MNT/r/snapshots/w/info"
	[ "$(cat "$MNT/r/snapshots/w/tree/sub/b.txt")" = bee ]
	[ "$(readlink "$MNT/r/snapshots/w/tree/l")" = a.txt ]
	echo two >"$W/a.txt"
	rm "$W/sub/b.txt"
	rm -r "$W/gone"
	echo n >"$W/n.txt"
	cat "$MNT/r/snapshots/w/diff" >"$BATS_TEST_TMPDIR/patch"
	grep -qx '+two' "$BATS_TEST_TMPDIR/patch"
	grep -qx 'deleted file mode 100644' "$BATS_TEST_TMPDIR/patch"
	grep -qx '+++ b/n.txt' "$BATS_TEST_TMPDIR/patch"
	run ctl_write "$MNT/r/ctl" "restore w"
	[ "$status" -eq 0 ]
	[[ "$output" == "restored w: "*"processes were left alone"* ]]
	# seen from inside the sandbox, and through workspace/
	[ "$(conf_run r cat a.txt sub/b.txt gone/g.txt)" = "$(printf 'one\nbee\ng')" ]
	[ "$(conf_run r 'test -e n.txt && echo there || echo absent')" = absent ]
	[ "$(conf_run r readlink l)" = a.txt ]
	[ "$(cat "$W/a.txt")" = one ]
	[ ! -e "$W/n.txt" ]
	[ -z "$(cat "$MNT/r/snapshots/w/diff")" ]
}

@test "daytona: source= gives snapshot base from the checkout; its diff shows what changed in the sandbox and git apply takes it" {
	R="$BATS_TEST_TMPDIR/repo"
	git -c init.defaultBranch=main init -q "$R"
	printf 'l1\nl2\nl3\n' >"$R/a.txt"
	git -C "$R" add -A
	git -C "$R" -c user.email=t@example.org -c user.name=t commit -qm one
	run conf_new r "source=$R"
	[ "$status" -eq 0 ]
	grep -qx 'kind workspace' "$MNT/r/snapshots/base/info"
	[ "$(cat "$MNT/r/snapshots/base/tree/a.txt")" = "$(printf 'l1\nl2\nl3')" ]
	[ -z "$(cat "$MNT/r/snapshots/base/diff")" ]
	conf_run r "sed -i s/l2/L2/ a.txt && echo new >n.txt" >/dev/null
	cat "$MNT/r/snapshots/base/diff" >"$BATS_TEST_TMPDIR/patch"
	grep -qx '+L2' "$BATS_TEST_TMPDIR/patch"
	grep -qx '+new' "$BATS_TEST_TMPDIR/patch"
	git clone -q "$R" "$BATS_TEST_TMPDIR/clone"
	git -C "$BATS_TEST_TMPDIR/clone" apply "$BATS_TEST_TMPDIR/patch"
	[ "$(cat "$BATS_TEST_TMPDIR/clone/a.txt")" = "$(printf 'l1\nL2\nl3')" ]
	[ "$(cat "$BATS_TEST_TMPDIR/clone/n.txt")" = new ]
}

@test "daytona: a successful setup= takes snapshot setup of the prepared tree; restore setup brings it back" {
	R="$BATS_TEST_TMPDIR/repo"
	one_commit_repo "$R"
	run conf_new r "source=$R" "setup='echo built >out.txt'"
	[ "$status" -eq 0 ]
	grep -qx 'kind workspace' "$MNT/r/snapshots/setup/info"
	grep -qx 'label setup' "$MNT/r/snapshots/setup/info"
	[ "$(cat "$MNT/r/snapshots/setup/tree/out.txt")" = built ]
	[ "$(cat "$MNT/r/snapshots/setup/tree/a.txt")" = one ]
	# base is the checkout before setup: out.txt is what setup added
	[ ! -e "$MNT/r/snapshots/base/tree/out.txt" ]
	grep -qx '+built' "$MNT/r/snapshots/base/diff"
	[ -z "$(cat "$MNT/r/snapshots/setup/diff")" ]
	conf_run r "echo broken >out.txt && rm a.txt" >/dev/null
	run ctl_write "$MNT/r/ctl" "restore setup"
	[ "$status" -eq 0 ]
	[ "$(conf_run r "cat out.txt a.txt")" = "$(printf 'built\none')" ]
}

@test "daytona: no setup= takes no setup snapshot; a failed setup takes none either" {
	R="$BATS_TEST_TMPDIR/repo"
	one_commit_repo "$R"
	run conf_new r "source=$R"
	[ "$status" -eq 0 ]
	[ ! -e "$MNT/r/snapshots/setup" ]
	run conf_new f "source=$R" "setup='exit 3'"
	[ "$status" -ne 0 ]
	[ ! -e "$MNT/f/snapshots/setup" ]
}
