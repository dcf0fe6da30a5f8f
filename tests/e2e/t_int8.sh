#!/usr/bin/env bash
# The int8w mode (issue 34): the cached int8 weights against numpy, the cache's
# refusals (truncated, another source, impossible values), and agreement with
# the f32 mode next to bf16's on fixture models. Checks in
# tests/server/int8_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" "$FIXTURES/tiny-deep" /usr/bin/python3
run_servers_py 900 2400 tests/server/int8_test.py
