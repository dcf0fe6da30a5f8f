#!/usr/bin/env bash
# The HTTP layer under attack (issue 15 defects 2-6) over raw sockets:
# CLOSE-WAIT, slowloris (header and body deadlines, per-client limit),
# half-close, JSON bodies and framing of HTTP-level errors, NUL in the path.
# The checks are in tests/server/http_attacks.py; every wait there is bounded
# and this wrapper bounds the whole run and kills any server left behind.
set -u
. "$(dirname "$0")/lib.sh"
run_servers_py 180 600 tests/server/http_attacks.py
