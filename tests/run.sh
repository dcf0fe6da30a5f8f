#!/usr/bin/env bash
# Runs every test binary of a build directory and every tests/e2e/t_*.sh script.
# Prints one line per test and a closing "N passed, N failed" line.
set -u
usage() {
    cat <<'EOF'
Runs every test binary of a build directory and every tests/e2e/t_*.sh script.
usage: tests/run.sh [BUILD]
  BUILD          build directory, relative to the repository root (default: build)
  -h, --help     this text
environment:
  SHARED         the shared/ folder (default: ../shared next to the repo)
  ASAN_OPTIONS   (default: detect_leaks=1:abort_on_error=0)
  UBSAN_OPTIONS  (default: print_stacktrace=1:halt_on_error=1)
  BASAL_TEST_FULL  1: also run, under the sanitizers, the scripts marked
                 "# basal-test: release-only" (oracle-bound exhaustive checks whose
                 code paths smaller tests already cover there); `make test-full` sets it
EOF
}
case ${1:-} in
    -h|--help) usage; exit 0 ;;
    # before BUILD/test-logs is made: an option is never a build directory
    -*) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export BASAL="$root/$build/basal"
export BUILD="$root/$build"
export FIXTURES="$root/build/fixtures"
export SHARED="${SHARED:-$root/../shared}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
pass=0; fail=0; failed=()
logdir="$root/$build/test-logs"; mkdir -p "$logdir"
run_one() {
    local name=$1; shift
    local t0=$EPOCHREALTIME
    if "$@" >"$logdir/$name.log" 2>&1; then
        pass=$((pass+1)); printf 'PASS %-32s %6.2fs  %s\n' "$name" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}')" "$(tail -n 1 "$logdir/$name.log")"
    else
        fail=$((fail+1)); failed+=("$name")
        printf 'FAIL %-32s\n' "$name"; tail -n 30 "$logdir/$name.log" | sed 's/^/    /'
    fi
}
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
skipped=()
for s in tests/e2e/t_*.sh; do
    [ -f "$s" ] || continue
    if [ "$build" != build ] && [ "${BASAL_TEST_FULL:-0}" != 1 ] && head -n 20 "$s" | grep -q '^# basal-test: release-only'; then
        skipped+=("$(basename "$s" .sh)"); continue
    fi
    run_one "$(basename "$s" .sh)" bash "$s"
done
[ ${#skipped[@]} -gt 0 ] && echo "[$build] release-only here (make test-full runs them too): ${skipped[*]}"
echo "[$build] ${failed[*]:+failed: ${failed[*]}}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
