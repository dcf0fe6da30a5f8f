#!/usr/bin/env bash
# `basal bench --reference DIR` (spec 06 §7.1): the items of a reference
# export's bench.jsonl (one question each: state, question, raw option texts,
# type choice or score, gold), accuracy over all of them in calls of 32
# questions. The oracle of the accuracy is tools/protocol_ref.py (prompts,
# npm tokenizer, PyTorch f32 forward and the decision math in Python, none of
# it shared with the C code) on the same items as System One requests; the
# report must carry every field §7.1 lists, lat_n = min(--lat-n, items - 5),
# per_item one entry per timed item; a bad line is named with its file and
# line, and fewer than 6 items are refused. Also bench-requests' per-request
# samples (06 §7.2).
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias"
model=$FIXTURES/tiny-bias
export BENCH_MODEL_DIR=$model
ref=$tmp/ref
mkdir -p "$ref"
"$PY" - "$ref" <<'PYEOF'
import json, sys
items = [
    ("Klient pisze, że paczka nie dotarła mimo opłacenia zamówienia.", "Którego działu dotyczy zgłoszenie?",
     ["płatności", "dostawy", "reklamacje"], "choice", 1),
    ("The customer cannot log in to online banking since yesterday.", "Which team should handle this?",
     ["cards", "online banking", "loans", "other"], "choice", 1),
    ("Faktura zawiera błędny numer NIP.", "Czego dotyczy problem?", ["faktury", "dostawy"], "choice", 0),
    ("Service was slow but the staff were kind.", "How satisfied is the customer?", ["low", "medium", "high"], "score", 1),
    ("Zamówiłem buty, przyszły za małe, chcę wymienić.", "Jaki to typ sprawy?",
     ["zwrot lub wymiana", "reklamacja jakości", "pytanie o dostawę"], "choice", 0),
    ("My card was charged twice for one purchase.", "What is this about?", ["double charge", "delivery", "password"],
     "choice", 0),
    ("Proszę o zmianę adresu dostawy.", "Czego dotyczy prośba?", ["dostawy", "płatności", "konta", "inne"], "choice", 0),
    ("I love the product, five stars!", "Sentiment?", ["negative", "neutral", "positive"], "score", 2),
    ("Brak gold: pytanie kontrolne.", "Czy to test?", ["tak", "nie"], None, None),
    ("Klient dziękuje za szybką pomoc.", "Czy klient jest zadowolony?", ["Tak, zadowolony", "Nie"], "noul", 0),
]
with open(sys.argv[1] + "/bench.jsonl", "w") as f:
    for i, (st, q, o, t, g) in enumerate(items):
        rec = {"index": i, "source": "t_bench_reference", "line": i + 1, "id": f"b{i}", "state": st, "question": q,
               "options": o}
        if t: rec["type"] = t
        if g is not None: rec["gold"] = g
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
PYEOF
"$BASAL" bench --model "$model" --reference "$ref" --threads 1 --lat-n 50 --out "$tmp/out.json" \
    >"$tmp/stdout" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ]; then ok; else bad "bench --reference: exit $rc: $(tail -3 "$tmp/err")"; fi
# basal-rs main.rs's summary line: "lat2 median X ms, p95 Y ms, lat1 Z ms, D dec/s, acc A" (A: the JSON value)
if grep -qE '^lat2 median [0-9.]+ ms, p95 [0-9.]+ ms, lat1 [0-9.]+ ms, [0-9.]+ dec/s, acc [0-9.]+ \([0-9]+/9\);' "$tmp/err"
then ok; else bad "stderr summary: $(grep lat2 "$tmp/err")"; fi
# the oracle: the same items as System One requests through the Python reference
"$PY" - "$ref/bench.jsonl" "$tmp/reqs.jsonl" "$(cd "$model" && "$PY" -c 'import json; print(json.load(open("basal.json"))["name"])')" <<'PYEOF'
import json, sys
src, dst, name = sys.argv[1:]
with open(dst, "w") as f:
    for line in open(src):
        r = json.loads(line)
        t = r.get("type", "choice")
        o = r["options"]
        q = {"type": t, "instructions": r["question"], "criteria": {"true": o[0], "false": o[1]} if t == "noul" else o}
        f.write(json.dumps({"model": name, "state": r["state"], "questions": {"q": q}}, ensure_ascii=False) + "\n")
PYEOF
if "$PY" tools/protocol_ref.py --model "$model" --requests "$tmp/reqs.jsonl" >"$tmp/oracle.json" 2>"$tmp/oracle.err"; then ok
else bad "protocol_ref.py: $(tail -3 "$tmp/oracle.err")"; fi
# every item's prompts and token ids through `basal prepare` (no weights), for the packed-token oracle
"$PY" - "$tmp/reqs.jsonl" "$model" "$BASAL" "$tmp/prep.json" <<'PYEOF'
import json, subprocess, sys
reqs, model, basal, out = sys.argv[1:]
res = [json.loads(subprocess.run([basal, "prepare", "--model", model], input=l.encode(), capture_output=True,
                                 check=True).stdout) for l in open(reqs)]
json.dump(res, open(out, "w"))
PYEOF
"$PY" - "$ref/bench.jsonl" "$tmp/oracle.json" "$tmp/out.json" "$tmp/prep.json" >"$tmp/check" 2>&1 <<'PYEOF'
import json, sys
items = [json.loads(l) for l in open(sys.argv[1])]
oracle = json.load(open(sys.argv[2]))
rep = json.load(open(sys.argv[3]))
fails = []
def eq(got, want, what):
    if got != want: fails.append(f"{what}: got {got!r}, expected {want!r}")
correct = gold = 0
for it, res in zip(items, oracle):
    body = res.get("response", res) if isinstance(res, dict) else res
    a = body["answers"]["q"]
    if it.get("type") == "noul":
        probs = [a["noul"], 1 - a["noul"]]
    else:
        keys = [str(j) for j in range(len(it["options"]))] if it.get("type") == "score" else it["options"]
        probs = [a["probabilities"][k] for k in keys]
    best = max(range(len(probs)), key=lambda j: (probs[j], -j))
    if "gold" in it:
        gold += 1
        correct += best == it["gold"]
eq(len(oracle), len(items), "oracle answers")
eq(rep["with_gold"], gold, "with_gold")
eq(rep["correct"], correct, "correct (argmax = gold, oracle: tools/protocol_ref.py)")
eq(rep["acc"], correct / gold, "acc")
eq(rep["n_items"], len(items), "n_items")
# 06 §7.1 step 5: every field it names
for k in ("n", "lat_n", "lat1_ms", "lat2_ms", "lat2_p95_ms", "lat1_ms_all", "lat2_ms_all", "per_item", "lat2_prepare_ms",
          "lat2_forward_ms", "lat2_packed_tokens", "dec_s", "dec_s_runs", "dec_s_questions", "dec_s_batching",
          "all_items_s", "acc", "correct", "with_gold", "load_s", "backend"):
    if k not in rep: fails.append(f"field {k} missing")
eq(rep["lat_n"], len(items) - 5, "lat_n = min(--lat-n 50, items - 5)")
# 06 §7.6: the weights' SHA-256 recorded, against hashlib
import hashlib, os
mdir = os.environ["BENCH_MODEL_DIR"]
want = {f: hashlib.sha256(open(os.path.join(mdir, f), "rb").read()).hexdigest()
        for f in sorted(os.listdir(mdir)) if f.endswith(".safetensors")}
eq(rep.get("weights_sha256"), want, "weights_sha256")
eq(rep["n"], len(items), "n")
eq(len(rep["per_item"]), rep["lat_n"], "per_item entries")
eq(len(rep["lat2_ms_all"]), rep["lat_n"], "lat2_ms_all entries")
# basal-rs bench.rs: format!("{batch:?}") of its Batching enum
eq(rep["dec_s_batching"], "Budget", "dec_s_batching default")
eq(rep["dec_s_questions"], min(len(items), 128), "dec_s_questions: the items of a pass (min(n, 128))")
eq([x["index"] for x in rep["per_item"]], list(range(5, len(items))), "per_item indices")
eq([sorted(x) for x in rep["per_item"]][:1], [sorted(["index", "packed_tokens", "lat1_ms", "lat2_ms", "lat2_prepare_ms",
                                                       "lat2_forward_ms"])], "per_item fields (basal-rs bench.rs)")
if not all(x["packed_tokens"] > 0 and x["lat2_prepare_ms"] >= 0 and x["lat2_forward_ms"] > 0 for x in rep["per_item"]):
    fails.append(f"per_item values: {rep['per_item']}")
# packed tokens of an item: its two order prompts (`basal prepare`, natural and reversed) in one row sharing their
# common prefix, template included
packed = json.load(open(sys.argv[4]))
def lcp(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]: k += 1
    return k
for x in rep["per_item"]:
    o = [y["input_ids"] for y in packed[x["index"]][0]["orders"]]
    k = lcp(o[0], o[1])
    eq(x["packed_tokens"], k + len(o[0]) - k + len(o[1]) - k, f"per_item {x['index']} packed_tokens")
# medians (mean of the two middle values when even), p95 = sorted[int(0.95 n)], summaries of |x| (basal-rs stats.rs)
import statistics
def summ(xs):
    s = sorted(abs(v) for v in xs)
    q = lambda p: s[min(int(p * len(s)), len(s) - 1)]
    return {"n": len(s), "max": s[-1], "p50": statistics.median(s), "p95": q(0.95), "p99": q(0.99),
            "mean": sum(s) / len(s)}
def close(a, b):  # per_item times are printed to 0.001 ms
    return all(abs(a[k] - b[k]) <= 0.0011 for k in b) and sorted(a) == sorted(b)
for key, field in (("lat2_prepare_ms", "lat2_prepare_ms"), ("lat2_forward_ms", "lat2_forward_ms"),
                   ("lat2_packed_tokens", "packed_tokens")):
    want = summ([x[field] for x in rep["per_item"]])
    if not close(rep[key], want): fails.append(f"{key}: got {rep[key]}, expected {want}")
for key, field in (("lat1_ms", "lat1_ms"), ("lat2_ms", "lat2_ms")):
    eq(rep[key], statistics.median(sorted(x[field] for x in rep["per_item"])), f"{key}: median of the timed items")
    eq(rep[key + "_all"], sorted(x[field] for x in rep["per_item"]), f"{key}_all: sorted samples")
s2 = sorted(x["lat2_ms"] for x in rep["per_item"])
eq(rep["lat2_p95_ms"], s2[int(0.95 * len(s2))], "lat2_p95_ms = sorted[int(0.95 n)]")
print("\n".join(fails) if fails else "ok")
PYEOF
if [ "$(cat "$tmp/check")" = ok ]; then ok; else bad "report: $(cat "$tmp/check")"; fi
# bench-requests (06 §7.2): per request all_ms (run order) and the median/min/max of exactly those samples
# (three one-question requests, and one with two questions on one state: its shared tree is smaller)
head -3 "$tmp/reqs.jsonl" | "$PY" -c 'import json, sys
reqs = [json.loads(l) for l in sys.stdin]
two = json.loads(json.dumps(reqs[0]))
two["questions"]["p"] = {"type": "noul", "instructions": "Czy klient jest zadowolony?"}
reqs.append(two)
for i, r in enumerate(reqs): print(json.dumps({"id": f"r{i}", "request": r}, ensure_ascii=False))' >"$tmp/br.jsonl"
"$BASAL" bench-requests --model "$model" --requests "$tmp/br.jsonl" --reps 5 --threads 1 --batching tree,single \
    --out "$tmp/br.json" 2>"$tmp/err"; rc=$?
# packed sizes: a trie of the prompts (from `basal prepare`) has one token per distinct prefix
for i in 0 1 2 3; do
    sed -n "$((i + 1))p" "$tmp/br.jsonl" | "$PY" -c 'import json, sys; print(json.dumps(json.loads(sys.stdin.read())["request"]))' |
        "$BASAL" prepare --model "$model" >"$tmp/prep$i.json"
done
if [ "$rc" -eq 0 ] && "$PY" - "$tmp/br.json" "$tmp" <<'PYEOF'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
assert r["reps"] == 5 and r["backend"] == "cpu", r
import hashlib, os
mdir = os.environ["BENCH_MODEL_DIR"]
assert r["weights_sha256"] == {f: hashlib.sha256(open(os.path.join(mdir, f), "rb").read()).hexdigest()
                               for f in sorted(os.listdir(mdir)) if f.endswith(".safetensors")}, r["weights_sha256"]
def trie(seqs): return len({tuple(s[:k]) for s in seqs for k in range(1, len(s) + 1)})
for mode in r["modes"]:
    assert len(mode["requests"]) == 4, mode
    for i, q in enumerate(mode["requests"]):
        a = q["all_ms"]
        assert len(a) == 5 and list(q)[-1] == "all_ms", q
        assert (q["min_ms"], q["max_ms"], q["median_ms"]) == (min(a), max(a), sorted(a)[2]), q
        items = json.load(open(f"{sys.argv[2]}/prep{i}.json"))
        per_q = {}
        for it in items:
            per_q.setdefault(it["item"]["question"], []).extend(o["input_ids"] for o in it["orders"])
        want = (sum(trie(v) for v in per_q.values()), trie([s for v in per_q.values() for s in v]))
        got = (q["packed_tokens_per_question_rows"], q["packed_tokens_shared_tree"])
        assert got == want, (q["id"], got, want)
        assert i < 3 or got[1] < got[0], ("two questions on one state share it", got)
PYEOF
then ok; else bad "bench-requests report: exit $rc: $(tail -3 "$tmp/err")"; fi
# refusals: a bad line names the file and line; fewer than 6 items
mkdir -p "$tmp/bad" "$tmp/few"
{ head -1 "$ref/bench.jsonl"; echo '{"state": "x", "question": "y", "options": ["a"]}'; } >"$tmp/bad/bench.jsonl"
"$BASAL" bench --model "$model" --reference "$tmp/bad" --threads 1 >/dev/null 2>"$tmp/err"; rc=$?
if [ "$rc" -eq 1 ] && grep -qF "$tmp/bad/bench.jsonl line 2: bench item with 1 options (2..10)" "$tmp/err"; then ok
else bad "bad line: exit $rc: $(cat "$tmp/err")"; fi
head -5 "$ref/bench.jsonl" >"$tmp/few/bench.jsonl"
"$BASAL" bench --model "$model" --reference "$tmp/few" --threads 1 >/dev/null 2>"$tmp/err"; rc=$?
if [ "$rc" -eq 1 ] && grep -qF "has 5 items; the method needs at least 6" "$tmp/err"; then ok
else bad "5 items: exit $rc: $(cat "$tmp/err")"; fi
finish
