#!/usr/bin/env bash
# Docker provider latency, against the docker CLI doing the same work:
#
#   1. exec: a ctl write of `exec true` until its end is seen through
#      runs/N/wait, vs `docker exec CONTAINER true`;
#   2. reading 1000 small workspace files with cat through the mount, vs one
#      `docker exec CONTAINER cat ...` of the same files, and vs `docker cp`.
#
# Prints the median of ROUNDS rounds for each, and ratios (sandboxfs / CLI;
# below 1 means sandboxfs is faster).
#
#   bash bench/docker_exec.sh [ROUNDS]        # default 7
#
# Needs a running engine and an image with sh and cat
# (SFS_DOCKER_IMAGE, default sandboxfs-test:latest: see .ci/docker-up).
# SFS_BIN picks the binary (default build/sandboxfs).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SFS_BIN:-$ROOT/build/sandboxfs}
IMAGE=${SFS_DOCKER_IMAGE:-sandboxfs-test:latest}
ROUNDS=${1:-7}
EXECS=20 # execs per round
FILES=1000

die() {
	echo "docker_exec.sh: $*" >&2
	exit 1
}
[ -x "$BIN" ] || die "no $BIN (build first)"
timeout 15 docker info >/dev/null 2>&1 || die "no docker engine answers"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "no image $IMAGE (run .ci/docker-up)"

TMP=$(mktemp -d /tmp/sfs-bench.XXXXXX)
MNT=$TMP/mnt
STATE=$TMP/state
mkdir -p "$MNT" "$STATE"
PID=
cleanup() {
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	[ -z "$PID" ] || wait "$PID" 2>/dev/null || true
	local ids
	ids=$(docker ps -aq --filter "label=sandboxfs.state=$STATE" 2>/dev/null || true)
	# shellcheck disable=SC2086
	[ -z "$ids" ] || docker rm -f -v $ids >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT

"$BIN" -f --state "$STATE" "$MNT" 2>"$TMP/daemon.log" &
PID=$!
for _ in $(seq 1 100); do
	[ -e "$MNT/ctl" ] && break
	sleep 0.05
done
[ -e "$MNT/ctl" ] || die "mount failed: $(cat "$TMP/daemon.log")"

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

ctl "new b provider=docker image=$IMAGE" "$MNT/ctl" >/dev/null
CID=$(awk '$1 == "id" { print $2 }' "$MNT/b/status")

now_ns() { date +%s%N; }
# median of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# ms START END
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", (b - a) / 1e6 }'; }

sfs_exec=() cli_exec=() sfs_read=() cli_read=() cp_read=()
for r in $(seq 1 "$ROUNDS"); do
	# exec latency, per exec, averaged over the round
	t0=$(now_ns)
	for _ in $(seq 1 $EXECS); do
		n=$(ctl "exec true" "$MNT/b/ctl")
		[ "$(cat "$MNT/b/runs/$n/wait")" = "exited 0" ] || die "run $n: $(cat "$MNT/b/runs/$n/status")"
	done
	t1=$(now_ns)
	for _ in $(seq 1 $EXECS); do
		docker exec "$CID" true
	done
	t2=$(now_ns)
	sfs_exec+=("$(awk -v a="$t0" -v b="$t1" -v n=$EXECS 'BEGIN { printf "%.2f\n", (b - a) / 1e6 / n }')")
	cli_exec+=("$(awk -v a="$t1" -v b="$t2" -v n=$EXECS 'BEGIN { printf "%.2f\n", (b - a) / 1e6 / n }')")

	# 1000 fresh files per round, so no one reads from a warm cache
	docker exec "$CID" sh -c "mkdir -p /workspace/r$r && cd /workspace/r$r && i=0; while [ \$i -lt $FILES ]; do echo file \$i >f\$i; i=\$((i + 1)); done"
	docker exec "$CID" sh -c "mkdir -p /workspace/c$r && cp /workspace/r$r/* /workspace/c$r/"
	docker exec "$CID" sh -c "mkdir -p /workspace/p$r && cp /workspace/r$r/* /workspace/p$r/"
	t0=$(now_ns)
	cat "$MNT/b/workspace/r$r"/* >/dev/null
	t1=$(now_ns)
	docker exec "$CID" sh -c "cat /workspace/c$r/*" >/dev/null
	t2=$(now_ns)
	docker cp "$CID:/workspace/p$r" "$TMP/cp$r"
	t3=$(now_ns)
	copied=$(find "$TMP/cp$r" -type f | wc -l)
	[ "$copied" -eq $FILES ] || die "docker cp copied $copied files"
	rm -rf "$TMP/cp$r"
	sfs_read+=("$(ms "$t0" "$t1")")
	cli_read+=("$(ms "$t1" "$t2")")
	cp_read+=("$(ms "$t2" "$t3")")
done

m_sfs_exec=$(printf '%s\n' "${sfs_exec[@]}" | median)
m_cli_exec=$(printf '%s\n' "${cli_exec[@]}" | median)
m_sfs_read=$(printf '%s\n' "${sfs_read[@]}" | median)
m_cli_read=$(printf '%s\n' "${cli_read[@]}" | median)
m_cp_read=$(printf '%s\n' "${cp_read[@]}" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "docker provider bench: $ROUNDS rounds, engine $(docker version -f '{{.Server.Version}}'), image $IMAGE"
printf '%-44s %10s ms\n' "exec true -> runs/N/wait (sandboxfs)" "$m_sfs_exec"
printf '%-44s %10s ms\n' "docker exec true (CLI)" "$m_cli_exec"
printf '%-44s %10s\n' "  ratio sandboxfs / CLI" "$(ratio "$m_sfs_exec" "$m_cli_exec")"
printf '%-44s %10s ms\n' "cat $FILES workspace files (sandboxfs)" "$m_sfs_read"
printf '%-44s %10s ms\n' "docker exec cat of the same files (CLI)" "$m_cli_read"
printf '%-44s %10s ms\n' "docker cp of the same files (CLI)" "$m_cp_read"
printf '%-44s %10s\n' "  ratio sandboxfs / docker exec cat" "$(ratio "$m_sfs_read" "$m_cli_read")"
printf '%-44s %10s\n' "  ratio sandboxfs / docker cp" "$(ratio "$m_sfs_read" "$m_cp_read")"
