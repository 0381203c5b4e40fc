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
failed=0
for n in "${names[@]}"; do
	bin="$build/fuzz_$n"
	if [ ! -x "$bin" ]; then
		echo "fuzz $n: FAILED (no binary $bin: build the fuzzers target)"
		failed=$((failed + 1))
		continue
	fi
	mkdir -p "$out/$n/corpus" "$out/$n/crashes"
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
		echo "fuzz $n: ok (${execs:-?} executions in $secs s, ${cov:-cov: ?}, corpus $(ls "$out/$n/corpus" | wc -l) inputs)"
	else
		failed=$((failed + 1))
		crash=$(ls "$out/$n/crashes/" 2>/dev/null | head -n 1)
		echo "fuzz $n: FAILED (exit $rc after ${execs:-?} executions; input: ${crash:+$out/$n/crashes/$crash})"
		grep -E 'ERROR|SUMMARY|^ +#[0-9]+ .* in ' "$log" | grep -v 'fuzzer::' | head -n 20 | sed 's/^/    /'
	fi
done
[ -n "${SFS_FUZZ_OUT:-}" ] || rm -rf "$out"
[ "$failed" -eq 0 ]
