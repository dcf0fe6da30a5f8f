#!/usr/bin/env bash
# Runs each libFuzzer target (built by `make fuzz`) for SECONDS on its seed
# corpus tests/fuzz/corpus/<name>/ plus what earlier runs found
# (build-fuzz/corpus/<name>/), 1 job, ASan+UBSan; prints the executions of
# each and a closing "N passed, N failed" line. A crash, leak, sanitizer
# report or broken invariant leaves its input in build-fuzz/crashes/.
#   tools/fuzz-run.sh SECONDS [name ...]      (default: every target)
#   FUZZ_RUNS=1000000 tools/fuzz-run.sh 0 fuzz_request   (a fixed count instead of a time)
set -u
usage() {
    cat <<'EOF'
Runs each libFuzzer target of build-fuzz/ (make fuzz) on its seed corpus; crashes go to build-fuzz/crashes/.
usage: tools/fuzz-run.sh [SECONDS [NAME ...]]
  SECONDS         time per target (default: 20)
  NAME            targets, e.g. fuzz_request (default: every tests/fuzz/fuzz_*.c)
  -h, --help      this text
environment:
  FUZZ_RUNS       a fixed execution count instead of SECONDS (default: unset)
  FUZZ_FIXTURES   fixture directory for the targets (default: build/fixtures)
  ASAN_OPTIONS    (default: detect_leaks=1)
  UBSAN_OPTIONS   (default: print_stacktrace=1:halt_on_error=1)
EOF
}
case ${1:-} in
    -h|--help) usage; exit 0 ;;
    ''|*[!0-9]*) [ $# -eq 0 ] || { echo "fuzz-run: SECONDS must be a whole number, not '$1'" >&2; usage >&2; exit 2; } ;;
esac
cd "$(dirname "$0")/.."
secs=${1:-20}
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do names+=("$(basename "$f" .c)"); done
fi
export FUZZ_FIXTURES=${FUZZ_FIXTURES:-$(pwd)/build/fixtures}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p build-fuzz/crashes
pass=0; fail=0
for n in "${names[@]}"; do
    bin=build-fuzz/$n
    if [ ! -x "$bin" ]; then echo "FAIL $n: $bin missing (make fuzz)"; fail=$((fail+1)); continue; fi
    corpus=build-fuzz/corpus/$n
    mkdir -p "$corpus"
    limit=(-max_total_time="$secs")
    [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
    log=build-fuzz/$n.log
    if "$bin" "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix=build-fuzz/crashes/"$n"- "$corpus" "tests/fuzz/corpus/$n" >"$log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
        t=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*$')
        echo "PASS $n: ${runs:-?} executions in ${t:-$secs} s"
        pass=$((pass+1))
    else
        echo "FAIL $n (log $log):"
        grep -E "ERROR|invariant|SUMMARY|Test unit written" "$log" | head -8 | sed 's/^/    /'
        fail=$((fail+1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
