#!/usr/bin/env bash
# Choice with 11..255 options through `basal serve` over 127.0.0.1 (spec 03 §5,
# 04 §7 B2, §11): answers with all n keys, byte-identical under 32 concurrent
# clients mixed with small requests, no round 2 for clients that leave. The
# checks are in tests/server/large_choice_test.py; this wrapper bounds the run
# and kills any server left behind.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias/config.json"
run_servers_py 400 1500 tests/server/large_choice_test.py
