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
export SERVER_PIDS=$tmp/pids
: >"$SERVER_PIDS"
cleanup() {
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"
    rm -rf "$tmp"
}
trap cleanup EXIT
limit=180
case $BASAL in *asan*) limit=600 ;; esac
BASAL=$BASAL FIXTURES=$FIXTURES SHARED=$SHARED TMPDIR=$tmp \
    timeout -k 10 "$limit" "$PY" -B tests/server/client_test.py
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "t_client: timed out after $limit s"; echo "0 passed, 1 failed"; exit 1; fi
exit "$rc"
