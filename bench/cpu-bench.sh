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
#   int8-ratio (only when named) `single` in the modes of MODES in turn
#              (A, B, C, A, B, C, ...), PAIRS rounds: each mode's lat2
#              speed-up over the bf16 run of its round and the medians, and
#              each run's peak RSS against the bf16 weights (the int8 modes'
#              quantized weights are made once, in a warm-up start that fills
#              the cache, then read from it); with LLAMA_BENCH and GGUF,
#              llama.cpp's llama-bench prompt processing of LLAMA_TOKENS tokens
#              on each GGUF file in every round too
# Peak RSS of each run comes from /usr/bin/time -v.
# Usage: bench/cpu-bench.sh [all|gemm|single|five-2k|doc-16k|dtype-ratio|int8-ratio]
# DTYPE=bf16 runs single, five-2k and doc-16k in the bf16 compute mode (its default kernel: AMX where the CPU has it;
# BASAL_BF16=avx512-bf16|avx2|portable picks another).
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
  BASAL_BF16    bf16 kernel: avx512-bf16, avx2 or portable (default: unset, AMX where the CPU has it)
  LAT_N         decisions per latency run (default: 5; 3 in dtype-ratio)
  TP_ITEMS      throughput items of single (default: 16)
  REPS          repetitions of five-2k (default: 1)
  LONG          1 adds doc-16k to all (default: 0)
  PAIRS         bf16/f32 pairs of dtype-ratio, bf16/int8w/int8 rounds of int8-ratio (default: 3)
  BASAL_INT8    int8 kernel: avx512-vnni, avx-vnni, avx2 or portable (default: unset, the fastest the CPU has)
  MODES         modes of int8-ratio: dtypes, or int8-all (int8 with every projection W8A8) (default: bf16 int8w int8)
  LLAMA_BENCH   int8-ratio: llama.cpp's llama-bench binary (default: unset, not run)
  GGUF          int8-ratio: the GGUF files it measures, space-separated (bench/gguf-from-basal.py; default: unset)
  LLAMA_TOKENS  int8-ratio: its prompt tokens (default: 465, the packed tokens of the decision)
  LLAMA_THREADS int8-ratio: its threads (default: 2); LLAMA_REPS its repetitions (default: 3)
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
    modes=${MODES:-bf16 int8w int8}
    # mode words: a dtype, or int8-all (dtype int8 with every projection W8A8: BASAL_INT8_WEIGHT_ONLY=none)
    run_mode() { # NAME OUT-NAME ARGS...
        local m=$1 o=$2; shift 2
        case $m in
            int8-all) BASAL_INT8_WEIGHT_ONLY=none timed "$o" "$B" bench --model "$M" --dtype int8 "$@" --out "$out/$o.json" ;;
            *) timed "$o" "$B" bench --model "$M" --dtype "$m" "$@" --out "$out/$o.json" ;;
        esac
    }
    # a first start of each quantized mode fills the quantized-weights cache (timed apart)
    for m in $modes; do
        case $m in int8*) run_mode "$m" "warm-$m" --lat-n 1 --state-tokens 250 --throughput-items 0 ;; esac
    done
    for i in $(seq "${PAIRS:-3}"); do
        for m in $modes; do
            run_mode "$m" "ratio-$m-$i" --lat-n "${LAT_N:-3}" --state-tokens 250 --throughput-items 0
        done
        if [ -n "${LLAMA_BENCH:-}" ]; then # llama.cpp's prompt processing at the decision's token count
            for g in ${GGUF:-}; do
                timed "llama-$(basename "$g" .gguf)-$i" "$LLAMA_BENCH" -m "$g" -p "${LLAMA_TOKENS:-465}" -n 0 \
                    -t "${LLAMA_THREADS:-2}" -r "${LLAMA_REPS:-3}" -o json > "$out/llama-$(basename "$g" .gguf)-$i.json"
            done
        fi
    done
    /usr/bin/python3 - "$out" "${PAIRS:-3}" "$M" "$modes" "${GGUF:-}" "${LLAMA_TOKENS:-465}" <<'PY' | tee -a "$out/summary.txt"
import json, os, re, statistics, sys
out, rounds, model, modes, ggufs, ntok = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5].split(), int(sys.argv[6])
weights = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model) if f.endswith(".safetensors"))
def rss(name):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/{name}.stderr").read())
    return int(m.group(1)) * 1024
def run(name):
    return json.load(open(f"{out}/{name}.json")), rss(name)
for m in modes:
    if m.startswith("int8"):
        j, r = run(f"warm-{m}")
        print(f"first start of {m} (quantizing, writing the cache): load {j['load_s']:.1f} s, peak RSS {r / 2**30:.2f} GiB "
              f"= {r / weights:.3f}x the {weights / 1e9:.2f} GB of bf16 weights")
base = "bf16" if "bf16" in modes else modes[0]
speed = {m: [] for m in modes}
llama = {g: [] for g in ggufs}
for i in range(1, rounds + 1):
    b, rb = run(f"ratio-{base}-{i}")
    line = [f"round {i}: lat2 {base} {b['lat2_ms']:.0f} ms"]
    for m in modes:
        j, r = run(f"ratio-{m}-{i}")
        speed[m].append(b["lat2_ms"] / j["lat2_ms"])
        kern = j.get("int8_kernel") or j.get("bf16_kernel") or j["kernel"]
        line.append(f"{m} {j['lat2_ms']:.0f} ms ({kern}) = {speed[m][-1]:.2f}x, GEMM {b['profile_lat2']['gemm_ms'] / j['profile_lat2']['gemm_ms']:.2f}x, "
                    f"load {j['load_s']:.1f} s, peak RSS {r / 2**30:.2f} GiB = {r / weights:.3f}x")
    for g in ggufs:
        name = os.path.basename(g)[:-5]
        rows = [x for x in json.load(open(f"{out}/llama-{name}-{i}.json")) if x.get("n_prompt") == ntok]
        tps = rows[0]["avg_ts"] if rows else 0
        ms = ntok / tps * 1000 if tps else 0
        llama[g].append(b["lat2_ms"] / ms if ms else 0)
        line.append(f"llama.cpp {name} pp{ntok} {tps:.1f} tok/s = {ms:.0f} ms = {llama[g][-1]:.2f}x, peak RSS "
                    f"{rss(f'llama-{name}-{i}') / 2**30:.2f} GiB")
    print("; ".join(line))
for m in modes:
    print(f"int8-ratio: {m} lat2 speed-up over {base}, median {statistics.median(speed[m]):.2f}x "
          f"(min {min(speed[m]):.2f}, max {max(speed[m]):.2f}) over {rounds} rounds")
for g in ggufs:
    print(f"int8-ratio: llama.cpp {os.path.basename(g)} pp{ntok} against {base}'s lat2, median {statistics.median(llama[g]):.2f}x")
PY
fi
echo "results in $out"
