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
run_servers_py 240 900 tests/server/scaleout_test.py
