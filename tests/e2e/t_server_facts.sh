#!/usr/bin/env bash
# facts: "auto" end to end (spec 03 §3, 02 T9/T10): `basal prepare`/`decide`
# and `basal serve` on both endpoints against tools/facts_ref.py; the checks
# are in tests/server/facts_test.py. This wrapper bounds the run and kills any
# server left behind.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias/config.json"
run_servers_py 300 900 tests/server/facts_test.py
