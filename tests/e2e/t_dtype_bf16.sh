#!/usr/bin/env bash
# dtype bf16 on the CPU (issue 16) against dtype f32, over HTTP: 200 generated
# requests of each decided type per fixture; decisions must be equal wherever
# the f32 margin between the top two options exceeds 0.05, and the modes must
# differ somewhere (tests/e2e/bf16_agreement_check.py prints the agreement table).
set -u
. "$(dirname "$0")/lib.sh"
n=200
case $BASAL in *asan*) n=40 ;; esac
run_servers_py 600 1200 tests/e2e/bf16_agreement_check.py "$n" tiny-bias tiny-gqa4 tiny-f16
