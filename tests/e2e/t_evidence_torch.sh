#!/usr/bin/env bash
# Evidence spans end to end against the independent PyTorch reference
# (tools/evidence_ref.py: prompts from the spec, ids from the npm oracle,
# offsets from the vocabulary, torch f32 forward and head, best_spans from
# 03 §4.5) on fixtures with heads in f32, bf16 and f16 storage: for every
# question of tests/data/evidence-requests.jsonl (PL and EN, string, object and
# array states, multi-byte and byte-fallback characters, 1–10 options) `basal
# decide` gives the same spans (start, end, text) with probabilities within
# 1e-5. And evidence never changes a decision: the answers without the
# evidence key equal those of the same request without evidence. The rows the
# head reads come from the decision forward (engine/evidence_run.h) for most
# questions; every body equals the one of a separate forward per question
# (`decide --evidence-separate`) byte for byte.
# basal-test: release-only (under the sanitizers in make test-full: an exhaustive oracle comparison;
# the code paths it takes run under ASan+UBSan in the smaller tests)
set -u
. "$(dirname "$0")/lib.sh"
reqs=tests/data/evidence-requests.jsonl
need "$reqs" tests/oracle/node_modules

for spec in tiny-bias:f32 tiny-nobias:bf16 tiny-hd128:f16; do
    name=${spec%%:*} dt=${spec##*:}
    src="$FIXTURES/$name" d="$tmp/$name"
    [ -f "$src/config.json" ] || { bad "$name: fixture missing"; continue; }
    mkdir -p "$d"
    for f in "$src"/*; do ln -s "$f" "$d/"; done
    H=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["hidden_size"])' "$src/config.json")
    $PY tools/make_evidence_head.py --hidden "$H" --dtype "$dt" --seed 5 --out "$d/evidence_head.pt"
    model=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$src/basal.json")
    sed "s/@MODEL@/$model/" "$reqs" > "$d.jsonl"
    if ! $PY tools/evidence_ref.py --model "$d" --requests "$d.jsonl" > "$d.ref.json" 2> "$d.referr"; then
        bad "$name: reference failed: $(tail -3 "$d.referr")"; continue
    fi
    : > "$d.c.jsonl"; : > "$d.noev.jsonl"
    i=0 failed=0 inline=0 same=0
    while IFS= read -r body; do
        i=$((i+1))
        out=$(printf '%s' "$body" | "$BASAL" decide --model "$d" --timing 2>"$d.err") || { bad "$name: request $i: $(cat "$d.err")"; failed=1; break; }
        inline=$((inline + $(sed -n 's/.*"evidence_inline": \([0-9]*\).*/\1/p' "$d.err")))
        # the rows read from the decision forward equal a separate forward's, bitwise (the whole body)
        if [ "$name" = tiny-bias ]; then
            sep=$(printf '%s' "$body" | "$BASAL" decide --model "$d" --evidence-separate 2>/dev/null)
            [ "$sep" = "$out" ] && same=$((same+1)) || { bad "$name: request $i: inline and separate evidence differ"; }
        fi
        printf '%s\n' "$out" | $PY -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >> "$d.c.jsonl"
        # the decision check once (first fixture): the request without evidence
        if [ "$name" != tiny-bias ]; then printf '%s\n' "$out" | $PY -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >> "$d.noev.jsonl"; continue; fi
        noev=$(printf '%s' "$body" | $PY -c '
import json, sys
b = json.load(sys.stdin)
for q in b["questions"].values(): q.pop("evidence", None)
print(json.dumps(b, ensure_ascii=False))' | "$BASAL" decide --model "$d" 2>/dev/null)
        printf '%s\n' "$noev" | $PY -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >> "$d.noev.jsonl"
    done < "$d.jsonl"
    [ $failed -eq 0 ] || continue
    echo "$name: $inline evidence jobs read from decision forwards"
    [ "$inline" -ge 20 ] && ok || bad "$name: only $inline evidence jobs from decision forwards"
    if [ "$name" = tiny-bias ]; then
        echo "$name: $same of $i bodies identical with --evidence-separate"
        [ "$same" -eq "$i" ] && ok || bad "$name: --evidence-separate differs"
    fi
    if $PY - "$d.ref.json" "$d.c.jsonl" "$d.noev.jsonl" "$name" <<'EOF'
import json, sys
ref = json.load(open(sys.argv[1]))
got = [json.loads(l) for l in open(sys.argv[2])]
noev = [json.loads(l) for l in open(sys.argv[3])]
name = sys.argv[4]
assert len(ref) == len(got) == len(noev)
nq = ns = 0
worst = 0.0
bad = []
for ri, (r, g, n) in enumerate(zip(ref, got, noev)):
    for qid, a in g["answers"].items():
        ev = a.pop("evidence", None)
        if (ev is None) != (qid not in r):
            bad.append(f"request {ri + 1} {qid}: evidence key presence differs")
            continue
        n["answers"][qid].pop("evidence", None)
        if a != n["answers"][qid]:
            bad.append(f"request {ri + 1} {qid}: the decision changed with evidence")
        if ev is None:
            continue
        nq += 1
        want = r[qid]
        if [(s["start"], s["end"], s["text"]) for s in ev] != [(s["start"], s["end"], s["text"]) for s in want]:
            bad.append(f"request {ri + 1} {qid}: spans differ:\n  C:     {ev}\n  torch: {want}")
            continue
        for s, w in zip(ev, want):
            ns += 1
            worst = max(worst, abs(s["probability"] - w["probability"]))
    if g["usage"] != n["usage"]:
        bad.append(f"request {ri + 1}: usage changed with evidence")
for b in bad:
    print(b)
print(f"{name}: {nq} questions, {ns} spans identical to torch, max |dp| = {worst:.3g}")
sys.exit(1 if bad or worst > 1e-5 or nq < 20 else 0)
EOF
    then ok; else bad "$name: evidence differs from the torch reference"; fi
done
finish
