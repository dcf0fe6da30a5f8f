#!/usr/bin/env bash
# The device options of the CLI without a GPU (a GPU machine runs
# tools/gpu-check.sh instead): --device auto falls back to the CPU with one log
# line and bitwise the CPU's logits; --device cuda, f16 on the CPU and
# gemm-search fail with exit 1 and a clear message; bad values are usage
# errors (exit 2). Holds for CUDA and non-CUDA builds alike.
set -u
. "$(dirname "$0")/lib.sh"
dir="$FIXTURES/tiny-bias"

echo '{"prompts": [[1, 2, 3, 4, 5], [1, 2, 3, 9]], "ids": [5, 6, 31999]}' > "$tmp/in.json"
"$BASAL" logits --model "$dir" --input "$tmp/in.json" --device cpu > "$tmp/cpu.json" 2>/dev/null || bad "logits --device cpu"
"$BASAL" logits --model "$dir" --input "$tmp/in.json" > "$tmp/default.json" 2>/dev/null || bad "logits (default device)"
cmp -s "$tmp/cpu.json" "$tmp/default.json" && ok || bad "the default device is not the CPU"
"$BASAL" logits --model "$dir" --input "$tmp/in.json" --device auto > "$tmp/auto.json" 2> "$tmp/auto.err"
rc=$?
if grep -q "no usable CUDA GPU; using the CPU backend" "$tmp/auto.err"; then
    [ $rc -eq 0 ] && cmp -s "$tmp/cpu.json" "$tmp/auto.json" && ok || bad "--device auto fallback: exit $rc or logits differ"
    [ "$(grep -c 'no usable CUDA GPU' "$tmp/auto.err")" -eq 1 ] && ok || bad "--device auto logged more than once"
    out=$("$BASAL" logits --model "$dir" --input "$tmp/in.json" --device cuda 2>&1 >/dev/null); rc=$?
    [ $rc -eq 1 ] && grep -qE "no CUDA GPU is available|this build has no CUDA backend" <<<"$out" && ok \
        || bad "logits --device cuda: exit $rc: $out"
    req='{"model":"basal-tiny","state":"a","questions":{"q":{"type":"noul","instructions":"x"}}}'
    out=$(echo "$req" | "$BASAL" decide --model "$dir" --device cuda 2>&1 >/dev/null); rc=$?
    [ $rc -eq 1 ] && grep -qE "basal decide: (no CUDA GPU is available|this build has no CUDA backend)" <<<"$out" && ok \
        || bad "decide --device cuda: exit $rc: $out"
    out=$("$BASAL" bench --model "$dir" --device cuda --lat-n 1 --throughput-items 0 2>&1 >/dev/null); rc=$?
    [ $rc -eq 1 ] && grep -qE "no CUDA GPU is available|this build has no CUDA backend" <<<"$out" && ok \
        || bad "bench --device cuda: exit $rc: $out"
    out=$("$BASAL" gemm-search --model "$dir" --out "$tmp/t.json" --invariant 2>&1); rc=$?
    [ $rc -eq 1 ] && grep -qE "no CUDA GPU is available|this build has no CUDA backend" <<<"$out" && [ ! -e "$tmp/t.json" ] && ok \
        || bad "gemm-search without a GPU: exit $rc: $out"
else
    echo "a usable GPU is present: the no-GPU checks are skipped (tools/gpu-check.sh covers CUDA)"
fi
out=$(echo '{}' | "$BASAL" decide --model "$dir" --dtype f16 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && grep -q "dtype f16 needs the CUDA backend; use bf16 or f32" <<<"$out" && ok || bad "decide --dtype f16 on the CPU: exit $rc: $out"
# dtype f32 and auto are today's f32 compute; bf16 rounds the GEMM inputs to
# bf16 (issue 16): other bits, close to f32 (tests/e2e/t_dtype_bf16.sh bounds it).
"$BASAL" logits --model "$dir" --input "$tmp/in.json" --device cpu --dtype f32 > "$tmp/f32.json" 2>/dev/null \
    && cmp -s "$tmp/cpu.json" "$tmp/f32.json" && ok || bad "--dtype f32 on the CPU changed the logits"
"$BASAL" logits --model "$dir" --input "$tmp/in.json" --device cpu --dtype bf16 > "$tmp/bf16.json" 2>/dev/null \
    && ! cmp -s "$tmp/cpu.json" "$tmp/bf16.json" \
    && /usr/bin/python3 tools/compare_logits.py "$tmp/bf16.json" "$tmp/cpu.json" --tol 0.25 --label "bf16 vs f32" >/dev/null \
    && ok || bad "--dtype bf16 on the CPU: not a distinct mode within 0.25 of f32 (same argmax)"
for args in "--device gpu" "--dtype fp16" "--device"; do
    out=$("$BASAL" logits --model "$dir" --input "$tmp/in.json" $args 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && ok || bad "logits $args: exit $rc (expected 2): $out"
done
out=$("$BASAL" prepare --model "$dir" --device cpu 2>&1 </dev/null); rc=$?
[ $rc -eq 2 ] && ok || bad "prepare takes no --device: exit $rc"
out=$("$BASAL" gemm-search --model "$dir" 2>&1); rc=$?
[ $rc -eq 2 ] && ok || bad "gemm-search without --out: exit $rc"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
