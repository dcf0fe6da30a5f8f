#!/usr/bin/env bash
# `basal serve` end to end over 127.0.0.1 (spec 02, 04 §11–§12, 06 §4): every
# endpoint and error body, OpenAPI validation, batch invariance under 32
# clients, overload (529), SIGTERM with requests in flight, disconnecting
# clients, multi-model configuration. The checks are in tests/server/api_test.py
# (stdlib http.client + python3-jsonschema); this wrapper bounds the run and
# kills any server left behind.
set -u
. "$(dirname "$0")/lib.sh"
export SERVER_PIDS=$tmp/pids
: >"$SERVER_PIDS"
cleanup() {
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"
    rm -rf "$tmp"
}
trap cleanup EXIT
limit=600
case $BASAL in *asan*) limit=1800 ;; esac
BASAL=$BASAL FIXTURES=${FIXTURES:-$root/build/fixtures} SHARED=${SHARED:-$root/../shared} \
    timeout -k 10 "$limit" /usr/bin/python3 -B tests/server/api_test.py
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "t_server_api: timed out after $limit s"; echo "0 passed, 1 failed"; exit 1; fi
exit "$rc"
