#!/usr/bin/env bash
# Round trips and wall time of everyday commands on a remote workspace of
# 1000 files, against a provider's local emulator with injected latency.
#
#   bench/remote.sh [PROVIDER] [LATENCY_MS] [runs]   # default daytona, 20
#
# PROVIDER is any with a conformance adapter (tests/bats/providers/NAME.bash:
# daytona, vercel, sprites …), which says how its emulator starts and how
# sandboxfs is pointed at it.  Prints one line per step: provider calls made
# for workspace/ (the daemon's remote_calls counter), all HTTP requests the
# emulator saw (journal polls included), and wall time.  The first and last
# steps are runs: the one that makes the tree, and `true` on it (for aws,
# each a task that syncs the tree in before and back after); with "runs" as
# the third argument only they are timed.  SFS_BIN picks the binary
# (default build/sandboxfs).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SFS_BIN:-$ROOT/build/sandboxfs}
PROVIDER=${1:-daytona}
LAT=${2:-20}
ONLY=${3:-}
SFS_ROOT=$ROOT
ADAPTER=$ROOT/tests/bats/providers/$PROVIDER.bash
[ -f "$ADAPTER" ] || { echo "bench/remote.sh: no adapter $ADAPTER" >&2; exit 2; }
# shellcheck source=/dev/null
. "$ADAPTER"
TMP=$(mktemp -d /tmp/sfs-bench-XXXXXX)
MNT=$TMP/mnt STATE=$TMP/state
mkdir -p "$MNT" "$STATE" "$TMP/emu"
EMU_PID= SFS_PID=

cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; fi
	[ -n "$SFS_PID" ] && { kill "$SFS_PID" 2>/dev/null || true; }
	[ -n "$EMU_PID" ] && { kill "$EMU_PID" 2>/dev/null || true; wait "$EMU_PID" 2>/dev/null || true; }
	rm -rf "$TMP"
}
trap cleanup EXIT

KEY=bench-key-$$
# shellcheck disable=SC2046 # the adapter's flags are words
# the same layout as the suite's emulator (remote_helpers.bash): adapters
# such as sbx's find the emulator's root through EMU_DIR
export EMU_DIR=$TMP/emu
mkdir -p "$EMU_DIR/root"
python3 "$P_EMULATOR" --root "$EMU_DIR/root" $(p_emu_secret_args "$KEY") \
	--port-file "$TMP/port" --log "$EMU_DIR/requests.log" --latency-ms "$LAT" >"$TMP/emu.out" 2>&1 &
EMU_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
PORT=$(cat "$TMP/port")
p_emu_env "http://127.0.0.1:$PORT" "$KEY"
"$BIN" -f --state "$STATE" "$MNT" 2>"$TMP/daemon.log" &
SFS_PID=$!
for _ in $(seq 1 100); do [ -e "$MNT/ctl" ] && break; sleep 0.05; done

ctl() { exec 7<>"$1"; printf '%s\n' "$2" >&7; cat <&7; exec 7>&-; }
calls() { awk '$1 == "remote_calls" { print $2 }' "$MNT/b/status"; }
requests() { curl -s "http://127.0.0.1:$PORT/_emu/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

ctl "$MNT/ctl" "new b provider=$PROVIDER ${P_NEW_OPTS:-}" >/dev/null
W=$MNT/b/workspace

step() {
	local name=$1
	shift
	[ "$ONLY" != runs ] || [ "${name#run:}" != "$name" ] || return 0
	local c0 r0 t0 t1
	c0=$(calls)
	r0=$(requests)
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1 || echo "  ($name exited $?)"
	t1=$(date +%s%N)
	printf '%-28s %6d calls %6d requests %8.1f ms\n' "$name" $(($(calls) - c0)) \
		$(($(requests) - r0 - 1)) "$(echo "($t1 - $t0) / 1000000" | bc -l)"
}

vim_save() {
	HOME=$TMP vim -Nu NONE -i NONE -n -es -c 'set backupcopy=no writebackup' \
		-c '%s/line 1$/line one/' -c wq "$W/src/f1.txt"
}

# run_wait CMD: exec CMD in the sandbox and wait for its end (for aws, a task
# that syncs the workspace in before and back after)
run_wait() {
	local n
	n=$(ctl "$MNT/b/ctl" "exec $1")
	[ "$(cat "$MNT/b/runs/$n/wait")" = "exited 0" ]
}

echo "sandboxfs remote workspace bench ($PROVIDER): 1000 files, ${LAT} ms injected latency per request"
step "run: make 1000 files, commit" run_wait 'mkdir -p src && for i in $(seq 1 1000); do echo "line $i" > src/f$i.txt; done && git init -q . && git add -A && git -c user.email=b@x -c user.name=b commit -qm init && echo ok'
sleep 1.2 # let caches from the run's end settle
step "ls -l src (cold)" ls -l "$W/src"
step "ls -l src (warm)" ls -l "$W/src"
sleep 1.2
step "ls -l src (after cache TTL)" ls -l "$W/src"
step "cat src/f500.txt (cold)" cat "$W/src/f500.txt"
step "cat src/f500.txt (warm)" cat "$W/src/f500.txt"
sleep 1.2
step "git status (cold)" git -C "$W" status --short
step "git status (warm)" git -C "$W" status --short
step "vim save src/f1.txt" vim_save
step "git status after the save" git -C "$W" status --short
step "run: true (the tree as it is)" run_wait true
