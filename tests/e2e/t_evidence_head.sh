#!/usr/bin/env bash
# evidence_head.pt (spec 03 §4.2, 05 §14 E2, §18 item 7): heads written by the
# real torch.save (Debian python3-torch) in f32, f16 and bf16 storage load with
# exactly the values torch.load reads; every file of the refusal corpus
# (tools/make_evidence_head.py --broken: truncated and corrupt archives, the
# legacy format, unknown globals, a __reduce__ of os.system, huge sizes, wrong
# shapes, missing or extra tensors, storages past the end, …) is refused with
# its message; a model directory with a broken head does not load, and one
# with a valid head loads (`basal prepare`).
set -u
. "$(dirname "$0")/lib.sh"
T="$BUILD/tests/test_evidence"
src="$FIXTURES/tiny-bias"
need "$T" "$src/config.json"
H=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["hidden_size"])' "$src/config.json")

for dt in f32 f16 bf16; do
    $PY tools/make_evidence_head.py --hidden "$H" --dtype "$dt" --seed 3 --out "$tmp/head-$dt.pt"
    $PY tools/make_evidence_head.py --dump "$tmp/head-$dt.pt" > "$tmp/torch-$dt.json"
    if ! "$T" --load "$tmp/head-$dt.pt" "$H" > "$tmp/c-$dt.json"; then
        bad "$dt head refused: $(cat "$tmp/c-$dt.json")"; continue
    fi
    # torch's values widened to f32 against ours: bitwise (both exact widenings)
    if $PY - "$tmp/torch-$dt.json" "$tmp/c-$dt.json" <<'EOF'
import json, struct, sys
t, c = (json.load(open(p)) for p in sys.argv[1:3])
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
assert (t["d"], t["k"]) == (c["d"], c["k"]), (t["d"], t["k"], c["d"], c["k"])
assert sorted(t["tensors"]) == sorted(c["tensors"])
for n, tv in t["tensors"].items():
    cv = c["tensors"][n]
    assert tv["shape"] == cv["shape"], (n, tv["shape"], cv["shape"])
    assert [f32(x) for x in tv["values"]] == [f32(x) for x in cv["values"]], n
EOF
    then ok; echo "$dt head: values equal torch.load's"; else bad "$dt head: values differ from torch.load"; fi
done

$PY tools/make_evidence_head.py --hidden "$H" --broken "$tmp/broken"
n=0
while IFS=$'\t' read -r f msg; do
    n=$((n+1))
    out=$("$T" --load "$tmp/broken/$f" "$H"); rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "error: evidence_head.pt: " <<<"$out" && grep -qF -- "$msg" <<<"$out"; then
        ok
    else
        bad "$f: exit $rc, expected \"$msg\", got: $out"
    fi
done < "$tmp/broken/cases.tsv"
echo "refusal corpus: $n files"
[ "$n" -ge 20 ] && ok || bad "only $n broken heads"

# randomly mutated heads (tools/make_evidence_head.py --fuzz): each one loads or
# is refused with a message; under the asan suite this is a memory-safety check
$PY tools/make_evidence_head.py --hidden "$H" --fuzz "$tmp/fuzz" --n 400 --seed 2
if out=$("$T" --load-many "$H" "$tmp"/fuzz/*.pt); then ok; echo "fuzz: $out"; else bad "fuzz: $out"; fi

# through the model loader (05 §1 D2: a broken head is a load error)
req='{"model":"basal-tiny","state":"a","questions":{"q":{"type":"noul","instructions":"x","evidence":true}}}'
model_with() { # DIR HEAD: a copy of the fixture (files linked) with HEAD as its evidence_head.pt
    mkdir -p "$1"
    for f in "$src"/*; do ln -s "$f" "$1/"; done
    cp "$2" "$1/evidence_head.pt"
}
model_with "$tmp/m-good" "$tmp/head-bf16.pt"
if out=$(echo "$req" | "$BASAL" prepare --model "$tmp/m-good" 2>&1 >/dev/null); then ok; else bad "model with a valid head refused: $out"; fi
model_with "$tmp/m-bad" "$tmp/broken/reduce-os-system.pt"
out=$(echo "$req" | "$BASAL" prepare --model "$tmp/m-bad" 2>&1 >/dev/null); rc=$?
if [ $rc -eq 1 ] && grep -qF "evidence_head.pt: data.pkl: global posix.system is not allowed" <<<"$out"; then ok
else bad "model with a malicious head: exit $rc: $out"; fi
# without a head, evidence is a capability error (02 §4.4)
out=$(echo "$req" | "$BASAL" decide --model "$src" 2>/dev/null)
if grep -qF '"msg": "evidence is not available for this model (no evidence_head.pt)"' <<<"$out" ||
   grep -qF '"msg":"evidence is not available for this model (no evidence_head.pt)"' <<<"$out"; then ok
else bad "evidence without a head: $out"; fi
finish
