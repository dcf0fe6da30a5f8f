#!/usr/bin/env bash
# The CPU forward pass against the independent PyTorch f32 reference
# (tools/torch_ref.py, spec 07 §2.1) on every fixture: max |dlogit| <= 1e-4 and
# the same argmax (spec 05 §12). The C side packs all prompts of a model into
# one prefix-trie row; "separate" mode must give bitwise the same text.
set -u
. "$(dirname "$0")/lib.sh"
for name in tiny-bias tiny-nobias tiny-hd128 tiny-gqa1 tiny-gqa4 tiny-f16 tiny-tied tiny-f32 stories260K; do
    dir="$FIXTURES/$name"
    if [ ! -f "$dir/config.json" ]; then
        echo "$name: fixture missing ($dir)"; fail=$((fail+1)); continue
    fi
    # Prompts sharing prefixes (a template, states, questions) plus one long
    # prompt, random ids below the vocabulary size; seeded per model.
    $PY tools/forward_prompts.py "$dir/config.json" "$name" > "$tmp/$name.in.json"
    if ! "$BASAL" logits --model "$dir" --input "$tmp/$name.in.json" > "$tmp/$name.c.json" 2> "$tmp/$name.err"; then
        echo "$name: basal logits failed: $(cat "$tmp/$name.err")"; fail=$((fail+1)); continue
    fi
    $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d["mode"]="separate"; print(json.dumps(d))' \
        "$tmp/$name.in.json" > "$tmp/$name.sep.json"
    if "$BASAL" logits --model "$dir" --input "$tmp/$name.sep.json" --threads 1 > "$tmp/$name.c1.json" 2>/dev/null \
        && cmp -s "$tmp/$name.c.json" "$tmp/$name.c1.json"; then
        echo "$name: tree (2 threads) == separate (1 thread), bitwise"; pass=$((pass+1))
    else
        echo "$name: tree and separate logits differ"; fail=$((fail+1))
    fi
    if ! $PY tools/torch_ref.py --model "$dir" --input "$tmp/$name.in.json" > "$tmp/$name.ref.json" 2> "$tmp/$name.referr"; then
        echo "$name: torch reference failed: $(tail -3 "$tmp/$name.referr")"; fail=$((fail+1)); continue
    fi
    if $PY tools/compare_logits.py "$tmp/$name.c.json" "$tmp/$name.ref.json" --tol 1e-4 --label "$name vs torch"; then
        pass=$((pass+1))
    else
        fail=$((fail+1))
    fi
done
# The portable kernels (forced as on a CPU without AVX2/FMA, spec 05 §16)
# against the same reference.
for name in tiny-bias tiny-hd128 stories260K; do
    dir="$FIXTURES/$name"
    [ -f "$tmp/$name.ref.json" ] || continue
    if BASAL_CPU=generic "$BASAL" logits --model "$dir" --input "$tmp/$name.in.json" > "$tmp/$name.g.json" 2>/dev/null \
        && $PY tools/compare_logits.py "$tmp/$name.g.json" "$tmp/$name.ref.json" --tol 1e-4 --label "$name (portable kernels) vs torch"; then
        pass=$((pass+1))
    else
        fail=$((fail+1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
