"""`basal compare` (spec 06 §6) re-expressed in Python from the semantics of itsoltech/basal-rs
crates/basal-cli/src/compare.rs and stats.rs (serde_json Value equality: an integer and a float differ;
number arrays read with their non-numbers dropped; first index of the maximum; summaries of |x| with
p_q = sorted[min(floor(q n), n - 1)]), written independently of the C code, as the oracle of
tests/e2e/t_parity_formats.sh. Usage: parity_rs_compare.py A B REPORT (exit 1 and the differences when the
report differs from the expected one; floats within 1e-12 relative)."""
import json, math, sys

def read_jsonl(p):
    with open(p, encoding="utf-8") as f:
        return [json.loads(l) for l in f.read().split("\n") if l.strip()]

def f64s(v):
    return [float(x) for x in v if isinstance(x, (int, float)) and not isinstance(x, bool)] if isinstance(v, list) else []

def g(v, k):
    return v.get(k) if isinstance(v, dict) else None

def argmax(p):
    b = 0
    for i, v in enumerate(p):
        if v > p[b]:
            b = i
    return b

def num(x):
    return None if x is None or not math.isfinite(x) else x

def summary(xs):
    s = sorted(abs(v) for v in xs)
    n = len(s)
    def q(qq):
        return float("nan") if not n else s[min(int(qq * n), n - 1)]
    med = float("nan") if not n else s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    mean = float("nan") if not n else sum(s) / n  # ascending order, as basal-rs sums the sorted values
    return {"n": n, "max": num(s[-1] if n else float("nan")), "p50": num(med), "p95": num(q(0.95)),
            "p99": num(q(0.99)), "mean": num(mean)}

def tv(p, q):
    return 0.5 * sum(abs(a - b) for a, b in zip(p, q))

def quality(dists, gold):
    n = len(dists)
    acc = nll = brier = 0.0
    bins = [[0.0, 0.0, 0] for _ in range(10)]
    for p, gg in zip(dists, gold):
        top = argmax(p)
        hit = 1.0 if top == gg else 0.0
        acc += hit
        nll -= math.log(max(p[gg] if gg < len(p) else 0.0, 1e-12))  # basal-rs panics here
        brier += sum((v - (1.0 if i == gg else 0.0)) ** 2 for i, v in enumerate(p))
        b = min(int(p[top] * 10.0), 9)
        bins[b][0] += p[top]; bins[b][1] += hit; bins[b][2] += 1
    ece = sum(abs(b[0] - b[1]) / n for b in bins if b[2] > 0)
    div = (lambda x: num(x / n)) if n else (lambda x: None)
    return {"n": n, "correct": int(acc), "accuracy": div(acc), "nll": div(nll), "brier": div(brier), "ece_10bin": ece}

DEV = {("so-null-and-missing-instructions", "explicit_null"): "instructions=null is treated as missing (empty); upstream renders the text \"null\"",
       ("so-empty-structures", "empty_true"): "noul description \"\"/{} is kept; upstream replaces falsy descriptions with Tak/Nie"}
def known_deviation(case, item):
    if (case, item) in DEV:
        return DEV[(case, item)]
    if case == "so-unknown-type":
        return "unknown type is a validation error; upstream treats it as choice"
    if case == "so-missing-type":
        return "missing type is a validation error; upstream defaults to choice"
    return None

class TC:
    def __init__(self):
        self.orders, self.mis, self.dev = 0, [], []
    def compare(self, tag, a, b, dev):
        diffs = []
        ao = g(a, "orders") if isinstance(g(a, "orders"), list) else []
        bo = g(b, "orders") if isinstance(g(b, "orders"), list) else []
        if len(ao) != len(bo):
            diffs.append(f"orders {len(ao)} vs {len(bo)}")
        for k, (x, y) in enumerate(zip(ao, bo)):
            self.orders += 1
            for f in ("prompt", "input_ids", "letter_ids", "perm"):
                if not same(g(x, f), g(y, f)):
                    diffs.append(f"order {k}: {f}")
        for f in ("prefix_len", "packed_len", "readout_cols"):
            if not same(g(g(a, "pack"), f), g(g(b, "pack"), f)):
                diffs.append(f"pack.{f}")
        if not diffs:
            return True
        (self.dev if dev else self.mis).append({"item": tag, "differences": diffs, "reason": dev})
        return False

def same(x, y):  # serde_json Value equality (ints and floats differ)
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        return type(x) is type(y) and x == y
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    return x == y

class Num:
    def __init__(self):
        self.logit, self.op, self.avg, self.cal, self.tva, self.tvc, self.fa, self.fc, self.items = [], [], [], [], [], [], [], [], 0
    def add(self, tag, a, b):
        self.items += 1
        ao = g(a, "orders") if isinstance(g(a, "orders"), list) else []
        bo = g(b, "orders") if isinstance(g(b, "orders"), list) else []
        for x, y in zip(ao, bo):
            self.logit += [q - p for p, q in zip(f64s(g(x, "letter_logits")), f64s(g(y, "letter_logits")))]
            self.op += [q - p for p, q in zip(f64s(g(x, "probs")), f64s(g(y, "probs")))]
        aa, ba, ac, bc = f64s(g(a, "p_avg")), f64s(g(b, "p_avg")), f64s(g(a, "p_cal")), f64s(g(b, "p_cal"))
        self.avg += [q - p for p, q in zip(aa, ba)]
        self.cal += [q - p for p, q in zip(ac, bc)]
        self.tva.append(tv(aa, ba)); self.tvc.append(tv(ac, bc))
        for (x, y, fl) in ((aa, ba, self.fa), (ac, bc, self.fc)):
            if argmax(x) != argmax(y):
                fl.append({"item": tag, "a": argmax(x), "b": argmax(y), "gold": g(a, "gold"), "a_p": x, "b_p": y})
    def js(self):
        n = self.items
        return {"items": n, "letter_logit_diff": summary(self.logit), "order_prob_diff": summary(self.op),
                "avg_prob_diff": summary(self.avg), "cal_prob_diff": summary(self.cal), "tv_avg": summary(self.tva),
                "tv_cal": summary(self.tvc), "argmax_agreement_avg": f"{n - len(self.fa)}/{n}",
                "argmax_agreement_cal": f"{n - len(self.fc)}/{n}", "flips_avg": self.fa, "flips_cal": self.fc}

def fnum(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

def answer_diff(a, b):
    out = {"type_a": g(a, "type"), "type_b": g(b, "type")}
    pa = g(a, "probabilities")
    if isinstance(pa, dict):
        m = 0.0
        for k, v in pa.items():
            x, y = fnum(v), fnum(g(g(b, "probabilities"), k))
            if x is not None and y is not None:
                m = max(m, abs(x - y))
        out["max_abs_prob_diff"] = m
    else:
        out["max_abs_prob_diff"] = None
    for f in ("noul", "score"):
        x, y = fnum(g(a, f)), fnum(g(b, f))
        if x is not None and y is not None:
            out[f + "_diff"] = y - x
    if isinstance(g(a, "choice"), str) or isinstance(g(b, "choice"), str):
        out["choice_a"], out["choice_b"], out["choice_same"] = g(a, "choice"), g(b, "choice"), same(g(a, "choice"), g(b, "choice"))
    out["confidence_a"], out["confidence_b"] = g(a, "confidence"), g(b, "confidence")
    x, y = fnum(g(a, "confidence")), fnum(g(b, "confidence"))
    if x is not None and y is not None:
        out["confidence_diff"] = y - x
    ks = lambda v: set(v) if isinstance(v, dict) else None
    out["fields_same"] = ks(a) == ks(b)
    if g(a, "legend") is not None or g(b, "legend") is not None:
        out["legend_same"] = same(g(a, "legend"), g(b, "legend"))
    out["type_same"] = same(g(a, "type"), g(b, "type"))
    for f in ("selected", "action", "refused", "answer", "calibration", "max_error", "threshold"):
        if g(a, f) is not None or g(b, f) is not None:
            out[f + "_same"] = same(g(a, f), g(b, f))
    ea, eb = g(a, "evidence"), g(b, "evidence")
    if isinstance(ea, list) and isinstance(eb, list):
        span = lambda x: [g(x, "start"), g(x, "end"), g(x, "text")]
        out["evidence_spans_same"] = len(ea) == len(eb) and all(same(span(x), span(y)) for x, y in zip(ea, eb))
        out["evidence_first_same"] = same(span(ea[0]) if ea else None, span(eb[0]) if eb else None)
        m = 0.0
        for x, y in zip(ea, eb):
            p, q = fnum(g(x, "probability")), fnum(g(y, "probability"))
            if p is not None and q is not None:
                m = max(m, abs(p - q))
        out["evidence_max_abs_probability_diff"] = m
        out["evidence_a"], out["evidence_b"] = [span(x) for x in ea], [span(x) for x in eb]
    elif ea is not None or eb is not None:
        out["evidence_spans_same"] = False
    x, y = fnum(g(a, "set_confidence")), fnum(g(b, "set_confidence"))
    if x is not None and y is not None:
        out["set_confidence_diff"] = y - x
    xa, xb = g(a, "expected_costs"), g(b, "expected_costs")
    if isinstance(xa, dict) and isinstance(xb, dict):
        out["expected_costs_keys_same"] = list(xa) == list(xb)
        m = 0.0
        for k, v in xa.items():
            p, q = fnum(v), fnum(xb.get(k))
            if p is not None and q is not None:
                m = max(m, abs(p - q))
        out["expected_costs_max_abs_diff"] = m
    return out

def text(v):  # serde_json Value::to_string of an index
    return json.dumps(v, ensure_ascii=False, separators=(",", ":")) if not isinstance(v, float) else repr(v)

def error_of(c):
    v = c.get("upstream_error") if "upstream_error" in c else c.get("error")
    return v
def answer_of(c):
    v = c.get("upstream_answer") if "upstream_answer" in c else c.get("answer")
    return v
def item_named(c, name):
    for x in (g(c, "items") or []):
        if isinstance(x.get("name"), str) and x["name"] == name or (not isinstance(x.get("name"), str) and name == ""):
            return x
    return None
def str_of(v, k):
    x = g(v, k)
    return x if isinstance(x, str) else ""

def compare(A, B):
    tc = TC()
    a_bench = read_jsonl(A + "/bench.jsonl")
    b_bench = {text(r.get("index")): r for r in read_jsonl(B + "/bench.jsonl")}
    num_, missing = Num(), []
    qa, qb, qc, qd, gold = [], [], [], [], []
    for a in a_bench:
        key = text(a.get("index"))
        b = b_bench.get(key)
        if b is None:
            missing.append(key); continue
        tag = f"bench/{key}"
        if tc.compare(tag, a, b, None):
            num_.add(tag, a, b)
            gg = a.get("gold")
            if isinstance(gg, int) and not isinstance(gg, bool) and gg >= 0:
                gold.append(gg); qa.append(f64s(a.get("p_avg"))); qb.append(f64s(b.get("p_avg")))
                qc.append(f64s(a.get("p_cal"))); qd.append(f64s(b.get("p_cal")))
    b_so = {str_of(r, "id"): r for r in read_jsonl(B + "/systemone.jsonl")}
    so_num, cases, up = Num(), [], []
    for a in read_jsonl(A + "/systemone.jsonl"):
        cid = str_of(a, "id")
        b = b_so.get(cid)
        if b is None:
            missing.append(cid); continue
        items = []
        for bi in (g(b, "items") or []):
            name = str_of(bi, "name")
            ai = item_named(a, name)
            if ai is None:
                items.append({"item": name, "note": "only in b"}); continue
            tag = f"systemone/{cid}/{name}"
            s = tc.compare(tag, ai, bi, known_deviation(cid, name))
            if s:
                so_num.add(tag, ai, bi)
            x, y = answer_of(a), answer_of(b)
            xa = g(g(x, "answers"), name) if x is not None else None
            ya = g(g(y, "answers"), name) if y is not None else None
            items.append({"item": name, "tokens_identical": s, "tv_cal": tv(f64s(ai.get("p_cal")), f64s(bi.get("p_cal"))),
                          "answer": answer_diff(xa, ya) if (isinstance(g(x, "answers"), dict) and name in x["answers"] and isinstance(g(y, "answers"), dict) and name in y["answers"]) else None})
        cases.append({"id": cid, "error_a": error_of(a), "error_b": error_of(b), "deviation": known_deviation(cid, ""), "items": items})
        if "answer_upstream" in b:
            ub = b["answer_upstream"]
            ua = answer_of(a)
            err_a = a.get("upstream_error")
            has_err_b = isinstance(ub, dict) and "error" in ub
            qs = []
            if ua is not None and not has_err_b:
                xa = g(ua, "answers") if isinstance(g(ua, "answers"), dict) else {}
                xb = g(ub, "answers") if isinstance(g(ub, "answers"), dict) else {}
                for n in sorted(set(xa) | set(xb), key=lambda s: s.encode()):
                    qs.append({"question": n, "diff": answer_diff(xa[n], xb[n])} if n in xa and n in xb else {"question": n, "only_in_one": True})
            up.append({"id": cid, "error_upstream": err_a, "error_ours": ub.get("error") if has_err_b else None,
                       "errors_agree": (err_a is not None) == has_err_b, "questions": qs})
    return {"a": A, "b": B, "sign": "differences are b - a", "missing": missing,
            "tokens": {"orders_compared": tc.orders, "mismatches": tc.mis, "known_deviations": tc.dev},
            "bench": num_.js(),
            "quality": {"a_avg": quality(qa, gold), "b_avg": quality(qb, gold), "a_cal": quality(qc, gold), "b_cal": quality(qd, gold)},
            "systemone": {"numeric_identical_tokens": so_num.js(), "cases": cases}, "upstream_endpoint": up}

def close(x, y):
    return x == y or abs(x - y) <= 1e-12 * max(abs(x), abs(y))
def diff(x, y, path="", out=None):
    out = [] if out is None else out
    if isinstance(x, float) or isinstance(y, float):
        if not (isinstance(x, (int, float)) and isinstance(y, (int, float)) and close(float(x), float(y))):
            out.append(f"{path}: {x!r} vs {y!r}")
    elif isinstance(x, dict) and isinstance(y, dict):
        if list(x) != list(y):
            out.append(f"{path}: keys {list(x)} vs {list(y)}")
        for k in x:
            if k in y:
                diff(x[k], y[k], f"{path}.{k}", out)
    elif isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            out.append(f"{path}: len {len(x)} vs {len(y)}")
        for i, (p, q) in enumerate(zip(x, y)):
            diff(p, q, f"{path}[{i}]", out)
    elif x != y:
        out.append(f"{path}: {x!r} vs {y!r}")
    return out

if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="Checks a `basal compare` report against compare.rs re-expressed in "
                                 "Python; exit 1 and the differences when they differ.")
    ap.add_argument("A", help="reference export directory a")
    ap.add_argument("B", help="reference export directory b")
    ap.add_argument("REPORT", help="the report `basal compare --a A --b B --out REPORT` wrote")
    args = ap.parse_args()
    A, B, rep = args.A, args.B, args.REPORT
    exp = compare(A, B)
    got = json.load(open(rep, encoding="utf-8"))
    d = diff(exp, got)
    for x in d[:40]:
        print("DIFF", x)
    print(f"{len(d)} differences")
    sys.exit(1 if d else 0)
