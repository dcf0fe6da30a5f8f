#!/usr/bin/env bash
# The int8 mode (issue 34, W8A8 with smoothing): the product against numpy, the
# calibration maxima against the PyTorch reference, the smoothing factors and
# quantized weights against numpy, the cache's refusals, every kernel's answers
# equal, batch invariance, agreement with f32 next to bf16 on fixtures and on an
# outlier fixture with and without smoothing. Checks in tests/server/int8_w8a8_test.py.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$BUILD/tests/test_gemm_i8" "$FIXTURES/tiny-bias" "$FIXTURES/tiny-deep" "$FIXTURES/tiny-outliers" /usr/bin/python3
BUILD=$BUILD run_servers_py 900 2400 tests/server/int8_w8a8_test.py
