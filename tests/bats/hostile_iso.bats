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

# sb_uid NAME: the uid runs of isolated sandbox NAME have.
sb_uid() {
	run_in "$1" 'id -u'
}

@test "hostile_iso: isolated sandboxes get uids of their own from local.isolation_ids; one's uid cannot read another's /proc/PID/environ" {
	ctl_write "$MNT/ctl" "new a provider=local isolation=bwrap" >/dev/null
	ctl_write "$MNT/ctl" "new b provider=local isolation=bwrap env.SFS_ISO_SECRET=b-secret-$$" >/dev/null
	ua=$(sb_uid a)
	ub=$(sb_uid b)
	[ "$ua" != "$ub" ]
	for u in "$ua" "$ub"; do
		[ "$u" -ge 2147000000 ]
		[ "$u" -lt 2147065536 ]
	done
	[ "$(run_in a 'id -g')" = "$ua" ]
	# each workspace is its own sandbox's
	[ "$(stat -c %u:%g "$MNT/a/workspace")" = "$ua:$ua" ]
	[ "$(stat -c %u:%g "$MNT/b/workspace")" = "$ub:$ub" ]
	[ -f "$STATE/isolation-ids/$ua" ]
	[ -f "$STATE/isolation-ids/$ub" ]
	run_in b "setsid sleep 3017 >/dev/null 2>&1 & echo ok" >/dev/null
	wait_for pgrep -u "$ub" -f 'sleep 3017'
	pid=$(pgrep -u "$ub" -f 'sleep 3017' | head -1)
	# what a set-uid file of sandbox a would give a host user: a's uid
	run ! setpriv --reuid="$ua" --regid="$ua" --clear-groups cat "/proc/$pid/environ"
	[[ "$output" != *b-secret* ]]
	# the control: b's own uid reads it (so the refusal above is the uid's)
	setpriv --reuid="$ub" --regid="$ub" --clear-groups cat "/proc/$pid/environ" | tr '\0' '\n' | grep -qx "SFS_ISO_SECRET=b-secret-$$"
	# destroy gives the id back; a new sandbox may take it
	rmdir "$MNT/a"
	[ ! -e "$STATE/isolation-ids/$ua" ]
	still_serving 3
}

@test "hostile_iso: a sandbox keeps its uid across a daemon restart; a fork gets a uid of its own and its files; local.isolation_ids is checked" {
	new_iso box >/dev/null
	u=$(sb_uid box)
	run_in box 'echo kept >f; mkdir d; echo x >d/g; ln -s /etc/passwd l' >/dev/null
	crash_daemon
	iso_kill_holders
	sfs_mount
	[ "$(sb_uid box)" = "$u" ]
	ctl_write "$MNT/box/ctl" "fork copy" >/dev/null
	c=$(sb_uid copy)
	[ "$c" != "$u" ]
	# the copy's files are the copy's uid's: its runs write them
	run run_in copy 'stat -c %u f d d/g; echo more >>f; echo y >d/g; cat f'
	[ "$status" -eq 0 ]
	[ "$(sed -n 1,3p <<<"$output" | sort -u)" = "$c" ]
	[[ "$output" == *more* ]]
	# the symlink was changed itself, not /etc/passwd
	[ "$(stat -c %u /etc/passwd)" = 0 ]
	still_serving 4
	# a range with root or nobody in it, or past the last uid, is refused at new
	local bad
	for bad in 0:10 60000:10000 4294967290:10 x:1 5:; do
		sfs_unmount
		sfs_mount -o "local.isolation_ids=$bad"
		run bash -c "echo 'new bad provider=local isolation=bwrap' >'$MNT/ctl'"
		[[ "$output" == *"Invalid argument"* ]]
		[ ! -e "$MNT/bad" ]
	done
}

@test "hostile_iso: a record from before ids of their own (shared uid 65534) still loads and runs" {
	new_iso box >/dev/null
	run_in box 'echo old >f' >/dev/null
	crash_daemon
	iso_kill_holders
	local ws
	ws=$(ls -d "$STATE"/sandboxes/*/workspace)
	chown -R 65534:65534 "$ws"
	jq '(.. | objects | select(has("isolation")) ) |= (del(.uid, .gid) | .holder.uid = 65534 | .holder.gid = 65534)' "$STATE/registry.json" >"$STATE/registry.new"
	mv "$STATE/registry.new" "$STATE/registry.json"
	rm -f "$STATE"/sandboxes/*/holder
	sfs_mount
	run run_in box 'id -u; cat f; echo new >>f'
	[ "$status" -eq 0 ]
	[ "$(head -n1 <<<"$output")" = 65534 ]
	[[ "$output" == *old* ]]
	still_serving 5
}

@test "hostile_iso: runs' umask: 077 isolated, 022 not, umask= on new and local.umask; checked, recorded, not in the command's env" {
	new_iso box >/dev/null
	ctl_write "$MNT/ctl" "new plain provider=local" >/dev/null
	ctl_write "$MNT/ctl" "new own provider=local isolation=bwrap umask=0027" >/dev/null
	grep -qx 'umask 0077' "$MNT/box/status"
	grep -qx 'umask 0022' "$MNT/plain/status"
	grep -qx 'umask 0027' "$MNT/own/status"
	local probe='umask; touch f; mkdir d; stat -c %a f d; if env | grep -q SANDBOXFS_RUN_UMASK; then echo LEAKED; fi'
	[ "$(run_in box "$probe" | tr '\n' ' ')" = "0077 600 700 " ]
	[ "$(run_in plain "$probe" | tr '\n' ' ')" = "0022 644 755 " ]
	[ "$(run_in own "$probe" | tr '\n' ' ')" = "0027 640 750 " ]
	# what host users see of them
	[ "$(stat -c %a "$MNT/box/workspace/f")" = 600 ]
	local bad
	for bad in 0999 1777 0o77 -022 '' 00777; do
		run bash -c "echo 'new bad provider=local umask=$bad' >'$MNT/ctl'"
		[[ "$output" == *"Invalid argument"* ]]
		[ ! -e "$MNT/bad" ]
	done
	# kept across a restart; a fork takes its source's
	crash_daemon
	sfs_mount -o local.umask=0007
	grep -qx 'umask 0027' "$MNT/own/status"
	ctl_write "$MNT/own/ctl" "fork copy" >/dev/null
	grep -qx 'umask 0027' "$MNT/copy/status"
	# local.umask is the default of new sandboxes, isolated or not
	ctl_write "$MNT/ctl" "new conf provider=local" >/dev/null
	[ "$(run_in conf 'umask')" = 0007 ]
	mkdir -p "$BATS_TEST_TMPDIR/s2" "$BATS_TEST_TMPDIR/m2"
	run timeout 10 "$SFS_BIN" -f --state "$BATS_TEST_TMPDIR/s2" -o local.umask=01777 "$BATS_TEST_TMPDIR/m2"
	[ "$status" -ne 0 ]
	[ "$status" -ne 124 ]
	[[ "$output" == *local.umask* ]]
	still_serving 6
}

@test "hostile_iso: restore writes an isolated sandbox's workspace as its own uid: a directory the sandbox cannot write stays as it was" {
	new_iso box >/dev/null
	[ "$(run_in box 'mkdir -p mine; echo one >mine/f; echo one >top; echo done')" = done ]
	local ws uid
	ws=$(awk '$1 == "id" { print $2 }' "$MNT/box/status")
	uid=$(stat -c %u "$ws/mine")
	[ "$uid" -ge 2147000000 ]
	# the host puts a directory of root's in the workspace: the sandbox may
	# read it, not write it
	mkdir "$ws/rootdir"
	echo one >"$ws/rootdir/g"
	chmod 0755 "$ws/rootdir"
	chmod 0644 "$ws/rootdir/g"
	ctl_write "$MNT/box/ctl" 'snapshot s1' >/dev/null
	[ "$(run_in box 'echo two >mine/f; echo two >top; echo done')" = done ]
	echo two >"$ws/rootdir/g"
	# restore as root would write rootdir/g; as the sandbox's uid it is refused
	run ctl_write "$MNT/box/ctl" 'restore s1'
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"rootdir"* ]]
	[[ "$output" == *"ermission denied"* ]]
	[ "$(cat "$ws/rootdir/g")" = two ]
	[ "$(stat -c %u "$ws/rootdir/g")" = 0 ]
	# without the directory of root's, restore does its work, as the sandbox
	rm -rf "$ws/rootdir"
	run ctl_write "$MNT/box/ctl" 'restore s1'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(cat "$ws/mine/f")" = one ]
	[ "$(cat "$ws/top")" = one ]
	[ "$(stat -c %u "$ws/top")" = "$uid" ]
	[ "$(stat -c %u "$ws/mine/f")" = "$uid" ]
	still_serving 1
}
