#!/usr/bin/env bash
# Base workspaces (new … base=DIR): the cost of what changed, over a big base.
#
#   1. `new b base=BASE hide=*.pem` over a base of FILES files (overlayfs
#      mount plus the walk that puts the hide whiteouts);
#   2. `cat snapshots/base/diff` with 10 changed files (5 edited, 2 added,
#      2 deleted, 1 chmod): found from the upper layer, so it should not
#      grow with the base (target: under 1 s at 200 000 files);
#   3. the same with -o cow.mode=copy, whose diff stats the whole tree (for
#      comparison; its `new` copies the base).
#
#   bash bench/cowbase.sh [FILES] [ROUNDS]     # defaults 200000, 5
#   MODES=auto bash bench/cowbase.sh 500000   # overlayfs only
#
# Prints the median of ROUNDS reads of the diff.  Needs root (overlayfs).
# SFS_BIN picks the binary (default build/sandboxfs).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SFS_BIN:-$ROOT/build/sandboxfs}
FILES=${1:-200000}
ROUNDS=${2:-5}

die() {
	echo "cowbase.sh: $*" >&2
	exit 1
}
[ -x "$BIN" ] || die "no $BIN (build first)"
[ "$(id -u)" = 0 ] || die "overlayfs needs root"

TMP=$(mktemp -d /tmp/sfs-bench.XXXXXX)
BASE=$TMP/base
PID=
cleanup() {
	local m
	fusermount3 -u "$TMP/mnt" 2>/dev/null || umount -l "$TMP/mnt" 2>/dev/null || true
	[ -z "$PID" ] || wait "$PID" 2>/dev/null || true
	for m in $(awk -v s="$TMP/" 'index($5, s) == 1 { print $5 }' /proc/self/mountinfo); do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { echo "$2 - $1" | bc; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# FILES small files, 1000 per directory, two levels deep
python3 - "$BASE" "$FILES" <<'PY'
import os, sys
base, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(base, "d%03d" % (i // 10000), "e%02d" % (i // 1000 % 10))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%04d.txt" % (i % 1000)), "w") as f:
        f.write("file %d\nline two\nline three\n" % i)
PY
echo "base: $FILES files in $(find "$BASE" -type d | wc -l) directories"

# one mode: mount, new, 10 changes, ROUNDS reads of the diff
one() {
	local mode=$1 mnt=$TMP/mnt state=$TMP/state-$1
	mkdir -p "$mnt" "$state"
	"$BIN" -f -o cow.mode="$mode" --state "$state" "$mnt" 2>"$TMP/daemon-$mode.log" &
	PID=$!
	local i
	for i in $(seq 1 100); do
		[ -e "$mnt/ctl" ] && break
		sleep 0.05
	done
	local t0 t1
	t0=$(now)
	echo "new b base=$BASE hide=*.pem" >"$mnt/ctl"
	t1=$(now)
	printf '%-8s new            %8.3f s\n' "$mode" "$(elapsed "$t0" "$t1")"
	local w=$mnt/b/workspace
	for i in 1 2 3 4 5; do echo "edit $i" >>"$w/d00$i/e0$i/f00$i$i.txt"; done
	echo added >"$w/added1.txt"
	echo added >"$w/d001/added2.txt"
	rm "$w/d002/e03/f0100.txt" "$w/d003/e04/f0200.txt"
	chmod 755 "$w/d004/e05/f0300.txt"
	local times=() lines
	for i in $(seq 1 "$ROUNDS"); do
		t0=$(now)
		lines=$(wc -l <"$mnt/b/snapshots/base/diff")
		t1=$(now)
		times+=("$(elapsed "$t0" "$t1")")
	done
	printf '%-8s diff (median)  %8.3f s   (%d lines, %d changed files)\n' "$mode" \
		"$(printf '%s\n' "${times[@]}" | median)" "$lines" \
		"$(grep -c '^diff --git' "$mnt/b/snapshots/base/diff")"
	rmdir "$mnt/b"
	fusermount3 -u "$mnt"
	wait "$PID" || true
	PID=
}

for m in ${MODES:-auto copy}; do
	one "$m"
done
