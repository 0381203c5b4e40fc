#!/usr/bin/env bats
# Remote workspaces walked cold (issue 15): directories listed once for
# many lookups, small files fetched in bulk beside the one opened, and a
# prefetched copy never served once a run or the mount changed the file;
# and another user's write (FUSE_HANDLE_KILLPRIV_V2, fs/kernel_io.c)
# clearing set-user-ID on a remote file as the host would.
# Against the daytona emulator (its bulk-download route); no time asserted.

load helpers
load daytona_helpers

setup() {
	# "(TTL 60 s)" in a test's name: caches that outlive a slow step on a
	# loaded machine, so its call counts do not depend on timing
	case "$BATS_TEST_DESCRIPTION" in
	*"(TTL 60 s)"*) dt_setup -o remote.attr_timeout=60 ;;
	*"(allow_other)"*)
		# a mount point other users can reach (the bats tmpdir is private)
		AO_DIR=$(mktemp -d /tmp/sfs-rb-ao.XXXXXX)
		chmod 755 "$AO_DIR"
		MNT="$AO_DIR/mnt"
		dt_setup -o allow_other
		;;
	*) dt_setup ;;
	esac
	dt_new b1 >/dev/null
	W=$MNT/b1/workspace
}

teardown() {
	cd "$BATS_TEST_TMPDIR"
	dt_teardown
	if [ -n "${AO_DIR:-}" ]; then
		rmdir "$AO_DIR/mnt" 2>/dev/null || true
		rmdir "$AO_DIR" 2>/dev/null || true
	fi
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

@test "bulk: a cold git status of 1000 files costs at most 20 calls, the index write two of them" {
	# the index a second younger than the files: no racily clean entries,
	# which git would read to compare
	dt_run b1 'mkdir -p src && for i in $(seq 1 1000); do echo "line $i" > src/f$i.txt; done && sleep 1 && git init -q . && git add -A && git -c user.email=b@x -c user.name=b commit -qm init' >/dev/null
	# cold as bench/remote.sh has it: past the 1 s cache of every listing
	# and attribute, the root's own attributes (kept 10 s) aside
	ls "$W" >/dev/null
	sleep 1.2
	c0=$(conf_calls b1)
	l0=$(wc -l <"$EMU_DIR/requests.log")
	[ -z "$(git -C "$W" status --porcelain)" ]
	c1=$(conf_calls b1)
	echo "cold git status: $((c1 - c0)) calls" >&3
	sed -n "$((l0 + 1)),\$p" "$EMU_DIR/requests.log" >&3
	# listings outlive the 1 s TTL while git keeps the workspace busy (one
	# listing per directory), the index.lock is made at its close (upload,
	# move: was create, upload, stat, move), and .git/info/exclude comes in
	# a bulk call with an object; was 24-30
	[ $((c1 - c0)) -le 20 ]
	[ "$(sed -n "$((l0 + 1)),\$p" "$EMU_DIR/requests.log" | grep -c 'index.lock')" -eq 2 ]
	[ "$(sed -n "$((l0 + 1)),\$p" "$EMU_DIR/requests.log" | grep -c '/files?path=[^&]*/home/daytona$')" -eq 1 ]
}

@test "bulk: a file created through the mount is made remotely at its close in one call; one removed before that costs none (TTL 60 s)" {
	mkfiles c 1
	ls "$W/c" >/dev/null
	c0=$(conf_calls b1)
	exec 5>"$W/c/new"
	echo data >&5
	[ -e "$W/c/new" ]
	ls "$W/c" | grep -qx new
	exec 5>&-
	[ "$(conf_calls b1)" -eq $((c0 + 1)) ]
	mv "$W/c/new" "$W/c/renamed"
	[ "$(conf_calls b1)" -eq $((c0 + 2)) ]
	[ "$(stat -c %s "$W/c/renamed")" -eq 5 ]
	# a temporary file unlinked while open: nothing reaches the remote
	# (python: bash's `exec N>` closes a duplicate at once, a flush)
	python3 -c 'import os,sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); os.unlink(sys.argv[1]); os.write(fd, b"scratch"); os.close(fd)' "$W/c/tmp"
	[ ! -e "$W/c/tmp" ]
	[ "$(conf_calls b1)" -eq $((c0 + 2)) ]
	[ "$(dt_run b1 'cat c/renamed; ls c')" = "$(printf 'data\nf1\nrenamed')" ]
}

@test "bulk: a file created through the mount and still open shows in its directory's new name after the directory is renamed, and lands there at its close" {
	mkdir "$W/d1"
	python3 - "$W" <<'PY'
import os, sys, time
w = sys.argv[1]
fd = os.open(w + "/d1/new", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"kept\n")
os.rename(w + "/d1", w + "/d2")
time.sleep(1.2)  # past the kernel's entry and attribute timeouts
st = os.stat(w + "/d2/new")  # open, not saved yet: its attributes are ours
assert "new" in os.listdir(w + "/d2"), os.listdir(w + "/d2")
os.close(fd)
PY
	[ "$(cat "$W/d2/new")" = kept ]
	[ "$(dt_run b1 'cat d2/new')" = kept ]
}

@test "remote: another user's write, truncate or O_TRUNC open clears set-user-ID, as on the host (allow_other)" {
	modes() { echo "$(stat -c %a "$W/f") $(dt_run b1 'stat -c %a f')"; }
	echo x >"$W/f"
	chmod 6777 "$W/f"
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- sh -c "echo y >> '$W/f'"
	[ "$(modes)" = "777 777" ]
	chmod 6777 "$W/f"
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- truncate -s 1 "$W/f"
	[ "$(modes)" = "777 777" ]
	chmod 6777 "$W/f"
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- sh -c ": > '$W/f'"
	[ "$(modes)" = "777 777" ]
	# root (CAP_FSETID) keeps them
	chmod 6777 "$W/f"
	echo z >>"$W/f"
	[ "$(modes)" = "6777 6777" ]
	[ "$(dt_run b1 'cat f')" = z ]
}
