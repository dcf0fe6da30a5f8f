#!/usr/bin/env bash
# The prompt JSON writer against the machine's CPython (spec 07 §3):
#  1. the committed goldens are what tools/pyjson-goldens.py produces now
#     (a stale golden or a hand-edited one fails here);
#  2. live differential runs: fresh random texts from other seeds, CPython
#     writes the expected text() (or its decode error and position), the test
#     binary in --stdin mode answers, every record must be byte-identical.
#     One run uses a fixed seed; one a new seed each time (printed, so a
#     failure can be replayed with PYJSON_SEED=<seed>).
set -u
. "$(dirname "$0")/lib.sh"
GEN=tools/pyjson-goldens.py
bin=$BUILD/tests/test_pyjson

if [ ! -x "$bin" ]; then
    echo "missing $bin (make $bin)"
    echo "0 passed, 1 failed"
    exit 1
fi

if "$PY" "$GEN" --out "$tmp/gold" --shared "$SHARED" >/dev/null; then
    for f in pyjson-inputs.json pyjson-goldens.json; do
        if cmp -s "$tmp/gold/$f" "tests/data/$f"; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "stale: tests/data/$f differs from a fresh run of $GEN"
        fi
    done
else
    fail=$((fail + 1)); echo "$GEN failed"
fi

live_run() {
    local seed=$1 dir=$tmp/live-$1
    if ! "$PY" "$GEN" --live "$seed" 2000 "$dir" --shared "$SHARED"; then
        fail=$((fail + 1)); echo "$GEN --live $seed failed"; return
    fi
    if ! "$bin" --stdin <"$dir/live-in.bin" >"$dir/live-out.bin"; then
        fail=$((fail + 1)); echo "$bin --stdin failed (seed $seed)"; return
    fi
    if "$PY" "$GEN" --compare "$dir/live-exp.bin" "$dir/live-out.bin"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "live differential failed for seed $seed"
    fi
}

live_run 977
live_run "${PYJSON_SEED:-$(( $(date +%s) % 1000000 + 1000 ))}"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
