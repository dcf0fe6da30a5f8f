#!/usr/bin/env bash
# The public in-process API (include/basal.h; issue 32): examples/embed (C,
# built by make against libbasal) and the Python bindings (bindings/python,
# ctypes over libbasal.so) answer every request of tests/data/protocol-e2e-*
# and a set of refusals with the status and the bytes of `basal serve`;
# libbasal.so exports only the public API; `pkg-config basal` builds the
# example. The checks are in tests/e2e/api/embed_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$BUILD/examples/embed" "$FIXTURES/tiny-bias"
BUILD=$BUILD run_servers_py 300 900 tests/e2e/api/embed_test.py
