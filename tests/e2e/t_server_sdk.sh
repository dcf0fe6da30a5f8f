#!/usr/bin/env bash
# The official TypeSafe JS SDK (@typesafe-ai/sdk 0.6.0, pinned in
# tests/oracle/package.json) against `basal serve` on 127.0.0.1 (spec 07 §6):
# three servers (plain, --max-inflight 1, with an API key), the checks in
# tests/server/sdk_e2e.mjs. Every server is killed on exit; runs are bounded.
set -u
. "$(dirname "$0")/lib.sh"
oracle=$root/tests/oracle
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
[ -f "$oracle/node_modules/@typesafe-ai/sdk/package.json" ] || fail "the SDK is not installed (run 'make deps')"
limit=60
case $BASAL in *asan*) limit=240 ;; esac

# start NAME ARGS...: a server on a free port; sets URL_<NAME>
start() {
    local name=$1; shift
    : >"$tmp/$name.err"
    env -u BASAL_ADDR -u BASAL_CONFIG "$BASAL" serve --addr 127.0.0.1:0 "$@" 2>"$tmp/$name.err" &
    pids+=($!)
    local i port=""
    for ((i = 0; i < limit * 50; i++)); do
        port=$(grep -o 'serving on http://127\.0\.0\.1:[0-9]*' "$tmp/$name.err" | head -1 | sed 's/.*://')
        [ -n "$port" ] && break
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.02
    done
    [ -n "$port" ] || { cat "$tmp/$name.err"; fail "server $name did not start"; }
    printf -v "URL_$name" 'http://127.0.0.1:%s' "$port"
}
export KEY=sdk-test-key-42
start MAIN --model "$FIXTURES/tiny-bias"
start BUSY --model "$FIXTURES/tiny-bias" --max-inflight 1
BASAL_SDK_KEY=$KEY start AUTH --model "$FIXTURES/tiny-bias" --api-key-env BASAL_SDK_KEY
URL_MAIN=$URL_MAIN URL_BUSY=$URL_BUSY URL_AUTH=$URL_AUTH MODEL=basal-tiny ORACLE_DIR=$oracle \
    timeout -k 5 $((limit * 5)) node tests/server/sdk_e2e.mjs >"$tmp/node.out" 2>&1
grep -v ' passed, .* failed$' "$tmp/node.out"
read -r pass fail < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$tmp/node.out" | tail -1)
pass=${pass:-0} fail=${fail:-1}
# the servers stop cleanly: SIGTERM, exit 0
for i in "${!pids[@]}"; do kill -TERM "${pids[$i]}" 2>/dev/null; done
for i in "${!pids[@]}"; do
    if timeout "$limit" bash -c "while kill -0 ${pids[$i]} 2>/dev/null; do sleep 0.05; done"; then
        wait "${pids[$i]}"; st=$?
        if [ "$st" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: server $i exited $st"; fi
    else
        fail=$((fail + 1)); echo "FAIL: server $i did not stop on SIGTERM"
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
