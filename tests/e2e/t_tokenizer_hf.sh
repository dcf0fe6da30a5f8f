#!/usr/bin/env bash
# Re-runs Hugging Face tokenizers@0.23.2 (npm, the library basal-rs links) live
# and compares its ids and character offsets with the committed
# tests/data/hf-tokenizer-goldens.json (test_tokenizer checks the C engine
# against that file), so a stale or hand-edited golden fails here. Without node
# or the npm package (make deps) there is nothing to compare: reported as skipped.
set -u
. "$(dirname "$0")/lib.sh"
pkg="$root/tests/oracle/node_modules/tokenizers/package.json"
if ! command -v node >/dev/null 2>&1 || [ ! -f "$pkg" ]; then
    echo "skipped: node or tests/oracle/node_modules/tokenizers missing (run make deps)"
    echo "0 passed, 0 failed"
    exit 0
fi
SHARED="${SHARED:-$root/../shared}" node "$root/tools/hf-tokenizer-goldens.js" --check
