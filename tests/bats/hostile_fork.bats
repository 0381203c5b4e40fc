#!/usr/bin/env bats
# bats file_tags=core
# A local fork copies its source's workspace while the source's runs may
# still be changing it (providers/untrusted/copy.c): FIFOs left in it or
# swapped in during the copy, a directory swapped for a symlink to a host
# directory, symlinks out of the workspace, a disk that fills up.  Each test
# checks what the fork holds, that the fork ended, and that the daemon
# still serves another sandbox; one checks that a plain tree comes out the
# same, times and holes included.

load helpers
load docker_helpers
load iso_helpers

setup() {
	sfs_mount
}

teardown() {
	unblock_fifos
	iso_teardown
	if [ -n "${SMALL_FS:-}" ]; then umount -l "$SMALL_FS" 2>/dev/null || true; fi
}

# unblock_fifos: opens every FIFO left in a workspace for writing, so that
# a copy blocked opening one for reading (cp -a before untrusted_copy_tree)
# ends instead of outliving the test.
unblock_fifos() {
	local f
	[ -n "${STATE:-}" ] || return 0
	while IFS= read -r -d '' f; do
		timeout 1 sh -c 'exec 3>"$1"' _ "$f" 2>/dev/null || true
	done < <(find "$STATE"/sandboxes/*/workspace -type p -print0 2>/dev/null)
}

# other_ws WS: the workspace directory on the host that is not WS (the
# fork's, when there are two)
other_ws() {
	local d
	for d in "$STATE"/sandboxes/*/workspace; do
		[ "$d" = "$1" ] || echo "$d"
	done
}

# start_in SANDBOX CMD: starts CMD in SANDBOX and prints its run number
start_in() { ctl_write "$MNT/$1/ctl" "exec $2"; }

# journal_has SANDBOX RUN TEXT
journal_has() { grep -q "$3" "$MNT/$1/runs/$2/journal"; }

# fork_within SOURCE NAME: forks SOURCE as NAME in the background (a hung
# ctl write cannot be killed: FUSE waits for the daemon's answer) and fails
# unless the fork ended, successfully, within 30 s.
fork_within() {
	ctl_write "$MNT/$1/ctl" "fork $2" >"$BATS_TEST_TMPDIR/fork.$2" 2>&1 &
	local p=$! i
	for i in $(seq 1 600); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$p" 2>/dev/null; then
		echo "fork $2 of $1 still running after 30 s" >&2
		return 1
	fi
	wait "$p" || {
		cat "$BATS_TEST_TMPDIR/fork.$2" >&2
		return 1
	}
}

# still_serving: the mount answers and another sandbox still runs commands
still_serving() {
	mountpoint -q "$MNT"
	kill -0 "$SFS_PID"
	if [ ! -d "$MNT/other" ]; then new_box other; fi
	run run_in other "echo alive"
	[ "$status" -eq 0 ]
	[[ "$output" == *alive* ]]
}

@test "hostile_fork: FIFOs in the workspace are left out of the fork, with one warning" {
	new_box box
	ws=$(host_ws)
	echo kept >"$ws/f"
	mkdir "$ws/d"
	mkfifo "$ws/pipe" "$ws/d/pipe2"
	fork_within box copy
	C="$MNT/copy/workspace"
	[ "$(cat "$C/f")" = kept ]
	[ -d "$C/d" ]
	[ ! -e "$C/pipe" ]
	[ ! -L "$C/pipe" ]
	[ ! -e "$C/d/pipe2" ]
	[ ! -L "$C/d/pipe2" ]
	# one line for the fork, with how many
	[ "$(grep -c 'fork of box left out' "$BATS_TEST_TMPDIR/daemon.log")" = 1 ]
	grep -q 'copy: fork of box left out 2 FIFO' "$BATS_TEST_TMPDIR/daemon.log"
	run run_in copy "cat f"
	[ "$status" -eq 0 ]
	still_serving
}

@test "hostile_fork: a FIFO swapped in and out while the fork copies: every fork ends" {
	new_box box
	# f and g trade places as fast as renameat2(RENAME_EXCHANGE) goes: one
	# a regular file, the other a FIFO no one writes; 50 pairs, so that a
	# copy meets many; for at most 60 s
	cat >"$MNT/box/workspace/swap.py" <<-'PY'
		import ctypes, os, time
		libc = ctypes.CDLL(None, use_errno=True)
		for i in range(50):
		    os.mkfifo("g%d" % i)
		    open("f%d" % i, "w").write("x")
		print("swapping", flush=True)
		end = time.time() + 60
		while time.time() < end:
		    for i in range(50):
		        libc.renameat2(-100, b"f%d" % i, -100, b"g%d" % i, 2)  # RENAME_EXCHANGE
	PY
	n=$(start_in box "/usr/bin/python3 swap.py")
	wait_for journal_has box "$n" swapping
	for i in $(seq 1 8); do
		fork_within box "c$i"
		# what a fork holds of the pairs: regular files, never a FIFO
		[ -z "$(find "$MNT/c$i/workspace" -type p)" ]
	done
	ctl_write "$MNT/box/ctl" "kill $n KILL" >/dev/null || true
	still_serving
}

@test "hostile_fork: a directory swapped for a symlink to a host directory mid-copy: no host file in the fork" {
	new_box box
	ws=$(host_ws)
	# a host directory the sandbox may not read, with the names of d's files
	secret="$BATS_TEST_TMPDIR/hostdir"
	mkdir -m 700 "$secret"
	run_in box 'mkdir d && for i in $(seq -w 1 300); do head -c 200000 /dev/zero >d/f$i; done' >/dev/null
	for i in $(seq -w 1 300); do echo "host-secret-$i" >"$secret/f$i"; done
	# the attack: the moment the fork opens d, d and a symlink to the host
	# directory trade places (one renameat2, a copy that goes by path then
	# reads the host's files for the rest of d's names)
	cat >"$ws/swap.py" <<-PY
		import ctypes, os
		libc = ctypes.CDLL(None, use_errno=True)
		os.symlink("$secret", "s")
		fd = libc.inotify_init()
		libc.inotify_add_watch(fd, b"d", 0x20)  # IN_OPEN
		print("watching", flush=True)
		os.read(fd, 4096)
		ok = libc.renameat2(-100, b"d", -100, b"s", 2) == 0  # RENAME_EXCHANGE
		print("swapped" if ok else "not swapped", flush=True)
	PY
	n=$(start_in box "/usr/bin/python3 swap.py")
	wait_for journal_has box "$n" watching
	fork_within box copy
	[ "$(cat "$MNT/box/runs/$n/wait")" = "exited 0" ]
	grep -q swapped "$MNT/box/runs/$n/journal"
	C=$(other_ws "$ws")
	run grep -rl host-secret "$C"
	echo "$output"
	[ "$status" -eq 1 ]
	still_serving
}

@test "hostile_fork: symlinks out of the workspace are copied as links, never what they name" {
	new_box box
	ws=$(host_ws)
	echo topsecret-9d1f >"$BATS_TEST_TMPDIR/secret"
	chmod 600 "$BATS_TEST_TMPDIR/secret"
	ln -s "$BATS_TEST_TMPDIR/secret" "$ws/secret"
	ln -s /etc/shadow "$ws/shadow"
	ln -s "$BATS_TEST_TMPDIR" "$ws/hostdir"
	ln -s ../../../.. "$ws/up"
	fork_within box copy
	C=$(other_ws "$ws")
	[ -L "$C/secret" ]
	[ "$(readlink "$C/secret")" = "$BATS_TEST_TMPDIR/secret" ]
	[ -L "$C/shadow" ]
	[ "$(readlink "$C/shadow")" = /etc/shadow ]
	[ -L "$C/hostdir" ]
	[ "$(readlink "$C/hostdir")" = "$BATS_TEST_TMPDIR" ]
	[ -L "$C/up" ]
	[ "$(readlink "$C/up")" = ../../../.. ]
	run grep -rl topsecret-9d1f "$C"
	[ "$status" -eq 1 ]
	still_serving
}

@test "hostile_fork: files, directories, links, holes, times and modes come out the same, without set-user-ID" {
	new_box box
	ws=$(host_ws)
	mkdir -p "$ws/a/b/c" "$ws/ro"
	echo one >"$ws/a/one"
	: >"$ws/empty"
	: >"$ws/a/b/c/empty2"
	head -c 20M /dev/urandom >"$ws/big"
	truncate -s 30M "$ws/sparse"
	printf x | dd of="$ws/sparse" bs=1 seek=10M conv=notrunc status=none
	ln "$ws/a/one" "$ws/hard"
	ln -s a/one "$ws/rel"
	echo in-ro >"$ws/ro/f"
	cp /bin/true "$ws/suid"
	chmod 4755 "$ws/suid"
	chmod 2775 "$ws/a"
	chmod 0555 "$ws/ro"
	# times in the past (a symlink's own, directories' after their files)
	touch -h -d '2001-02-03 04:05:06.123456789' "$ws/rel"
	find "$ws" -mindepth 1 ! -type l -exec touch -d '2002-03-04 05:06:07.5' {} +
	touch -d '2003-04-05 06:07:08' "$ws/a/b/c" "$ws/a/b" "$ws/a" "$ws"
	fork_within box copy
	C=$(other_ws "$ws")
	# no set-user-ID or set-group-ID in the copy
	[ "$(stat -c %a "$C/suid")" = 755 ]
	[ "$(stat -c %a "$C/a")" = 775 ]
	[ "$(stat -c %a "$C/ro")" = 555 ]
	# the same bytes (symlinks compared as links)
	diff -r --no-dereference "$ws" "$C"
	# the same names, types, sizes, mtimes to the nanosecond, and modes
	# once the source's set-id bits are gone too
	chmod 755 "$ws/suid"
	chmod g-s "$ws/a"
	diff <(cd "$ws" && find . -printf '%p %y %s %m %T@\n' | sort) \
		<(cd "$C" && find . -printf '%p %y %s %m %T@\n' | sort)
	[ "$(stat -c %Y "$C/big")" = "$(stat -c %Y "$ws/big")" ]
	# a hard link stays one; the holes stay holes
	[ "$(stat -c %i "$C/hard")" = "$(stat -c %i "$C/a/one")" ]
	[ "$(stat -c %h "$C/hard")" = 2 ]
	[ "$(du -k "$C/sparse" | cut -f1)" -lt 1024 ]
	run run_in copy "cat a/one ro/f && cmp big big"
	[ "$status" -eq 0 ]
	[[ "$output" == *one*in-ro* ]]
	still_serving
}

@test "hostile_fork: a fork that runs out of space fails naming the file, and leaves no half copy" {
	sfs_unmount
	SMALL_FS="$BATS_TEST_TMPDIR/small"
	mkdir "$SMALL_FS"
	mount -t tmpfs -o size=48m tmpfs "$SMALL_FS" || skip "cannot mount a tmpfs here"
	STATE="$SMALL_FS/state"
	sfs_mount
	new_box box
	ws=$(host_ws)
	head -c 30M /dev/zero >"$ws/big"
	echo small >"$ws/small"
	run ctl_write "$MNT/box/ctl" "fork copy"
	echo "fork: $output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"copying big: No space left on device"* ]]
	# the half copy is gone and its space is back
	[ "$(other_ws "$ws")" = "" ]
	[ "$(df -k --output=used "$SMALL_FS" | tail -n 1)" -lt $((40 * 1024)) ]
	[ "$(cat "$ws/small")" = small ]
	still_serving
}
