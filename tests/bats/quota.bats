#!/usr/bin/env bats
# bats file_tags=core
# A sandbox's state quota (quota=SIZE): its state directory is a file system
# of its own, so a run that fills its workspace or its journal gets ENOSPC
# there, and the other sandboxes, the registry and the state disk do not.

load helpers
load iso_helpers

setup() {
	[ "$(id -u)" -eq 0 ] || skip "quota= needs root (it mounts a file system)"
	[ -e /dev/loop-control ] || skip "quota= needs loop devices: no /dev/loop-control"
	sfs_mount
}

teardown() {
	iso_kill_holders
	sfs_teardown
}

# status_of NAME KEY: the value of KEY in NAME's status.
status_of() {
	awk -v k="$2" '$1 == k { print $2 }' "$MNT/$1/status"
}

# key_of NAME: the sandbox's key, the name of its state dir.
key_of() {
	local d
	for d in "$STATE"/sandboxes/*/; do
		if [ -e "$d/workspace/.mark-$1" ]; then
			basename "$d"
			return 0
		fi
	done
	return 1
}

@test "quota: a run that fills its quota gets ENOSPC; other sandboxes keep writing" {
	ctl_write "$MNT/ctl" 'new q quota=32M' >/dev/null
	ctl_write "$MNT/ctl" 'new free' >/dev/null
	[ "$(status_of q quota)" = 33554432 ]
	# no quota, no quota lines
	[ -z "$(status_of free quota)" ]
	local n
	n=$(ctl_write "$MNT/q/ctl" 'exec dd if=/dev/zero of=big bs=1M count=64 2>&1; echo "dd=$?"')
	[ "$(cat "$MNT/q/runs/$n/wait")" = "exited 0" ]
	run cat "$MNT/q/runs/$n/journal"
	echo "$output"
	[[ "$output" == *"No space left on device"* ]]
	[[ "$output" == *"dd=1"* ]]
	[ "$(status_of q quota_full)" = yes ]
	# through the mount too
	run dd if=/dev/zero of="$MNT/q/workspace/more" bs=1M count=8 conv=fsync
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	# the other sandbox, the registry and the host are not short of room
	n=$(ctl_write "$MNT/free/ctl" 'exec dd if=/dev/zero of=big bs=1M count=40 2>&1 && echo ok')
	[ "$(cat "$MNT/free/runs/$n/wait")" = "exited 0" ]
	[ "$(tail -n 1 "$MNT/free/runs/$n/journal")" = ok ]
	ctl_write "$MNT/ctl" 'new later' >/dev/null
	[ -d "$MNT/later/workspace" ]
	# the image is sparse and holds no more than its size on the state disk
	local used
	used=$(du -k "$STATE"/quotas/*.img | awk '{ s += $1 } END { print s }')
	[ "$used" -le $((33 * 1024)) ]
	# room again once the big file goes (discard gives its blocks back)
	rm "$MNT/q/workspace/big"
	# ext4 counts freed blocks at its next journal commit
	not_full() { [ -z "$(status_of q quota_full)" ]; }
	wait_for not_full
	n=$(ctl_write "$MNT/q/ctl" 'exec echo fine >small && cat small')
	[ "$(cat "$MNT/q/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/q/runs/$n/journal")" = fine ]
}

@test "quota: a run whose output fills the quota ends; its journal is cut with a line saying so and how much was dropped" {
	ctl_write "$MNT/ctl" 'new chatty quota=16M' >/dev/null
	local n
	n=$(ctl_write "$MNT/chatty/ctl" 'exec head -c 64000000 /dev/zero | tr "\0" x; echo done >&2')
	[ "$(timeout 60 cat "$MNT/chatty/runs/$n/wait")" = "exited 0" ]
	local size
	size=$(stat -c %s "$MNT/chatty/runs/$n/journal")
	[ "$size" -lt 16777216 ]
	[ "$size" -gt 1000000 ]
	[ "$(status_of chatty quota_full)" = yes ]
	# the cut is said where it happened, in the room held for it
	local cut
	cut=$(grep -a '^sandboxfs: journal cut at ' "$MNT/chatty/runs/$n/journal")
	echo "$cut"
	[[ "$cut" == *"No space left on device"*"further output is dropped" ]]
	# the bytes before it are the run's own
	[ "$(head -c 1000 "$MNT/chatty/runs/$n/journal" | tr -d x | wc -c)" -eq 0 ]
	# "done" never reached the journal: no gap, nothing after the cut but the
	# count, and what was kept and what was dropped make all of the output
	run ! grep -aq '^done' "$MNT/chatty/runs/$n/journal"
	local kept dropped
	kept=$(sed -nE 's/^sandboxfs: journal cut at ([0-9]+) bytes.*/\1/p' "$MNT/chatty/runs/$n/journal")
	dropped=$(sed -nE "s/^sandboxfs: ([0-9]+) bytes of the run's output were dropped$/\1/p" \
		"$MNT/chatty/runs/$n/journal")
	[ $((kept + dropped)) -eq 64000005 ]
	still=$(ctl_write "$MNT/ctl" 'new other' && echo made)
	[[ "$still" == *made* ]]
}

@test "quota: bad sizes are refused with the reason, and nothing is made" {
	run ctl_write "$MNT/ctl" 'new tiny quota=1M'
	[ "$status" -ne 0 ]
	[[ "$output" == *"quota=1M: expected a size of at least 16M"* ]]
	[ ! -e "$MNT/tiny" ]
	run ctl_write "$MNT/ctl" 'new word quota=lots'
	[ "$status" -ne 0 ]
	[[ "$output" == *"quota=lots"* ]]
	[ ! -e "$MNT/word" ]
	run ctl_write "$MNT/ctl" 'new huge quota=99999999999T'
	[ "$status" -ne 0 ]
	[ ! -e "$MNT/huge" ]
	# nothing left on the state disk either
	[ -z "$(ls -A "$STATE/quotas" 2>/dev/null)" ]
}

@test "quota: survives a restart and a reboot's unmount; fork keeps it; rmdir removes it" {
	ctl_write "$MNT/ctl" 'new keep quota=24M' >/dev/null
	echo kept >"$MNT/keep/workspace/.mark-keep"
	local key
	key=$(key_of keep)
	[ -f "$STATE/quotas/$key.img" ]
	mountpoint -q "$STATE/sandboxes/$key"
	sfs_unmount
	# what a reboot does: the daemon's mounts are gone
	umount "$STATE/sandboxes/$key"
	run ! mountpoint -q "$STATE/sandboxes/$key"
	sfs_mount
	# shown when the test fails: what the daemon said of it, what is mounted
	grep -i -e quota -e keep "$BATS_TEST_TMPDIR/daemon.log" || true
	grep -F "$STATE/" /proc/self/mountinfo || true
	cat "$MNT/keep/status"
	[ "$(status_of keep state)" = running ]
	[ "$(cat "$MNT/keep/workspace/.mark-keep")" = kept ]
	[ "$(status_of keep quota)" = 25165824 ]
	ctl_write "$MNT/keep/ctl" 'fork kid' >/dev/null
	[ "$(status_of kid quota)" = 25165824 ]
	[ "$(cat "$MNT/kid/workspace/.mark-keep")" = kept ]
	rmdir "$MNT/keep"
	[ ! -e "$STATE/quotas/$key.img" ]
	[ ! -e "$STATE/sandboxes/$key" ]
	run grep -F "$STATE/sandboxes/$key" /proc/self/mountinfo
	[ "$status" -ne 0 ]
	[ "$(cat "$MNT/kid/workspace/.mark-keep")" = kept ]
}

@test "quota: -o quota= is the default of new sandboxes; its workspace is nosuid" {
	sfs_unmount
	sfs_mount -o quota=20M
	ctl_write "$MNT/ctl" 'new dflt' >/dev/null
	[ "$(status_of dflt quota)" = 20971520 ]
	local key
	touch "$MNT/dflt/workspace/.mark-dflt"
	key=$(key_of dflt)
	grep -F " $STATE/sandboxes/$key " /proc/self/mountinfo | grep -q nosuid
	# a bad default refuses the start, naming it
	sfs_unmount
	run timeout -k 5 20 "$SFS_BIN" -f --state "$STATE" -o quota=2K "$MNT" 3>&-
	[ "$status" -ne 0 ]
	[[ "$output" == *"quota=2K"* ]]
}

@test "quota: a run that takes every block freed cannot take the room of its journal's cut line" {
	iso_require
	command -v python3 >/dev/null || skip "needs python3"
	ctl_write "$MNT/ctl" 'new grab quota=16M isolation=bwrap' >/dev/null
	# fills the quota, then for 6 s grabs any block that comes free: blocks
	# the wrapper freed for the cut line would be its first catch
	cat >"$MNT/grab/workspace/grab.py" <<'PY'
import os, time
fd = os.open("hog", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
buf = b"\0" * 1024
end = time.time() + 6
while time.time() < end:
    try:
        os.write(fd, buf)
    except OSError:
        pass
PY
	local n
	n=$(ctl_write "$MNT/grab/ctl" 'exec python3 grab.py & sleep 2; head -c 3000000 /dev/zero | tr "\0" x; wait')
	[ "$(timeout 60 cat "$MNT/grab/runs/$n/wait")" = "exited 0" ]
	run grep -a '^sandboxfs: ' "$MNT/grab/runs/$n/journal"
	echo "$output"
	[[ "${lines[0]}" == "sandboxfs: journal cut at "*"No space left on device"* ]]
	local kept dropped
	kept=$(sed -nE 's/^sandboxfs: journal cut at ([0-9]+) bytes.*/\1/p' "$MNT/grab/runs/$n/journal")
	dropped=$(sed -nE "s/^sandboxfs: ([0-9]+) bytes of the run's output were dropped$/\1/p" \
		"$MNT/grab/runs/$n/journal")
	[ $((kept + dropped)) -eq 3000000 ]
	# a run that ends gives back what its journal held past its end
	rm "$MNT/grab/workspace/hog"
	local i
	for i in $(seq 1 100); do
		[ -z "$(status_of grab quota_full)" ] && break
		sleep 0.1
	done
	n=$(ctl_write "$MNT/grab/ctl" 'exec head -c 100000 /dev/zero')
	[ "$(timeout 60 cat "$MNT/grab/runs/$n/wait")" = "exited 0" ]
	local j="$MNT/grab/runs/$n/journal"
	[ "$(stat -c %s "$j")" -eq 100000 ]
	for i in $(seq 1 50); do
		[ $(($(stat -c %b "$j") * 512)) -le $((100000 + 16384)) ] && break
		sleep 0.1
	done
	[ $(($(stat -c %b "$j") * 512)) -le $((100000 + 16384)) ]
}
