#!/usr/bin/env bash
# Run latency of the local and docker providers, in one invocation, beside
# the docker CLI doing the same:
#
#   1. exec -> exit: `exec true` written to a sandbox's ctl until
#      runs/N/wait returns `exited 0`, for a local sandbox (its own loop,
#      back to back, then again with 20 ms between execs), interleaved with
#      the same run done natively by the bench itself (a directory, a
#      journal file, `sh -c true` spawned into it and waited for, a status
#      file: the floor of the machine's process and file creation),
#      then for a docker sandbox interleaved with `docker exec CID true` on
#      the same container;
#   2. journal latency: a line written by a process in the sandbox until a
#      reader of runs/N/journal (a blocking read through the mount) sees it,
#      for local and docker.  The run echoes what it reads from a FIFO in its
#      own filesystem; the bench writes a line into that FIFO from the host
#      (the docker one through the container's overlay MergedDir) and times
#      the line's arrival in the journal, with the reader already waiting in
#      its read (as a follower is).  Writing to the FIFO and the shell's echo
#      are in the number (tens of microseconds).
#
# Prints median, p90 and p99 of every series, and the ratios local sandboxfs /
# native and docker sandboxfs / CLI.  It is a benchmark, not a test: nothing
# asserts.  On a loaded or slow machine compare the ratios, not the times.
#
#   bash bench/runs.sh [EXECS] [LINES]     # default 50 execs, 200 lines per sandbox
#
# SFS_BIN picks the binary (default build/sandboxfs); SFS_DOCKER_IMAGE the
# image (default sandboxfs-test:latest).  Without a docker engine only the
# local rows are printed.  Extra daemon options: SFS_BENCH_OPTS="-o ...".
# SFS_BASE_BIN=OTHER_BINARY mounts a second daemon (a baseline build) and
# interleaves its rows ("base ...") with this one's, plus the ratios.
# SFS_BENCH_DIR=DIR puts the state (runs, journals) there instead of /tmp:
# ext4 without a journal skips inodes freed in the last minutes when it
# allocates one, and a run makes 6 (its directory and files; all of them
# ahead, a moment after the previous exec), so right after an invocation
# that removed a few thousand, the next one's runs start slower
# (docs/performance.md, rounds 6 to 8); a fresh file system (a loop-mounted
# image) has no past.  SFS_BENCH_CHURN=N gives it one: N directories of 4
# empty files made and removed there before the mounts.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SFS_BIN:-$ROOT/build/sandboxfs}
IMAGE=${SFS_DOCKER_IMAGE:-sandboxfs-test:latest}
EXECS=${1:-50}
LINES=${2:-200}

die() {
	echo "runs.sh: $*" >&2
	exit 1
}
[ -x "$BIN" ] || die "no $BIN (build first)"
DOCKER=1
if ! timeout 15 docker info >/dev/null 2>&1 || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	echo "runs.sh: no docker engine or no image $IMAGE: local rows only" >&2
	DOCKER=0
fi

TMP=$(mktemp -d "${SFS_BENCH_DIR:-/tmp}/sfs-bench-runs.XXXXXX")
if [ -n "${SFS_BENCH_CHURN:-}" ]; then
	for i in $(seq 1 "$SFS_BENCH_CHURN"); do
		mkdir "$TMP/churn$i"
		: >"$TMP/churn$i/a" && : >"$TMP/churn$i/b" && : >"$TMP/churn$i/c" && : >"$TMP/churn$i/d"
	done
	rm -rf "$TMP"/churn*
fi
PIDS=() MNTS=()
cleanup() {
	local m ids
	for m in "${MNTS[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	for m in "${PIDS[@]}"; do wait "$m" 2>/dev/null || true; done
	for m in "$TMP"/state*; do
		ids=$(docker ps -aq --filter "label=sandboxfs.state=$m" 2>/dev/null || true)
		# shellcheck disable=SC2086
		[ -z "$ids" ] || docker rm -f -v $ids >/dev/null 2>&1 || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

# mount NAME BIN: mounts BIN on $TMP/mntNAME with a local sandbox l and, with
# docker, a docker sandbox d, and adds them to MOUNT_ARGS
mount_one() {
	local name=$1 bin=$2 mnt=$TMP/mnt$1 state=$TMP/state$1 ws=$TMP/ws$1 cid='' merged=''
	mkdir -p "$mnt" "$state" "$ws"
	# shellcheck disable=SC2086 # options are words
	"$bin" -f --state "$state" ${SFS_BENCH_OPTS:-} "$mnt" 2>"$TMP/daemon$name.log" &
	PIDS+=($!)
	MNTS+=("$mnt")
	for _ in $(seq 1 100); do
		[ -e "$mnt/ctl" ] && break
		sleep 0.05
	done
	[ -e "$mnt/ctl" ] || die "mount failed: $(cat "$TMP/daemon$name.log")"
	ctl "new l dir=$ws" "$mnt/ctl" >/dev/null
	if [ "$DOCKER" = 1 ]; then
		ctl "new d provider=docker image=$IMAGE" "$mnt/ctl" >/dev/null
		cid=$(awk '$1 == "id" { print $2 }' "$mnt/d/status")
		merged=$(docker inspect -f '{{.GraphDriver.Data.MergedDir}}' "$cid" 2>/dev/null || true)
	fi
	MOUNT_ARGS+=("$name" "$mnt" "$ws" "${cid:--}" "${merged:--}")
}
MOUNT_ARGS=()
mount_one "" "$BIN"
# SFS_BASE_BIN=OTHER: the same rows for another binary (a baseline build),
# interleaved with this one's in the same invocation
if [ -n "${SFS_BASE_BIN:-}" ]; then
	[ -x "$SFS_BASE_BIN" ] || die "no $SFS_BASE_BIN"
	mount_one "base" "$SFS_BASE_BIN"
fi

mkdir "$TMP/native"
SFS_BENCH_NATIVE=$TMP/native python3 - "$EXECS" "$LINES" "${MOUNT_ARGS[@]}" <<'EOF'
import itertools, os, random, subprocess, sys, threading, time

execs, lines = int(sys.argv[1]), int(sys.argv[2])
mounts = []  # (label prefix, mount, local workspace dir, container id, merged dir)
a = sys.argv[3:]
for i in range(0, len(a), 5):
    name, mnt, lws, cid, merged = a[i:i + 5]
    mounts.append((name + " " if name else "", mnt, lws,
                   "" if cid == "-" else cid, "" if merged == "-" else merged))

def ctl(path, line):
    fd = os.open(path, os.O_RDWR)
    try:
        os.write(fd, (line + "\n").encode())
        return os.read(fd, 4096).decode().strip()
    finally:
        os.close(fd)

def read_all(path):
    with open(path, "rb") as f:
        return f.read().decode()

def exec_true(mnt, sb):
    t0 = time.perf_counter_ns()
    n = ctl(f"{mnt}/{sb}/ctl", "exec true")
    got = read_all(f"{mnt}/{sb}/runs/{n}/wait").strip()
    t1 = time.perf_counter_ns()
    if got != "exited 0":
        sys.exit(f"runs.sh: {sb} run {n}: {got!r}")
    return (t1 - t0) / 1e6

NATIVE = "native: the same run, no daemon"
native_dirs = (f"{os.environ['SFS_BENCH_NATIVE']}/{i}" for i in itertools.count(1))

def native_run():
    # what a run is without sandboxfs in between: the floor this machine
    # puts under any local run
    d = next(native_dirs)
    t0 = time.perf_counter_ns()
    os.mkdir(d)
    j = os.open(f"{d}/journal", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        pid = os.posix_spawn("/bin/sh", ["sh", "-c", "true"], os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, j, 1),
                                           (os.POSIX_SPAWN_DUP2, j, 2)])
    finally:
        os.close(j)
    _, st = os.waitpid(pid, 0)
    with open(f"{d}/status", "w") as f:
        f.write(f"exited {os.waitstatus_to_exitcode(st)}\n")
    t1 = time.perf_counter_ns()
    return (t1 - t0) / 1e6

def cli_exec(cid):
    t0 = time.perf_counter_ns()
    subprocess.run(["docker", "exec", cid, "true"], check=True)
    return (time.perf_counter_ns() - t0) / 1e6

def stats(v):
    s = sorted(v)
    med = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    p90 = s[min(len(s) - 1, int(len(s) * 0.90))]
    p99 = s[min(len(s) - 1, int(len(s) * 0.99))]
    return med, p90, p99

def journal_latency(mnt, sb, fifo_host, fifo_in_sandbox):
    if os.path.exists(fifo_host):
        os.unlink(fifo_host)
    os.mkfifo(fifo_host, 0o666)
    n = ctl(f"{mnt}/{sb}/ctl",
            f"exec while IFS= read -r l; do echo \"$l\"; done < {fifo_in_sandbox}")
    w = os.open(fifo_host, os.O_WRONLY)  # waits for the run to open it
    r = os.open(f"{mnt}/{sb}/runs/{n}/journal", os.O_RDONLY)
    out = []
    got = {}

    def reader(tag):
        buf = b""
        while not buf.endswith(tag):
            b = os.read(r, 65536)
            if not b:
                break
            buf += b
        got["t"] = time.perf_counter_ns()
        got["ok"] = buf.endswith(tag)

    try:
        for i in range(lines + 5):
            tag = f"L{i}\n".encode()
            # the reader waits in its read (parked in the daemon) before the
            # line is written: that is the latency a follower sees
            th = threading.Thread(target=reader, args=(tag,))
            th.start()
            time.sleep(random.uniform(0.005, 0.015))
            t0 = time.perf_counter_ns()
            os.write(w, tag)
            th.join()
            if not got["ok"]:
                sys.exit(f"runs.sh: {sb} journal ended early")
            if i >= 5:  # the first lines start the follower
                out.append((got["t"] - t0) / 1e6)
    finally:
        os.close(w)
        os.close(r)
    if read_all(f"{mnt}/{sb}/runs/{n}/wait").strip() != "exited 0":
        sys.exit(f"runs.sh: {sb} journal run did not exit 0")
    return out

series = {}
for pre, mnt, lws, cid, merged in mounts:
    exec_true(mnt, "l")  # warm-up
    if cid:
        exec_true(mnt, "d")
        cli_exec(cid)
# local runs first, on their own: a `docker exec` just before leaves dockerd,
# containerd and the shim busy for milliseconds on a 2-core machine, which
# the next local exec paid (9.8 ms median interleaved, 2.6 ms alone)
native_run()  # warm-up
for _ in range(execs):
    for pre, mnt, lws, cid, merged in mounts:
        series.setdefault(pre + "local: exec true -> wait", []).append(exec_true(mnt, "l"))
    series.setdefault(NATIVE, []).append(native_run())
# the same with 20 ms between execs, as a user or an agent issues them: the
# daemon makes the next run's directory after each exec's reply, which back
# to back competes with the next exec where file creation is slow
for _ in range(execs):
    for pre, mnt, lws, cid, merged in mounts:
        time.sleep(0.02)
        series.setdefault(pre + "local: exec true -> wait, 20 ms apart", []).append(
            exec_true(mnt, "l"))
for _ in range(execs):
    for pre, mnt, lws, cid, merged in mounts:
        if cid:
            series.setdefault(pre + "docker: exec true -> wait", []).append(exec_true(mnt, "d"))
            series.setdefault(pre + "docker exec CID true (CLI)", []).append(cli_exec(cid))

for pre, mnt, lws, cid, merged in mounts:
    series[pre + "local: journal line latency"] = journal_latency(
        mnt, "l", f"{lws}/lat.fifo", "lat.fifo")
    if cid and merged:
        series[pre + "docker: journal line latency"] = journal_latency(
            mnt, "d", f"{merged}/tmp/lat.fifo", "/tmp/lat.fifo")
    elif cid:
        print("runs.sh: no MergedDir for the container: docker journal row skipped",
              file=sys.stderr)

print(f"sandboxfs run latency: {execs} execs, {lines} journal lines per sandbox (ms)")
print(f"{'':48s} {'median':>9s} {'p90':>9s} {'p99':>9s}")
for name, v in series.items():
    med, p90, p99 = stats(v)
    print(f"{name:48s} {med:9.2f} {p90:9.2f} {p99:9.2f}")
    if os.environ.get("SFS_BENCH_DUMP"):
        print("   ", " ".join(f"{x:.1f}" for x in v))
for pre, mnt, lws, cid, merged in mounts:
    loc = stats(series[pre + "local: exec true -> wait"])[0]
    nat = stats(series[NATIVE])[0]
    print(f"{'  ' + pre + 'ratio local sandboxfs / native':48s} {loc / nat:9.2f}")
    if cid:
        d = stats(series[pre + "docker: exec true -> wait"])[0]
        c = stats(series[pre + "docker exec CID true (CLI)"])[0]
        print(f"{'  ' + pre + 'ratio docker sandboxfs / CLI':48s} {d / c:9.2f}")
if len(mounts) > 1:
    for name in list(series):
        if not name.startswith("base ") and "base " + name in series:
            r = stats(series[name])[0] / stats(series["base " + name])[0]
            print(f"{'  ratio / base: ' + name:48s} {r:9.2f}")
EOF
