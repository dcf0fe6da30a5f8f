#!/usr/bin/env bash
# facts: "auto" end to end (spec 03 §3, 02 T9/T10): `basal prepare`/`decide`
# and `basal serve` on both endpoints against tools/facts_ref.py; the checks
# are in tests/server/facts_test.py. This wrapper bounds the run and kills any
# server left behind.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias/config.json"
export SERVER_PIDS=$tmp/pids
: >"$SERVER_PIDS"
cleanup() {
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"
    rm -rf "$tmp"
}
trap cleanup EXIT
limit=300
case $BASAL in *asan*) limit=900 ;; esac
BASAL=$BASAL FIXTURES=$FIXTURES SHARED=$SHARED timeout -k 10 "$limit" $PY -B tests/server/facts_test.py
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "t_server_facts: timed out after $limit s"; echo "0 passed, 1 failed"; exit 1; fi
exit "$rc"
