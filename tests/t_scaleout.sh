#!/usr/bin/env bash
# Scale-out: 3 `basal serve` replicas on loopback ports behind nginx (a
# foreground nginx with every path in a temporary directory, its configuration
# generated from deploy/nginx/basal.conf), `basal client --jobs 32` over a few
# hundred requests, one replica SIGKILLed mid-run and started again: every
# input answered exactly once, every answer byte-identical to a single
# server's. The checks are in tests/server/scaleout_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" /usr/sbin/nginx
export SERVER_PIDS=$tmp/pids
: >"$SERVER_PIDS"
cleanup() {
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"
    rm -rf "$tmp"
}
trap cleanup EXIT
limit=240
case $BASAL in *asan*) limit=900 ;; esac
BASAL=$BASAL FIXTURES=$FIXTURES SHARED=$SHARED TMPDIR=$tmp \
    timeout -k 10 "$limit" "$PY" -B tests/server/scaleout_test.py
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "t_scaleout: timed out after $limit s"; echo "0 passed, 1 failed"; exit 1; fi
exit "$rc"
