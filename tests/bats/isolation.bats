#!/usr/bin/env bats
# isolation=bwrap for local sandboxes (SPEC §11): every test looks from
# inside a run at what a sandboxed command can see and do.

load helpers
load docker_helpers
load iso_helpers

setup() {
	iso_require
	# the daemon's own environment must not reach an isolated run
	export SFS_ISO_CANARY="canary-$$-value"
	sfs_mount
}

teardown() {
	iso_teardown
	rm -f ${ISO_ETC_FILES:-}
}

@test "isolation=bwrap: status says so; system dirs read-only, workspace writable, \$HOME and the state dir absent" {
	new_iso box
	grep -qx 'isolation bwrap' "$MNT/box/status"
	grep -qx 'workspace /workspace' "$MNT/box/status"
	echo from-host >"$MNT/box/workspace/in"
	# one line: exec takes the rest of its line
	run run_in box "cat in; echo made >out; pwd; for f in /usr/sandboxfs-x /etc/sandboxfs-x; do if touch \$f 2>/dev/null; then echo WROTE \$f; fi; done; if [ -e '$HOME' ]; then echo HOME-SEEN; fi; if [ -e '$STATE' ]; then echo STATE-SEEN; fi; if [ -e '$BATS_TEST_TMPDIR' ]; then echo TMPDIR-SEEN; fi; if cat /etc/shadow 2>/dev/null; then echo SHADOW-READ; fi; echo done"
	[ "$status" -eq 0 ]
	[[ "$output" == *from-host* ]]
	[[ "$output" == *"/workspace"* ]]
	[[ "$output" != *WROTE* ]]
	[[ "$output" != *SEEN* ]]
	[[ "$output" != *SHADOW-READ* ]]
	[[ "$output" == *done* ]]
	[ "$(cat "$MNT/box/workspace/out")" = made ]
	[ ! -e /usr/sandboxfs-x ]
	[ ! -e /etc/sandboxfs-x ]
	# the file's host owner: the sandbox's uid, never root
	owner=$(stat -c %u "$STATE"/sandboxes/*/workspace/out)
	[ "$owner" -ne 0 ]
	grep -qx 'isolation none' <(ctl_write "$MNT/ctl" "new plain provider=local" && cat "$MNT/plain/status")
}

@test "isolation=bwrap: no capabilities, not host root, host processes invisible, daemon env and bwrap argv clean" {
	new_iso box
	run run_in box 'grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Uid):" /proc/self/status; echo "map $(cat /proc/self/uid_map)"; echo "procs $(ls /proc | grep -c "^[0-9]")"; echo "host $(hostname)"; if unshare -Ur true 2>/dev/null; then echo NESTED-USERNS; fi; if mount -o remount,rw /usr 2>/dev/null; then echo REMOUNTED; fi; cat /proc/1/cmdline /proc/1/environ 2>/dev/null | tr "\0" " "; echo; env'
	[ "$status" -eq 0 ]
	for c in CapInh CapPrm CapEff CapBnd CapAmb; do
		grep -qx "$c:	0000000000000000" <<<"$output"
	done
	grep -qx 'NoNewPrivs:	1' <<<"$output"
	# inside uid 65534 (whatever it is) maps to a host uid that is not 0
	read -r _ inside outside _ < <(grep '^map ' <<<"$output")
	uid_line=$(grep '^Uid:' <<<"$output")
	[[ "$uid_line" != *"	0	"* ]]
	[ "$inside" -ne 0 ]
	[ -n "$outside" ]
	# only the sandbox's own processes: its pid 1, the holder, this run
	procs=$(grep '^procs ' <<<"$output" | cut -d' ' -f2)
	[ "$procs" -lt 10 ]
	grep -qx 'host box' <<<"$output"
	[[ "$output" != *NESTED-USERNS* ]]
	[[ "$output" != *REMOUNTED* ]]
	[[ "$output" != *"$SFS_ISO_CANARY"* ]]
	# the run's host processes are not root either
	run_cmd_n=$(ctl_write "$MNT/box/ctl" "exec sleep 30")
	wait_for eval 'test -n "$(sfs_run_pids "$STATE")"'
	holder=$(jq -r .holder.target "$STATE"/sandboxes/*/holder)
	ns=$(readlink "/proc/$holder/ns/pid")
	inside=0
	for p in $(sfs_run_pids "$STATE"); do
		# the run wrapper stays outside, on the host; what runs inside is not root
		[ "$(readlink "/proc/$p/ns/pid")" = "$ns" ] || continue
		inside=$((inside + 1))
		[ "$(awk '/^Uid:/ {print $3}' "/proc/$p/status")" -ne 0 ]
	done
	[ "$inside" -ge 1 ]
	ctl_write "$MNT/box/ctl" "kill $run_cmd_n"
}

@test "isolation=bwrap: sandboxfs's config file (credentials) and secret values stay out of sight inside" {
	conf=/etc/sandboxfs-isotest-$$.conf
	echo "git.token = conf-canary-$$" >"$conf"
	sfs_unmount
	sfs_mount --config "$conf" || {
		rm -f "$conf"
		false
	}
	ctl_write "$MNT/ctl" "new box provider=local isolation=bwrap secret.API_TOKEN=env:SFS_ISO_CANARY"
	run run_in box "cat $conf 2>&1; echo token-length \${#API_TOKEN}; cat /proc/1/cmdline /proc/1/environ /proc/2/environ 2>&1 | tr '\\0' ' '"
	rm -f "$conf"
	[ "$status" -eq 0 ]
	[[ "$output" != *"conf-canary-$$"* ]]
	# the secret reaches the run's environment, and only there
	grep -qx "token-length ${#SFS_ISO_CANARY}" <<<"$output"
	[[ "$output" != *"$SFS_ISO_CANARY"* ]]
}

@test "isolation=bwrap: a --config that is a symlink still makes isolated sandboxes, its target masked" {
	local real=/etc/sandboxfs-isoreal-$$.conf link=/etc/sandboxfs-isolink-$$.conf
	local away=/etc/sandboxfs-isoaway-$$.conf
	ISO_ETC_FILES="$real $link $away"
	echo "git.token = conf-canary-$$" >"$real"
	ln -s "$real" "$link"
	sfs_unmount
	sfs_mount --config "$link"
	run new_iso box
	[ "$status" -eq 0 ]
	run run_in box "cat $link $real 2>&1; echo done"
	[ "$status" -eq 0 ]
	[[ "$output" != *"conf-canary-$$"* ]]
	[[ "$output" == *done* ]]
	# a link in /etc to a config elsewhere: nothing to mask inside
	cp "$real" "$BATS_TEST_TMPDIR/away.conf"
	ln -s "$BATS_TEST_TMPDIR/away.conf" "$away"
	sfs_unmount
	sfs_mount --config "$away"
	run new_iso box2
	[ "$status" -eq 0 ]
	run run_in box2 "cat $away 2>&1; echo done"
	[ "$status" -eq 0 ]
	[[ "$output" != *"conf-canary-$$"* ]]
}

@test "isolation=bwrap: a joined run has a seccomp filter: TIOCSTI and the keyrings are refused" {
	new_iso box
	cat >"$MNT/box/workspace/probe.py" <<'PY'
import ctypes, errno, fcntl, os, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("tiocsti ok")
except OSError as e:
    print("tiocsti", errno.errorcode[e.errno])
libc = ctypes.CDLL(None, use_errno=True)
# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0): syscall 250 on x86_64
if os.uname().machine == "x86_64":
    r = libc.syscall(250, 0, -3, 0)
    print("keyctl", errno.errorcode.get(ctypes.get_errno(), r) if r < 0 else "ok")
PY
	run run_in box 'grep "^Seccomp:" /proc/self/status; /usr/bin/python3 probe.py'
	[ "$status" -eq 0 ]
	grep -qx 'Seccomp:	2' <<<"$output"
	grep -qx 'tiocsti EPERM' <<<"$output"
	if [ "$(uname -m)" = x86_64 ]; then grep -qx 'keyctl EPERM' <<<"$output"; fi
}

@test "isolation=bwrap: runs share one namespace set: run 1's background process and /tmp are seen by run 2, not by the host" {
	new_iso box
	run run_in box "sleep 300 >/dev/null 2>&1 & echo \$! >/tmp/bg-$$; echo started"
	[ "$status" -eq 0 ]
	[ ! -e "/tmp/bg-$$" ]
	run run_in box "kill -0 \$(cat /tmp/bg-$$) && echo alive; ps -eo args | grep -c '^sleep 300'"
	[ "$status" -eq 0 ]
	[[ "$output" == *alive* ]]
	# and a second sandbox sees none of it
	new_iso other
	run run_in other "if [ -e /tmp/bg-$$ ]; then echo SHARED; fi; ps -eo args | grep -c '^sleep 300' || true"
	[[ "$output" != *SHARED* ]]
	[[ "$output" == 0 ]]
}

@test "isolation=bwrap: kill and cancel end every process of the sandbox, also one that left the run's group" {
	new_iso box
	n=$(ctl_write "$MNT/box/ctl" "exec setsid sleep 300 & sleep 300")
	wait_for eval 'test "$(sfs_run_pids "$STATE" | wc -l)" -ge 2'
	ctl_write "$MNT/box/ctl" "kill $n"
	[ "$(cat "$MNT/box/runs/$n/wait")" != running ]
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
	[ -z "$(sfs_run_pids "$STATE")" ]
	# the next run gets a fresh namespace, with nothing of the old one
	run run_in box "ps -eo args | grep -c '^sleep 300' || true"
	[ "$output" = 0 ]
	# cancel does the same
	n=$(ctl_write "$MNT/box/ctl" "exec setsid sleep 300 & sleep 300")
	wait_for eval 'test "$(sfs_run_pids "$STATE" | wc -l)" -ge 2'
	ctl_write "$MNT/box/ctl" "cancel $n"
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
	[ -z "$(sfs_run_pids "$STATE")" ]
}

@test "isolation=bwrap: takeover after a daemon restart joins the same namespace" {
	new_iso box
	run run_in box "sleep 300 >/dev/null 2>&1 & echo \$! >/tmp/bg; echo started"
	[ "$status" -eq 0 ]
	holder=$(jq -r .holder.target "$STATE"/sandboxes/*/holder)
	crash_daemon
	kill -0 "$holder"
	sfs_mount
	grep -qx 'isolation bwrap' "$MNT/box/status"
	run run_in box 'kill -0 $(cat /tmp/bg) && echo still-there'
	[ "$status" -eq 0 ]
	[[ "$output" == *still-there* ]]
	[ "$(jq -r .holder.target "$STATE"/sandboxes/*/holder)" = "$holder" ]
}

@test "isolation=bwrap: rmdir ends the namespace and its processes" {
	new_iso box
	run run_in box "setsid sleep 300 >/dev/null 2>&1 & echo ok"
	holder=$(jq -r .holder.target "$STATE"/sandboxes/*/holder)
	kill -0 "$holder"
	rmdir "$MNT/box"
	wait_for test ! -e "/proc/$holder"
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
	[ -z "$(sfs_run_pids "$STATE")" ]
}

@test "isolation=bwrap: unmounting ends the daemon while a sandbox's namespace lives on (no copy of the mount pins it), and a new daemon takes the sandbox over" {
	new_iso box
	run run_in box 'echo inside'
	[ "$output" = inside ]
	fusermount3 -u "$MNT"
	wait_for daemon_gone
	# the holder outlived the daemon, as takeover wants
	[ -n "$(jq -r .holder.target "$STATE"/sandboxes/*/holder)" ]
	kill -0 "$(jq -r .holder.target "$STATE"/sandboxes/*/holder)"
	sfs_mount
	run run_in box 'echo again'
	[ "$output" = again ]
}

@test "isolation=bwrap: a missing bwrap is EOPNOTSUPP saying why; bad values are EINVAL; network= needs bwrap" {
	sfs_unmount
	sfs_mount -o local.bwrap=/nonexistent/bwrap
	exec 7<>"$MNT/ctl"
	run bash -c 'echo "new box provider=local isolation=bwrap" >&7'
	[[ "$output" == *"Operation not supported"* ]]
	msg=$(cat <&7)
	exec 7>&-
	[[ "$msg" == *"bubblewrap"* ]]
	[ ! -e "$MNT/box" ]
	run bash -c "echo 'new box provider=local isolation=chroot' >'$MNT/ctl'"
	[[ "$output" == *"Invalid argument"* ]]
	run bash -c "echo 'new box provider=local network=none' >'$MNT/ctl'"
	[[ "$output" == *"Operation not supported"* ]]
	[ ! -e "$MNT/box" ]
}

@test "isolation=bwrap: local.isolation=bwrap makes it the default of mkdir" {
	sfs_unmount
	sfs_mount -o local.isolation=bwrap
	mkdir "$MNT/box"
	grep -qx 'isolation bwrap' "$MNT/box/status"
	run run_in box 'grep CapEff /proc/self/status; hostname'
	[[ "$output" == *"0000000000000000"* ]]
	[[ "$output" == *box* ]]
}

@test "network=none: loopback only; a server on the host's loopback is not reached (host mode reaches it)" {
	net_setup
	new_iso open "network=host"
	run run_in open "curl -sf -m 5 http://$A:$PORT/"
	[ "$status" -eq 0 ]
	[[ "$output" == *"page of good"* ]]
	new_iso shut "network=none"
	grep -qx 'network none' "$MNT/shut/status"
	run run_in shut "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; if curl -sf -m 5 http://$A:$PORT/; then echo REACHED; fi"
	net_teardown_servers
	[ "$status" -eq 0 ]
	[ "$output" = lo ]
}

@test "network=allow: an allowed name is reached (HTTP and CONNECT), another is refused and logged, nothing goes around the proxy" {
	net_setup
	new_iso box "network=allow:good.test:$PORT,*.good.test:$PORT"
	grep -qx 'networkPolicy true' "$MNT/box/caps"
	run run_in box "curl -sf -m 5 http://good.test:$PORT/; curl -sf -m 5 -p http://good.test:$PORT/; curl -sf -m 5 http://a.good.test:$PORT/; echo bad \$(curl -s -m 5 -o /dev/null -w '%{http_code}' http://bad.test:$PORT/); curl -s -m 5 -p http://bad.test:$PORT/ >/dev/null; echo tunnel-rc \$?; echo port \$(curl -s -m 5 -o /dev/null -w '%{http_code}' http://good.test:1/); if curl -sf -m 5 --noproxy '*' http://$A:$PORT/; then echo AROUND; fi"
	net_teardown_servers
	[ "$status" -eq 0 ]
	[ "$(grep -c '^page of good$' <<<"$output")" = 3 ]
	grep -qx 'bad 403' <<<"$output"
	grep -qx 'tunnel-rc 56' <<<"$output"
	grep -qx 'port 403' <<<"$output"
	[[ "$output" != *"page of bad"* ]]
	[[ "$output" != *AROUND* ]]
	grep -q "box: network: refused GET bad.test:$PORT" "$BATS_TEST_TMPDIR/daemon.log"
	grep -q "box: network: refused CONNECT bad.test:$PORT" "$BATS_TEST_TMPDIR/daemon.log"
}

@test "policy network: later runs get the new policy; bad values are EINVAL, a sandbox without isolation EOPNOTSUPP" {
	net_setup
	new_iso box "network=none"
	run run_in box "curl -s -m 5 -o /dev/null -w '%{http_code}' -x http://127.0.0.1:3128 http://good.test:$PORT/"
	[[ "$output" != 200 ]]
	ctl_write "$MNT/box/ctl" "policy network allow:good.test:$PORT"
	grep -qx "network allow:good.test:$PORT" "$MNT/box/status"
	run run_in box "curl -sf -m 5 http://good.test:$PORT/"
	[[ "$output" == *"page of good"* ]]
	ctl_write "$MNT/box/ctl" "policy network allow:bad.test:$PORT"
	run run_in box "curl -s -m 5 -o /dev/null -w '%{http_code}' http://good.test:$PORT/"
	[ "$output" = 403 ]
	run bash -c "echo 'policy network allow:*' >'$MNT/box/ctl'"
	[[ "$output" == *"Invalid argument"* ]]
	run bash -c "echo 'policy network allow:*.test' >'$MNT/box/ctl'"
	[[ "$output" == *"Invalid argument"* ]]
	run bash -c "echo 'policy network sometimes' >'$MNT/box/ctl'"
	[[ "$output" == *"Invalid argument"* ]]
	grep -qx "network allow:bad.test:$PORT" "$MNT/box/status"
	# off and on again at once: the proxy's port in the namespace is free again
	ctl_write "$MNT/box/ctl" "policy network none"
	ctl_write "$MNT/box/ctl" "policy network allow:good.test:$PORT"
	run run_in box "curl -sf -m 5 http://good.test:$PORT/"
	[[ "$output" == *"page of good"* ]]
	# to the host's network: a new namespace set for the next run
	ctl_write "$MNT/box/ctl" "policy network host"
	run run_in box "curl -sf -m 5 http://$A:$PORT/"
	net_teardown_servers
	[[ "$output" == *"page of good"* ]]
	mkdir "$MNT/plain"
	grep -qx 'networkPolicy false' "$MNT/plain/caps"
	grep -qx 'networkPolicy false' "$MNT/providers/local/caps"
	run bash -c "echo 'policy network none' >'$MNT/plain/ctl'"
	[[ "$output" == *"Operation not supported"* ]]
}

@test "network=allow: a process left running across a daemon restart reaches the proxy again before any new run" {
	net_setup
	new_iso box "network=allow:good.test:$PORT"
	ctl_write "$MNT/box/ctl" "exec sleep 5; curl -sf -m 5 http://good.test:$PORT/ >late.out"
	crash_daemon
	sfs_mount -o "proxy.resolve=good.test=$A;bad.test=$B"
	ws=$(echo "$STATE"/sandboxes/*/workspace)
	wait_for grep -q "page of good" "$ws/late.out"
	net_teardown_servers
	grep -q "page of good" "$ws/late.out"
}

@test "network=allow: the proxy is also the unix socket bound at /run/sandboxfs, and survives a daemon restart" {
	net_setup
	new_iso box "network=allow:good.test:$PORT"
	run run_in box "test -S /run/sandboxfs/proxy.sock && echo socket; curl -sf -m 5 http://good.test:$PORT/"
	[[ "$output" == *socket* ]]
	[[ "$output" == *"page of good"* ]]
	crash_daemon
	sfs_mount -o "proxy.resolve=good.test=$A;bad.test=$B"
	run run_in box "curl -sf -m 5 http://good.test:$PORT/; echo bad \$(curl -s -m 5 -o /dev/null -w '%{http_code}' http://bad.test:$PORT/)"
	net_teardown_servers
	[[ "$output" == *"page of good"* ]]
	grep -qx 'bad 403' <<<"$output"
}

@test "docker network=none and allow:: none reaches nothing, allow: reaches an allowed name through the proxy and is refused another" {
	docker_require
	net_setup
	img=$SFS_DOCKER_IMAGE
	# the control: Docker's host network reaches the host's loopback server
	# (busybox wget: its -T crashes in this image, and refusals are quick)
	ctl_write "$MNT/ctl" "new dh provider=docker image=$img network=host"
	run run_in dh "wget -q -O - http://$A:$PORT/"
	[[ "$output" == *"page of good"* ]]
	ctl_write "$MNT/ctl" "new dn provider=docker image=$img network=none"
	run run_in dn "if wget -q -O - http://$A:$PORT/; then echo REACHED; fi; if wget -q -O - http://good.test:$PORT/; then echo REACHED; fi; echo tried"
	[ "$status" -eq 0 ]
	[[ "$output" != *REACHED* ]]
	ctl_write "$MNT/ctl" "new da provider=docker image=$img network=allow:good.test:$PORT"
	grep -qx 'networkPolicy true' "$MNT/da/caps"
	run run_in da "wget -q -O - http://good.test:$PORT/; if wget -q -O - http://bad.test:$PORT/; then echo BAD-REACHED; fi; if wget -q -O - --proxy off http://$A:$PORT/; then echo AROUND; fi; test -S /run/sandboxfs/proxy.sock && echo socket; if touch /run/sandboxfs/planted; then echo PLANTED; fi"
	[[ "$output" == *"page of good"* ]]
	[[ "$output" != *PLANTED* ]]
	[[ "$output" != *BAD-REACHED* ]]
	[[ "$output" != *AROUND* ]]
	[[ "$output" == *socket* ]]
	grep -q "da: network: refused GET bad.test:$PORT" "$BATS_TEST_TMPDIR/daemon.log"
	# an allow-list changes under the container; its network mode cannot
	ctl_write "$MNT/da/ctl" "policy network allow:bad.test:$PORT"
	run run_in da "wget -q -O - http://bad.test:$PORT/; if wget -q -O - http://good.test:$PORT/; then echo GOOD-REACHED; fi"
	net_teardown_servers
	[[ "$output" == *"page of bad"* ]]
	[[ "$output" != *GOOD-REACHED* ]]
	run bash -c "echo 'policy network host' >'$MNT/da/ctl'"
	[[ "$output" == *"Operation not supported"* ]]
	run bash -c "echo 'policy network allow:good.test' >'$MNT/dn/ctl'"
	[[ "$output" == *"Operation not supported"* ]]
}

@test "isolation=bwrap: a fork is isolated like its source; expose needs network=host" {
	new_iso box "network=none"
	run run_in box "echo kept >f"
	ctl_write "$MNT/box/ctl" "fork copy"
	grep -qx 'isolation bwrap' "$MNT/copy/status"
	grep -qx 'network none' "$MNT/copy/status"
	run run_in copy 'cat f; grep CapEff /proc/self/status; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	[ "$status" -eq 0 ]
	[[ "$output" == *kept* ]]
	[[ "$output" == *"0000000000000000"* ]]
	[ "$(echo "$output" | tail -n1)" = lo ]
	run bash -c "echo 'expose 8080' >'$MNT/box/ctl'"
	[[ "$output" == *"Operation not supported"* ]]
	new_iso open "network=host"
	ctl_write "$MNT/open/ctl" "expose 8080"
	[ "$(cat "$MNT/open/ports/8080")" = "http://127.0.0.1:8080" ]
}
