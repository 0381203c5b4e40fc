#!/usr/bin/env bats
# A workspace far bigger than the daemon's fd limit: every inode the kernel
# holds is a node of the daemon, and a node may not cost an fd for as long
# as the kernel keeps it (docs/architecture.md, "Inode table").  The daemon
# runs with 4096 fds and without CAP_SYS_RESOURCE (so it cannot raise them);
# a tree of SFS_SCALE_FILES files (200,000 by default, in a tenth as many
# directories) is unpacked, listed, searched and removed through the mount
# while runs and new sandboxes keep working.  Minutes on a small machine,
# hence untagged.

load helpers

FD_LIMIT=4096
# minutes, not the 3 the test command gives one test (.ci/test runs this
# file first, so it overlaps the others)
BATS_TEST_TIMEOUT=${SFS_SCALE_TIMEOUT:-900}

teardown() {
	cd "$BATS_TEST_TMPDIR"
	# only these two: a bare `wait` would wait for the daemon too
	local p
	for p in ${SAMPLER:-} ${TAR_PID:-}; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	sfs_teardown
}

# daemon_fds: how many fds the daemon has open now.
daemon_fds() {
	ls "/proc/$SFS_PID/fd" | wc -l
}

# start_fd_sampler: records the daemon's open fds every 0.2 s in $FDS_LOG.
start_fd_sampler() {
	FDS_LOG="$BATS_TEST_TMPDIR/fds.log"
	(while kill -0 "$SFS_PID" 2>/dev/null; do
		ls "/proc/$SFS_PID/fd" 2>/dev/null | wc -l
		sleep 0.2
	done) >"$FDS_LOG" 3>&- &
	SAMPLER=$!
}

peak_fds() {
	sort -n "$FDS_LOG" | tail -n 1
}

# exec_ok SANDBOX: a run in SANDBOX starts and exits 0 with its output.
exec_ok() {
	local n
	n=$(ctl_write "$MNT/$1/ctl" "exec echo ran-in-$1") || return 1
	[[ "$n" =~ ^[0-9]+$ ]] || {
		echo "exec in $1: $n" >&2
		return 1
	}
	[ "$(cat "$MNT/$1/runs/$n/wait")" = "exited 0" ] || return 1
	[ "$(cat "$MNT/$1/runs/$n/journal")" = "ran-in-$1" ]
}

# sandbox_ok NAME: a new sandbox can be made and its workspace used.
sandbox_ok() {
	mkdir "$MNT/$1" || return 1
	echo hello >"$MNT/$1/workspace/hello" || return 1
	[ "$(cat "$MNT/$1/workspace/hello")" = hello ]
}

# make_tree DIR FILES: FILES small files in FILES/10 directories (100 at
# the top, the rest below them) under DIR/t; one file in 100 holds NEEDLE.
make_tree() {
	python3 - "$1" "$2" <<'EOF'
import os, sys
root, files = sys.argv[1], int(sys.argv[2])
dirs = max(files // 10, 100)
tops = 100
per_top = dirs // tops
n = 0
for t in range(tops):
    for s in range(per_top):
        d = os.path.join(root, "t", "d%03d" % t, "s%04d" % s)
        os.makedirs(d)
        for f in range(files // dirs):
            with open(os.path.join(d, "f%d.js" % f), "w") as fp:
                fp.write("module.exports = %d;\n" % n + ("// NEEDLE\n" if n % 100 == 0 else ""))
            n += 1
print(n)
EOF
}

@test "a tree of many more files than the daemon may open fds is unpacked, listed, searched and removed; runs and new sandboxes keep working" {
	local files=${SFS_SCALE_FILES:-200000} made start
	mkdir "$BATS_TEST_TMPDIR/src"
	made=$(make_tree "$BATS_TEST_TMPDIR/src" "$files")
	tar -C "$BATS_TEST_TMPDIR/src" -cf "$BATS_TEST_TMPDIR/tree.tar" t
	rm -rf "$BATS_TEST_TMPDIR/src"

	SFS_WRAP="setpriv --bounding-set -sys_resource prlimit --nofile=$FD_LIMIT:$FD_LIMIT" sfs_mount
	[ "$(awk '/^Max open files/ {print $4}' "/proc/$SFS_PID/limits")" = "$FD_LIMIT" ]
	start_fd_sampler
	mkdir "$MNT/big"
	W="$MNT/big/workspace"
	H=$(awk '$1=="workspace"{print $2}' "$MNT/big/status")

	start=$SECONDS
	tar -C "$W" -xf "$BATS_TEST_TMPDIR/tree.tar" 2>"$BATS_TEST_TMPDIR/tar.err" &
	TAR_PID=$!
	# halfway through the archive (its second half is d050 to d099):
	# a run and a new sandbox work while the unpack goes on
	while kill -0 "$TAR_PID" 2>/dev/null && [ ! -d "$H/t/d050" ]; do sleep 0.2; done
	exec_ok big
	sandbox_ok during
	local tar_rc=0
	wait "$TAR_PID" || tar_rc=$?
	TAR_PID=
	echo "unpack: $made files in $((SECONDS - start)) s, tar exit $tar_rc" >&3
	head -n 5 "$BATS_TEST_TMPDIR/tar.err"
	[ "$tar_rc" -eq 0 ]

	# every file and directory (and t itself), through the mount
	start=$SECONDS
	[ "$(find "$W/t" | wc -l)" -eq $((made + made / 10 + 100 + 1)) ]
	echo "find: $((SECONDS - start)) s" >&3
	start=$SECONDS
	git -C "$W" init -q
	[ "$(git -C "$W" status --porcelain --untracked-files=all | wc -l)" -eq "$made" ]
	echo "git status: $((SECONDS - start)) s" >&3
	start=$SECONDS
	if command -v rg >/dev/null; then
		[ "$(rg -l NEEDLE "$W/t" | wc -l)" -eq $((made / 100)) ]
	else
		[ "$(grep -rl NEEDLE "$W/t" | wc -l)" -eq $((made / 100)) ]
	fi
	echo "search: $((SECONDS - start)) s" >&3
	exec_ok big
	sandbox_ok after
	exec_ok after

	start=$SECONDS
	rm -rf "$W/t"
	echo "rm -rf: $((SECONDS - start)) s" >&3
	[ ! -e "$H/t" ]
	exec_ok big
	sandbox_ok last

	echo "peak daemon fds: $(peak_fds) (limit $FD_LIMIT), now $(daemon_fds)" >&3
	[ "$(peak_fds)" -lt "$FD_LIMIT" ]
	[ "$(daemon_fds)" -lt "$FD_LIMIT" ]
}
