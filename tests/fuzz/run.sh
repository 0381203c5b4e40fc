#!/usr/bin/env bash
# Runs each libFuzzer harness of tests/fuzz for a bounded time, starting from
# its seed corpus in tests/fuzz/corpus/NAME (copied: the repository's corpus is
# never written to).
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [NAME...]
#
# BUILD_DIR is a build configured with CC=clang -DSFS_FUZZ=ON (target
# `fuzzers`). Prints one line per harness, `fuzz NAME: ok (...)` or
# `fuzz NAME: FAILED (...)` with the crashing input's path and the stack, and
# exits non-zero when any failed. SFS_FUZZ_OUT=DIR keeps corpora and crashes there.
# SFS_FUZZ_JOBS harnesses run at once (default: the number of CPUs); each
# is one process on one core, so each gets its SECONDS of fuzzing whatever
# the number.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR SECONDS [NAME...]}
secs=${2:?usage: run.sh BUILD_DIR SECONDS [NAME...]}
shift 2
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in "$here"/fuzz_*.c; do
		n=$(basename "$f" .c)
		names+=("${n#fuzz_}")
	done
fi
out=${SFS_FUZZ_OUT:-$(mktemp -d /tmp/sfsfuzz.XXXXXX)}
# fuzz_one NAME: runs one harness; its report line (and stack) in $out/NAME/report.
fuzz_one() {
	local n=$1 bin="$build/fuzz_$1" log rc execs cov crash
	local report="$out/$n/report"
	mkdir -p "$out/$n/corpus" "$out/$n/crashes"
	if [ ! -x "$bin" ]; then
		echo "fuzz $n: FAILED (no binary $bin: build the fuzzers target)" >"$report"
		return
	fi
	cp -n "$here/corpus/$n/"* "$out/$n/corpus/" 2>/dev/null || true
	log="$out/$n/log"
	# -timeout: one input taking over 10 s is a hang, reported as a failure.
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-print_final_stats=1 -artifact_prefix="$out/$n/crashes/" \
		"$out/$n/corpus" >"$log" 2>&1
	rc=$?
	execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1)
	if [ "$rc" -eq 0 ]; then
		echo "fuzz $n: ok (${execs:-?} executions in $secs s, ${cov:-cov: ?}, corpus $(ls "$out/$n/corpus" | wc -l) inputs)" >"$report"
	else
		crash=$(ls "$out/$n/crashes/" 2>/dev/null | head -n 1)
		{
			echo "fuzz $n: FAILED (exit $rc after ${execs:-?} executions; input: ${crash:+$out/$n/crashes/$crash})"
			grep -E 'ERROR|SUMMARY|^ +#[0-9]+ .* in ' "$log" | grep -v 'fuzzer::' | head -n 20 | sed 's/^/    /'
		} >"$report"
	fi
}

jobs=${SFS_FUZZ_JOBS:-$(nproc)}
echo "fuzz: ${#names[@]} harnesses, $jobs at a time, $secs s each"
running=0
for n in "${names[@]}"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	fuzz_one "$n" &
	running=$((running + 1))
done
wait
failed=0
for n in "${names[@]}"; do
	cat "$out/$n/report" 2>/dev/null || echo "fuzz $n: FAILED (no report)"
	grep -q "^fuzz $n: ok " "$out/$n/report" 2>/dev/null || failed=$((failed + 1))
done
[ -n "${SFS_FUZZ_OUT:-}" ] || rm -rf "$out"
[ "$failed" -eq 0 ]
