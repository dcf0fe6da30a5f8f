#!/usr/bin/env bash
# `basal serve` start order, loading state and logs (issue 18): the whole
# configuration checked and the address bound before any model loads (a busy
# port fails in milliseconds, timed against a load slowed by the test-only
# BASAL_TEST_LOAD_DELAY_MS), /health 503 "loading" then 200, doctor --config
# failing with serve's own message, every --log-format json line parsed by
# CPython's json, the access log's fields and request id, SIGHUP reopening
# the access log file. The checks are in tests/server/startup_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" "$FIXTURES/tiny-nobias"
run_servers_py 300 900 tests/server/startup_test.py
