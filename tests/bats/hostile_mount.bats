# bats file_tags=core
#
# A second user on an allow_other mount: what the root daemon does on that
# user's behalf gives it no more than the user would have on the disk.

load helpers

setup() {
	DISK=
	AO_DIR=
}

teardown() {
	cd "$BATS_TEST_TMPDIR"
	sfs_teardown
	if [ -n "$DISK" ]; then
		umount "$DISK" 2>/dev/null || umount -l "$DISK" 2>/dev/null || true
		rmdir "$DISK" 2>/dev/null || true
	fi
	if [ -n "$AO_DIR" ]; then
		rmdir "$AO_DIR/mnt" "$AO_DIR" 2>/dev/null || true
	fi
}

as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
}

# small_disk: a 64 MiB ext4 on a loop device with half its blocks reserved
# for root, mounted on $DISK, with a directory everyone may write in.
small_disk() {
	truncate -s 64M "$BATS_TEST_TMPDIR/disk.img"
	mkfs.ext4 -q -F -m 50 -b 4096 "$BATS_TEST_TMPDIR/disk.img"
	DISK=$(mktemp -d /tmp/sfs-disk.XXXXXX)
	mount -o loop "$BATS_TEST_TMPDIR/disk.img" "$DISK" || skip "no loop device to mount a small disk"
	mkdir "$DISK/ws"
	chmod 1777 "$DISK/ws"
}

# mount_ao [options...]: mounts with allow_other on a mount point other
# users can reach (the bats tmpdir is private).
mount_ao() {
	AO_DIR=$(mktemp -d /tmp/sfs-ao.XXXXXX)
	chmod 755 "$AO_DIR"
	MNT="$AO_DIR/mnt"
	sfs_mount -o allow_other "$@"
}

# free_blocks DIR: the disk's free blocks, root's reserve included.
free_blocks() { stat -f -c %f "$1"; }
total_blocks() { stat -f -c %b "$1"; }

# fill_as_nobody: nobody writes through the mount until the disk refuses;
# what is left free must still be about root's half.  DAEMON_WRITES is set
# to how many of the daemon's writes went to the file.
fill_as_nobody() {
	echo "new d dir=$DISK/ws" >"$MNT/ctl"
	trace_daemon "$BATS_TEST_TMPDIR/trace" pwrite64,pwritev,write,splice
	run as_nobody dd if=/dev/zero of="$MNT/d/workspace/fill" bs=1M count=100 conv=fsync
	kill "$TRACER"
	wait "$TRACER" || true
	DAEMON_WRITES=$(grep -c "ws/fill>" "$BATS_TEST_TMPDIR/trace" || true)
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left"* ]]
	local free total
	free=$(free_blocks "$DISK")
	total=$(total_blocks "$DISK")
	echo "free $free of $total blocks" >&3
	# nobody got what is not reserved, and none of root's reserve
	[ "$free" -gt $((total * 2 / 5)) ]
	# the file is nobody's, as on the disk
	[ "$(stat -c %U "$DISK/ws/fill")" = nobody ]
	# and root, whose reserve it is, can still write there
	dd if=/dev/zero of="$MNT/d/workspace/root-file" bs=1M count=4 conv=fsync status=none
}

@test "a user of an allow_other mount cannot fill root's reserved blocks: passthrough writes" {
	small_disk
	mount_ao
	fill_as_nobody
	# the kernel wrote, with the credentials the backing file was registered with
	[ "$DAEMON_WRITES" -eq 0 ]
}

@test "a user of an allow_other mount cannot fill root's reserved blocks: writes through the daemon" {
	small_disk
	mount_ao -o passthrough=false
	fill_as_nobody
	[ "$DAEMON_WRITES" -gt 0 ]
	# fallocate goes through the daemon too
	run as_nobody fallocate -l 8M "$MNT/d/workspace/more"
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left"* ]]
}

@test "a root-opened passthrough file gives a later user no root reserve" {
	small_disk
	mount_ao
	echo "new d dir=$DISK/ws" >"$MNT/ctl"
	touch "$DISK/ws/shared"
	chmod 666 "$DISK/ws/shared"
	# root holds the file open for writing first: its backing file is root's
	exec 5>>"$MNT/d/workspace/shared"
	run as_nobody dd if=/dev/zero of="$MNT/d/workspace/shared" bs=1M count=100 conv=notrunc,fsync
	exec 5>&-
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left"* ]]
	[ "$(free_blocks "$DISK")" -gt $(($(total_blocks "$DISK") * 2 / 5)) ]
}
