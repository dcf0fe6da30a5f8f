#!/usr/bin/env bash
# CPU benchmark of issue "CPU speed" on random bf16 weights with the
# dimensions of basal-1.5-mini (spec 05 §15): creates the model once under
# bench/models/ (3.2 GB), then measures in this order and writes everything
# under bench/results/<date>/:
#   gemm       bench/gemm_bench (ours vs OpenBLAS sgemm on the projection shapes)
#   single     `basal bench`: one question on a ~300-token prompt (lat1, lat2
#              median/p95, dec/s, stage profile, GFLOP/s vs the sgemm peak)
#   five-2k    `basal bench-requests`: five questions on a 2k-token state
#   doc-16k    five questions on a 16k-token document (skipped unless LONG=1:
#              about 7 minutes on 2 cores; needs a 32k-position model)
# Peak RSS of each run comes from /usr/bin/time -v.
# Usage: bench/cpu-bench.sh [all|gemm|single|five-2k|doc-16k]
# DTYPE=bf16 runs single, five-2k and doc-16k in the bf16 compute mode (its default kernel: AMX where the CPU has it;
# BASAL_BF16=avx512-bf16|portable picks another).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
B=build/basal
M=bench/models/mini-shape
M32=bench/models/mini-shape-32k
out=bench/results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" bench/models
[ -x "$B" ] || make -j2 build/basal
if [ ! -f "$M/basal.json" ]; then "$B" make-model "$M" --preset mini-shape; fi
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*/flags: '"$(grep -o -w 'avx2\|fma\|f16c\|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"'/' > "$out/machine.txt"
timed() { local name=$1; shift; /usr/bin/time -v "$@" 2> >(tee "$out/$name.stderr" >&2) ; }
peak() { grep "Maximum resident set size" "$out/$1.stderr" | awk '{printf "%.2f GiB", $6/1048576}'; }

if [ "$what" = all ] || [ "$what" = gemm ]; then
    make -s build/bench/gemm_bench
    build/bench/gemm_bench --reps 5 --m 300,2048 | tee "$out/gemm.txt"
fi
if [ "$what" = all ] || [ "$what" = single ]; then
    timed single "$B" bench --model "$M" ${DTYPE:+--dtype "$DTYPE"} --lat-n "${LAT_N:-5}" --state-tokens 250 --throughput-items "${TP_ITEMS:-16}" \
        --out "$out/single.json"
    echo "single: peak RSS $(peak single)" | tee -a "$out/summary.txt"
fi
if [ "$what" = all ] || [ "$what" = five-2k ]; then
    /usr/bin/python3 - > "$out/five-2k.jsonl" <<'PY'
import json
words = "klient zamówienie paczka dostawa reklamacja zwrot faktura płatność konto hasło karta przelew termin umowa sklep".split()
state = " ".join(words[(i * 7) % 15] + ("." if i % 9 == 8 else "") for i in range(900))  # about 2k tokens
qs = {f"q{i}": {"type": "noul", "instructions": f"Czy zgłoszenie dotyczy tematu {w}?"} for i, w in enumerate(words[:5])}
print(json.dumps({"id": "five-2k", "request": {"model": None, "state": state, "questions": qs}}, ensure_ascii=False))
PY
    timed five-2k "$B" bench-requests --model "$M" ${DTYPE:+--dtype "$DTYPE"} --requests "$out/five-2k.jsonl" --batching tree --reps "${REPS:-1}" \
        --out "$out/five-2k.json"
    echo "five-2k: peak RSS $(peak five-2k)" | tee -a "$out/summary.txt"
fi
if [ "$what" = doc-16k ] || { [ "$what" = all ] && [ "${LONG:-0}" = 1 ]; }; then
    if [ ! -f "$M32/basal.json" ]; then "$B" make-model "$M32" --preset mini-shape --max-pos 32768; fi
    /usr/bin/python3 - > "$out/doc-16k.jsonl" <<'PY'
import json
words = "umowa strona wykonawca zamawiający termin kara płatność odbiór gwarancja rękojmia aneks paragraf".split()
# 4870 words = a 16.55k-token prompt prefix (template + state) with the fixture tokenizer
doc = " ".join(f"§{i // 40 + 1}." if i % 40 == 0 else words[(i * 5) % 12] for i in range(4870))
qs = {f"q{i}": {"type": "noul", "instructions": f"Czy umowa przewiduje: {w}?"} for i, w in enumerate(words[:5])}
print(json.dumps({"id": "doc-16k", "request": {"model": None, "state": doc, "questions": qs}}, ensure_ascii=False))
PY
    timed doc-16k "$B" bench-requests --model "$M32" ${DTYPE:+--dtype "$DTYPE"} --requests "$out/doc-16k.jsonl" --batching tree --reps 1 --no-warmup \
        --out "$out/doc-16k.json"
    echo "doc-16k: peak RSS $(peak doc-16k)" | tee -a "$out/summary.txt"
fi
echo "results in $out"
