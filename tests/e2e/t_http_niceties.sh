#!/usr/bin/env bash
# HTTP niceties of `basal serve` (issue 18 item 5): the served names on an
# unknown model, /v1/basal with a misspelt type (upstream 1.5: an uncalibrated
# choice), the prompt_too_long body, JSON 404s, and opt-in CORS with its
# preflight. The checks are in tests/server/http_niceties.py (http.client and
# CPython json); this wrapper bounds the run and kills any server left behind.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias"
run_servers_py 300 900 tests/server/http_niceties.py
