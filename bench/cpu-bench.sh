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
#   dtype-ratio  (only when named) `single` in the bf16 and the f32 mode in
#              turn, PAIRS times (default 3): the f32/bf16 ratio of lat2 pair
#              by pair and its median, so that the machine's drift hits both
#              modes alike; LAT_N (default 3) decisions per run
#   int8-ratio (only when named) `single` in the bf16, int8w and int8 modes in
#              turn (A, B, C, A, B, C, ...), PAIRS rounds: each int8 mode's
#              lat2 speed-up over the bf16 run of its round and the medians,
#              and each run's peak RSS against the bf16 weights (the int8
#              modes' quantized weights are made once, in a warm-up start
#              that fills the cache, then read from it)
# Peak RSS of each run comes from /usr/bin/time -v.
# Usage: bench/cpu-bench.sh [all|gemm|single|five-2k|doc-16k|dtype-ratio|int8-ratio]
# DTYPE=bf16 runs single, five-2k and doc-16k in the bf16 compute mode (its default kernel: AMX where the CPU has it;
# BASAL_BF16=avx512-bf16|portable picks another).
set -euo pipefail
usage() {
    cat <<'EOF'
CPU benchmark on a random bf16 model of basal-1.5-mini's shape; results go to bench/results/<date>/.
usage: bench/cpu-bench.sh [MODE]
  MODE          all (default: gemm, single, five-2k; doc-16k too when LONG=1),
                gemm, single, five-2k, doc-16k, dtype-ratio or int8-ratio
  -h, --help    this text
environment:
  DTYPE         compute mode of single, five-2k and doc-16k (default: unset: auto, f32 on the CPU)
  BASAL_BF16    bf16 kernel: avx512-bf16 or portable (default: unset, AMX where the CPU has it)
  LAT_N         decisions per latency run (default: 5; 3 in dtype-ratio)
  TP_ITEMS      throughput items of single (default: 16)
  REPS          repetitions of five-2k (default: 1)
  LONG          1 adds doc-16k to all (default: 0)
  PAIRS         bf16/f32 pairs of dtype-ratio, bf16/int8w/int8 rounds of int8-ratio (default: 3)
  BASAL_INT8    int8 kernel: avx512-vnni, avx-vnni or portable (default: unset, the fastest the CPU has)
EOF
}
what=${1:-all}
case $what in
    -h|--help) usage; exit 0 ;;
    all|gemm|single|five-2k|doc-16k|dtype-ratio|int8-ratio) ;;
    # checked before the results directory exists: a typo must not leave an empty one
    *) echo "cpu-bench: unknown mode '$what'" >&2; usage >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
B=build/basal
M=bench/models/mini-shape
M32=bench/models/mini-shape-32k
out=bench/results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" bench/models
[ -x "$B" ] || make -j2 build/basal
if [ ! -f "$M/basal.json" ]; then "$B" make-model "$M" --preset mini-shape; fi
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*/flags: '"$(grep -o -w 'avx2\|fma\|f16c\|avx512f\|avx512_bf16\|avx512_vnni\|avx_vnni\|amx_bf16\|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"'/' > "$out/machine.txt"
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
if [ "$what" = dtype-ratio ]; then
    for i in $(seq "${PAIRS:-3}"); do
        for d in bf16 f32; do
            timed "ratio-$d-$i" "$B" bench --model "$M" --dtype "$d" --lat-n "${LAT_N:-3}" --state-tokens 250 \
                --throughput-items 0 --out "$out/ratio-$d-$i.json"
        done
    done
    /usr/bin/python3 - "$out" "${PAIRS:-3}" <<'PY' | tee -a "$out/summary.txt"
import json, re, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
def run(d, i):
    j = json.load(open(f"{out}/ratio-{d}-{i}.json"))
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/ratio-{d}-{i}.stderr").read())
    return j, int(rss.group(1)) / 1048576
ratios, gemm = [], []
for i in range(1, pairs + 1):
    (b, rb), (f, rf) = run("bf16", i), run("f32", i)
    ratios.append(f["lat2_ms"] / b["lat2_ms"])
    gemm.append(f["profile_lat2"]["gemm_ms"] / b["profile_lat2"]["gemm_ms"])
    print(f"pair {i}: lat2 bf16 {b['lat2_ms']:.0f} ms ({b['bf16_kernel']}), f32 {f['lat2_ms']:.0f} ms ({f['kernel']}): "
          f"{ratios[-1]:.2f}x; GEMM in the forward {gemm[-1]:.2f}x; peak RSS {rb:.2f} / {rf:.2f} GiB")
print(f"dtype-ratio: lat2 f32/bf16 median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f}) "
      f"over {pairs} pairs; GEMM median {statistics.median(gemm):.2f}x")
PY
fi
if [ "$what" = int8-ratio ]; then
    # a first start of each int8 mode fills the quantized-weights cache (timed apart)
    for d in int8w int8; do
        timed "warm-$d" "$B" bench --model "$M" --dtype "$d" --lat-n 1 --state-tokens 250 --throughput-items 0 \
            --out "$out/warm-$d.json"
    done
    for i in $(seq "${PAIRS:-3}"); do
        for d in bf16 int8w int8; do
            timed "ratio-$d-$i" "$B" bench --model "$M" --dtype "$d" --lat-n "${LAT_N:-3}" --state-tokens 250 \
                --throughput-items 0 --out "$out/ratio-$d-$i.json"
        done
    done
    /usr/bin/python3 - "$out" "${PAIRS:-3}" "$M" <<'PY' | tee -a "$out/summary.txt"
import json, os, re, statistics, sys
out, rounds, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
weights = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model) if f.endswith(".safetensors"))
def run(name):
    j = json.load(open(f"{out}/{name}.json"))
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/{name}.stderr").read())
    return j, int(rss.group(1)) * 1024
for d in ("int8w", "int8"):
    j, rss = run(f"warm-{d}")
    print(f"first start of {d} (quantizing, writing the cache): load {j['load_s']:.1f} s, peak RSS {rss / 2**30:.2f} GiB "
          f"= {rss / weights:.3f}x the {weights / 1e9:.2f} GB of bf16 weights")
ratios = {"int8w": [], "int8": []}
for i in range(1, rounds + 1):
    (b, rb) = run(f"ratio-bf16-{i}")
    line = [f"round {i}: lat2 bf16 {b['lat2_ms']:.0f} ms ({b['bf16_kernel']}, peak RSS {rb / weights:.3f}x)"]
    for d in ("int8w", "int8"):
        j, r = run(f"ratio-{d}-{i}")
        ratios[d].append(b["lat2_ms"] / j["lat2_ms"])
        line.append(f"{d} {j['lat2_ms']:.0f} ms ({j.get('int8_kernel') or j['bf16_kernel']}): {ratios[d][-1]:.2f}x, "
                    f"GEMM {b['profile_lat2']['gemm_ms'] / j['profile_lat2']['gemm_ms']:.2f}x, load {j['load_s']:.1f} s, "
                    f"peak RSS {r / 2**30:.2f} GiB = {r / weights:.3f}x")
    print("; ".join(line))
for d in ("int8w", "int8"):
    print(f"int8-ratio: {d} lat2 speed-up over bf16, median {statistics.median(ratios[d]):.2f}x "
          f"(min {min(ratios[d]):.2f}, max {max(ratios[d]):.2f}) over {rounds} rounds")
PY
fi
echo "results in $out"
