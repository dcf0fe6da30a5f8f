#!/usr/bin/env bash
# `basal benchmark` (spec 06 §7.5): a short run on the fixture model, the JSON
# report against bench/benchmark-report.schema.json and recomputed from its
# samples, the HTML report in headless Debian chromium (puppeteer-core), --url,
# the RAM guard, no overwriting. Checks in tests/server/benchmark_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" /usr/bin/chromium tests/oracle/node_modules/puppeteer-core bench/workloads/mixed.jsonl
export SERVER_PIDS=$tmp/pids
: >"$SERVER_PIDS"
cleanup() {
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"
    rm -rf "$tmp"
}
trap cleanup EXIT
if "$PY" bench/make-workloads.py --check; then :; else echo "bench/workloads differ from bench/make-workloads.py"; echo "0 passed, 1 failed"; exit 1; fi
limit=240
case $BASAL in *asan*) limit=900 ;; esac
BASAL=$BASAL FIXTURES=$FIXTURES SHARED=$SHARED TMPDIR=$tmp \
    timeout -k 10 "$limit" "$PY" -B tests/server/benchmark_test.py
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "t_benchmark: timed out after $limit s"; echo "0 passed, 1 failed"; exit 1; fi
exit "$rc"
