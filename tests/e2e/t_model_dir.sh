#!/usr/bin/env bash
# Basal model-directory checks (spec 01 §1, 05 §1–§3): every manifest rule
# broken once on a copy of the tiny-bias fixture; `basal prepare` (manifests
# and tokenizer) and `basal decide` (also the weights) must refuse the model
# with exit 1 and a message naming the file and the problem. The unbroken
# copy must load.
set -u
. "$(dirname "$0")/lib.sh"
src="$FIXTURES/tiny-bias"
export V10="$FIXTURES/tiny-v10/basal.json"
req='{"model":"basal-tiny","state":"a","questions":{"q":{"type":"noul","instructions":"x"}}}'

# mutate NAME EXPECTED-MESSAGE PYTHON-CODE: copies the fixture (weights linked),
# runs the code with d = the copy's path, and expects prepare to fail with the message.
mutate() {
    local name=$1 expect=$2 code=$3 cmd=${4:-prepare}
    local d="$tmp/$name"
    mkdir -p "$d"
    for f in "$src"/*; do
        case "$(basename "$f")" in
            model.safetensors) ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$d/" ;;
            *) cp "$f" "$d/" ;;
        esac
    done
    $PY -c "import json, os, sys; d = sys.argv[1]
def load(n): return json.load(open(os.path.join(d, n)))
def save(n, v): json.dump(v, open(os.path.join(d, n), 'w'), ensure_ascii=False)
$code" "$d" || { echo "$name: mutation script failed"; fail=$((fail+1)); return; }
    local out rc
    out=$(echo "$req" | timeout 30 "$BASAL" "$cmd" --model "$d" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -eq 1 ] && grep -qF -- "$expect" <<<"$out"; then
        pass=$((pass+1))
    else
        echo "$name: exit $rc, expected exit 1 with \"$expect\", got: $out"; fail=$((fail+1))
    fi
}

out=$(echo "$req" | "$BASAL" prepare --model "$src" 2>&1 >/dev/null); rc=$?
if [ $rc -eq 0 ]; then pass=$((pass+1)); else echo "unbroken fixture refused: $out"; fail=$((fail+1)); fi

mutate no-readout 'basal.json: readout missing' 'v = load("basal.json"); del v["readout"]; save("basal.json", v)'
mutate kind 'basal.json: unsupported readout kind' 'v = load("basal.json"); v["readout"]["kind"] = "logits"; save("basal.json", v)'
mutate letters 'basal.json: letters differ from ABCDEFGHIJ' 'v = load("basal.json"); v["readout"]["letters"] = "ABCDEFGHIK"; save("basal.json", v)'
mutate prefill 'basal.json: prefill differs' 'v = load("basal.json"); v["readout"]["prefill"] = "{\"answer\":\""; save("basal.json", v)'
mutate templates-string 'basal.json: templates "basal-2.0" (only the basal-1.0 prompt contract is implemented)' \
    'v = load("basal.json"); v["readout"]["templates"] = "basal-2.0"; save("basal.json", v)'
mutate templates-no-en 'basal.json: template en' \
    'v = load("basal.json"); t = json.load(open(os.environ["V10"]))["readout"]["templates"]; del t["en"]; v["readout"]["templates"] = t; save("basal.json", v)'
mutate templates-differ 'basal.json: pl template differs from the implemented prompt' \
    'v = load("basal.json"); v["readout"]["templates"] = {"pl": {"system": "x", "user": "y"}, "en": {"system": "x", "user": "y"}}; save("basal.json", v)'
mutate no-name 'basal.json: name' 'v = load("basal.json"); del v["name"]; save("basal.json", v)'
mutate template-escaped 'chat_template.jinja differs from the implemented template' \
    't = open(os.path.join(d, "chat_template.jinja"), encoding="utf-8").read(); open(os.path.join(d, "chat_template.jinja"), "w").write(t.replace("\n", "\\n"))'
mutate template-newline 'chat_template.jinja differs from the implemented template' \
    'open(os.path.join(d, "chat_template.jinja"), "a").write("\n")'
mutate no-template 'chat_template.jinja: missing' 'os.remove(os.path.join(d, "chat_template.jinja"))'
mutate bos-missing 'tokenizer_config.json: bos_token' 'v = load("tokenizer_config.json"); del v["bos_token"]; save("tokenizer_config.json", v)'
mutate bos-unknown 'bos token <bos> is not in the vocabulary' 'v = load("tokenizer_config.json"); v["bos_token"] = "<bos>"; save("tokenizer_config.json", v)'
mutate normalizer 'tokenizer.json: unexpected normalizer' \
    'v = load("tokenizer.json"); v["normalizer"] = {"type": "NFC"}; save("tokenizer.json", v)'
mutate pretok 'unsupported pre_tokenizer' \
    'v = load("tokenizer.json"); v["pre_tokenizer"]["split"] = True; save("tokenizer.json", v)'
mutate no-im-end 'tokenizer.json: <|im_end|> is not a token' \
    'v = load("tokenizer.json"); v["added_tokens"] = [t for t in v["added_tokens"] if t["content"] != "<|im_end|>"]; save("tokenizer.json", v)'
mutate vocab-size 'is not below vocab_size 32000' \
    'v = load("config.json"); v["vocab_size"] = 32000; save("config.json", v)'
mutate calib-type 'CALIBRATION.json: unknown type rank' \
    'v = load("CALIBRATION.json"); v["temperature_per_prim"]["rank"] = 1.0; save("CALIBRATION.json", v)'
mutate calib-json 'CALIBRATION.json: not valid JSON' 'open(os.path.join(d, "CALIBRATION.json"), "w").write("{")'
mutate config-theta 'rope_parameters' 'v = load("config.json"); del v["rope_parameters"]; save("config.json", v)'
mutate weights-missing 'no weights' 'os.remove(os.path.join(d, "model.safetensors"))' decide
# prepare needs no weights (spec 06 §5.2): a model without them still prepares
d="$tmp/weightless"; mkdir -p "$d"; cp "$src"/*.json "$src"/*.jinja "$d/"
if echo "$req" | "$BASAL" prepare --model "$d" >/dev/null 2>&1; then pass=$((pass+1)); else echo "prepare needed the weights"; fail=$((fail+1)); fi
# without CALIBRATION.json the model is uncalibrated, not refused
rm -f "$d/CALIBRATION.json"
if echo "$req" | "$BASAL" prepare --model "$d" >/dev/null 2>&1; then pass=$((pass+1)); else echo "CALIBRATION.json treated as required"; fail=$((fail+1)); fi

# ---- files that are not regular files, and tokenizer/manifest rules (never a hang, never a silent
# difference: each refused with the file and the problem named) ----
for f in config.json basal.json tokenizer.json tokenizer_config.json chat_template.jinja CALIBRATION.json; do
    mutate "fifo-$f" "$f: not a regular file" "os.remove(os.path.join(d, '$f')); os.mkfifo(os.path.join(d, '$f'))"
done
mutate zero-tokenizer "tokenizer.json: not a regular file" \
    'os.remove(os.path.join(d, "tokenizer.json")); os.symlink("/dev/zero", os.path.join(d, "tokenizer.json"))'
mutate fifo-weights "model.safetensors: not a regular file" \
    'os.remove(os.path.join(d, "model.safetensors")); os.mkfifo(os.path.join(d, "model.safetensors"))' decide
mutate no-model-type 'tokenizer.json: model.type missing (it must be "BPE")' \
    'v = load("tokenizer.json"); del v["model"]["type"]; save("tokenizer.json", v)'
mutate no-merges 'tokenizer.json: model.merges missing' \
    'v = load("tokenizer.json"); del v["model"]["merges"]; save("tokenizer.json", v)'
# an added token's id in the file is not what HF tokenizers uses (AddedVocabulary::add_tokens
# numbers tokens outside the vocabulary after it, in file order): <|im_end|> written with
# <|im_start|>'s id 32000 still gets 32001 (the tokenizers node binding encodes the mutated
# file exactly as the original), so the model loads, prompts keep their ids, and a warning
# names the token
d="$tmp/added-same-id"; mkdir -p "$d"; cp "$src"/*.json "$src"/*.jinja "$d/"
$PY -c 'import json, sys; p = sys.argv[1] + "/tokenizer.json"; v = json.load(open(p))
[a.update(id=32000) for a in v["added_tokens"] if a["content"] == "<|im_end|>"]; json.dump(v, open(p, "w"), ensure_ascii=False)' "$d"
want=$(echo "$req" | "$BASAL" prepare --model "$src" 2>/dev/null)
got=$(echo "$req" | "$BASAL" prepare --model "$d" 2>"$tmp/added-same-id.err"); rc=$?
if [ "$rc" -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ] && grep -qF 'added token "<|im_end|>" has id 32000 in the file; Hugging Face tokenizers gives it id 32001' "$tmp/added-same-id.err"; then
    pass=$((pass+1)); else echo "added-same-id: exit $rc, same prepare output: $([ "$got" = "$want" ] && echo yes || echo no), stderr: $(cat "$tmp/added-same-id.err")"; fail=$((fail+1)); fi
mutate tokcfg-not-json 'tokenizer_config.json: bos_token: the file is not valid JSON (line 1' \
    'open(os.path.join(d, "tokenizer_config.json"), "w").write("{x")'
mutate empty-name 'basal.json: name must be a non-empty string without control characters' \
    'v = load("basal.json"); v["name"] = ""; save("basal.json", v)'
mutate ctl-name 'basal.json: name must be a non-empty string without control characters' \
    'v = load("basal.json"); v["name"] = "a\nb"; save("basal.json", v)'
# a sharded checkpoint whose index forgets a tensor: the message names the index
d="$tmp/sharded-unlisted"
cp -r "$FIXTURES/tiny-sharded" "$d"
$PY -c 'import json, sys; p = sys.argv[1] + "/model.safetensors.index.json"; v = json.load(open(p))
del v["weight_map"]["lm_head.weight"]; json.dump(v, open(p, "w"))' "$d"
out=$(echo "$req" | timeout 30 "$BASAL" decide --model "$d" 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "model.safetensors.index.json (the 1 shard it lists): missing tensor: lm_head.weight" <<<"$out"; then
    pass=$((pass+1)); else echo "sharded-unlisted: exit $rc: $out"; fail=$((fail+1)); fi

# ---- model references (06 §3 R1-R2) for the one-shot commands, as for serve ----
hf="$tmp/hf"
snap="$hf/hub/models--acme--tiny/snapshots/0123456789abcdef"
mkdir -p "$snap" "$hf/hub/models--acme--tiny/refs"
cp -r "$src"/. "$snap"/
echo 0123456789abcdef >"$hf/hub/models--acme--tiny/refs/main"
for cmd in prepare decide; do
    bk=(); [ "$cmd" = decide ] && bk=(--backend cpu)   # prepare loads no weights: no backend options
    want=$(echo "$req" | "$BASAL" "$cmd" --model "$src" "${bk[@]}" 2>/dev/null)
    for ref in acme/tiny acme/tiny@main acme/tiny@0123; do
        got=$(echo "$req" | HF_HOME="$hf" "$BASAL" "$cmd" --model "$ref" "${bk[@]}" 2>"$tmp/err"); rc=$?
        if [ "$rc" -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then pass=$((pass+1))
        else echo "$cmd --model $ref: exit $rc, output differs from --model DIR: $(head -c 300 "$tmp/err")"; fail=$((fail+1)); fi
    done
done
# the older flag name of --backend still works
got=$(echo "$req" | "$BASAL" decide --model "$src" --device cpu 2>/dev/null)
if [ -n "$got" ] && [ "$got" = "$want" ]; then pass=$((pass+1)); else echo "decide --device cpu differs from --backend cpu"; fail=$((fail+1)); fi
for ref in acme/tiny@nosuch acme/other; do
    repo=${ref%@*}; rev=main; [ "$ref" != "$repo" ] && rev=${ref#*@}
    out=$(echo "$req" | HF_HOME="$hf" "$BASAL" decide --model "$ref" 2>&1 >/dev/null); rc=$?
    expect="model $repo@$rev is not available locally (looked in $hf/hub/models--${repo%/*}--${repo#*/}); pass a local directory"
    if [ "$rc" -eq 1 ] && grep -qF -- "$expect" <<<"$out"; then pass=$((pass+1))
    else echo "decide --model $ref: exit $rc, expected 1 with \"$expect\", got: $out"; fail=$((fail+1)); fi
done
out=$(echo "$req" | "$BASAL" decide --model "$tmp/no/such/dir" 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "model $tmp/no/such/dir: no such directory" <<<"$out"; then pass=$((pass+1))
else echo "decide --model (missing directory): exit $rc: $out"; fail=$((fail+1)); fi

# decide --timing (06 §5.1): {"prepare_ms", "forward_ms", "total_ms", ...}; total is the request's time;
# a GEMM table given to the CPU backend is accepted with a note (06 §4.2)
echo "$req" | "$BASAL" decide --model "$src" --backend cpu --timing --gemm-table "$tmp/none.json" >/dev/null 2>"$tmp/err"
if $PY - "$tmp/err" <<'PYEOF'
import json, sys
err = open(sys.argv[1]).read()
line = [l for l in err.splitlines() if l.startswith("timing: ")]
t = json.loads(line[0][len("timing: "):])
assert list(t)[:3] == ["prepare_ms", "forward_ms", "total_ms"], list(t)
assert abs(t["total_ms"] - t["prepare_ms"] - t["forward_ms"]) < 0.01, t
assert "none.json is ignored: the CPU backend" in err, err
PYEOF
then pass=$((pass+1)); else echo "decide --timing / --gemm-table on the CPU: $(cat "$tmp/err")"; fail=$((fail+1)); fi

# decide takes serve's --tree-max-tokens (rows cut smaller: the same bytes, 04 §7) and --kernels fused only
two='{"model":"basal-tiny","state":"Klient pisze o zamówieniu.","questions":{"q":{"type":"choice","instructions":"Który dział?","criteria":["a","b","c"]},"p":{"type":"noul","instructions":"Czy pilne?"}}}'
want=$(echo "$two" | "$BASAL" decide --model "$src" 2>/dev/null)
got=$(echo "$two" | "$BASAL" decide --model "$src" --tree-max-tokens 100 --kernels fused 2>/dev/null)
if [ -n "$want" ] && [ "$got" = "$want" ]; then pass=$((pass+1)); else echo "decide --tree-max-tokens 100 differs"; fail=$((fail+1)); fi
out=$(echo "$two" | "$BASAL" decide --model "$src" --kernels candle 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 2 ] && grep -qF -- "--kernels must be fused" <<<"$out"; then pass=$((pass+1)); else echo "decide --kernels candle: exit $rc: $out"; fail=$((fail+1)); fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
