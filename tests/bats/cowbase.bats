#!/usr/bin/env bats
# bats file_tags=cowbase
# new … base=HOSTDIR hide=… (SPEC §9): copy-on-write workspaces over a host
# directory that nothing in the sandbox can change, on local (overlayfs, and
# the copy fallback forced with -o cow.mode=copy) and docker; hide patterns;
# snapshots/base/diff from the upper layer, replayed with git apply.

load helpers
load docker_helpers

setup() {
	BASE="$BATS_TEST_TMPDIR/base"
	make_base "$BASE"
}

teardown() {
	# rmdir while the daemon lives: runs, holders and overlays go its way
	local d
	if [ -n "${MNT:-}" ] && mountpoint -q "$MNT" 2>/dev/null; then
		for d in "$MNT"/*/; do
			[ -e "$d/status" ] && rmdir "$d" 2>/dev/null
		done
	fi
	sfs_teardown
	docker_cleanup
	if [ -n "${STATE_OVERLAY:-}" ]; then umount -l "$STATE_OVERLAY" 2>/dev/null || true; fi
}

# make_base DIR: a small project with files to hide.
make_base() {
	mkdir -p "$1/src/deep" "$1/secrets/inner" "$1/docs" "$1/gone"
	printf 'line 1\nline 2\nline 3\n' >"$1/src/main.c"
	printf 'deep\n' >"$1/src/deep/x.txt"
	printf 'tool\n' >"$1/tool.sh"
	chmod 755 "$1/tool.sh"
	printf 'KEY=hunter2\n' >"$1/.env"
	printf 'PEM\n' >"$1/docs/server.pem"
	printf 'PEM\n' >"$1/top.pem"
	printf 'shh\n' >"$1/secrets/inner/token"
	printf 'trunc me please\n' >"$1/big.txt"
	printf 'bye\n' >"$1/gone/a"
	printf 'bye\n' >"$1/gone/b"
	ln -s src/main.c "$1/link"
}

# fingerprint DIR: names, types, modes, sizes, times and contents.
fingerprint() {
	(cd "$1" && find . -printf '%p %y %m %s %T@ %l\n' | sort && find . -type f -exec md5sum {} + | sort)
}

# cow_new NAME [OPTIONS...]: a local base sandbox of $BASE; prints ctl's answer.
cow_new() {
	local name=$1
	shift
	ctl_write "$MNT/ctl" "new $name base=$BASE $*"
}

# run_wait NAME CMD: runs CMD in the sandbox (local or docker) and waits;
# prints its journal.
run_wait() {
	local n
	n=$(dk_ctl "$MNT/$1/ctl" "exec $2")
	[ "$(cat "$MNT/$1/runs/$n/wait")" = "exited 0" ] || {
		cat "$MNT/$1/runs/$n/journal" >&2
		return 1
	}
	cat "$MNT/$1/runs/$n/journal"
}

ws_dir() { awk '$1=="workspace"{print $2}' "$MNT/$1/status"; }

# changes_everything NAME: every kind of change, from a run and through workspace/.
changes_everything() {
	run_wait "$1" 'echo more >>src/main.c; rm src/deep/x.txt; mv tool.sh tool2.sh; chmod 600 big.txt; truncate -s 4 big.txt; mkdir newdir; echo n >newdir/n.txt; rm -r gone; ln -sf tool2.sh link; touch -d 2001-01-01 src/main.c'
	local w="$MNT/$1/workspace"
	echo via-mount >"$w/mounted.txt"
	echo edit >>"$w/src/main.c"
	rm "$w/top.pem" 2>/dev/null || true
	mv "$w/docs" "$w/docs2"
	chmod 700 "$w/src"
	truncate -s 0 "$w/tool2.sh"
}

check_untouched() {
	local before=$1
	diff <(echo "$before") <(fingerprint "$BASE")
}

# base_roundtrip overlay|copy: every change, the base as it was, rmdir.
base_roundtrip() {
	local before
	before=$(fingerprint "$BASE")
	cow_new w
	grep -q "\"mode\": \"$1\"" "$STATE"/sandboxes/*/cow/base.json
	grep -qx "base $(realpath "$BASE")" "$MNT/w/status"
	grep -qx "cow $1" "$MNT/w/status"
	if [ "$1" = overlay ]; then
		[ "$(stat -f -c %T "$(ws_dir w)")" = overlayfs ]
	else
		[ "$(stat -f -c %T "$(ws_dir w)")" != overlayfs ]
	fi
	changes_everything w
	check_untouched "$before"
	# what the sandbox sees: the changes
	[ "$(cat "$MNT/w/workspace/newdir/n.txt")" = n ]
	[ ! -e "$MNT/w/workspace/src/deep/x.txt" ]
	[ ! -e "$MNT/w/workspace/gone" ]
	[ "$(stat -c %s "$MNT/w/workspace/big.txt")" = 4 ]
	[ "$(run_wait w 'cat mounted.txt')" = via-mount ]
	[ "$(run_wait w 'stat -c %a big.txt')" = 600 ]
	# the base as it was
	[ -e "$BASE/src/deep/x.txt" ] && [ -e "$BASE/tool.sh" ] && [ -d "$BASE/gone" ]
	# rmdir: the upper layer goes, the base stays
	local key
	key=$(ls "$STATE/sandboxes")
	rmdir "$MNT/w"
	wait_for test ! -e "$STATE/sandboxes/$key/cow"
	check_untouched "$before"
	run awk -v s="$STATE/" 'index($5, s) == 1' /proc/self/mountinfo
	[ -z "$output" ]
}

@test "cowbase: local base= over overlayfs: runs and workspace/ change the view, never the base; rmdir leaves it" {
	sfs_mount
	base_roundtrip overlay
}

@test "cowbase: local base= with -o cow.mode=copy (the fallback): the same, and the base is never written" {
	sfs_mount -o cow.mode=copy
	base_roundtrip copy
}

@test "cowbase: when overlayfs cannot be mounted (upper on an overlayfs state dir), new falls back to the copy" {
	[ "$(id -u)" = 0 ] || skip "needs root to mount the state dir's overlay"
	local o=$BATS_TEST_TMPDIR/ovl
	mkdir -p "$o/l" "$o/u" "$o/w" "$o/state"
	mount -t overlay overlay -o "lowerdir=$o/l,upperdir=$o/u,workdir=$o/w" "$o/state"
	STATE_OVERLAY=$o/state
	STATE=$o/state
	sfs_mount
	local before
	before=$(fingerprint "$BASE")
	cow_new w 'hide=.env'
	grep -qx "cow copy" "$MNT/w/status"
	grep -q "copying the base instead" "$BATS_TEST_TMPDIR/daemon.log"
	[ ! -e "$MNT/w/workspace/.env" ]
	run_wait w 'echo x >>src/main.c; rm tool.sh'
	grep -q '^+x$' "$MNT/w/snapshots/base/diff"
	check_untouched "$before"
	rmdir "$MNT/w"
	sfs_unmount
	umount "$o/state"
}

@test "cowbase: base= with isolation=bwrap: the run sees the view at /workspace, hidden files absent, writes in the upper layer" {
	command -v bwrap >/dev/null || sfs_need "bubblewrap is not installed (.ci/setup installs it)"
	chmod 777 "$BASE" # the sandbox uid (65534) may then create files at the root
	sfs_mount
	local before
	before=$(fingerprint "$BASE")
	cow_new b 'hide=.env,secrets/' isolation=bwrap
	[ "$(run_wait b pwd)" = /workspace ]
	run_wait b 'test ! -e .env && test ! -e secrets && cat src/main.c >/dev/null && echo made >made.txt'
	[ "$(cat "$MNT/b/workspace/made.txt")" = made ]
	[ -f "$STATE"/sandboxes/*/cow/upper/made.txt ]
	check_untouched "$before"
}

@test "cowbase: the workspace is an overlay mount with its upper layer in the state dir" {
	sfs_mount
	cow_new w
	local ws
	ws=$(ws_dir w)
	[[ $ws == "$STATE"/sandboxes/*/cow/merged ]]
	[ "$(stat -f -c %T "$ws")" = overlayfs ]
	run_wait w 'echo x >new.txt'
	[ -f "$(dirname "$ws")/upper/new.txt" ]
	[ ! -e "$BASE/new.txt" ]
	[ "$(run_wait w pwd)" = "$ws" ]
}

@test "cowbase: hide= patterns are absent in runs and through workspace/, the base keeps them" {
	sfs_mount
	cow_new h 'hide=.env,*.pem,secrets/'
	local w="$MNT/h/workspace"
	[ ! -e "$w/.env" ] && [ ! -e "$w/top.pem" ] && [ ! -e "$w/docs/server.pem" ] && [ ! -e "$w/secrets" ]
	[ -e "$w/src/main.c" ] && [ -e "$w/docs" ]
	run ls -A "$w"
	[[ $output != *.env* && $output != *secrets* && $output != *top.pem* ]]
	run_wait h 'test ! -e .env && test ! -e docs/server.pem && test ! -e secrets && ! ls -A | grep -q pem'
	run ctl_write "$MNT/h/ctl" "exec cat .env"
	n=$output
	[ "$(cat "$MNT/h/runs/$n/wait")" != "exited 0" ]
	# a directory made where a hidden one was shows nothing of the base's
	run_wait h 'mkdir secrets && ls -A secrets | wc -l' | grep -qx 0
	[ -f "$BASE/.env" ] && [ -f "$BASE/secrets/inner/token" ]
}

@test "cowbase: hide= matches case exactly unless hide.case=insensitive" {
	printf 'KEY=upper\n' >"$BASE/.ENV"
	printf 'PEM\n' >"$BASE/docs/Other.PEM"
	sfs_mount
	cow_new cs 'hide=.env,*.pem'
	[ -e "$MNT/cs/workspace/.ENV" ]
	[ -e "$MNT/cs/workspace/docs/Other.PEM" ]
	[ ! -e "$MNT/cs/workspace/.env" ]
	cow_new ci 'hide=.env,*.pem' hide.case=insensitive
	local w="$MNT/ci/workspace"
	[ ! -e "$w/.ENV" ]
	[ ! -e "$w/.env" ]
	[ ! -e "$w/docs/Other.PEM" ]
	[ ! -e "$w/top.pem" ]
	[ -e "$w/src/main.c" ]
	run_wait ci 'test ! -e .ENV && test ! -e docs/Other.PEM && echo hidden' | grep -qx hidden
	grep -q '"hide_case": "insensitive"' "$STATE"/sandboxes/*/cow/base.json
	[ -f "$BASE/.ENV" ]
	[ -f "$BASE/docs/Other.PEM" ]
}

@test "cowbase: hide=.git hides a repository's history too; without it git show HEAD:.env reads a hidden file" {
	git -C "$BASE" init -q
	git -C "$BASE" add -A
	git -C "$BASE" -c user.email=t@example.com -c user.name=t commit -qm base
	sfs_mount
	cow_new leaky 'hide=.env'
	[ ! -e "$MNT/leaky/workspace/.env" ]
	run_wait leaky 'git show HEAD:.env' | grep -qx KEY=hunter2
	cow_new tight 'hide=.git,.env'
	[ ! -e "$MNT/tight/workspace/.git" ]
	[ ! -e "$MNT/tight/workspace/.env" ]
	run ctl_write "$MNT/tight/ctl" 'exec git show HEAD:.env'
	n=$output
	[ "$(cat "$MNT/tight/runs/$n/wait")" != "exited 0" ]
	run grep -c hunter2 "$MNT/tight/runs/$n/journal"
	[ "$output" = 0 ]
	[ -d "$BASE/.git" ]
	[ -f "$BASE/.env" ]
}

@test "cowbase: hide= with -o cow.mode=copy leaves hidden files out of the copy" {
	sfs_mount -o cow.mode=copy
	cow_new h 'hide=.env,/docs,**/inner'
	local w="$MNT/h/workspace"
	[ ! -e "$w/.env" ] && [ ! -e "$w/docs" ] && [ ! -e "$w/secrets/inner" ] && [ -d "$w/secrets" ]
	[ -e "$w/top.pem" ]
	run grep -rl hunter2 "$STATE/sandboxes"
	[ -z "$output" ]
}

@test "cowbase: a daemon restart brings the sandbox back with its changes (mounted, or mounted again)" {
	sfs_mount
	cow_new r 'hide=.env'
	run_wait r 'echo kept >kept.txt; rm src/main.c'
	local ws
	ws=$(ws_dir r)
	# killed: the overlay stays mounted and is taken over
	kill -9 "$SFS_PID"
	wait_for dk_gone_pid "$SFS_PID"
	umount -l "$MNT" 2>/dev/null || true
	sfs_mount
	[ "$(cat "$MNT/r/workspace/kept.txt")" = kept ]
	[ ! -e "$MNT/r/workspace/src/main.c" ]
	# as after a reboot: nothing mounted; the next daemon mounts it again
	sfs_unmount
	umount "$ws"
	[ "$(stat -f -c %T "$ws")" != overlayfs ]
	sfs_mount
	[ "$(stat -f -c %T "$ws")" = overlayfs ]
	[ "$(run_wait r 'cat kept.txt')" = kept ]
	[ ! -e "$MNT/r/workspace/.env" ]
	[ ! -e "$MNT/r/workspace/src/main.c" ]
	[ -f "$BASE/src/main.c" ]
}

@test "cowbase: bad base= and hide= fail new with a clear error and leave nothing" {
	sfs_mount
	echo f >"$BATS_TEST_TMPDIR/file"
	local line
	while IFS='|' read -r line want; do
		run ctl_write "$MNT/ctl" "new bad $line"
		[ "$status" -ne 0 ]
		[[ $output == *"error: "*"$want"* ]] || { echo "$line -> $output" >&2; false; }
		[ ! -e "$MNT/bad" ]
		[ -z "$(ls -A "$STATE/sandboxes" 2>/dev/null)" ]
	done <<EOF2
base=$BATS_TEST_TMPDIR/file|is not a directory
base=$BATS_TEST_TMPDIR/nothing-here|No such file or directory
base=relative/dir|expected an absolute path
base=$MNT|inside the sandboxfs mount
base=$STATE|inside the state directory
base=$BATS_TEST_TMPDIR|contains the state directory
base=$BASE hide=!keep|negation
base=$BASE hide=a,,b|an empty pattern
base=$BASE dir=$BASE|exclude each other
base=$BASE source=$BASE|source= and base= exclude each other
hide=.env|hide= needs base=
hide.case=insensitive|hide.case= needs base=
base=$BASE hide=.env hide.case=maybe|hide.case=maybe: sensitive or insensitive
EOF2
	run awk -v s="$STATE/" 'index($5, s) == 1' /proc/self/mountinfo
	[ -z "$output" ]
}

@test "cowbase: docker base= binds the merged view at the workdir; hide= holds inside and through workspace/; the base is never changed" {
	docker_setup
	local before
	before=$(fingerprint "$BASE")
	dk_new d "base=$BASE" 'hide=.env,*.pem,secrets/'
	[ "$(run_wait d 'pwd')" = /workspace ]
	[ "$(run_wait d 'cat src/main.c | wc -l')" = 3 ]
	run_wait d 'test ! -e .env && test ! -e top.pem && test ! -e docs/server.pem && test ! -e secrets'
	run_wait d 'echo more >>src/main.c; rm src/deep/x.txt; mv tool.sh t2.sh; chmod 600 big.txt; truncate -s 2 big.txt; rm -r gone; echo new >new.txt'
	local w="$MNT/d/workspace"
	[ "$(cat "$w/new.txt")" = new ]
	[ "$(tail -1 "$w/src/main.c")" = more ]
	[ ! -e "$w/.env" ] && [ ! -e "$w/secrets" ] && [ ! -e "$w/docs/server.pem" ]
	echo from-host >"$w/host.txt"
	rm "$w/link"
	[ "$(run_wait d 'cat host.txt; test ! -e link && echo nolink')" = "$(printf 'from-host\nnolink')" ]
	check_untouched "$before"
	# a restart keeps the view: the container still binds it
	dk_restart_daemon
	[ "$(run_wait d 'cat new.txt')" = new ]
	local cid key
	cid=$(dk_id d)
	key=$(ls "$STATE/sandboxes")
	rmdir "$MNT/d"
	wait_for test ! -e "$STATE/sandboxes/$key/cow"
	run docker inspect "$cid"
	[ "$status" -ne 0 ]
	check_untouched "$before"
	run awk -v s="$STATE/" 'index($5, s) == 1' /proc/self/mountinfo
	[ -z "$output" ]
}

@test "cowbase: docker base= refuses a bad base and leaves no container; snapshot and fork say why they are refused" {
	docker_setup
	run dk_new bad base=relative
	[ "$status" -ne 0 ]
	[[ $output == *"error: "*"expected an absolute path"* ]]
	[ ! -e "$MNT/bad" ]
	[ -z "$(docker ps -aq --filter "label=sandboxfs.state=$STATE")" ]
	dk_new d "base=$BASE"
	run dk_ctl "$MNT/d/ctl" snapshot
	[ "$status" -ne 0 ]
	[[ $output == *"snapshot of a base= sandbox is not supported"* ]]
	run dk_ctl "$MNT/d/ctl" fork e
	[ "$status" -ne 0 ]
	[[ $output == *"fork of a base= sandbox is not supported"* ]]
}

@test "cowbase: forget keeps a base sandbox's layer for resume; fork copies the view into a plain sandbox" {
	sfs_mount
	cow_new f 'hide=.env'
	run_wait f 'echo kept >kept.txt; rm tool.sh'
	local id
	id=$(awk '$1=="id"{print $2}' "$MNT/f/status")
	ctl_write "$MNT/f/ctl" "fork g"
	[ "$(cat "$MNT/g/workspace/kept.txt")" = kept ]
	[ ! -e "$MNT/g/workspace/tool.sh" ] && [ ! -e "$MNT/g/workspace/.env" ]
	[[ $(ws_dir g) != */cow/merged ]]
	echo "forget f" >"$MNT/ctl"
	[ ! -e "$MNT/f" ]
	[ "$(stat -f -c %T "$id")" = overlayfs ]
	echo "resume f provider=local id=$id" >"$MNT/ctl"
	[ "$(run_wait f 'cat kept.txt')" = kept ]
	[ ! -e "$MNT/f/workspace/tool.sh" ] && [ -e "$BASE/tool.sh" ]
	rmdir "$MNT/f"
	run awk -v s="$STATE/" 'index($5, s) == 1' /proc/self/mountinfo
	[ -z "$output" ]
}

# tree_sig DIR: what git can carry of a tree: each file and symlink with its
# exec bit and content (empty directories and other mode bits are not git's)
tree_sig() {
	(cd "$1" && find . -path ./.git -prune -o \( -type f -o -type l \) -print | LC_ALL=C sort |
		while read -r f; do
			if [ -L "$f" ]; then
				echo "$f link $(readlink "$f")"
			else
				echo "$f $([ -x "$f" ] && echo x || echo -) $(md5sum <"$f" | cut -c1-32)"
			fi
		done)
}

# apply_check NAME: snapshots/base/diff of NAME, applied with git apply to a
# copy of the base without its hidden files, gives NAME's workspace.
apply_check() {
	local patch=$BATS_TEST_TMPDIR/$1.patch copy=$BATS_TEST_TMPDIR/$1.copy
	cat "$MNT/$1/snapshots/base/diff" >"$patch"
	grep -q '^diff --git a/src/main.c b/src/main.c$' "$patch"
	grep -q '^+++ /dev/null$' "$patch"
	grep -q '^--- /dev/null$' "$patch"
	run grep -E 'hunter2|PEM|shh|\.env|\.pem|secrets/' "$patch"
	[ "$status" -eq 1 ]
	rm -rf "$copy"
	cp -a "$BASE" "$copy"
	rm -rf "$copy/.env" "$copy/top.pem" "$copy/docs/server.pem" "$copy/secrets"
	git -C "$copy" init -q
	git -C "$copy" apply --whitespace=nowarn "$patch"
	# what the sandbox made at a hidden path stays out of the diff
	diff <(tree_sig "$copy") <(tree_sig "$MNT/$1/workspace" | grep -vE '^\./(.*/)?(\.env|[^/]*\.pem|secrets/.*) ')
}

diff_roundtrip() {
	cow_new w 'hide=.env,*.pem,secrets/'
	[ -d "$MNT/w/snapshots/base" ]
	# nothing changed: an empty diff
	[ -z "$(cat "$MNT/w/snapshots/base/diff")" ]
	changes_everything w
	run_wait w 'printf x >noeol.txt; printf "keep me\n" >>"src/deep/new file.txt"; echo leak >x.pem; : >empty.txt'
	apply_check w
	[ -f "$MNT/w/workspace/x.pem" ]
	# a binary file comes as a git binary patch, which git apply replays too
	printf 'bin\0ary' >"$MNT/w/workspace/bin.dat"
	grep -qx 'GIT binary patch' "$MNT/w/snapshots/base/diff"
	apply_check w
	cmp "$MNT/w/workspace/bin.dat" <(printf 'bin\0ary')
}

@test "cowbase: snapshots/base/diff comes from the upper layer and git apply replays it on a copy of the base (overlayfs)" {
	sfs_mount
	diff_roundtrip
}

@test "cowbase: snapshots/base/diff with -o cow.mode=copy, replayed the same way" {
	sfs_mount -o cow.mode=copy
	diff_roundtrip
}

@test "cowbase: docker base= has snapshots/base/diff, replayed by git apply" {
	docker_setup
	dk_new d "base=$BASE" 'hide=.env,*.pem,secrets/'
	run_wait d 'echo more >>src/main.c; rm src/deep/x.txt; mv tool.sh t2.sh; rm -r gone; echo new >new.txt; chmod +x big.txt'
	apply_check d
}
