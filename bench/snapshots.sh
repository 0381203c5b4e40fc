#!/usr/bin/env bash
# Workspace snapshots against native git, in one invocation, on the same
# machine and filesystem (SPEC §10, issue 11):
#   snapshot   the second and later snapshot of a 5200-file workspace with 10
#              files changed  vs  `git add -A && git commit` of the same tree
#   diff       `cat snapshots/base/diff` with 10 files changed  vs  `git diff`
#   growth     what the object store grows by for one changed 4 KiB file
# ROUNDS rounds; prints wall-clock medians and the ratios sfs/git, the CPU
# time of each operation (perf stat task-clock: the daemon's threads, or
# git's) when perf is there and, as the floor of any request through the
# mount, `cat status`.  On a loaded machine the wall
# clock of a FUSE request pays a scheduling wait per round trip (cat ->
# kernel -> daemon thread -> reply), which the CPU columns do not.  Run as
# root.
#
#   bench/snapshots.sh [-r ROUNDS] [-d WORKDIR] [-b SANDBOXFS]
#
# SFS_BASE_BIN=OTHER_BINARY mounts a second daemon (a baseline build) on the
# same tree and interleaves its snapshot and diff with this one's in every
# round, printing its rows ("base …") beside them: before and after under
# the same load.
#
# This is a benchmark, never a test: nothing here asserts.
set -euo pipefail

ROUNDS=5
WORK=
SFS_BIN="$(cd "$(dirname "$0")/.." && pwd)/build/sandboxfs"
while [ $# -gt 0 ]; do
	case "$1" in
	-r) ROUNDS=$2; shift 2 ;;
	-d) WORK=$2; shift 2 ;;
	-b) SFS_BIN=$2; shift 2 ;;
	*) echo "usage: $0 [-r ROUNDS] [-d WORKDIR] [-b SANDBOXFS]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 2; }
[ -x "$SFS_BIN" ] || { echo "no $SFS_BIN: build first" >&2; exit 2; }
WORK=${WORK:-$(mktemp -d /var/tmp/sfs-bench-snap.XXXXXX)}
MNT=$WORK/mnt
log() { printf '%s\n' "$*" >&2; }

SFS_PID=
BASE_PID=
BMNT=$WORK/base-mnt
cleanup() {
	cd /
	local m
	for m in "$MNT" "$BMNT"; do
		if mountpoint -q "$m" 2>/dev/null; then fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; fi
	done
	[ -z "$SFS_PID" ] || { kill "$SFS_PID" 2>/dev/null || true; wait "$SFS_PID" 2>/dev/null || true; }
	[ -z "$BASE_PID" ] || { kill "$BASE_PID" 2>/dev/null || true; wait "$BASE_PID" 2>/dev/null || true; }
	if ! grep -q " $WORK/" /proc/mounts; then rm -rf "$WORK"; else log "left $WORK (still mounted)"; fi
}
trap cleanup EXIT

# mount BIN MNT STATE: starts a daemon, its pid in MOUNTED_PID
mount_one() {
	mkdir -p "$2" "$3"
	"$1" -f --state "$3" "$2" 2>>"$WORK/sfs.log" &
	MOUNTED_PID=$!
	for _ in $(seq 1 100); do [ -e "$2/ctl" ] && break; sleep 0.05; done
	[ -e "$2/ctl" ] || { log "mount failed"; cat "$WORK/sfs.log" >&2; exit 1; }
}
mkdir -p "$WORK/native"
mount_one "$SFS_BIN" "$MNT" "$WORK/state"
SFS_PID=$MOUNTED_PID
if [ -n "${SFS_BASE_BIN:-}" ]; then
	[ -x "$SFS_BASE_BIN" ] || { log "no $SFS_BASE_BIN"; exit 2; }
	mount_one "$SFS_BASE_BIN" "$BMNT" "$WORK/base-state"
	BASE_PID=$MOUNTED_PID
fi

# ctl LINE: one command on the sandbox's ctl, its result on stdout (bctl:
# the baseline daemon's)
ctl() { exec 7<>"$MNT/b/ctl"; printf '%s\n' "$*" >&7; cat <&7; exec 7>&-; }
bctl() { exec 7<>"$BMNT/b/ctl"; printf '%s\n' "$*" >&7; cat <&7; exec 7>&-; }
now() { date +%s%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", (b - a) / 1e6 }'; }
# cpu FILE CMD...: runs CMD, appending the task-clock ms of the daemon (when
# FILE ends in .sfs, or .base for the baseline's) or of CMD itself to FILE;
# without perf, just runs CMD.
cpu() {
	local f=$1
	shift
	if ! command -v perf >/dev/null; then "$@"; return; fi
	if [[ $f == *.sfs ]]; then
		perf stat -x, -e task-clock -p "$SFS_PID" -o "$f.raw" -- "$@"
	elif [[ $f == *.base ]]; then
		perf stat -x, -e task-clock -p "$BASE_PID" -o "$f.raw" -- "$@"
	else
		perf stat -x, -e task-clock -o "$f.raw" -- "$@"
	fi
	awk -F, '$3 == "task-clock" { print $1 }' "$f.raw" >>"$f"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# the tree: 52 directories of 100 files (1-3 KiB of text each)
mkdir "$MNT/b"
WS=$(awk '$1=="workspace"{print $2}' "$MNT/b/status")
python3 - "$WS" <<'PY'
import os, random, sys
random.seed(7)
root = sys.argv[1]
for d in range(52):
    os.makedirs(f"{root}/d{d:02}", exist_ok=True)
    for f in range(100):
        with open(f"{root}/d{d:02}/f{f:03}.txt", "w") as fh:
            fh.write("\n".join(f"line {i} {random.random()}" for i in range(random.randint(40, 120))) + "\n")
PY
cp -a "$WS/." "$WORK/native/"
BWS=
if [ -n "$BASE_PID" ]; then
	mkdir "$BMNT/b"
	BWS=$(awk '$1=="workspace"{print $2}' "$BMNT/b/status")
	cp -a "$WS/." "$BWS/"
fi
G() { git -C "$WORK/native" -c user.email=b@example.org -c user.name=b "$@"; }
G init -q
G add -A
G commit -qm base
G tag base
sleep 1.1 # files changed in the stat cache's second are hashed again
ctl snapshot base >/dev/null
ctl snapshot warm >/dev/null # every file in the stat cache now
if [ -n "$BASE_PID" ]; then
	bctl snapshot base >/dev/null
	bctl snapshot warm >/dev/null
fi

# change10 DIR ROUND: the same 10 files, new contents each round
change10() {
	local i
	for i in 0 5 10 15 20 25 30 35 40 45; do
		printf 'round %s\n' "$2" >>"$1/d$(printf %02d "$i")/f007.txt"
	done
}

: >"$WORK/t.snap.sfs"; : >"$WORK/t.snap.git"; : >"$WORK/t.diff.sfs"; : >"$WORK/t.diff.git"
: >"$WORK/t.floor"; : >"$WORK/c.snap.sfs"; : >"$WORK/c.snap.git"; : >"$WORK/c.diff.sfs"; : >"$WORK/c.diff.git"
: >"$WORK/t.snap.base"; : >"$WORK/t.diff.base"; : >"$WORK/c.snap.base"; : >"$WORK/c.diff.base"
# base_diff / base_snap: the baseline's diff and snapshot, in round $r
base_diff() {
	t0=$(now); cpu "$WORK/c.diff.base" cat "$BMNT/b/snapshots/base/diff" >/dev/null; t1=$(now)
	ms "$t0" "$t1" >>"$WORK/t.diff.base"
}
base_snap() {
	t0=$(now); cpu "$WORK/c.snap.base" sh -c 'exec 7<>"$1"; echo "snapshot $2" >&7; cat <&7' sh "$BMNT/b/ctl" "r$r" >/dev/null; t1=$(now)
	ms "$t0" "$t1" >>"$WORK/t.snap.base"
}
for r in $(seq 1 "$ROUNDS"); do
	change10 "$WS" "$r"
	change10 "$WORK/native" "$r"
	[ -z "$BWS" ] || change10 "$BWS" "$r"
	sync
	# the baseline goes first in odd rounds and last in even ones: whatever
	# the order costs (a writeback, a wake-up) falls on both builds alike
	[ -z "$BASE_PID" ] || [ $((r % 2)) -eq 0 ] || base_diff
	t0=$(now); cat "$MNT/b/status" >/dev/null; t1=$(now)
	ms "$t0" "$t1" >>"$WORK/t.floor"
	t0=$(now); cpu "$WORK/c.diff.sfs" cat "$MNT/b/snapshots/base/diff" >/dev/null; t1=$(now)
	ms "$t0" "$t1" >>"$WORK/t.diff.sfs"
	[ -z "$BASE_PID" ] || [ $((r % 2)) -eq 1 ] || base_diff
	t0=$(now); cpu "$WORK/c.diff.git" git -C "$WORK/native" diff base >/dev/null; t1=$(now)
	ms "$t0" "$t1" >>"$WORK/t.diff.git"
	[ -z "$BASE_PID" ] || [ $((r % 2)) -eq 0 ] || base_snap
	t0=$(now); cpu "$WORK/c.snap.sfs" sh -c 'exec 7<>"$1"; echo "snapshot $2" >&7; cat <&7' sh "$MNT/b/ctl" "r$r" >/dev/null; t1=$(now)
	ms "$t0" "$t1" >>"$WORK/t.snap.sfs"
	[ -z "$BASE_PID" ] || [ $((r % 2)) -eq 1 ] || base_snap
	t0=$(now); cpu "$WORK/c.snap.git" sh -c 'git -C "$1" add -A && git -C "$1" -c user.email=b@example.org -c user.name=b commit -qm "$2"' sh "$WORK/native" "r$r"; t1=$(now)
	ms "$t0" "$t1" >>"$WORK/t.snap.git"
done

# growth: one changed 4 KiB file, one more snapshot
head -c 3072 /dev/urandom | base64 -w 0 | head -c 4096 >"$WS/d03/f050.txt"
sleep 1.1
ctl snapshot g0 >/dev/null
before=$(du -sk "$WORK/state/git/store" | cut -f1)
head -c 3072 /dev/urandom | base64 -w 0 | head -c 4096 >"$WS/d03/f050.txt"
ctl snapshot g1 >/dev/null
after=$(du -sk "$WORK/state/git/store" | cut -f1)

snap_sfs=$(median <"$WORK/t.snap.sfs"); snap_git=$(median <"$WORK/t.snap.git")
diff_sfs=$(median <"$WORK/t.diff.sfs"); diff_git=$(median <"$WORK/t.diff.git")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else printf "-" }'; }
m() { if [ -s "$1" ]; then median <"$1"; else echo -; fi; }
cs=$(m "$WORK/c.snap.sfs"); cg=$(m "$WORK/c.snap.git")
cds=$(m "$WORK/c.diff.sfs"); cdg=$(m "$WORK/c.diff.git")
fmt='%-44s %9s %9s %7s %9s %9s %7s\n'
printf "$fmt" "5200 files, 10 changed; $ROUNDS rounds" "sfs ms" "git ms" "sfs/git" "sfs cpu" "git cpu" "sfs/git"
printf "$fmt" "second snapshot vs git add -A && git commit" "$snap_sfs" "$snap_git" "$(ratio "$snap_sfs" "$snap_git")" "$cs" "$cg" "$(ratio "$cs" "$cg")"
printf "$fmt" "cat snapshots/base/diff vs git diff" "$diff_sfs" "$diff_git" "$(ratio "$diff_sfs" "$diff_git")" "$cds" "$cdg" "$(ratio "$cds" "$cdg")"
if [ -n "$BASE_PID" ]; then
	bs=$(m "$WORK/t.snap.base"); bd=$(m "$WORK/t.diff.base")
	bcs=$(m "$WORK/c.snap.base"); bcd=$(m "$WORK/c.diff.base")
	printf "$fmt" "base: second snapshot vs git add+commit" "$bs" "$snap_git" "$(ratio "$bs" "$snap_git")" "$bcs" "$cg" "$(ratio "$bcs" "$cg")"
	printf "$fmt" "base: cat snapshots/base/diff vs git diff" "$bd" "$diff_git" "$(ratio "$bd" "$diff_git")" "$bcd" "$cdg" "$(ratio "$bcd" "$cdg")"
fi
printf '%-44s %9s\n' "cat status (a request's floor)" "$(median <"$WORK/t.floor")"
printf '%-44s %9s KiB\n' "store growth, one changed 4 KiB file" "$((after - before))"
