#!/usr/bin/env bash
# dtype bf16 on the CPU (issue 16) against dtype f32, over HTTP: 200 generated
# requests of each decided type per fixture; decisions must be equal wherever
# the f32 margin between the top two options exceeds 0.05, and the modes must
# differ somewhere (tests/bf16_agreement_check.py prints the agreement table).
set -u
root=$(pwd)
BASAL=${BASAL:-$root/build/basal}
case $BASAL in /*) ;; *) BASAL=$root/$BASAL ;; esac
tmp=$(mktemp -d)
export SERVER_PIDS=$tmp/pids
: >"$SERVER_PIDS"
cleanup() {
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"
    rm -rf "$tmp"
}
trap cleanup EXIT
n=200 limit=600
case $BASAL in *asan*) n=40 limit=1200 ;; esac
BASAL=$BASAL FIXTURES=${FIXTURES:-$root/build/fixtures} \
    timeout -k 10 "$limit" /usr/bin/python3 -B tests/bf16_agreement_check.py "$n" tiny-bias tiny-gqa4 tiny-f16
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "t_dtype_bf16: timed out after $limit s"; echo "0 passed, 1 failed"; exit 1; fi
exit "$rc"
