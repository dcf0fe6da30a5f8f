#!/usr/bin/env bash
# The HTTP layer under attack (issue 15 defects 2-6) over raw sockets:
# CLOSE-WAIT, slowloris (header and body deadlines, per-client limit),
# half-close, JSON bodies and framing of HTTP-level errors, NUL in the path.
# The checks are in tests/server/http_attacks.py; every wait there is bounded
# and this wrapper bounds the whole run and kills any server left behind.
set -u
. "$(dirname "$0")/lib.sh"
export SERVER_PIDS=$tmp/pids
: >"$SERVER_PIDS"
cleanup() {
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"
    rm -rf "$tmp"
}
trap cleanup EXIT
limit=180
case $BASAL in *asan*) limit=600 ;; esac
BASAL=$BASAL FIXTURES=${FIXTURES:-$root/build/fixtures} SHARED=${SHARED:-$root/../shared} \
    timeout -k 10 "$limit" /usr/bin/python3 -B tests/server/http_attacks.py
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "t_http_attacks: timed out after $limit s"; echo "0 passed, 1 failed"; exit 1; fi
exit "$rc"
