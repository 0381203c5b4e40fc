#!/usr/bin/env bats
# bats file_tags=snapshots
# Workspace snapshots (SPEC §8, §10) on the local provider: the object store,
# snapshots/ID/{info,tree/,diff}, restore writing only differences, fork
# from=, the implicit `base` and `setup` snapshots of a source= sandbox.

load helpers
load docker_helpers

setup() {
	sfs_mount
}

teardown() {
	sfs_teardown
	docker_cleanup
}

gitc() { git -c user.email=t@example.org -c user.name=t -c init.defaultBranch=main "$@"; }
ws() { awk '$1=="workspace"{print $2}' "$MNT/$1/status"; }

# fill DIR: files, an executable, a private file, a symlink, an empty
# directory, a nested directory
fill() {
	mkdir -p "$1/sub/deeper" "$1/empty"
	printf 'one\ntwo\nthree\n' >"$1/a.txt"
	printf '#!/bin/sh\necho hi\n' >"$1/run.sh"
	chmod 755 "$1/run.sh"
	echo private >"$1/secret"
	chmod 600 "$1/secret"
	echo bee >"$1/sub/b.txt"
	echo deep >"$1/sub/deeper/d.txt"
	ln -s sub/b.txt "$1/link"
	chmod 700 "$1/empty"
}

# modes DIR: every path with its type and mode, sorted
modes() { (cd "$1" && find . -path ./.git -prune -o -printf '%p %y %m\n' | sort); }

# bats test_tags=core
@test "snapshot, change, restore: the tree is equal byte for byte, modes included" {
	mkdir "$MNT/s"
	W="$MNT/s/workspace"
	fill "$W"
	run ctl_write "$MNT/s/ctl" "snapshot first"
	[ "$status" -eq 0 ]
	[ "$output" = first ]
	host=$(ws s)
	cp -a "$host" "$BATS_TEST_TMPDIR/copy"
	keep_ino=$(stat -c %i "$host/sub/deeper/d.txt")
	keep_mtime=$(stat -c %Y.%y "$host/sub/deeper/d.txt")
	# change, delete, add (a symlink, an empty dir), chmod, replace kinds
	echo changed >>"$W/a.txt"
	rm "$W/sub/b.txt"
	echo new >"$W/new.txt"
	ln -s a.txt "$W/newlink"
	rm "$W/link"
	ln -s run.sh "$W/link"
	mkdir "$W/newempty"
	chmod 644 "$W/run.sh"
	chmod 640 "$W/secret"
	rmdir "$W/empty"
	echo file >"$W/empty"
	run ctl_write "$MNT/s/ctl" "restore first"
	[ "$status" -eq 0 ]
	[[ "$output" == "restored first: "*"processes were left alone"* ]]
	diff -r --no-dereference "$BATS_TEST_TMPDIR/copy" "$host"
	[ "$(modes "$BATS_TEST_TMPDIR/copy")" = "$(modes "$host")" ]
	[ "$(readlink "$host/link")" = sub/b.txt ]
	# an unchanged file was not written
	[ "$(stat -c %i "$host/sub/deeper/d.txt")" = "$keep_ino" ]
	[ "$(stat -c %Y.%y "$host/sub/deeper/d.txt")" = "$keep_mtime" ]
}

@test "caps snapshots is true for local and status says snapshots workspace" {
	mkdir "$MNT/s"
	grep -qx 'snapshots true' "$MNT/s/caps"
	grep -qx 'snapshots true' "$MNT/providers/local/caps"
	grep -qx 'snapshots workspace' "$MNT/s/status"
}

# bats test_tags=core
@test "snapshots/ID: info, a read-only tree/ served from the store" {
	mkdir "$MNT/s"
	W="$MNT/s/workspace"
	fill "$W"
	mkfifo "$W/fifo"
	id=$(ctl_write "$MNT/s/ctl" "snapshot")
	[ "$id" = snap-1 ]
	info="$MNT/s/snapshots/$id/info"
	grep -qx 'kind workspace' "$info"
	grep -qx 'label -' "$info"
	grep -qx 'files 6' "$info"
	grep -qx 'skipped 1' "$info" # the fifo
	grep -qE '^commit [0-9a-f]{40}$' "$info"
	grep -qE '^time [0-9-]+T[0-9:]+Z$' "$info"
	grep -qE '^bytes [0-9]+$' "$info"
	commit=$(awk '$1=="commit"{print $2}' "$info")
	[ "$(git --git-dir="$STATE/git/store" rev-parse "refs/sandboxfs/$(ls "$STATE/sandboxes")/$id")" = "$commit" ]
	T="$MNT/s/snapshots/$id/tree"
	# the workspace changes; the snapshot does not
	echo later >"$W/a.txt"
	rm -r "$W/sub"
	[ "$(cat "$T/a.txt")" = "$(printf 'one\ntwo\nthree')" ]
	[ "$(cat "$T/sub/deeper/d.txt")" = deep ]
	[ "$(readlink "$T/link")" = sub/b.txt ]
	[ "$(cat "$T/link")" = bee ]
	[ -d "$T/empty" ]
	[ -z "$(ls -A "$T/empty")" ]
	[ ! -e "$T/fifo" ]
	# the owner's read and execute bits only (the workspace's owners and
	# ACLs are not in a snapshot)
	[ "$(stat -c %a "$T/run.sh")" = 500 ]
	[ "$(stat -c %a "$T/secret")" = 400 ]
	[ "$(stat -c %a "$T/a.txt")" = 400 ]
	[ "$(stat -c %s "$T/a.txt")" = 14 ]
	[ "$(ls "$T" | tr '\n' ' ')" = "a.txt empty link run.sh secret sub " ]
	run bash -c "echo x >'$T/a.txt'"
	[ "$status" -ne 0 ]
	run touch "$T/newfile"
	[ "$status" -ne 0 ]
	# inode numbers are stable: the same path, the same number
	i1=$(stat -c %i "$T/sub/deeper/d.txt")
	i2=$(stat -c %i "$T/sub/deeper/d.txt")
	[ "$i1" = "$i2" ]
	[ "$(find "$T" -type f | wc -l)" -eq 5 ]
}

# bats test_tags=core
@test "snapshots/ID/diff is git's diff of the workspace against it, and git apply takes it" {
	mkdir "$MNT/s"
	W="$MNT/s/workspace"
	fill "$W"
	head -c 3000 /dev/urandom >"$W/blob.bin"
	ctl_write "$MNT/s/ctl" "snapshot before"
	cp -a "$(ws s)" "$BATS_TEST_TMPDIR/before"
	[ -z "$(cat "$MNT/s/snapshots/before/diff")" ]
	sed -i 's/two/TWO/' "$W/a.txt"
	rm "$W/sub/b.txt"
	echo added >"$W/sub/new.txt"
	chmod 755 "$W/a.txt"
	ln -s a.txt "$W/alink"
	cat "$MNT/s/snapshots/before/diff" >"$BATS_TEST_TMPDIR/patch"
	grep -q '^-two$' "$BATS_TEST_TMPDIR/patch"
	grep -q '^+TWO$' "$BATS_TEST_TMPDIR/patch"
	grep -q '^deleted file mode 100644$' "$BATS_TEST_TMPDIR/patch"
	grep -q '^old mode 100644$' "$BATS_TEST_TMPDIR/patch"
	grep -q '^new file mode 120000$' "$BATS_TEST_TMPDIR/patch"
	gitc init -q "$BATS_TEST_TMPDIR/before"
	git -C "$BATS_TEST_TMPDIR/before" apply --check "$BATS_TEST_TMPDIR/patch"
	git -C "$BATS_TEST_TMPDIR/before" apply "$BATS_TEST_TMPDIR/patch"
	rm -rf "$BATS_TEST_TMPDIR/before/.git"
	diff -r --no-dereference "$BATS_TEST_TMPDIR/before" "$(ws s)"
	[ "$(modes "$BATS_TEST_TMPDIR/before")" = "$(modes "$(ws s)")" ]
	# a binary file changed, a new one, and a text change beside them: the
	# binary parts are git binary patches, and git apply takes them all
	cp -a "$(ws s)" "$BATS_TEST_TMPDIR/before2"
	gitc init -q "$BATS_TEST_TMPDIR/before2"
	ctl_write "$MNT/s/ctl" "snapshot mid" >/dev/null
	head -c 3000 /dev/urandom >"$W/blob.bin"
	printf 'bin\0ary\1' >"$W/new.bin"
	echo more >>"$W/sub/new.txt"
	cat "$MNT/s/snapshots/mid/diff" >"$BATS_TEST_TMPDIR/patch2"
	run grep -c '^GIT binary patch$' "$BATS_TEST_TMPDIR/patch2"
	[ "$output" = 2 ]
	run grep -c '^Binary files' "$BATS_TEST_TMPDIR/patch2"
	[ "$output" = 0 ]
	git -C "$BATS_TEST_TMPDIR/before2" apply --check "$BATS_TEST_TMPDIR/patch2"
	git -C "$BATS_TEST_TMPDIR/before2" apply "$BATS_TEST_TMPDIR/patch2"
	rm -rf "$BATS_TEST_TMPDIR/before2/.git"
	diff -r --no-dereference "$BATS_TEST_TMPDIR/before2" "$(ws s)"
	cmp "$BATS_TEST_TMPDIR/before2/blob.bin" "$W/blob.bin"
}

# bats test_tags=tsan
@test "diffs of a 2500-file workspace read at once, beside snapshots and a deletion, each whole and right (no TSan report)" {
	export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}log_path=$BATS_TEST_TMPDIR/tsan:halt_on_error=0"
	sfs_unmount
	sfs_mount
	mkdir "$MNT/s"
	W=$(ws s)
	local d f r i pids=()
	# big enough for the threaded walk (fs/snapshots/compare.c)
	for d in $(seq -w 0 99); do
		mkdir "$W/d$d"
		for f in $(seq -w 0 24); do echo "$d $f" >"$W/d$d/f$f"; done
	done
	ctl_write "$MNT/s/ctl" "snapshot base" >/dev/null
	echo changed >>"$W/d00/f00"
	echo changed >>"$W/d99/f24"
	rm "$W/d50/f12"
	echo new >"$W/d42/new"
	for r in 1 2 3 4; do
		(for i in 1 2 3 4 5; do cat "$MNT/s/snapshots/base/diff" >"$BATS_TEST_TMPDIR/diff.$r.$i"; done) &
		pids+=($!)
	done
	(for i in 1 2 3; do
		ctl_write "$MNT/s/ctl" "snapshot tmp$i" >/dev/null
		rmdir "$MNT/s/snapshots/tmp$i"
	done) &
	pids+=($!)
	for r in "${pids[@]}"; do wait "$r"; done
	for f in "$BATS_TEST_TMPDIR"/diff.*; do
		[ "$(grep -c '^diff --git ' "$f")" -eq 4 ]
		grep -q '^+++ b/d00/f00$' "$f"
		grep -q '^+++ b/d99/f24$' "$f"
		grep -q '^deleted file mode 100644$' "$f"
		grep -q '^+++ b/d42/new$' "$f"
	done
	[ "$(ls "$BATS_TEST_TMPDIR"/diff.* | wc -l)" -eq 20 ]
	sfs_unmount
	no_tsan_reports
}

@test "restore leaves running processes alone and says so; a second snapshot costs little" {
	mkdir "$MNT/s"
	W="$MNT/s/workspace"
	fill "$W"
	ctl_write "$MNT/s/ctl" "snapshot a"
	n=$(ctl_write "$MNT/s/ctl" "exec sleep 30")
	echo more >"$W/a.txt"
	run ctl_write "$MNT/s/ctl" "restore a"
	[ "$status" -eq 0 ]
	[[ "$output" == *"processes were left alone (1 runs still running)"* ]]
	[ "$(cat "$MNT/s/runs/$n/status")" = running ]
	ctl_write "$MNT/s/runs/$n/ctl" kill
	[ "$(cat "$W/a.txt")" = "$(printf 'one\ntwo\nthree')" ]
	# one changed 4 KiB file: the store grows by far less than 64 KiB
	head -c 4096 /dev/urandom | base64 >"$W/sub/deeper/d.txt"
	ctl_write "$MNT/s/ctl" "snapshot b"
	before=$(du -sk "$STATE/git/store" | cut -f1)
	head -c 4096 /dev/urandom | base64 >"$W/sub/deeper/d.txt"
	ctl_write "$MNT/s/ctl" "snapshot c"
	after=$(du -sk "$STATE/git/store" | cut -f1)
	[ $((after - before)) -lt 64 ]
}

@test "fork NEW from=ID makes a sandbox with the snapshot's tree" {
	mkdir "$MNT/s"
	W="$MNT/s/workspace"
	fill "$W"
	ctl_write "$MNT/s/ctl" "snapshot a"
	cp -a "$(ws s)" "$BATS_TEST_TMPDIR/at-a"
	echo after >"$W/a.txt"
	rm -r "$W/sub"
	run ctl_write "$MNT/s/ctl" "fork f from=a"
	[ "$status" -eq 0 ]
	[ "$output" = f ]
	diff -r --no-dereference "$BATS_TEST_TMPDIR/at-a" "$(ws f)"
	[ "$(modes "$BATS_TEST_TMPDIR/at-a")" = "$(modes "$(ws f)")" ]
	# the source is as it was
	[ "$(cat "$W/a.txt")" = after ]
	run ctl_write "$MNT/s/ctl" "fork g from=nosuch"
	[ "$status" -ne 0 ]
	[ ! -e "$MNT/g" ]
}

@test "rmdir snapshots/ID drops it and its ref; bad snapshot commands change nothing" {
	mkdir "$MNT/s"
	echo x >"$MNT/s/workspace/x"
	ctl_write "$MNT/s/ctl" "snapshot a"
	run ctl_write "$MNT/s/ctl" "snapshot a"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: snapshot: snapshots/a exists already"* ]]
	run ctl_write "$MNT/s/ctl" "snapshot bad/label"
	[ "$status" -ne 0 ]
	run ctl_write "$MNT/s/ctl" "snapshot kind=bogus"
	[ "$status" -ne 0 ]
	[[ "$output" == *"kind=bogus"* ]]
	run ctl_write "$MNT/s/ctl" "snapshot kind=native"
	[ "$status" -ne 0 ]
	[[ "$output" == *"not supported"* || "$output" == *"does not support"* ]]
	run ctl_write "$MNT/s/ctl" "restore nosuch"
	[ "$status" -ne 0 ]
	[ "$(ls "$MNT/s/snapshots")" = a ]
	rmdir "$MNT/s/snapshots/a"
	[ -z "$(ls "$MNT/s/snapshots")" ]
	[ -z "$(git --git-dir="$STATE/git/store" for-each-ref refs/sandboxfs)" ]
	run ctl_write "$MNT/s/ctl" "restore a"
	[ "$status" -ne 0 ]
}

@test "snapshots survive a remount; rmdir or forget of the sandbox drops its refs" {
	mkdir "$MNT/s"
	echo x >"$MNT/s/workspace/x"
	ctl_write "$MNT/s/ctl" "snapshot a"
	sfs_unmount
	sfs_mount
	grep -qx 'kind workspace' "$MNT/s/snapshots/a/info"
	[ "$(cat "$MNT/s/snapshots/a/tree/x")" = x ]
	echo y >"$MNT/s/workspace/x"
	ctl_write "$MNT/s/ctl" "restore a"
	[ "$(cat "$MNT/s/workspace/x")" = x ]
	rmdir "$MNT/s"
	[ -z "$(git --git-dir="$STATE/git/store" for-each-ref refs/sandboxfs)" ]
	# forget drops the list with the registry entry, and the refs with it
	mkdir "$MNT/t"
	echo x >"$MNT/t/workspace/x"
	ctl_write "$MNT/t/ctl" "snapshot a"
	[ -n "$(git --git-dir="$STATE/git/store" for-each-ref refs/sandboxfs)" ]
	echo "forget t" >"$MNT/ctl"
	[ -z "$(git --git-dir="$STATE/git/store" for-each-ref refs/sandboxfs)" ]
}

# objects_size: bytes under the store's objects directory
objects_size() { du -sb "$STATE/git/store/objects" | cut -f1; }

@test "deleting snapshots frees the objects only they held; other snapshots still restore byte for byte" {
	store="$STATE/git/store"
	mkdir "$MNT/keep"
	fill "$MNT/keep/workspace"
	head -c 300000 /dev/urandom >"$MNT/keep/workspace/kept.bin"
	mkdir "$MNT/big"
	head -c 8000000 /dev/urandom >"$MNT/big/workspace/big.bin"
	cp "$MNT/keep/workspace/kept.bin" "$MNT/big/workspace/shared.bin"
	sleep 1.1 # older than the snapshots' second: their stat caches vouch for the files
	ctl_write "$MNT/keep/ctl" "snapshot k"
	cp -a "$(ws keep)" "$BATS_TEST_TMPDIR/want"
	size0=$(objects_size)
	ctl_write "$MNT/big/ctl" "snapshot one"
	ctl_write "$MNT/big/ctl" "snapshot two"
	[ "$(objects_size)" -gt $((size0 + 7000000)) ]
	# one snapshot gone: the other still holds the file
	rmdir "$MNT/big/snapshots/one"
	[ "$(objects_size)" -gt $((size0 + 7000000)) ]
	cmp "$MNT/big/snapshots/two/tree/big.bin" "$MNT/big/workspace/big.bin"
	# the last one gone: its objects go, though the sandbox lives (its stat
	# cache vouched for them: dropped, so the next snapshot reads the file)
	[ "$(find "$STATE/sandboxes" -name snapshots.statcache | wc -l)" -eq 2 ]
	rmdir "$MNT/big/snapshots/two"
	[ "$(objects_size)" -lt $((size0 + 100000)) ]
	[ "$(find "$STATE/sandboxes" -name snapshots.statcache | wc -l)" -eq 1 ]
	ctl_write "$MNT/big/ctl" "snapshot three"
	cmp "$MNT/big/snapshots/three/tree/big.bin" "$MNT/big/workspace/big.bin"
	git --git-dir="$store" fsck --no-dangling --no-progress
	# the sandbox gone: the store is back to what it was
	rmdir "$MNT/big"
	[ "$(objects_size)" -lt $((size0 + 100000)) ]
	# every object a ref reaches is there, and keep's snapshot restores whole
	git --git-dir="$store" fsck --no-dangling --no-progress
	[ "$(git --git-dir="$store" count-objects | cut -d' ' -f1)" -gt 0 ]
	cmp "$MNT/keep/snapshots/k/tree/kept.bin" "$BATS_TEST_TMPDIR/want/kept.bin"
	find "$MNT/keep/workspace" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
	echo junk >"$MNT/keep/workspace/junk"
	ctl_write "$MNT/keep/ctl" "restore k" >/dev/null
	diff -r --no-dereference "$BATS_TEST_TMPDIR/want" "$(ws keep)"
	[ "$(modes "$BATS_TEST_TMPDIR/want")" = "$(modes "$(ws keep)")" ]
}

@test "source= gives snapshot base (its diff applies to the source), setup= gives snapshot setup" {
	R="$BATS_TEST_TMPDIR/repo"
	gitc init -q "$R"
	printf 'l1\nl2\nl3\n' >"$R/a.txt"
	mkdir "$R/d"
	echo dd >"$R/d/d.txt"
	gitc -C "$R" add -A
	gitc -C "$R" commit -qm one
	run ctl_write "$MNT/ctl" "new s source=$R setup='echo built >out.txt'"
	[ "$status" -eq 0 ]
	[ "$(ls "$MNT/s/snapshots" | tr '\n' ' ')" = "base setup " ]
	grep -qx 'label base' "$MNT/s/snapshots/base/info"
	[ ! -e "$MNT/s/snapshots/base/tree/out.txt" ]
	[ ! -e "$MNT/s/snapshots/base/tree/.git" ]
	[ "$(cat "$MNT/s/snapshots/setup/tree/out.txt")" = built ]
	W="$MNT/s/workspace"
	sed -i 's/l2/L2/' "$W/a.txt"
	rm -r "$W/d" # (git has no empty directories: a diff cannot say "d/ stays")
	echo n >"$W/n.txt"
	cat "$MNT/s/snapshots/base/diff" >"$BATS_TEST_TMPDIR/patch"
	grep -q '^+built$' "$BATS_TEST_TMPDIR/patch"
	gitc clone -q "$R" "$BATS_TEST_TMPDIR/clone"
	git -C "$BATS_TEST_TMPDIR/clone" apply "$BATS_TEST_TMPDIR/patch"
	diff -r --exclude=.git "$BATS_TEST_TMPDIR/clone" "$(ws s)"
	# and git itself agrees on what changed since base
	[ "$(git -C "$(ws s)" status --porcelain | wc -l)" -eq 4 ]
}

@test "docker: snapshot kind=workspace records, diffs and restores the container's files" {
	docker_require
	run dk_new d
	[ "$status" -eq 0 ]
	grep -qx 'snapshots native' "$MNT/d/status"
	W="$MNT/d/workspace"
	echo one >"$W/a.txt"
	mkdir "$W/e"
	run dk_ctl "$MNT/d/ctl" "snapshot w kind=workspace"
	[ "$status" -eq 0 ]
	[ "$output" = w ]
	grep -qx 'kind workspace' "$MNT/d/snapshots/w/info"
	[ "$(cat "$MNT/d/snapshots/w/tree/a.txt")" = one ]
	echo two >"$W/a.txt"
	echo n >"$W/n.txt"
	grep -qx '+two' "$MNT/d/snapshots/w/diff"
	run dk_ctl "$MNT/d/ctl" "restore w"
	[ "$status" -eq 0 ]
	[[ "$output" == "restored w: "* ]]
	[ "$(cat "$W/a.txt")" = one ]
	[ ! -e "$W/n.txt" ]
	[ -d "$W/e" ]
	# the container sees it: the same files, not a copy
	[ "$(docker exec "$(dk_id d)" cat /workspace/a.txt)" = one ]
	run docker exec "$(dk_id d)" test -e /workspace/n.txt
	[ "$status" -ne 0 ]
	# fork from= a workspace snapshot: the fork's workspace is the snapshot's
	echo three >"$W/a.txt"
	run dk_ctl "$MNT/d/ctl" "fork e from=w"
	[ "$status" -eq 0 ]
	[ "$(cat "$MNT/e/workspace/a.txt")" = one ]
	[ "$(docker exec "$(dk_id e)" cat /workspace/a.txt)" = one ]
	[ "$(cat "$W/a.txt")" = three ]
}

# bats test_tags=core
@test "a sparse file above snapshot.max_file_size fails snapshot and diff with EFBIG naming it, unread" {
	mkdir "$MNT/s"
	echo small >"$MNT/s/workspace/a"
	run ctl_write "$MNT/s/ctl" "snapshot before"
	[ "$status" -eq 0 ]
	# a run's 100 GiB hole: the default cap refuses it before reading
	truncate -s 100G "$MNT/s/workspace/big"
	export -f ctl_write
	run timeout 20 bash -c 'ctl_write "$1" "snapshot after"' _ "$MNT/s/ctl"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: snapshot: big is 107374182400 bytes, above snapshot.max_file_size"* ]]
	[ "$(ls "$MNT/s/snapshots")" = before ]
	run timeout 20 cat "$MNT/s/snapshots/before/diff"
	[ "$status" -ne 0 ]
	[[ "$output" == *"File too large"* ]]
	rm "$MNT/s/workspace/big"
	run ctl_write "$MNT/s/ctl" "snapshot after"
	[ "$status" -eq 0 ]
}

@test "snapshot.max_file_size is the mount's: a file just above it is refused, one at it is taken" {
	sfs_teardown
	sfs_mount -o snapshot.max_file_size=4096
	mkdir "$MNT/s"
	head -c 4096 /dev/zero >"$MNT/s/workspace/at"
	run ctl_write "$MNT/s/ctl" "snapshot ok"
	[ "$status" -eq 0 ]
	head -c 4097 /dev/zero >"$MNT/s/workspace/above"
	run ctl_write "$MNT/s/ctl" "snapshot no"
	[ "$status" -ne 0 ]
	[[ "$output" == *"above is 4097 bytes, above snapshot.max_file_size (4096)"* ]]
}
