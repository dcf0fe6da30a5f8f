#!/usr/bin/env bash
# Upstream's serving knobs (--orders 1|2, --calibration FILE, --no-calibration,
# --name; YAML orders/calibration/no_calibration/name) against the torch
# protocol reference (tools/protocol_ref.py with the same knobs), and the
# decision log (--log-decisions, YAML decision_log) line for line against the
# responses under concurrent load, SIGHUP and a full disk. Checks in
# tests/server/decision_knobs_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-f32" /usr/bin/python3
run_servers_py 600 1800 tests/server/decision_knobs_test.py
