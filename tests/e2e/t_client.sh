#!/usr/bin/env bash
# `basal client` against a live `basal serve` (spec 06 §5.3): every input form,
# order under --jobs 32, error envelopes (422, unknown model, connection
# refused, timeout), retries on 529 counted in /metrics, API key, exit codes,
# SIGINT -> 130 with the answers so far flushed, the progress line on a pty.
# The checks are in tests/server/client_test.py; this wrapper bounds the run
# and kills any server left behind.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias"
run_servers_py 180 600 tests/server/client_test.py
