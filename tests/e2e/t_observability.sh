#!/usr/bin/env bash
# docs/OBSERVABILITY.md and docs/grafana-basal.json against what the server
# really exports (issue 35 item 4): a `basal serve --metrics` on the fixture
# model with the decision log on and max_inflight 1 gets answered requests on
# both endpoints, a 40-option choice, a 422 and a burst of 529s; its /metrics,
# read by prometheus_client's parser, must hold exactly the families of
# src/server/metrics.c and of the document's table (types and labels), and
# every metric and label the document's PromQL and the dashboard's panels use
# (tests/e2e/observability_check.py).
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" docs/OBSERVABILITY.md docs/grafana-basal.json
"$PY" -c 'import prometheus_client' 2>/dev/null || { echo "missing python3-prometheus-client (tools/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; }
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BASAL" serve --model "$FIXTURES/tiny-bias" --addr "127.0.0.1:$port" --metrics --max-inflight 1 \
    --log-decisions "$tmp/decisions.jsonl" --access-log off >"$tmp/serve.log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
limit=60; case $BASAL in *asan*) limit=300 ;; esac
for _ in $(seq 1 $((limit * 5))); do curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && break; sleep 0.2; done
name=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["name"])' "$FIXTURES/tiny-bias/basal.json")
timeout -k 5 "$limit" "$PY" -B tests/e2e/observability_check.py --url "http://127.0.0.1:$port" --model "$name" --root "$root"
rc=$?
kill -TERM "$pid"; wait "$pid"
exit "$rc"
