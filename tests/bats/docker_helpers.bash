# Docker fixtures: every test skips by name when no engine or test image is
# there, and teardown removes every container and image the test's daemon
# made (they carry the label sandboxfs.state=$STATE), even when it failed.
#
# The docker CLI is used here only to look from the outside (ps in a
# container, removing one behind the daemon's back); sandboxfs itself talks
# to the Engine API.

SFS_DOCKER_IMAGE="${SFS_DOCKER_IMAGE:-sandboxfs-test:latest}"

# docker_require: skips the test, naming why, unless Docker can be used.
# (In CI these fail instead: sfs_need.)
docker_require() {
	if [ -n "${SFS_DOCKER_UNAVAILABLE:-}" ]; then
		sfs_need "docker: $SFS_DOCKER_UNAVAILABLE"
		return
	fi
	command -v docker >/dev/null || {
		sfs_need "docker: no docker client on PATH"
		return
	}
	timeout 15 docker info >/dev/null 2>&1 || {
		sfs_need "docker: no engine answers on ${DOCKER_HOST:-/var/run/docker.sock} (run .ci/docker-up)"
		return
	}
	docker image inspect "$SFS_DOCKER_IMAGE" >/dev/null 2>&1 ||
		sfs_need "docker: image $SFS_DOCKER_IMAGE is missing (run .ci/docker-up)"
}

# docker_setup [sandboxfs options...]: requires Docker, then mounts.
docker_setup() {
	docker_require
	sfs_mount "$@"
}

docker_cleanup() {
	[ -n "${STATE:-}" ] || return 0
	command -v docker >/dev/null || return 0
	local ids
	ids=$(docker ps -aq --filter "label=sandboxfs.state=$STATE" 2>/dev/null || true)
	# shellcheck disable=SC2086 # ids are words
	[ -z "$ids" ] || docker rm -f -v $ids >/dev/null 2>&1 || true
	ids=$(docker images -q --filter "label=sandboxfs.state=$STATE" 2>/dev/null | sort -u || true)
	# shellcheck disable=SC2086
	[ -z "$ids" ] || docker rmi -f $ids >/dev/null 2>&1 || true
}

docker_teardown() {
	sfs_teardown
	docker_cleanup
	if [ -f "$BATS_TEST_TMPDIR/proxy.pids" ]; then
		local p
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/proxy.pids"
	fi
}

# dk_proxy_start: a proxy to the engine's unix socket that the test can cut
# (tests/bats/unix_proxy.py), listening on $DK_PROXY_SOCK in the test's
# directory; mount with -o docker.host=unix://$DK_PROXY_SOCK to go through it.
dk_proxy_start() {
	local target=${DOCKER_HOST:-unix:///var/run/docker.sock}
	[[ $target == unix://* ]] || skip "docker: the proxy needs an engine on a unix socket (DOCKER_HOST=$target)"
	command -v python3 >/dev/null || skip "docker: no python3 for the engine proxy"
	DK_PROXY_SOCK=$BATS_TEST_TMPDIR/engine.sock
	# started from a subshell: not a job of the test's shell, whose kill
	# would be reported in the test's output
	DK_PROXY_PID=$(python3 "$BATS_TEST_DIRNAME/unix_proxy.py" "$DK_PROXY_SOCK" "${target#unix://}" \
		</dev/null >/dev/null 2>&1 3>&- & echo $!)
	echo "$DK_PROXY_PID" >>"$BATS_TEST_TMPDIR/proxy.pids"
	wait_for test -S "$DK_PROXY_SOCK"
}

# dk_proxy_cut: drops every engine connection of the daemon, and answers no more.
dk_proxy_cut() {
	kill -9 "$DK_PROXY_PID" 2>/dev/null || true
	wait_for dk_gone_pid "$DK_PROXY_PID"
	rm -f "$DK_PROXY_SOCK"
}

dk_gone_pid() {
	! kill -0 "$1" 2>/dev/null
}

# dk_ctl FILE LINE: like ctl_write (writes LINE, prints what a read of the
# same fd returns), on a fd of its own: bats keeps its TAP stream on fd 3.
dk_ctl() {
	local f="$1" fd rc=0
	shift
	exec {fd}<>"$f"
	{ printf '%s\n' "$*" >&"$fd"; } 2>/dev/null || rc=$?
	cat <&"$fd"
	exec {fd}>&-
	return $rc
}

# dk_new NAME [OPTIONS...]: a docker sandbox from the test image.
dk_new() {
	local name=$1
	shift
	dk_ctl "$MNT/ctl" "new $name provider=docker image=$SFS_DOCKER_IMAGE $*"
}

# dk_id NAME: the sandbox's container id, from its status file.
dk_id() {
	awk '$1 == "id" { print $2 }' "$MNT/$1/status"
}

# dk_exec NAME CMD...: starts a run and prints its number.
dk_exec() {
	local name=$1
	shift
	dk_ctl "$MNT/$name/ctl" "exec $*"
}

# dk_ps NAME: the processes in the sandbox's container, seen from outside.
dk_ps() {
	docker exec "$(dk_id "$1")" ps -o pid,pgid,stat,args
}

# dk_count_in NAME ERE: how many processes in the container have a command
# line starting with ERE (so not the shells whose -c text mentions it).
dk_count_in() {
	docker exec "$(dk_id "$1")" ps -o args | grep -cE -- "^($2)" || true
}

# dk_count_is NAME ERE N: true when exactly N processes match (for wait_for).
dk_count_is() {
	[ "$(dk_count_in "$1" "$2")" -eq "$3" ]
}

# dk_status_is NAME RUN WANT: true when runs/RUN/status is WANT.
dk_status_is() {
	[ "$(cat "$MNT/$1/runs/$2/status")" = "$3" ]
}

# dk_restart_daemon [options...]: kill -9 the daemon and mount again on the same state.
dk_restart_daemon() {
	kill -9 "$SFS_PID" 2>/dev/null || true
	local _
	for _ in $(seq 1 100); do
		kill -0 "$SFS_PID" 2>/dev/null || break
		sleep 0.05
	done
	umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	sfs_mount "$@"
}
