#!/usr/bin/env bash
# `basal serve` end to end over 127.0.0.1 (spec 02, 04 §11–§12, 06 §4): every
# endpoint and error body, OpenAPI validation, batch invariance under 32
# clients, overload (529), SIGTERM with requests in flight, disconnecting
# clients, multi-model configuration. The checks are in tests/server/api_test.py
# (stdlib http.client + python3-jsonschema); this wrapper bounds the run and
# kills any server left behind.
set -u
. "$(dirname "$0")/lib.sh"
run_servers_py 600 1800 tests/server/api_test.py
