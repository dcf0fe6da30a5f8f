#!/usr/bin/env bash
# `basal benchmark` (spec 06 §7.5): a short run on the fixture model, the JSON
# report against bench/benchmark-report.schema.json and recomputed from its
# samples, the HTML report in headless Debian chromium (puppeteer-core), --url,
# the RAM guard, no overwriting. Checks in tests/server/benchmark_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" /usr/bin/chromium tests/oracle/node_modules/puppeteer-core bench/workloads/mixed.jsonl
if "$PY" bench/make-workloads.py --check; then :; else echo "bench/workloads differ from bench/make-workloads.py"; echo "0 passed, 1 failed"; exit 1; fi
run_servers_py 240 900 tests/server/benchmark_test.py
