#!/usr/bin/env bash
# `basal compare --a DIR --b DIR --out FILE` (spec 06 §6; basal-rs compare.rs,
# stats.rs): two synthetic exports made here (b: perturbed logits, one argmax
# flip, one token mismatch, one missing item; System One answers of the choice,
# noul and score types and an error case); every statistic of the report is
# computed again independently with numpy and compared (floats within 1e-12
# relative), as are the stderr summary line and the exit status; an existing
# --out is refused, a missing or corrupt input names the file (and line), and
# a directory compared with itself gives zero differences.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL"
BASAL=$BASAL TMP=$tmp "$PY" - <<'PYEOF'
import json, math, os, subprocess
import numpy as np

B, TMP = os.environ["BASAL"], os.environ["TMP"]
passed = failed = 0

def check(cond, what, exp=None, act=None):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)
        if exp is not None or act is not None:
            print("  expected:", exp)
            print("  actual:  ", act)

def close(x, y):
    if x is None or y is None:
        return x is None and y is None
    return x == y or abs(x - y) <= 1e-12 * max(abs(x), abs(y))

def same(x, y):
    """Recursive equality, floats within 1e-12 relative."""
    if isinstance(x, float) or isinstance(y, float):
        return isinstance(x, (int, float)) and isinstance(y, (int, float)) and close(float(x), float(y))
    if isinstance(x, dict):
        return isinstance(y, dict) and list(x) == list(y) and all(same(x[k], y[k]) for k in x)
    if isinstance(x, list):
        return isinstance(y, list) and len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    return x == y

def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()

rng = np.random.default_rng(7)
T = 1.3

def item(idx, logits_nat, gold, input_ids):
    k = len(logits_nat)
    perms = [list(range(k)), list(range(k))[::-1]]
    orders, probs = [], []
    for o, perm in enumerate(perms):
        ll = [float(logits_nat[j]) + 0.01 * o for j in perm]
        p = softmax(ll)
        probs.append(p)
        orders.append({"perm": perm, "prompt": f"Q{idx} order {o}", "input_ids": input_ids + [o],
                       "letter_ids": list(range(300, 300 + k)), "letter_logits": ll, "probs": [float(v) for v in p]})
    avg = np.zeros(k)
    for perm, p in zip(perms, probs):
        for pos, j in enumerate(perm):
            avg[j] += p[pos]
    avg /= len(perms)
    cal = softmax(np.log(np.maximum(avg, 1e-12)) / T)
    return {"index": idx, "source": "synthetic", "line": idx + 1, "id": f"item-{idx}", "type": "choice",
            "state": "s", "question": "q", "options": [f"o{j}" for j in range(k)], "gold": gold, "lang": "en",
            "orders": orders, "pack": {"prefix_len": 10, "packed_len": 20 + k, "readout_cols": [1, 2]},
            "p_avg": [float(v) for v in avg], "argmax_avg": int(np.argmax(avg)), "temperature": T,
            "p_cal": [float(v) for v in cal], "argmax_cal": int(np.argmax(cal))}

N = 8
base = [rng.normal(0, 2, size=3 + (i % 2)) for i in range(N)]
golds = [int(rng.integers(0, len(l))) for l in base]
a_bench = [item(i, base[i], golds[i], [1, 2, 3, i]) for i in range(N)]
pert = [l + rng.normal(0, 0.05, size=len(l)) for l in base]
# item 2: the argmax flips (the second best option gets the top logit)
o = np.argsort(pert[2])
pert[2][o[-2]] = pert[2][o[-1]] + 1.0
b_bench = [item(i, pert[i], golds[i], [1, 2, 3, i]) for i in range(N)]
b_bench[5]["orders"][1]["input_ids"][0] = 99   # token mismatch
del b_bench[6]                                   # missing in b
b_bench.reverse()                                # order of b does not matter

def so_item(name, typ, logits):
    it = item(0, logits, None, [5, 6])
    del it["gold"]
    return {"name": name, "type": typ, "keys": [str(j) for j in range(len(logits))], "options": it["options"],
            "lang": "en", "state_text": "s", "question_text": "q", "orders": it["orders"], "pack": it["pack"],
            "p_avg": it["p_avg"], "temperature": T, "p_cal": it["p_cal"]}

def answers(items):
    out = {}
    for it in items:
        p = it["p_cal"]
        probs = {k: v for k, v in zip(it["keys"], p)}
        if it["type"] == "choice":
            out[it["name"]] = {"type": "choice", "choice": it["keys"][int(np.argmax(p))], "probabilities": probs,
                               "confidence": max(p)}
        elif it["type"] == "noul":
            out[it["name"]] = {"type": "noul", "noul": p[0], "probabilities": probs, "confidence": max(p)}
        else:
            out[it["name"]] = {"type": "score", "score": float(sum(i * v for i, v in enumerate(p))),
                               "legend": {k: o for k, o in zip(it["keys"], it["options"])},
                               "probabilities": probs, "confidence": max(p)}
    return out

def so_cases(shift, runtime):
    c1 = [so_item("pick", "choice", np.array([1.0, 0.2, -0.5]) + shift * np.array([0.0, 1.5, 0.0])),
          so_item("ok", "noul", np.array([0.3, -0.3]) + shift * 0.1)]
    c2 = [so_item("rate", "score", np.array([0.1, 0.5, 0.9, 0.2, -1.0]) + shift * 0.2)]
    cases = [{"id": "mixed", "source": "syn", "request": {}, "items": c1},
             {"id": "scored", "source": "syn", "request": {}, "items": c2},
             {"id": "broken", "source": "syn", "request": {}, "items": []}]
    for c in cases[:2]:
        ans = {"answers": answers(c["items"])}
        if runtime:
            c["answer"] = ans
            c["answer_upstream"] = json.loads(json.dumps(ans))
        else:
            c["upstream_answer"] = ans
    if runtime:
        cases[2]["answer_upstream"] = {"error": {"type": "validation", "message": "bad"}}
        cases[2]["error"] = {"type": "validation", "message": "bad"}
    else:
        cases[2]["upstream_error"] = {"type": "ValueError", "message": "bad"}
    return cases

def write(d, bench, so):
    os.makedirs(d)
    with open(os.path.join(d, "bench.jsonl"), "w") as f:
        for r in bench:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(d, "systemone.jsonl"), "w") as f:
        for r in so:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump({"tool": "t_compare.sh", "temperatures": {"choice": T}}, f)

A, Bd = os.path.join(TMP, "a"), os.path.join(TMP, "b")
a_so, b_so = so_cases(0.0, False), so_cases(1.0, True)
write(A, a_bench, a_so)
write(Bd, b_bench, b_so)

# ---- expected, independently ----
def summ(xs):
    s = np.sort(np.abs(np.asarray(xs, dtype=np.float64)))
    n = len(s)
    if n == 0:
        return {"n": 0, "max": None, "p50": None, "p95": None, "p99": None, "mean": None}
    return {"n": n, "max": float(s[-1]), "p50": float(np.median(s)), "p95": float(s[min(int(0.95 * n), n - 1)]),
            "p99": float(s[min(int(0.99 * n), n - 1)]), "mean": float(s.mean())}

def tv(p, q):
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())

def quality(ds, gs):
    n = len(ds)
    P = [np.asarray(d) for d in ds]
    top = [int(np.argmax(p)) for p in P]
    hit = np.array([t == g for t, g in zip(top, gs)], dtype=float)
    nll = float(np.mean([-math.log(max(p[g], 1e-12)) for p, g in zip(P, gs)]))
    brier = float(np.mean([((p - np.eye(len(p))[g]) ** 2).sum() for p, g in zip(P, gs)]))
    conf = np.array([p[t] for p, t in zip(P, top)])
    bins = np.minimum((conf * 10).astype(int), 9)
    ece = sum(abs(conf[bins == b].sum() - hit[bins == b].sum()) / n for b in range(10) if (bins == b).any())
    return {"n": n, "correct": int(hit.sum()), "accuracy": float(hit.mean()), "nll": nll, "brier": brier,
            "ece_10bin": float(ece)}

def numeric(pairs):
    lg, op, av, ca, tva, tvc, fa, fc = [], [], [], [], [], [], [], []
    for tag, a, b in pairs:
        for x, y in zip(a["orders"], b["orders"]):
            lg += list(np.asarray(y["letter_logits"]) - np.asarray(x["letter_logits"]))
            op += list(np.asarray(y["probs"]) - np.asarray(x["probs"]))
        av += list(np.asarray(b["p_avg"]) - np.asarray(a["p_avg"]))
        ca += list(np.asarray(b["p_cal"]) - np.asarray(a["p_cal"]))
        tva.append(tv(a["p_avg"], b["p_avg"]))
        tvc.append(tv(a["p_cal"], b["p_cal"]))
        for key, fl in (("p_avg", fa), ("p_cal", fc)):
            ia, ib = int(np.argmax(a[key])), int(np.argmax(b[key]))
            if ia != ib:
                fl.append({"item": tag, "a": ia, "b": ib, "gold": a.get("gold"), "a_p": a[key], "b_p": b[key]})
    n = len(pairs)
    return {"items": n, "letter_logit_diff": summ(lg), "order_prob_diff": summ(op), "avg_prob_diff": summ(av),
            "cal_prob_diff": summ(ca), "tv_avg": summ(tva), "tv_cal": summ(tvc),
            "argmax_agreement_avg": f"{n - len(fa)}/{n}", "argmax_agreement_cal": f"{n - len(fc)}/{n}",
            "flips_avg": fa, "flips_cal": fc}

bmap = {r["index"]: r for r in b_bench}
pairs = [(f"bench/{a['index']}", a, bmap[a["index"]]) for a in a_bench if a["index"] in bmap and a["index"] != 5]
exp_bench = numeric(pairs)
g = [a["gold"] for _, a, _ in pairs]
exp_quality = {"a_avg": quality([a["p_avg"] for _, a, _ in pairs], g),
               "b_avg": quality([b["p_avg"] for _, _, b in pairs], g),
               "a_cal": quality([a["p_cal"] for _, a, _ in pairs], g),
               "b_cal": quality([b["p_cal"] for _, _, b in pairs], g)}
exp_tokens = {"orders_compared": 2 * (N - 1) + 2 * 3,  # bench pairs + System One items
              "mismatches": [{"item": "bench/5", "differences": ["order 1: input_ids"], "reason": None}],
              "known_deviations": []}
so_pairs = [(f"systemone/{ca['id']}/{ia['name']}", ia, ib) for ca, cb in zip(a_so, b_so)
            for ia, ib in zip(ca["items"], cb["items"])]
exp_so_num = numeric(so_pairs)

def adiff(x, y):
    d = {"type_a": x["type"], "type_b": y["type"],
         "max_abs_prob_diff": max(abs(x["probabilities"][k] - y["probabilities"][k]) for k in x["probabilities"])}
    for f in ("noul", "score"):
        if f in x:
            d[f + "_diff"] = y[f] - x[f]
    if "choice" in x:
        d.update(choice_a=x["choice"], choice_b=y["choice"], choice_same=x["choice"] == y["choice"])
    d.update(confidence_a=x["confidence"], confidence_b=y["confidence"], confidence_diff=y["confidence"] - x["confidence"],
             fields_same=True)
    if "legend" in x:
        d["legend_same"] = True
    d["type_same"] = True
    return d

exp_cases, exp_up = [], []
for ca, cb in zip(a_so, b_so):
    ea = ca.get("upstream_error")
    items = [{"item": ia["name"], "tokens_identical": True, "tv_cal": tv(ia["p_cal"], ib["p_cal"]),
              "answer": adiff(ca["upstream_answer"]["answers"][ia["name"]], cb["answer"]["answers"][ia["name"]])}
             for ia, ib in zip(ca["items"], cb["items"])]
    exp_cases.append({"id": ca["id"], "error_a": ea, "error_b": cb.get("error"), "deviation": None, "items": items})
    eb = cb["answer_upstream"].get("error")
    qs = []
    if "upstream_answer" in ca and eb is None:
        for n in sorted(ca["upstream_answer"]["answers"]):
            qs.append({"question": n, "diff": adiff(ca["upstream_answer"]["answers"][n], cb["answer_upstream"]["answers"][n])})
    exp_up.append({"id": ca["id"], "error_upstream": ea, "error_ours": eb, "errors_agree": True, "questions": qs})

expected = {"a": A, "b": Bd, "sign": "differences are b - a", "missing": ["6"], "tokens": exp_tokens,
            "bench": exp_bench, "quality": exp_quality,
            "systemone": {"numeric_identical_tokens": exp_so_num, "cases": exp_cases}, "upstream_endpoint": exp_up}

def run(args):
    p = subprocess.run([B, "compare"] + args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr

def fmt(x):
    return "null" if x is None else json.dumps(x) if isinstance(x, str) else repr(float(x)).replace("e-0", "e-")

out = os.path.join(TMP, "r.json")
rc, so, se = run(["--a", A, "--b", Bd, "--out", out])
check(rc == 0, "compare exits 0", 0, (rc, se))
rep = json.load(open(out)) if os.path.exists(out) else {}
check(exp_bench["argmax_agreement_avg"] == "5/6" and exp_bench["flips_avg"], "the fixture has a flip (self-check)",
      "5/6", exp_bench["argmax_agreement_avg"])
for key in expected:
    if isinstance(expected[key], dict):
        for sub in expected[key]:
            check(same(expected[key][sub], rep.get(key, {}).get(sub)), f"report {key}.{sub}",
                  expected[key][sub], rep.get(key, {}).get(sub))
    else:
        check(same(expected[key], rep.get(key)), f"report {key}", expected[key], rep.get(key))
check(list(rep) == list(expected), "top-level keys in basal-rs order", list(expected), list(rep))
line = (f"tokens: 1 mismatches; bench argmax avg \"{exp_bench['argmax_agreement_avg']}\", "
        f"cal \"{exp_bench['argmax_agreement_cal']}\"; max |logit diff| {fmt(rep['bench']['letter_logit_diff']['max'])}; "
        f"max TV avg {fmt(rep['bench']['tv_avg']['max'])}\n")
check(se == line, "stderr summary line", line, se)
check(close(rep["bench"]["letter_logit_diff"]["max"], exp_bench["letter_logit_diff"]["max"]), "stderr max logit value")
check(so == "", "nothing on stdout", "", so)
text = open(out).read()
check(text.startswith('{\n  "a": ') and text.endswith("}\n"), "pretty JSON with a final newline", "{\\n  \"a\": ...}\\n", text[:20])

# existing --out
before = open(out).read()
rc, so, se = run(["--a", A, "--b", Bd, "--out", out])
check(rc == 1 and se == f"basal compare: {out} exists; choose a new output path\n" and open(out).read() == before,
      "existing --out refused, left alone", (1, f"basal compare: {out} exists; choose a new output path"), (rc, se))

# same directory twice
out2 = os.path.join(TMP, "same.json")
rc, so, se = run(["--a", A, "--b", A, "--out", out2])
r2 = json.load(open(out2)) if rc == 0 else {}
bn = r2.get("bench", {})
check(rc == 0 and r2["tokens"]["mismatches"] == [] and r2["missing"] == [], "a == a: no mismatches, none missing", 0, (rc, se))
check(bn.get("argmax_agreement_avg") == f"{N}/{N}" and bn.get("argmax_agreement_cal") == f"{N}/{N}"
      and bn["flips_avg"] == [] and bn["flips_cal"] == [], "a == a: full agreement", f"{N}/{N}", bn.get("argmax_agreement_avg"))
zero = all(bn[k]["max"] == 0.0 and bn[k]["mean"] == 0.0 for k in
           ("letter_logit_diff", "order_prob_diff", "avg_prob_diff", "cal_prob_diff", "tv_avg", "tv_cal"))
check(zero, "a == a: every difference is 0.0", 0.0, {k: bn[k]["max"] for k in bn if isinstance(bn[k], dict)})
check(r2["quality"]["a_avg"] == r2["quality"]["b_avg"] and r2["quality"]["a_cal"] == r2["quality"]["b_cal"],
      "a == a: same quality both sides")
check(se == f"tokens: 0 mismatches; bench argmax avg \"{N}/{N}\", cal \"{N}/{N}\"; max |logit diff| 0.0; max TV avg 0.0\n",
      "a == a: stderr line", "... 0.0; max TV avg 0.0", se)

# missing and corrupt inputs
C = os.path.join(TMP, "c")
os.makedirs(C)
with open(os.path.join(C, "bench.jsonl"), "w") as f:
    f.write(open(os.path.join(A, "bench.jsonl")).readline())
    f.write("\n{\"index\": 1, oops}\n")
rc, so, se = run(["--a", A, "--b", C, "--out", os.path.join(TMP, "c.json")])
check(rc == 1 and f"{C}/bench.jsonl:3:" in se and not os.path.exists(os.path.join(TMP, "c.json")),
      "corrupt line: exit 1, names file and line", f"1, {C}/bench.jsonl:3: ...", (rc, se))
with open(os.path.join(C, "bench.jsonl"), "w") as f:
    f.write(open(os.path.join(A, "bench.jsonl")).readline())
rc, so, se = run(["--a", A, "--b", C, "--out", os.path.join(TMP, "c.json")])
check(rc == 1 and f"{C}/systemone.jsonl" in se and "No such file" in se, "missing file: exit 1, named",
      f"1, reading {C}/systemone.jsonl: No such file or directory", (rc, se))
rc, so, se = run(["--a", A, "--out", os.path.join(TMP, "d.json")])
check(rc == 2, "missing --b: usage error", 2, (rc, se))
rc, so, se = run(["--a", A, "--b", Bd, "--out", os.path.join(TMP, "e.json"), "--bogus"])
check(rc == 2 and "unknown option" in se, "unknown flag: usage error", 2, (rc, se))

print(f"{passed} passed, {failed} failed")
raise SystemExit(1 if failed else 0)
PYEOF
rc=$?
if [ "$rc" -eq 0 ]; then ok; else bad "t_compare checks (above)"; fi
finish
