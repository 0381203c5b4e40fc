#!/usr/bin/env bats
# bats file_tags=git,daytona
# new … source= on daytona (the emulator in tests/emulators/daytona): the
# checked-out tree goes up as one archive and is unpacked by one command.

load helpers
load daytona_helpers

setup() {
	dt_setup
	REPO="$BATS_TEST_TMPDIR/repo"
	git -c init.defaultBranch=main init -q "$REPO"
	mkdir "$REPO/d"
	for i in $(seq 1 40); do echo "file $i" >"$REPO/d/f$i"; done
	ln -s d/f1 "$REPO/link"
	git -C "$REPO" add .
	git -c user.email=t@example.org -c user.name=t -C "$REPO" commit -qm one
}

teardown() {
	dt_teardown
}

@test "daytona: source= arrives in a constant number of calls, setup runs there" {
	before=$(emu_stat requests)
	run dt_new g "source=$REPO setup='cat d/f40'"
	[ "$status" -eq 0 ]
	calls=$(($(emu_stat requests) - before))
	echo "# new made $calls emulator calls" >&3
	# 40 files and a .git: not one call per file
	[ "$calls" -lt 20 ]
	grep -qx 'state running' "$MNT/g/status"
	[ "$(cat "$MNT/g/workspace/d/f7")" = "file 7" ]
	[ "$(readlink "$MNT/g/workspace/link")" = d/f1 ]
	[ "$(cat "$MNT/g/workspace/.git/HEAD")" = "ref: refs/heads/main" ]
	[ "$(cat "$MNT/g/runs/1/journal")" = "file 40" ]
	[ ! -e "$MNT/g/workspace/.sandboxfs-source.tar" ]
}
