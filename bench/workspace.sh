#!/usr/bin/env bash
# The workspace benchmark: the same workload, in one invocation, on
#   native   a plain directory on the same filesystem
#   pt_ll    libfuse 3.14's example passthrough_ll (cache=auto: 1 s TTLs)
#   sfs      a sandboxfs workspace on the local provider (its defaults)
# for ROUNDS rounds, printing per-phase medians, the ratios sfs/native and
# sfs/pt_ll, and the daemons' CPU time per phase.  Run as root.
#
#   bench/workspace.sh [-r ROUNDS] [-d WORKDIR] [-b SANDBOXFS] [-c 'OPTIONS'] [-p PHASES] [-- SANDBOXFS_OPTIONS...]
#
# -c 'OPTIONS' adds a target sfs_b: a second sandboxfs mount with OPTIONS
# added (say '-o audit=false'), run in the same rounds right after sfs so
# both see the same machine load; the report adds its column, sfs/sfs_b
# and the daemons' CPU ratio.  It also adds two interleaved phases,
# create_rr and saves_rr (the create and saves workloads going round sfs
# and sfs_b one file or one save at a time): on a loaded machine the CPU
# time of each daemon in those is the fairest comparison there is, and
# the report gives its ratio per round (median, range) and over all rounds.
# -p PHASES: only these (comma-separated names from the report, say
# 'saves300,saves_rr'); the default is all of them.
#
# Phases (sizes fixed): create 2000 files of 4 KiB in 20 dirs; walk+lstat;
# read all; write 256 MiB with fsync; read it back (warm); 300 editor saves
# (temp, fsync, rename); git add+commit+status of the tree; remove it;
# `git status` of a generated 5200-file repository (hyperfine median); and
# open+read+close of a small file (fsbench p50 over 20000).
# This is a benchmark, never a test: nothing here asserts.
set -euo pipefail

ROUNDS=5
COMPARE=
PHASES=all
WORK=
SFS_BIN="$(cd "$(dirname "$0")/.." && pwd)/build/sandboxfs"
while [ $# -gt 0 ]; do
	case "$1" in
	-r) ROUNDS=$2; shift 2 ;;
	-d) WORK=$2; shift 2 ;;
	-b) SFS_BIN=$2; shift 2 ;;
	-c) COMPARE=$2; shift 2 ;;
	-p) PHASES=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [-r ROUNDS] [-d WORKDIR] [-b SANDBOXFS] [-c 'OPTIONS'] [-p PHASES] [-- SANDBOXFS_OPTIONS...]" >&2; exit 2 ;;
	esac
done
SFS_OPTS=("$@")
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 2; }
[ -x "$SFS_BIN" ] || { echo "no $SFS_BIN: build first" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "hyperfine missing (.ci/setup)" >&2; exit 2; }
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK=${WORK:-$(mktemp -d /var/tmp/sfs-bench.XXXXXX)}
mkdir -p "$WORK/bin"
log() { printf '%s\n' "$*" >&2; }
want() { [ "$PHASES" = all ] || [[ ",$PHASES," == *",$1,"* ]]; }

# ---- builds ----------------------------------------------------------------
gcc -O2 -Wall -o "$WORK/bin/fsbench" "$HERE/fsbench.c"
for f in /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c* \
	/usr/share/doc/libfuse3-dev/examples/passthrough_helpers.h*; do
	case "$f" in
	*.gz) zcat "$f" >"$WORK/bin/$(basename "$f" .gz)" ;;
	*) cp "$f" "$WORK/bin/" ;;
	esac
done
# shellcheck disable=SC2046
gcc -O2 -Wall -o "$WORK/bin/passthrough_ll" "$WORK/bin/passthrough_ll.c" $(pkg-config --cflags --libs fuse3)
FSB="$WORK/bin/fsbench"

# ---- targets ---------------------------------------------------------------
PIDS=()
cleanup() {
	cd /
	for m in "$WORK/pt_ll.mnt" "$WORK/sfs.mnt" "$WORK/sfs_b.mnt"; do
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || umount -l "$m"; }
	done
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	# never rm -rf across a live mount
	if ! grep -q " $WORK/" /proc/mounts; then
		rm -rf "$WORK"
	else
		log "left $WORK (still mounted)"
	fi
}
trap cleanup EXIT

wait_mount() {
	local i
	for i in $(seq 1 100); do mountpoint -q "$1" && return 0; sleep 0.05; done
	log "mount of $1 failed"
	return 1
}

mkdir -p "$WORK/native" "$WORK/pt_ll.src" "$WORK/pt_ll.mnt" "$WORK/sfs.state" "$WORK/sfs.mnt"
"$WORK/bin/passthrough_ll" -f -o "source=$WORK/pt_ll.src" "$WORK/pt_ll.mnt" 2>"$WORK/pt_ll.log" &
PT_PID=$!
PIDS+=("$PT_PID")
wait_mount "$WORK/pt_ll.mnt"
"$SFS_BIN" -f --state "$WORK/sfs.state" "${SFS_OPTS[@]}" "$WORK/sfs.mnt" 2>"$WORK/sfs.log" &
SFS_PID=$!
PIDS+=("$SFS_PID")
wait_mount "$WORK/sfs.mnt"
mkdir "$WORK/sfs.mnt/bench"
declare -A DIR=([native]="$WORK/native" [pt_ll]="$WORK/pt_ll.mnt" [sfs]="$WORK/sfs.mnt/bench/workspace")
declare -A PID=([native]=0 [pt_ll]=$PT_PID [sfs]=$SFS_PID)
TARGETS=(native pt_ll sfs)
if [ -n "$COMPARE" ]; then
	mkdir -p "$WORK/sfs_b.state" "$WORK/sfs_b.mnt"
	# shellcheck disable=SC2086 # COMPARE is a list of options
	"$SFS_BIN" -f --state "$WORK/sfs_b.state" "${SFS_OPTS[@]}" $COMPARE "$WORK/sfs_b.mnt" 2>"$WORK/sfs_b.log" &
	SFSB_PID=$!
	PIDS+=("$SFSB_PID")
	wait_mount "$WORK/sfs_b.mnt"
	mkdir "$WORK/sfs_b.mnt/bench"
	DIR[sfs_b]="$WORK/sfs_b.mnt/bench/workspace"
	PID[sfs_b]=$SFSB_PID
	TARGETS+=(sfs_b)
fi

# ---- the 5200-file repository (generated once, cloned onto each target) ---
SEED="$WORK/seed"
mkdir -p "$SEED"
want git_status_5k && (
	cd "$SEED"
	for a in $(seq -w 0 25); do
		mkdir -p "src/m$a"
		for b in $(seq -w 0 199); do
			printf 'module %s file %s\nline two\n' "$a" "$b" >"src/m$a/f$b.c"
		done
	done
	git init -q . && git add -A && git -c user.name=b -c user.email=b@b commit -q -m seed
)
for t in "${TARGETS[@]}"; do
	if want git_status_5k; then git clone -q "$SEED" "${DIR[$t]}/repo"; fi
	printf 'small file\n' >"${DIR[$t]}/small"
done

cpu_ticks() { # utime+stime of a daemon, in clock ticks
	[ "$1" -gt 0 ] || { echo 0; return; }
	awk '{print $14 + $15}' "/proc/$1/stat"
}

# results: one line per measurement: target phase round seconds cpu_seconds
RES="$WORK/results"
: >"$RES"
TCK=$(getconf CLK_TCK)
record() { # target phase round seconds cpu_ticks_before
	local after
	after=$(cpu_ticks "${PID[$1]}")
	echo "$1 $2 $3 $4 $(awk -v a="$after" -v b="$5" -v t="$TCK" 'BEGIN{printf "%.2f", (a-b)/t}')" >>"$RES"
}
phase() { # target round name command...: times a command that prints its own seconds
	local t=$1 r=$2 name=$3 c secs
	shift 3
	c=$(cpu_ticks "${PID[$t]}")
	secs=$("$@")
	record "$t" "$name" "$r" "$secs" "$c"
}
timed() { # target round name command...: times a command by the wall clock
	local t=$1 r=$2 name=$3 c s e
	shift 3
	c=$(cpu_ticks "${PID[$t]}")
	s=$(date +%s%N)
	"$@" >/dev/null
	e=$(date +%s%N)
	record "$t" "$name" "$r" "$(awk -v d=$((e - s)) 'BEGIN{printf "%.4f", d/1e9}')" "$c"
}
git_tree() {
	cd "$1"
	git init -q . 2>/dev/null
	git add -A
	git -c user.name=b -c user.email=b@b commit -q -m round
	git status --porcelain
	rm -rf .git
	cd /
}
hf_median() { # target round name dir
	local t=$1 r=$2 name=$3 c
	c=$(cpu_ticks "${PID[$t]}")
	hyperfine -N -w 2 -r 10 --export-json "$WORK/hf.json" "git -C $4 status --porcelain" >/dev/null 2>&1
	record "$t" "$name" "$r" "$(python3 -c "import json;print('%.4f'%json.load(open('$WORK/hf.json'))['results'][0]['median'])")" "$c"
}

rr() { # round name command args...: a workload going round sfs and sfs_b (fsbench's extra DIRs)
	local r=$1 name=$2 ca cb secs
	shift 2
	ca=$(cpu_ticks "${PID[sfs]}")
	cb=$(cpu_ticks "${PID[sfs_b]}")
	secs=$("$@")
	record sfs "$name" "$r" "$secs" "$ca"
	record sfs_b "$name" "$r" "$secs" "$cb"
}

for r in $(seq 1 "$ROUNDS"); do
	# The order turns each round: a target's phase can meet what the one
	# before it left (a 256 MiB file whose blocks a FUSE daemon frees at the
	# kernel's FORGET, ext4's journal), so none should always come after
	# the same one.
	k=$(((r - 1) % ${#TARGETS[@]}))
	for t in "${TARGETS[@]:k}" "${TARGETS[@]:0:k}"; do
		d=${DIR[$t]}
		log "round $r/$ROUNDS: $t"
		if want create; then phase "$t" "$r" create "$FSB" create "$d/tree" 20 2000 4096; fi
		mkdir -p "$d/tree"
		if want walk; then phase "$t" "$r" walk "$FSB" walk "$d/tree"; fi
		if want readall; then phase "$t" "$r" readall "$FSB" readall "$d/tree"; fi
		if want write256; then phase "$t" "$r" write256 "$FSB" write "$d/big" 256; fi
		if want read256; then phase "$t" "$r" read256 "$FSB" read "$d/big"; fi
		if want saves300; then phase "$t" "$r" saves300 "$FSB" saves "$d/tree" 300; fi
		if want git_commit; then timed "$t" "$r" git_commit git_tree "$d/tree"; fi
		if want rmtree; then phase "$t" "$r" rmtree "$FSB" rmtree "$d/tree"; fi
		rm -rf "$d/tree" "$d/big"
		if want git_status_5k; then hf_median "$t" "$r" git_status_5k "$d/repo"; fi
		if want cat; then
			read -r p50 p99 < <("$FSB" cat "$d/small" 20000)
			echo "$t cat_p50_us $r $p50 0" >>"$RES"
			echo "$t cat_p99_us $r $p99 0" >>"$RES"
		fi
	done
	if [ -n "$COMPARE" ]; then
		a=${DIR[sfs]} b=${DIR[sfs_b]}
		log "round $r/$ROUNDS: sfs and sfs_b in turn"
		if want create_rr; then
			rr "$r" create_rr "$FSB" create "$a/rr" 20 2000 4096 "$b/rr"
			rm -rf "$a/rr" "$b/rr"
		fi
		if want saves_rr; then
			mkdir -p "$a/rr" "$b/rr"
			rr "$r" saves_rr "$FSB" saves "$a/rr" 1000 "$b/rr"
			rm -rf "$a/rr" "$b/rr"
		fi
	fi
done

# ---- report ----------------------------------------------------------------
log ""
python3 - "$RES" "$ROUNDS" <<'EOF'
import sys, statistics as st
from collections import defaultdict
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
secs, cpu = defaultdict(list), defaultdict(list)
phases = []
for t, p, r, s, c in rows:
    secs[(t, p)].append(float(s)); cpu[(t, p)].append(float(c))
    if p not in phases: phases.append(p)
med = lambda v: st.median(v) if v else float('nan')
print(f"medians of {sys.argv[2]} rounds (seconds unless noted; cpu = daemon utime+stime, s)")
has_b = any(t == 'sfs_b' for t, _ in secs)
extra = f"{'sfs_b':>10}{'sfs/b':>8}{'cpu b':>8}{'cpu s/b':>8}" if has_b else ''
print(f"{'phase':<15}{'native':>10}{'pt_ll':>10}{'sfs':>10}{'sfs/nat':>9}{'sfs/pt':>8}{'cpu pt':>8}{'cpu sfs':>8}" + extra)
for p in phases:
    if p.endswith('_rr'):
        continue
    n, pt, s = (med(secs[(t, p)]) for t in ('native', 'pt_ll', 'sfs'))
    line = (f"{p:<15}{n:>10.4f}{pt:>10.4f}{s:>10.4f}{s/n if n else 0:>9.2f}{s/pt if pt else 0:>8.2f}"
            f"{med(cpu[('pt_ll', p)]):>8.2f}{med(cpu[('sfs', p)]):>8.2f}")
    if has_b:
        b = med(secs[('sfs_b', p)])
        cs, cb = med(cpu[('sfs', p)]), med(cpu[('sfs_b', p)])
        line += f"{b:>10.4f}{s/b if b else 0:>8.2f}{cb:>8.2f}{cs/cb if cb else 0:>8.2f}"
    print(line)
rr = [p for p in phases if p.endswith('_rr')]
if rr:
    print("interleaved (sfs and sfs_b in turn, one file or save each): daemon cpu sfs/sfs_b")
for p in rr:
    a, b = cpu[('sfs', p)], cpu[('sfs_b', p)]
    per = sorted(x / y for x, y in zip(a, b) if y)
    if per and sum(b):
        print(f"{p:<15}all rounds {sum(a)/sum(b):.3f}   per round median {med(per):.3f} "
              f"(range {per[0]:.3f}-{per[-1]:.3f})   cpu s {sum(a):.2f} / {sum(b):.2f}")
EOF
