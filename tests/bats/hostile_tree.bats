#!/usr/bin/env bats
# bats file_tags=core
# A sandbox attacks the daemon through its own workspace (providers/untrusted):
# a symlink swapped in while restore hashes a file, a file truncated while
# snapshot reads it, a FIFO swapped in under snapshot and diff, set-user-ID
# files planted for the snapshot's tree/ and for restore.  Each test checks
# that the attack failed on the host and that the daemon still serves
# another sandbox.

load helpers
load docker_helpers
load iso_helpers

setup() {
	command -v inotifywait >/dev/null || skip "inotify-tools is not installed (.ci/setup installs it)"
	sfs_mount
}

teardown() {
	iso_teardown
	if [ -n "${AO_DIR:-}" ]; then rm -rf "$AO_DIR"; fi
}

# start_in SANDBOX CMD: starts CMD in SANDBOX and prints its run number
start_in() { ctl_write "$MNT/$1/ctl" "exec $2"; }

# journal_has SANDBOX RUN TEXT
journal_has() { grep -q "$3" "$MNT/$1/runs/$2/journal"; }

# finishes PID: PID (a child of this shell) ends within 30 s
finishes() {
	local i
	for i in $(seq 1 600); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	echo "process $1 still running after 30 s" >&2
	return 1
}

# still_serving: the mount answers and another sandbox still runs commands
still_serving() {
	mountpoint -q "$MNT"
	kill -0 "$SFS_PID"
	[ -n "$(ls "$MNT")" ]
	if [ ! -d "$MNT/other" ]; then new_box other; fi
	run run_in other "echo alive"
	[ "$status" -eq 0 ]
	[[ "$output" == *alive* ]]
}

@test "hostile: a symlink swapped in while restore hashes a file: the host target keeps its mode" {
	new_box box
	# a root-owned file outside every workspace, the symlink's target
	target="$BATS_TEST_TMPDIR/rootbin"
	printf '#!/bin/sh\necho hi\n' >"$target"
	chown 0:0 "$target"
	chmod 0750 "$target"
	# a 200 MB file, set-user-ID when snapshotted, then made 0700 so
	# restore wants to change its mode after hashing it
	run_in box "dd if=/dev/zero of=big bs=1M count=200 status=none"
	# set-user-ID as a sandbox could leave it before isolation refused
	# the bit (or a sandbox without isolation): planted from the host
	chmod 4755 "$(host_ws)/big"
	run ctl_write "$MNT/box/ctl" "snapshot first"
	[ "$status" -eq 0 ]
	run_in box "chmod 700 big"
	# the attack: the moment restore opens big, a symlink to the target
	# is renamed over it
	n=$(start_in box "inotifywait -e open big 2>&1; ln -s $target tmp && mv -T tmp big && echo swapped")
	wait_for journal_has box "$n" "Watches established"
	run ctl_write "$MNT/box/ctl" "restore first"
	echo "restore: $output"
	[ "$(cat "$MNT/box/runs/$n/wait")" = "exited 0" ]
	grep -q swapped "$MNT/box/runs/$n/journal"
	# the target: not chmod'ed through the link, set-user-ID least of all
	[ "$(stat -c %a "$target")" = 750 ]
	[ "$(stat -c %u "$target")" = 0 ]
	still_serving
}

@test "hostile: a file truncated while snapshot reads it: the snapshot fails, the daemon lives" {
	new_box box
	run_in box "head -c 200M /dev/urandom >big"
	n=$(start_in box "inotifywait -e open big 2>&1; truncate -s 0 big && echo truncated")
	wait_for journal_has box "$n" "Watches established"
	run ctl_write "$MNT/box/ctl" "snapshot racy"
	echo "snapshot: $output"
	[ "$(cat "$MNT/box/runs/$n/wait")" = "exited 0" ]
	grep -q truncated "$MNT/box/runs/$n/journal"
	still_serving
	# and this sandbox still serves: its exec, a later snapshot
	run run_in box "echo still"
	[ "$status" -eq 0 ]
	run ctl_write "$MNT/box/ctl" "snapshot after"
	[ "$status" -eq 0 ]
}

@test "hostile: a FIFO swapped in and out under snapshot and diff: neither hangs" {
	new_box box
	echo base >"$MNT/box/workspace/keep"
	run ctl_write "$MNT/box/ctl" "snapshot first"
	[ "$status" -eq 0 ]
	# f and g trade places as fast as renameat2(RENAME_EXCHANGE) goes: one
	# a regular file, the other a FIFO no one writes; for at most 60 s
	cat >"$MNT/box/workspace/swap.py" <<-'PY'
		import ctypes, os, time
		libc = ctypes.CDLL(None, use_errno=True)
		os.mkfifo("g")
		open("f", "w").write("x")
		print("swapping", flush=True)
		end = time.time() + 60
		while time.time() < end:
		    for i in range(1000):
		        libc.renameat2(-100, b"f", -100, b"g", 2)  # RENAME_EXCHANGE
	PY
	n=$(start_in box "/usr/bin/python3 swap.py")
	wait_for journal_has box "$n" swapping
	# a hung request cannot be killed (FUSE waits for the daemon's answer),
	# so each read runs in the background and must end within 30 s
	for i in $(seq 1 20); do
		ctl_write "$MNT/box/ctl" "snapshot s$i" >/dev/null 2>&1 &
		p1=$!
		cat "$MNT/box/snapshots/first/diff" >/dev/null 2>&1 &
		p2=$!
		finishes "$p1"
		finishes "$p2"
	done
	ctl_write "$MNT/box/ctl" "kill $n KILL" >/dev/null || true
	still_serving
	run run_in box "echo still"
	[ "$status" -eq 0 ]
}

@test "hostile: a planted set-user-ID file is never set-user-ID in tree/ nor after restore; tree/ is owner-only" {
	new_box box
	run_in box "cp /bin/true suid && mkdir d && chmod 755 d && echo x >d/open && chmod 644 d/open"
	# an isolated run cannot set the bits: planted from the host
	chmod 6755 "$(host_ws)/suid"
	run ctl_write "$MNT/box/ctl" "snapshot planted"
	[ "$status" -eq 0 ]
	T="$MNT/box/snapshots/planted/tree"
	# no set-user-ID nor set-group-ID shown, and nothing for group or others
	[ "$(stat -c %a "$T/suid")" = 500 ]
	[ "$(stat -c %a "$T/d")" = 500 ]
	[ "$(stat -c %a "$T/d/open")" = 400 ]
	[ "$(stat -c %a "$T")" = 500 ]
	# restore writes the mode without them, whatever the record says
	run_in box "rm suid && chmod 700 d"
	run ctl_write "$MNT/box/ctl" "restore planted"
	[ "$status" -eq 0 ]
	ws=$(host_ws)
	[ "$(stat -c %a "$ws/suid")" = 755 ]
	# restored files are the sandbox's, as the workspace is
	[ "$(stat -c %u:%g "$ws/suid")" = "$(stat -c %u:%g "$ws")" ]
	[ "$(stat -c %u:%g "$ws/d")" = "$(stat -c %u:%g "$ws")" ]
	chmod 6755 "$ws/suid"
	run ctl_write "$MNT/box/ctl" "restore planted"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$ws/suid")" = 755 ]
	[ "$(stat -c %a "$ws/d")" = 755 ]
	still_serving
}

@test "hostile: fork copies no set-user-ID, set-group-ID or file capability out of the sandbox" {
	new_box box
	run_in box "cp /bin/true suid && mkdir sg && cp /bin/true sg/in"
	# an isolated run cannot set the bits: planted from the host
	chmod 4755 "$(host_ws)/suid"
	chmod 2775 "$(host_ws)/sg"
	chmod 6755 "$(host_ws)/sg/in"
	# a capability as a sandbox with the privilege would plant it
	setcap cap_net_raw+ep "$(host_ws)/suid"
	[ -n "$(getcap "$MNT/box/workspace/suid")" ] # seen through the mount
	run ctl_write "$MNT/box/ctl" "fork copy"
	[ "$status" -eq 0 ]
	C="$MNT/copy/workspace"
	[ -z "$(getcap "$C/suid")" ]
	[ "$(stat -c %a "$C/suid")" = 755 ]
	[ "$(stat -c %a "$C/sg")" = 775 ]
	[ "$(stat -c %a "$C/sg/in")" = 755 ]
	run run_in copy "cat /proc/self/status >/dev/null && echo forked"
	[ "$status" -eq 0 ]
	still_serving
}

@test "hostile: an ACL that keeps a user out of a workspace file keeps them out of tree/ too" {
	command -v setfacl >/dev/null || skip "acl is not installed"
	sfs_unmount
	AO_DIR=$(mktemp -d /tmp/sfs-tree-ao.XXXXXX)
	chmod 755 "$AO_DIR"
	MNT="$AO_DIR/mnt"
	sfs_mount -o allow_other
	mkdir "$MNT/demo"
	echo guarded >"$MNT/demo/workspace/f"
	chmod 644 "$MNT/demo/workspace/f"
	setfacl -m u:nobody:--- "$MNT/demo/workspace/f"
	run setpriv --reuid=nobody --regid=nogroup --clear-groups -- cat "$MNT/demo/workspace/f"
	[ "$status" -ne 0 ]
	run ctl_write "$MNT/demo/ctl" "snapshot s1"
	[ "$status" -eq 0 ]
	run setpriv --reuid=nobody --regid=nogroup --clear-groups -- cat "$MNT/demo/snapshots/s1/tree/f"
	[ "$status" -ne 0 ]
	[[ "$output" != *guarded* ]]
	[ "$(cat "$MNT/demo/snapshots/s1/tree/f")" = guarded ]
	still_serving
}
