#!/usr/bin/env bats
# bats file_tags=core
# isolation=bwrap against a hostile sandbox: what a run inside may not reach
# (the host's network by default), may not leave behind (set-id files in a
# workspace host users see), may not share (one uid with other sandboxes),
# and the modes its files get.  Every test also checks that the daemon
# still serves another sandbox.

load helpers
load docker_helpers
load iso_helpers

setup() {
	iso_require
	sfs_mount
}

teardown() {
	iso_teardown
}

# still_serving: the daemon answers and a fresh isolated sandbox still runs.
still_serving() {
	new_iso "alive$1" >/dev/null
	[ "$(run_in "alive$1" 'echo alive')" = alive ]
}

@test "hostile_iso: an isolated sandbox without network= has no network: a host loopback listener and an abstract socket are not reached" {
	PORT=$((20000 + RANDOM % 20000))
	serve host 127.0.0.1
	local abs="sfs-hostile-$$-$RANDOM"
	python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind('\0$abs'); s.listen(); s.accept()" &
	echo $! >>"$BATS_TEST_TMPDIR/servers.pids"
	wait_for grep -q "@$abs" /proc/net/unix
	new_iso box
	grep -qx 'network none' "$MNT/box/status"
	run run_in box "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; if curl -sf -m 5 http://127.0.0.1:$PORT/; then echo REACHED; fi; if python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\\\0$abs')\" 2>/dev/null; then echo ABSTRACT; fi"
	[ "$status" -eq 0 ]
	[ "$output" = lo ]
	# the listener itself is fine: the host reaches it
	curl -sf -m 5 "http://127.0.0.1:$PORT/" >/dev/null
	still_serving 1
}

@test "hostile_iso: a run cannot leave a set-user-ID or set-group-ID file in a dir= workspace (chmod, open, mknod), and the workspace is nosuid inside" {
	local ws="$BATS_TEST_TMPDIR/adopted"
	mkdir -p "$ws"
	chmod 0777 "$ws" # the sandbox's uid may write it
	ctl_write "$MNT/ctl" "new box provider=local isolation=bwrap dir=$ws" >/dev/null
	run run_in box "cp /bin/sh sh; chmod 6755 sh && echo CHMOD; chmod u+s sh && echo CHMOD-U; chmod g+s sh && echo CHMOD-G; python3 -c 'import os; os.chmod(\"sh\", 0o4755)' 2>/dev/null && echo PY-CHMOD; python3 -c 'import os; os.close(os.open(\"o\", os.O_CREAT | os.O_WRONLY, 0o6755))' 2>/dev/null && echo OPEN; python3 -c 'import os; os.mknod(\"n\", 0o104755)' 2>/dev/null && echo MKNOD; mkdir d; chmod 2777 d && echo DIR-SETGID; install -m 4755 /bin/true t 2>/dev/null && echo INSTALL; chmod 0755 sh && echo plain-chmod; awk '\$5 == \"/workspace\" {print \$6}' /proc/self/mountinfo"
	[ "$status" -eq 0 ]
	[[ "$output" != *CHMOD* ]]
	[[ "$output" != *OPEN* ]]
	[[ "$output" != *MKNOD* ]]
	[[ "$output" != *DIR-SETGID* ]]
	[[ "$output" != *INSTALL* ]]
	# chmod without set-id bits still works
	grep -qx plain-chmod <<<"$output"
	[[ "$(tail -n1 <<<"$output")" == *nosuid* ]]
	# on the host: nothing set-id in the workspace
	[ -z "$(find "$ws" -perm /6000)" ]
	[ -f "$ws/sh" ]
	still_serving 2
}
