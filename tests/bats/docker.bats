#!/usr/bin/env bats
# The docker provider against a real engine and the local image
# sandboxfs-test:latest (busybox: sh, setsid, kill, tail, ps, httpd).  Every
# test skips by name when Docker is not usable (SFS_DOCKER_UNAVAILABLE, no
# engine, no image), and teardown removes the containers and images it made.

load helpers
load docker_helpers

setup() {
	docker_require
}

teardown() {
	docker_teardown
}

# ---- the provider -----------------------------------------------------------

@test "docker: providers/docker is configured and its caps are what these tests prove" {
	sfs_mount
	grep -qx 'configured true' "$MNT/providers/docker/status"
	grep -q '^reason ready: Docker Engine API' "$MNT/providers/docker/status"
	grep -qx 'journal follow' "$MNT/providers/docker/status"
	expected='fs true
exec true
env true
ports true
backgroundProcesses true
writableStdin false
killableProcesses true
snapshots true
networkPolicy true
durableFilesystem true
fork true'
	[ "$(cat "$MNT/providers/docker/caps")" = "$expected" ]
}

@test "docker: new with an image that is not here fails cleanly and leaves nothing" {
	sfs_mount
	run dk_new_missing
	[ "$status" -ne 0 ]
	[[ "$output" == "error: docker: image 127.0.0.1:1/none:latest is not here and pulling it failed"* ]]
	[ ! -e "$MNT/nope" ]
	[ -z "$(docker ps -aq --filter "label=sandboxfs.state=$STATE")" ]
	run dk_new bad workdir=relative
	[ "$status" -ne 0 ]
	[[ "$output" == *"workdir=relative: expected an absolute path"* ]]
	run dk_new bad colour=blue
	[ "$status" -ne 0 ]
	[[ "$output" == *'unknown option "colour"'* ]]
	[ ! -e "$MNT/bad" ]
}

dk_new_missing() {
	# a name no registry can be reached for: the test never leaves this host
	dk_ctl "$MNT/ctl" "new nope provider=docker image=127.0.0.1:1/none:latest"
}

# ---- runs and journals ------------------------------------------------------

@test "docker: exec runs in the workspace with the sandbox env; cat journal streams live; status and wait" {
	sfs_mount
	run dk_new d1 env.GREETING=hello
	[ "$status" -eq 0 ]
	[ "$output" = d1 ]
	grep -qx 'provider docker' "$MNT/d1/status"
	grep -qx 'state running' "$MNT/d1/status"
	grep -qx "image $SFS_DOCKER_IMAGE" "$MNT/d1/status"
	grep -qx 'journal follow' "$MNT/d1/status"
	grep -qx 'workspace /workspace' "$MNT/d1/status"
	id=$(dk_id d1)
	[ "$(docker inspect -f '{{.State.Running}} {{index .Config.Labels "sandboxfs.name"}}' "$id")" = "true d1" ]

	n=$(dk_exec d1 'echo "$GREETING from $(pwd)"; for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.3; done; echo oops >&2; exit 3')
	[ "$n" = 1 ]
	cat "$MNT/d1/journal" >"$BATS_TEST_TMPDIR/live" &
	reader=$!
	wait_for grep -q 'tick 1' "$BATS_TEST_TMPDIR/live"
	# seen while the run is still going: the read streamed
	[ "$(cat "$MNT/d1/runs/1/status")" = running ]
	wait "$reader"
	[ "$(cat "$BATS_TEST_TMPDIR/live")" = "$(printf 'hello from /workspace\ntick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\noops')" ]
	[ "$(cat "$MNT/d1/runs/1/wait")" = "exited 3" ]
	[ "$(cat "$MNT/d1/runs/1/status")" = "exited 3" ]
	[ "$(stat -c %s "$MNT/d1/runs/1/journal")" -eq "$(wc -c <"$BATS_TEST_TMPDIR/live")" ]

	# env for later runs
	dk_ctl "$MNT/d1/ctl" "env GREETING=bye OTHER=x" >/dev/null
	n=$(dk_exec d1 'echo "$GREETING $OTHER $HOME"')
	[ "$(cat "$MNT/d1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/d1/runs/$n/journal")" = "bye x /root" ]
	dk_ctl "$MNT/d1/ctl" "unsetenv OTHER" >/dev/null
	n=$(dk_exec d1 'echo "[${OTHER:-unset}]"')
	[ "$(cat "$MNT/d1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/d1/runs/$n/journal")" = "[unset]" ]
}

@test "docker: kill signals the whole process group; a grandchild ignoring TERM is gone after it" {
	sfs_mount -o docker.kill_grace=1
	dk_new k1 >/dev/null
	n=$(dk_exec k1 'trap "" TERM; sh -c "trap \"\" TERM; sleep 300" & sleep 301')
	wait_for dk_count_is k1 'sleep 30[01]' 2
	echo kill >"$MNT/k1/runs/$n/ctl"
	[ "$(cat "$MNT/k1/runs/$n/wait")" = "killed KILL" ]
	# from inside, with a run of our own: no sleeper, not even a zombie
	m=$(dk_exec k1 'ps -o pid,stat,args')
	[ "$(cat "$MNT/k1/runs/$m/wait")" = "exited 0" ]
	run grep -cE 'sleep 30[01]$' "$MNT/k1/runs/$m/journal"
	[ "$output" = 0 ]
	[ "$(dk_count_in k1 'sleep 30[01]')" -eq 0 ]

	# a plain signal, no escalation
	n=$(dk_exec k1 'sleep 302')
	wait_for dk_count_is k1 'sleep 302' 1
	dk_ctl "$MNT/k1/ctl" "kill $n INT" >/dev/null
	[ "$(cat "$MNT/k1/runs/$n/wait")" = "killed INT" ]

	# nothing left to kill
	run dk_ctl "$MNT/k1/ctl" "kill $n"
	[ "$status" -ne 0 ]
	[[ "$output" == *"is not running"* ]]
}

@test "docker: dropping an exec's stream does not stop its process; our kill does" {
	sfs_mount
	dk_new s1 >/dev/null
	id=$(dk_id s1)
	# the docker CLI killed mid-exec: its hijacked stream is gone, the process is not
	timeout -s KILL 2 docker exec "$id" sleep 310 || true
	[ "$(dk_count_in s1 'sleep 310')" -eq 1 ]
	n=$(dk_exec s1 'sleep 311')
	wait_for dk_count_is s1 'sleep 311' 1
	dk_ctl "$MNT/s1/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/s1/runs/$n/wait")" = "killed TERM" ]
	[ "$(dk_count_in s1 'sleep 311')" -eq 0 ]
	[ "$(dk_count_in s1 'sleep 310')" -eq 1 ]
}

@test "docker: follow path (docker.fs=archive): tail -f streams, 500 reader opens leave no follower" {
	sfs_mount -o docker.fs=archive
	dk_new f1 >/dev/null
	n=$(dk_exec f1 'i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done')
	timeout 20 cat "$MNT/f1/runs/$n/journal" >"$BATS_TEST_TMPDIR/live" &
	reader=$!
	wait_for grep -qx 'tick 8' "$BATS_TEST_TMPDIR/live"
	[ "$(dk_count_in f1 'tail -c')" -eq 1 ]
	grep -qx 'followers 1' "$MNT/f1/status"
	kill "$reader"
	wait "$reader" || true

	for batch in $(seq 1 50); do
		pids=()
		for r in $(seq 1 10); do
			timeout 0.3 cat "$MNT/f1/runs/$n/journal" >/dev/null &
			pids+=($!)
		done
		wait "${pids[@]}" || true # (a plain wait would wait for the daemon too)
	done
	# with the readers gone, no follower is left in the container
	wait_for dk_count_is f1 'tail -c' 0
	wait_for grep -qx 'followers 0' "$MNT/f1/status"

	dk_ctl "$MNT/f1/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/f1/runs/$n/wait")" = "killed TERM" ]
	# the whole journal, fetched once the run ended
	m=$(grep -c '^tick' "$MNT/f1/runs/$n/journal")
	[ "$m" -ge 8 ]
	[ "$(dk_count_in f1 'tail -c')" -eq 0 ]

	# a finished run reads to the end at once
	n=$(dk_exec f1 'echo one; echo two')
	[ "$(cat "$MNT/f1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/f1/runs/$n/journal")" = "$(printf 'one\ntwo')" ]
}


@test "docker: workspace/ through the archive API (docker.fs=archive): ls, cat, echo >, mv, rm, mkdir, links" {
	sfs_mount -o docker.fs=archive -o remote.attr_timeout=0.2
	dk_new a1 >/dev/null
	id=$(dk_id a1)
	W=$MNT/a1/workspace
	[ -z "$(ls "$W")" ]
	echo "from host" >"$W/a.txt"
	[ "$(docker exec "$id" cat /workspace/a.txt)" = "from host" ]
	docker exec "$id" sh -c 'echo from container >/workspace/b.txt; mkdir /workspace/sub; echo spaced >"/workspace/with space"; ln -s /etc/passwd /workspace/abs; ln -s b.txt /workspace/rel'
	sleep 0.3 # the listing above was cached for remote.attr_timeout
	[ "$(cat "$W/b.txt")" = "from container" ]
	[ "$(cat "$W/with space")" = spaced ]
	[ "$(cat "$W/rel")" = "from container" ]
	run cat "$W/abs"
	[ "$status" -ne 0 ]
	[[ "$(readlink "$W/abs")" == */etc/passwd ]]
	mv "$W/a.txt" "$W/sub/c.txt"
	[ "$(docker exec "$id" cat /workspace/sub/c.txt)" = "from host" ]
	mkdir "$W/new"
	[ "$(docker exec "$id" stat -c %F /workspace/new)" = directory ]
	run rmdir "$W/sub"
	[ "$status" -ne 0 ]
	rm "$W/sub/c.txt"
	rmdir "$W/sub"
	[ "$(docker exec "$id" ls /workspace | tr '\n' ' ')" = "abs b.txt new rel with space " ]
	head -c 3000000 /dev/urandom >"$BATS_TEST_TMPDIR/big"
	cp "$BATS_TEST_TMPDIR/big" "$W/big"
	[ "$(docker exec "$id" md5sum /workspace/big | cut -d' ' -f1)" = "$(md5sum <"$BATS_TEST_TMPDIR/big" | cut -d' ' -f1)" ]
	cmp "$BATS_TEST_TMPDIR/big" "$W/big"
}

@test "docker: small files of a directory come in one archive GET (docker.fs=archive), and a later change is read again" {
	sfs_mount -o docker.fs=archive -o remote.attr_timeout=60
	dk_new a2 >/dev/null
	id=$(dk_id a2)
	W=$MNT/a2/workspace
	docker exec "$id" sh -c 'mkdir -p /workspace/d/sub && for i in $(seq 1 40); do echo "file $i" > /workspace/d/f$i; done; head -c 300000 /dev/zero > /workspace/d/sub/big'
	ls "$W/d" >/dev/null
	c0=$(awk '$1 == "remote_calls" { print $2 }' "$MNT/a2/status")
	for i in $(seq 1 39); do
		[ "$(cat "$W/d/f$i")" = "file $i" ]
	done
	c1=$(awk '$1 == "remote_calls" { print $2 }' "$MNT/a2/status")
	[ -n "$c0" ] && [ -n "$c1" ]
	echo "39 files: $((c1 - c0)) calls" >&3
	# one bulk GET of d (its subdirectory's file is not among them); was 39
	[ $((c1 - c0)) -le 2 ]
	# f40 came in that GET too; a run's change to it (same size) is never
	# served from that copy
	n=$(dk_exec a2 'echo "file XY" > d/f40')
	[ "$(cat "$MNT/a2/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$W/d/f40")" = "file XY" ]
	[ "$(cat "$W/d/sub/big" | wc -c)" -eq 300000 ]
}

# ---- restart and failures ---------------------------------------------------

@test "docker: daemon kill -9 and restart: the sandbox is back, its run re-attached, output written while down is there" {
	sfs_mount
	dk_new r1 >/dev/null
	echo kept >"$MNT/r1/workspace/file"
	n=$(dk_exec r1 'for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.25; done')
	wait_for grep -q 'line 1' "$MNT/r1/runs/$n/journal"
	kill -9 "$SFS_PID"
	sleep 1 # the run goes on writing while no daemon is there
	dk_restart_daemon
	grep -qx 'state running' "$MNT/r1/status"
	[ "$(cat "$MNT/r1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/r1/runs/$n/journal")" = "$(seq 1 8 | sed 's/^/line /')" ]
	[ "$(cat "$MNT/r1/workspace/file")" = kept ]
	n=$(dk_exec r1 'echo after restart')
	[ "$(cat "$MNT/r1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/r1/runs/$n/journal")" = "after restart" ]
}

# ATTACK.md finding 6: a daemon killed between starting a run's wrapper and
# saving its record (runs/N/docker.json) must not leave the run `lost` while
# the container knows better.  The record is removed by hand while the
# daemon is down: what a kill -9 at that moment leaves.
# dk_unrecorded_runs [options...]: the test, mounted with those options.
dk_unrecorded_runs() {
	sfs_mount -o docker.kill_grace=1 "$@"
	dk_new rr >/dev/null
	a=$(dk_exec rr 'echo a-out; sleep 2; exit 42')
	b=$(dk_exec rr 'echo b-out; sleep 300')
	wait_for grep -qx a-out "$MNT/rr/runs/$a/journal"
	wait_for grep -qx b-out "$MNT/rr/runs/$b/journal"
	kill -9 "$SFS_PID"
	runs=$(echo "$STATE"/sandboxes/*/runs)
	[ -f "$runs/$a/docker.json" ]
	rm "$runs/$a/docker.json" "$runs/$b/docker.json"
	# a number reserved, but its wrapper never started: no trace in the container
	c=$((b + 1))
	mkdir "$runs/$c"
	echo 'echo c-out' >"$runs/$c/cmd"
	dk_restart_daemon -o docker.kill_grace=1 "$@"
	[ "$(ls "$MNT/rr/runs" | sort -n | tr '\n' ' ')" = "$a $b $c " ]
	[ "$(timeout 20 cat "$MNT/rr/runs/$a/wait")" = "exited 42" ]
	[ "$(cat "$MNT/rr/runs/$a/status")" = "exited 42" ]
	[ "$(cat "$MNT/rr/runs/$a/journal")" = a-out ]
	[ "$(cat "$MNT/rr/runs/$b/status")" = running ]
	[ "$(head -n 1 "$MNT/rr/runs/$b/journal")" = b-out ]
	echo kill >"$MNT/rr/runs/$b/ctl"
	[ "$(timeout 20 cat "$MNT/rr/runs/$b/wait")" = "killed TERM" ]
	[ "$(dk_count_in rr 'sleep 300')" -eq 0 ]
	[ "$(cat "$MNT/rr/runs/$c/status")" = lost ]
	[ "$(timeout 10 cat "$MNT/rr/runs/$c/wait")" = lost ]
	# the record written at adoption serves the next restart too
	[ -f "$runs/$b/docker.json" ]
	dk_restart_daemon "$@"
	[ "$(cat "$MNT/rr/runs/$a/status")" = "exited 42" ]
	[ "$(cat "$MNT/rr/runs/$b/status")" = "killed TERM" ]
	[ "$(dk_exec rr 'echo after')" = $((c + 1)) ]
}

@test "docker: runs whose record a kill -9 cut off: status, journal, wait and kill come from the container's run files" {
	dk_unrecorded_runs
}

@test "docker: runs whose record a kill -9 cut off, through the archive API (docker.fs=archive): the same" {
	dk_unrecorded_runs -o docker.fs=archive
}

@test "docker: a container removed behind our back: clear error, its run is lost, the mount keeps working" {
	sfs_mount
	dk_new g1 >/dev/null
	dk_new g2 >/dev/null
	n=$(dk_exec g1 'sleep 300')
	docker rm -f "$(dk_id g1)" >/dev/null
	wait_for dk_status_is g1 "$n" lost
	run dk_exec g1 'echo hi'
	[ "$status" -ne 0 ]
	[[ "$output" == "error: sandbox \"g1\" is error, not running: docker: container "*" is gone (removed outside sandboxfs?)"* ]]
	grep -qx 'state error' "$MNT/g1/status"
	grep -q '^error docker: container .* is gone (removed outside sandboxfs?)' "$MNT/g1/status"
	run ls "$MNT/g1/workspace"
	[ "$status" -ne 0 ]
	# everything else goes on
	n=$(dk_exec g2 'echo still here')
	[ "$(cat "$MNT/g2/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/g2/runs/$n/journal")" = "still here" ]
	ls "$MNT" | grep -qx g1
	rmdir "$MNT/g1"
	[ ! -e "$MNT/g1" ]
	[ -d "$MNT/g2" ]
}

# issue 10 item 3: the final fetch of a lost run's journal must end even when
# there is nothing left to fetch it from.
@test "docker: a lost run's journal (container removed while the daemon was down) reads what exists, then EOF" {
	sfs_mount -o docker.fs=archive
	dk_new l1 >/dev/null
	n=$(dk_exec l1 'echo before; sleep 300')
	# a reader mirrors the bytes so far into the state dir
	timeout 5 cat "$MNT/l1/runs/$n/journal" >"$BATS_TEST_TMPDIR/live" || true
	grep -qx before "$BATS_TEST_TMPDIR/live"
	kill -9 "$SFS_PID"
	docker rm -f "$(docker ps -aq --filter "label=sandboxfs.state=$STATE")" >/dev/null
	# the default mode after the restart: no container, so no local journal file
	dk_restart_daemon
	[ "$(timeout 10 cat "$MNT/l1/runs/$n/status")" = lost ]
	[ "$(timeout 10 cat "$MNT/l1/runs/$n/wait")" = lost ]
	run timeout 10 cat "$MNT/l1/runs/$n/journal"
	[ "$status" -eq 0 ]
	[ "$output" = before ]
	run timeout 10 cat "$MNT/l1/journal"
	[ "$status" -eq 0 ]
	[ "$output" = before ]
}

# issue 10 item 10: noticed while the daemon runs (engine events), not at
# the next failed operation.
dk_removed_while_running() {
	dk_new g3 >/dev/null
	n=$(dk_exec g3 'echo started; sleep 300')
	wait_for grep -qx started "$MNT/g3/runs/$n/journal"
	timeout 20 cat "$MNT/g3/runs/$n/journal" >"$BATS_TEST_TMPDIR/j" &
	jr=$!
	timeout 20 cat "$MNT/g3/runs/$n/wait" >"$BATS_TEST_TMPDIR/w" &
	wr=$!
	grep -qx 'state running' "$MNT/g3/status"
	docker rm -f "$(dk_id g3)" >/dev/null
	wait_for grep -qx 'state error' "$MNT/g3/status"
	grep -q '^error docker: container .* is gone (removed outside sandboxfs?)' "$MNT/g3/status"
	# both readers end (not at their timeout: 124)
	wait "$jr"
	wait "$wr"
	[ "$(cat "$BATS_TEST_TMPDIR/j")" = started ]
	[ "$(cat "$BATS_TEST_TMPDIR/w")" = lost ]
	[ "$(cat "$MNT/g3/runs/$n/status")" = lost ]
	[ "$(timeout 10 cat "$MNT/g3/runs/$n/journal")" = started ]
	run dk_exec g3 'echo no'
	[ "$status" -ne 0 ]
	# an operation on it does not bring back "running"
	grep -qx 'state error' "$MNT/g3/status"
	rmdir "$MNT/g3"
	[ ! -e "$MNT/g3" ]
}

@test "docker: a container removed while the daemon runs: state error with the reason, its run lost, readers end" {
	sfs_mount
	dk_removed_while_running
}

@test "docker: a container removed while the daemon runs (docker.fs=archive): the same, followers too" {
	sfs_mount -o docker.fs=archive
	dk_removed_while_running
}

# issue 10 item 11: the old in-container follower must not outlive a dropped
# engine connection, and a reader that waits meanwhile is told why.
@test "docker: engine connection cut and back (docker.fs=archive): one follower, the reader resumes, status shows the outage" {
	dk_proxy_start
	sfs_mount -o docker.fs=archive -o "docker.host=unix://$DK_PROXY_SOCK"
	dk_new o1 >/dev/null
	n=$(dk_exec o1 'i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done')
	timeout 60 cat "$MNT/o1/runs/$n/journal" >"$BATS_TEST_TMPDIR/live" &
	reader=$!
	wait_for grep -qx 'tick 5' "$BATS_TEST_TMPDIR/live"
	[ "$(dk_count_in o1 'tail -c')" -eq 1 ]
	run ! grep -q '^error' "$MNT/o1/status"

	dk_proxy_cut
	wait_for grep -q '^error docker: the engine connection is down' "$MNT/o1/status"
	sleep 2 # the reader waits; stopping the old follower fails meanwhile
	kill -0 "$reader"
	got=$(grep -c '^tick' "$BATS_TEST_TMPDIR/live")

	dk_proxy_start
	# the reader resumes where it stopped, with nothing lost or repeated
	wait_for dk_ticks_at_least "$BATS_TEST_TMPDIR/live" $((got + 10))
	m=$(grep -c '^tick' "$BATS_TEST_TMPDIR/live")
	[ "$(head -n "$m" "$BATS_TEST_TMPDIR/live")" = "$(seq 1 "$m" | sed 's/^/tick /')" ]
	# one follower in the container: the old one was killed on reconnect
	wait_for dk_count_is o1 'tail -c' 1
	sleep 1
	[ "$(dk_count_in o1 'tail -c')" -eq 1 ]
	wait_for dk_no_error o1
	grep -qx 'state running' "$MNT/o1/status"
	kill "$reader"
	wait "$reader" || true
}

dk_ticks_at_least() {
	[ "$(grep -c '^tick' "$1")" -ge "$2" ]
}

dk_no_error() {
	! grep -q '^error' "$MNT/$1/status"
}

# ---- workspace --------------------------------------------------------------

@test "docker: workspace/ through the host fast path: ls, cat, echo >, mv, both ways" {
	sfs_mount
	dk_new w1 >/dev/null
	id=$(dk_id w1)
	[ -z "$(ls "$MNT/w1/workspace")" ]
	echo "from host" >"$MNT/w1/workspace/a.txt"
	[ "$(docker exec "$id" cat /workspace/a.txt)" = "from host" ]
	docker exec "$id" sh -c 'echo from container >/workspace/b.txt; mkdir /workspace/sub'
	[ "$(cat "$MNT/w1/workspace/b.txt")" = "from container" ]
	mv "$MNT/w1/workspace/a.txt" "$MNT/w1/workspace/sub/c.txt"
	[ "$(docker exec "$id" cat /workspace/sub/c.txt)" = "from host" ]
	[ "$(ls "$MNT/w1/workspace" | tr '\n' ' ')" = "b.txt sub " ]
	# an editor's save: a temp file renamed over the original
	printf 'v2\n' >"$MNT/w1/workspace/.b.txt.swp"
	mv "$MNT/w1/workspace/.b.txt.swp" "$MNT/w1/workspace/b.txt"
	[ "$(docker exec "$id" cat /workspace/b.txt)" = v2 ]
	# a run sees what the host wrote
	n=$(dk_exec w1 'cat sub/c.txt b.txt')
	[ "$(cat "$MNT/w1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/w1/runs/$n/journal")" = "$(printf 'from host\nv2')" ]
}

@test "docker: the daemon follows no symlink the container plants (workspace root, journal)" {
	sfs_mount
	echo host-secret >"$BATS_TEST_TMPDIR/secret"
	dk_new y1 workdir=/ws >/dev/null
	id=$(dk_id y1)
	n=$(dk_exec y1 'echo real output')
	[ "$(cat "$MNT/y1/runs/$n/wait")" = "exited 0" ]
	# the container points its run files and its workspace root at host paths
	docker exec "$id" sh -c "rm /.sandboxfs/runs/$n/journal && ln -s $BATS_TEST_TMPDIR/secret /.sandboxfs/runs/$n/journal"
	docker exec "$id" sh -c "rm -rf /ws && ln -s $BATS_TEST_TMPDIR /ws"
	dk_restart_daemon
	run cat "$MNT/y1/runs/$n/journal"
	[[ "$output" != *host-secret* ]]
	run ls "$MNT/y1/workspace/"
	[ "$status" -ne 0 ]
	[[ "$output" != *secret* ]]
	run cat "$MNT/y1/workspace/secret"
	[ "$status" -ne 0 ]
	[[ "$output" != *host-secret* ]]
}

# SPEC §5 for non-local providers: this is the workspace layer's rewriting
# (fs/workspace/entries.c readlink), tested here because docker is the first
# provider it applies to.
@test "docker: a symlink planted in the workspace never leads a host tool to a host file (SPEC §5)" {
	sfs_mount
	echo host-secret >"$BATS_TEST_TMPDIR/secret"
	dk_new z1 >/dev/null
	id=$(dk_id z1)
	docker exec "$id" sh -c "echo inner >/workspace/inside.txt; ln -s $BATS_TEST_TMPDIR/secret /workspace/evil; ln -s /workspace/inside.txt /workspace/good; ln -s $BATS_TEST_TMPDIR /workspace/evildir"
	# recognisable, but not a host path
	[[ "$(readlink "$MNT/z1/workspace/evil")" == *"$BATS_TEST_TMPDIR/secret" ]]
	run cat "$MNT/z1/workspace/evil"
	[[ "$output" != *host-secret* ]]
	run sh -c "echo overwritten >'$MNT/z1/workspace/evil'"
	[ "$(cat "$BATS_TEST_TMPDIR/secret")" = host-secret ]
	run ls "$MNT/z1/workspace/evildir/"
	[[ "$output" != *secret* ]]
	# a target inside the workspace still works from the host
	[ "$(cat "$MNT/z1/workspace/good")" = inner ]
}

# issue 10 item 12: ls -l of a symlink shows the length of what readlink
# shows, and a ".." target that leaves the workspace keeps its original text.
dk_check_links() {
	local W=$1 l shown
	for l in abs good up sub/up2 sub/in; do
		shown=$(readlink "$W/$l")
		[ "$(stat -c %s "$W/$l")" -eq "${#shown}" ] || {
			echo "$l: size $(stat -c %s "$W/$l") but readlink shows ${#shown} bytes: $shown" >&2
			return 1
		}
	done
	[ "$(readlink "$W/abs")" = /nonexistent/sandboxfs-outside-workspace/etc/passwd ]
	[ "$(readlink "$W/good")" = inside.txt ]
	[ "$(readlink "$W/sub/in")" = ../inside.txt ]
	[ "$(readlink "$W/up")" = /nonexistent/sandboxfs-outside-workspace/workspace/../etc/hostname ]
	[[ "$(readlink "$W/sub/up2")" == /nonexistent/sandboxfs-outside-workspace/workspace/*/../../etc/hostname ]]
	run cat "$W/up"
	[ "$status" -ne 0 ]
}

@test "docker: a symlink's size is what readlink shows; a .. target outside keeps its original (SPEC §5)" {
	sfs_mount
	dk_new ln1 >/dev/null
	docker exec "$(dk_id ln1)" sh -c 'cd /workspace && echo in >inside.txt && mkdir sub && ln -s /etc/passwd abs && ln -s /workspace/inside.txt good && ln -s ../etc/hostname up && ln -s ../../etc/hostname sub/up2 && ln -s /workspace/inside.txt sub/in'
	dk_check_links "$MNT/ln1/workspace"
	[ "$(cat "$MNT/ln1/workspace/sub/in")" = in ]
}

@test "docker: symlink sizes and .. targets through the archive API (docker.fs=archive)" {
	sfs_mount -o docker.fs=archive
	dk_new ln2 >/dev/null
	docker exec "$(dk_id ln2)" sh -c 'cd /workspace && echo in >inside.txt && mkdir sub && ln -s /etc/passwd abs && ln -s /workspace/inside.txt good && ln -s ../etc/hostname up && ln -s ../../etc/hostname sub/up2 && ln -s /workspace/inside.txt sub/in'
	dk_check_links "$MNT/ln2/workspace"
}

# ---- lifecycle --------------------------------------------------------------

@test "docker: stop and start keep the container's files" {
	sfs_mount
	dk_new t1 >/dev/null
	id=$(dk_id t1)
	echo durable >"$MNT/t1/workspace/f"
	dk_ctl "$MNT/t1/ctl" stop >/dev/null
	grep -qx 'state stopped' "$MNT/t1/status"
	[ "$(docker inspect -f '{{.State.Running}}' "$id")" = false ]
	run dk_exec t1 'echo no'
	[ "$status" -ne 0 ]
	[[ "$output" == *"is stopped, not running"* ]]
	dk_ctl "$MNT/t1/ctl" start >/dev/null
	grep -qx 'state running' "$MNT/t1/status"
	[ "$(docker inspect -f '{{.State.Running}}' "$id")" = true ]
	n=$(dk_exec t1 'cat f')
	[ "$(cat "$MNT/t1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/t1/runs/$n/journal")" = durable ]
	wait_for grep -qx durable "$MNT/t1/workspace/f"
}

@test "docker: fork copies the container into a new sandbox that goes its own way" {
	sfs_mount
	dk_new src >/dev/null
	echo original >"$MNT/src/workspace/f"
	n=$(dk_exec src 'echo ran in src')
	[ "$(cat "$MNT/src/runs/$n/wait")" = "exited 0" ]
	run dk_ctl "$MNT/src/ctl" "fork dst"
	[ "$status" -eq 0 ]
	[ "$(dk_id dst)" != "$(dk_id src)" ]
	[ "$(cat "$MNT/dst/workspace/f")" = original ]
	[ -z "$(ls "$MNT/dst/runs")" ]
	echo changed >"$MNT/dst/workspace/f"
	[ "$(cat "$MNT/src/workspace/f")" = original ]
	n=$(dk_exec dst 'cat f; ls /.sandboxfs/runs | wc -l')
	[ "$(cat "$MNT/dst/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/dst/runs/$n/journal")" = "$(printf 'changed\n1')" ]
	rmdir "$MNT/dst"
	[ -d "$MNT/src" ]
}

# dk_snapshot NAME LABEL: takes a snapshot, its id in $SNAP.  Skips (by
# name) while ctl does not pass snapshot/restore to the provider yet.  Not
# in a $(...): a skip there would only leave the subshell.
dk_snapshot() {
	local out rc=0
	out=$(dk_ctl "$MNT/$1/ctl" "snapshot $2") || rc=$?
	if [ "$rc" -ne 0 ] && [[ "$out" == *"not available for provider"* ]]; then
		skip "ctl: snapshot/restore are not wired to provider ops yet (ctl/commands.c)"
	fi
	[ "$rc" -eq 0 ] || {
		echo "$out" >&2
		return 1
	}
	SNAP=$out
}

@test "docker: snapshot lists under snapshots/, restore brings it back, rmdir deletes the image" {
	sfs_mount
	dk_new p1 >/dev/null
	echo v1 >"$MNT/p1/workspace/f"
	dk_snapshot p1 first
	sid=$SNAP
	[ -d "$MNT/p1/snapshots/$sid" ]
	docker image inspect "$sid" >/dev/null
	dk_snapshot p1 second
	other=$SNAP
	[ -d "$MNT/p1/snapshots/$other" ]
	old=$(dk_id p1)
	echo v2 >"$MNT/p1/workspace/f"
	dk_ctl "$MNT/p1/ctl" "restore $sid" >/dev/null
	[ "$(dk_id p1)" != "$old" ]
	run docker inspect "$old"
	[ "$status" -ne 0 ]
	n=$(dk_exec p1 'cat f')
	[ "$(cat "$MNT/p1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/p1/runs/$n/journal")" = v1 ]
	# an unused snapshot goes at once; the one in use goes with its last container
	rmdir "$MNT/p1/snapshots/$other"
	[ ! -e "$MNT/p1/snapshots/$other" ]
	run docker image inspect "$other"
	[ "$status" -ne 0 ]
	rmdir "$MNT/p1/snapshots/$sid"
	[ ! -e "$MNT/p1/snapshots/$sid" ]
	rmdir "$MNT/p1"
	run docker image inspect "$sid"
	[ "$status" -ne 0 ]
}

@test "docker: rmdir of a sandbox deletes the snapshot images it still lists" {
	sfs_mount
	dk_new p3 >/dev/null
	dk_snapshot p3 kept
	sid=$SNAP
	docker image inspect "$sid" >/dev/null
	rmdir "$MNT/p3"
	# nothing in the tree reaches the image any more
	wait_for sh -c "! docker image inspect '$sid' >/dev/null 2>&1"
	run docker image inspect "$sid"
	[ "$status" -ne 0 ]
}

# The container is replaced by restore: the fs layer must let go of the old
# one's workspace nodes (their fds point into a removed overlay) and look
# "workspace" up again.
@test "docker: after restore, workspace/ shows the restored container" {
	sfs_mount
	dk_new p2 >/dev/null
	echo v1 >"$MNT/p2/workspace/f"
	dk_snapshot p2 first
	echo v2 >"$MNT/p2/workspace/f"
	dk_ctl "$MNT/p2/ctl" "restore $SNAP" >/dev/null
	wait_for grep -qx v1 "$MNT/p2/workspace/f"
	echo v3 >"$MNT/p2/workspace/f"
	[ "$(docker exec "$(dk_id p2)" cat /workspace/f)" = v3 ]
}

@test "docker: fork from= a snapshot" {
	sfs_mount
	dk_new q1 >/dev/null
	echo at-snapshot >"$MNT/q1/workspace/f"
	dk_snapshot q1 base
	sid=$SNAP
	echo later >"$MNT/q1/workspace/f"
	dk_ctl "$MNT/q1/ctl" "fork q2 from=$sid" >/dev/null
	[ "$(cat "$MNT/q2/workspace/f")" = at-snapshot ]
	[ "$(cat "$MNT/q1/workspace/f")" = later ]
}

@test "docker: expose gives the URL of a port published at create; other ports are EOPNOTSUPP" {
	command -v curl >/dev/null || skip "docker: no curl on the host to fetch the URL"
	sfs_mount
	dk_new e1 ports=8080 >/dev/null
	echo hello-port >"$MNT/e1/workspace/index.html"
	dk_exec e1 'httpd -f -p 8080 -h /workspace' >/dev/null
	run dk_ctl "$MNT/e1/ctl" "expose 8080"
	[ "$status" -eq 0 ]
	url=$(cat "$MNT/e1/ports/8080")
	[[ "$url" == http://127.0.0.1:* ]]
	wait_for curl -fsS -o "$BATS_TEST_TMPDIR/page" "$url/index.html"
	[ "$(cat "$BATS_TEST_TMPDIR/page")" = hello-port ]
	run dk_ctl "$MNT/e1/ctl" "expose 9090"
	[ "$status" -ne 0 ]
	[[ "$output" == *"port 9090 was not published"*"ports=9090"* ]]
}

@test "docker: providers/docker/status reports orphans: containers of ours no sandbox owns" {
	docker_setup
	dk_new lost
	id=$(dk_id lost)
	run ! grep -q orphans "$MNT/providers/docker/status"
	echo "forget lost" >"$MNT/ctl"
	grep -q "orphans 1: ${id:0:12}" "$MNT/providers/docker/status"
	# still alive: forget leaves the sandbox alone
	[ "$(docker inspect -f '{{.State.Running}}' "$id")" = true ]
}

@test "docker: an orphan adopted again with resume is no longer counted an orphan" {
	docker_setup
	dk_new lost2
	id=$(dk_id lost2)
	echo "forget lost2" >"$MNT/ctl"
	grep -q "orphans 1: ${id:0:12}" "$MNT/providers/docker/status"
	echo "resume back provider=docker id=$id" >"$MNT/ctl"
	[ "$(dk_id back)" = "$id" ]
	# its labels still carry the old local id: the container id decides
	run ! grep -q orphans "$MNT/providers/docker/status"
}

@test "docker: forget then resume of the container id gets the runs back; the next exec numbers on" {
	docker_setup
	dk_new fr
	id=$(dk_id fr)
	[ "$(dk_exec fr 'echo out1')" = 1 ]
	[ "$(cat "$MNT/fr/runs/1/wait")" = "exited 0" ]
	echo "forget fr" >"$MNT/ctl"
	echo "resume fr provider=docker id=$id" >"$MNT/ctl"
	[ "$(cat "$MNT/fr/runs/1/journal")" = out1 ]
	[ "$(cat "$MNT/fr/runs/1/status")" = "exited 0" ]
	[ "$(dk_exec fr 'echo out2')" = 2 ]
	[ "$(cat "$MNT/fr/runs/2/wait")" = "exited 0" ]
	[ "$(cat "$MNT/fr/runs/2/journal")" = out2 ]
	[ "$(ls "$STATE/sandboxes" | wc -l)" = 1 ]
	run ! grep -q orphans "$MNT/providers/docker/status"
}

# ---- snapshot images: where they go with their sandbox ------------------------

# dk_key NAME: the sandbox's local key (its container's sandboxfs.local_id label).
dk_key() {
	docker inspect -f '{{index .Config.Labels "sandboxfs.local_id"}}' "$(dk_id "$1")"
}

# dk_snap_count KEY: how many snapshot images carry that sandbox key.
dk_snap_count() {
	docker images -q --filter "reference=sandboxfs-snapshot" \
		--filter "label=sandboxfs.local_id=$1" | sort -u | wc -l
}

dk_snap_count_is() {
	[ "$(dk_snap_count "$1")" -eq "$2" ]
}

dk_image_gone() {
	! docker image inspect "$1" >/dev/null 2>&1
}

@test "docker: rmdir of a sandbox deletes every snapshot image it took (ATTACK.md finding 6)" {
	sfs_mount
	dk_new si1 >/dev/null
	key=$(dk_key si1)
	dk_snapshot si1 one
	a=$SNAP
	dk_snapshot si1 two
	b=$SNAP
	[ "$(dk_snap_count "$key")" -eq 2 ]
	rmdir "$MNT/si1"
	wait_for dk_snap_count_is "$key" 0
	dk_image_gone "$a"
	dk_image_gone "$b"
}

@test "docker: a snapshot a fork from= runs on survives its source's rmdir and a restart, and goes with the fork" {
	sfs_mount
	dk_new sf1 >/dev/null
	echo at-base >"$MNT/sf1/workspace/f"
	dk_snapshot sf1 base
	sid=$SNAP
	dk_snapshot sf1 other
	oth=$SNAP
	dk_ctl "$MNT/sf1/ctl" "fork sf2 from=$sid" >/dev/null
	rmdir "$MNT/sf1"
	wait_for dk_image_gone "$oth"
	[ ! -e "$MNT/sf1" ]
	docker image inspect "$sid" >/dev/null
	# the fork's claim on it is saved: a restarted daemon still deletes it
	dk_restart_daemon
	docker image inspect "$sid" >/dev/null
	[ "$(cat "$MNT/sf2/workspace/f")" = at-base ]
	rmdir "$MNT/sf2"
	wait_for dk_image_gone "$sid"
}

@test "docker: a snapshot committed but never recorded (daemon killed mid-snapshot) is adopted at restart" {
	sfs_mount
	dk_new sa1 >/dev/null
	key=$(dk_key sa1)
	cid=$(dk_id sa1)
	echo v1 >"$MNT/sa1/workspace/f"
	kill -9 "$SFS_PID"
	wait_for dk_gone_pid "$SFS_PID"
	umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	# what the provider's commit leaves: sandboxfs-snapshot:<cid12>-<label>-<unix time>
	when=$(($(date +%s) - 100))
	docker commit "$cid" "sandboxfs-snapshot:${cid:0:12}-lost_one-$when" >/dev/null
	img=$(docker image inspect -f '{{.Id}}' "sandboxfs-snapshot:${cid:0:12}-lost_one-$when")
	sid=${img#sha256:}
	sid=${sid:0:12}
	docker exec "$cid" sh -c 'echo v2 >/workspace/f'
	sfs_mount
	[ -d "$MNT/sa1/snapshots/$sid" ]
	[ "$(stat -c %Y "$MNT/sa1/snapshots/$sid")" -eq "$when" ]
	[ "$(ls "$MNT/sa1/snapshots" | wc -l)" -eq 1 ]
	dk_ctl "$MNT/sa1/ctl" "restore $sid" >/dev/null
	n=$(dk_exec sa1 'cat f')
	[ "$(cat "$MNT/sa1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/sa1/runs/$n/journal")" = v1 ]
	# recorded now: another restart lists it once, and rmdir takes it along
	dk_restart_daemon
	[ "$(ls "$MNT/sa1/snapshots" | wc -l)" -eq 1 ]
	rmdir "$MNT/sa1"
	wait_for dk_snap_count_is "$key" 0
	dk_image_gone "$sid"
}
