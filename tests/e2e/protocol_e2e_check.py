#!/usr/bin/python3
"""End-to-end protocol reference test (issue "Exact Basal protocol", items 4 and 7).
Used by tests/e2e/t_protocol_e2e.sh.

usage: protocol_e2e_check.py BASAL FIXTURES SHARED TMPDIR

(a) The worked examples A-D of spec 01 §2.10 through `basal prepare` on
    tiny-bias: every order prompt's SHA-256, character and byte counts equal the
    spec's figures, input_ids equal the npm oracle's ids of that text, letter ids
    equal spec 07 §1 (A 28741 ...). tools/protocol_ref.py must reproduce the
    same digests (the reference is checked against the spec, too).
(b) tests/data/protocol-e2e-requests.jsonl (one raw /v1/systemone body per line,
    "@MODEL@" = the fixture's served name) on several fixtures: `basal prepare`
    against protocol_ref's prompts, oracle ids and letter ids; `basal decide`
    against protocol_ref's expected response (key order, answer types, choice,
    legend echoed literally, usage exact, every probability / noul / score /
    confidence within 1e-5).
(c) tests/data/protocol-e2e-multi-act.jsonl (33 multi/act requests of spec 03
    §1-§2) on tiny-bias, tiny-nobias, a variant with other temperatures and
    low certified thresholds, and a variant without CALIBRATION.json: prepare
    (every multi branch "<q>#<k>" with the §1.3 question text, oracle ids) and
    decide (selected sets, actions, refused / max_error / calibration
    identical; probabilities, set_confidence and expected costs within 1e-5;
    act refusals as the exact 422 body) against tools/protocol_ref.py; the
    multi prompt of 03 §1.3 by its SHA-256.
(d) a tiny-bias variant whose temperatures are 5e-324: the calibrated
    distributions are NaN (null in the response); act with max_error refuses
    (basal-rs's confidence is -inf) or fails without a defer action, multi's
    min takes the labels in their order; against tools/protocol_ref.py.
Prints PASS/FAIL detail lines and a last line "N passed, N failed".
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("basal", metavar="BASAL", help="the binary under test")
ap.add_argument("fixtures", metavar="FIXTURES", help="the fixtures directory")
ap.add_argument("shared", metavar="SHARED", help="the shared/ folder")
ap.add_argument("tmp", metavar="TMPDIR", help="a scratch directory")
# imported by tests/e2e/large_choice_e2e_check.py, whose command line has a fifth argument
A = ap.parse_args() if __name__ == "__main__" else ap.parse_known_args()[0]
BASAL, FIXTURES, SHARED, TMP = A.basal, A.fixtures, A.shared, A.tmp
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import protocol_ref  # noqa: E402

TOL = 1e-5
npass = nfail = 0
quiet = False
LETTER_IDS = [28741, 28760, 28743, 28757, 28749, 28765, 28777, 28769, 28737, 28798]  # spec 07 §1


def check(ok, what):
    global npass, nfail
    if ok:
        npass += 1
    else:
        nfail += 1
        if not quiet:
            print("FAIL:", what)
    return ok


def run(cmd, stdin_text, timeout=60):
    r = subprocess.run(cmd, input=stdin_text.encode("utf-8"), capture_output=True, timeout=timeout)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def model_name(d):
    with open(os.path.join(d, "basal.json"), encoding="utf-8") as f:
        return json.load(f)["name"]


class Obj(list):
    """A JSON object as its (key, value) pairs after Python dict semantics
    (duplicate keys: last value, first position), so key order takes part in ==."""


def literal(text):
    """JSON with number literals kept as written and ordered objects."""
    return json.loads(text, object_pairs_hook=lambda kv: Obj(dict(kv).items()),
                      parse_float=lambda s: ("num", s), parse_int=lambda s: ("num", s))


def prepare(d, body):
    rc, out, err = run([BASAL, "prepare", "--model", d, "--request", "-"], body)
    if not check(rc == 0, f"{os.path.basename(d)}: prepare exit {rc}: {err.strip()[-300:]} {out[:300]}"):
        return None
    return json.loads(out)


def decide(d, body):
    rc, out, err = run([BASAL, "decide", "--model", d, "--request", "-"], body)
    if not check(rc == 0, f"{os.path.basename(d)}: decide exit {rc}: {err.strip()[-300:]} {out[:300]}"):
        return None
    return out


# ---------------------------------------------------------------- (a) worked examples

def sha(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


with open(os.path.join(ROOT, "tests/data/protocol-e2e-requests.jsonl"), encoding="utf-8") as f:
    REQUESTS = [ln for ln in f.read().split("\n") if ln.strip()]

# (request line, question id, order) -> (sha256, characters or None, bytes or None), spec 01 §2.10
EXAMPLES = {
    (0, "dzial", 0): ("dfcdd3dd337a9504b141730bfaade4954f7bba79083349041a532aa46606153e", 564, 581),
    (0, "dzial", 1): ("b21c380db0b99b3362b2d0ace643782f0ba4470e497fe5834ee8a05212f8b645", 564, 581),
    (1, "billing", 0): ("bfa276386b4285d5da5fd1ef5bf11083add074db06cc782be3f2e36426a138b8", 510, 510),
    (1, "billing", 1): ("40aee1c1659644a6ca3e812d463c70c4fc724b062781b61e05a07cafe34aa162", 510, 510),
    (1, "tone", 0): ("4134a35c7b69526c9701f1a6bfb0860db63dc009e71c6e92bfe6df2497e2d3b4", None, 527),
    (2, "urgency", 0): ("604a8d5ed0ab25f68a3bc9f43cfcabc5a523613405b7f02387c717c213cffca9", 604, 616),
    (3, "team", 0): ("f580261a7cbe87f039afb3d2fb38d026a465e898652c93e39d86f034b6b431c3", None, 457),
}
# the option lines the spec prints for the examples
EXAMPLE_OPTIONS = {
    (0, "dzial"): ["cards: Reklamacje kart", "online: Wsparcie bankowości elektronicznej", "loans: Kredyty"],
    (1, "billing"): ["A payment or invoice problem", "No"],
    (1, "tone"): ["calm", "angry", "excited"],
    (2, "urgency"): ["niska", '{"level": "średnia", "sla_h": 48}', '["wysoka", "dziś"]'],
    (3, "team"): ["t1: Billing", "t2: Billing", "Retention"],
}
# the request line for the examples must be the spec's own bodies
SPEC_BODIES = {
    0: '{"state": "Klient: od wczoraj nie mogę zalogować się do bankowości internetowej, system pokazuje błąd hasła.", '
       '"questions": {"dzial": {"type": "choice", "instructions": "Do którego działu skierować zgłoszenie?", '
       '"criteria": {"cards": "Reklamacje kart", "online": "Wsparcie bankowości elektronicznej", "loans": "Kredyty"}}}}',
    2: '{"state": {"ticket": "Paczka nr 77 dotarła uszkodzona 🙁", "amount": 129.99, "vip": true, "notes": null, '
       '"tags": ["dostawa", "reklamacja"], "nested": {"a": [1, 2.5, -3e-7], "b": {}}}, '
       '"questions": {"urgency": {"type": "score", "instructions": "Jak pilne jest zgłoszenie?", '
       '"criteria": ["niska", {"level": "średnia", "sla_h": 48}, ["wysoka", "dziś"]]}}}',
}


def without_model(text):
    v = literal(text)
    return Obj((k, x) for k, x in v if k != "model")


for i, body in SPEC_BODIES.items():
    check(without_model(REQUESTS[i]) == literal(body), f"request line {i} is the spec's example body")


def part_a():
    d = os.path.join(FIXTURES, "tiny-bias")
    name = model_name(d)
    lines = sorted({k[0] for k in EXAMPLES})
    bodies = [REQUESTS[i].replace("@MODEL@", name) for i in lines]
    ref = protocol_ref.run(d, bodies, with_detail=True, with_forward=False)
    for li, body, r in zip(lines, bodies, ref):
        refitems = {it["item"]["question"]: it for it in r["items"]}
        got = prepare(d, body)
        if got is None:
            continue
        gotitems = {it["item"]["question"]: it for it in got}
        for (l, qid), opts in EXAMPLE_OPTIONS.items():
            if l != li:
                continue
            check(refitems[qid]["item"]["options"] == opts, f"example {li}/{qid}: reference option texts {refitems[qid]['item']['options']}")
            g = gotitems.get(qid)
            if not check(g is not None, f"example {li}/{qid}: prepare has no item"):
                continue
            check(g["item"]["options"] == opts, f"example {li}/{qid}: prepare option texts {g['item']['options']}")
            k = len(opts)
            for o in (0, 1):
                go, ro = g["orders"][o], refitems[qid]["orders"][o]
                spec = EXAMPLES.get((li, qid, o))
                tag = f"example {li}/{qid} order {o}"
                if spec:
                    digest, nchar, nbyte = spec
                    check(sha(ro["prompt"]) == digest, f"{tag}: reference prompt SHA-256 {sha(ro['prompt'])} != spec")
                    check(sha(go["prompt"]) == digest, f"{tag}: prompt SHA-256 {sha(go['prompt'])} != spec {digest}")
                    if nchar is not None:
                        check(len(go["prompt"]) == nchar, f"{tag}: {len(go['prompt'])} characters, spec {nchar}")
                    if nbyte is not None:
                        check(len(go["prompt"].encode()) == nbyte, f"{tag}: {len(go['prompt'].encode())} bytes, spec {nbyte}")
                check(go["prompt"] == ro["prompt"], f"{tag}: prompt differs from the reference")
                check(go["perm"] == (list(range(k)) if o == 0 else list(range(k - 1, -1, -1))), f"{tag}: perm {go['perm']}")
                check(go["input_ids"] == ro["input_ids"], f"{tag}: input_ids differ from the oracle "
                      f"(first difference at {first_diff(go['input_ids'], ro['input_ids'])})")
                check(ro["letter_ids"] == LETTER_IDS[:k], f"{tag}: oracle letter ids {ro['letter_ids']} != spec 07 §1")
                check(go["letter_ids"] == LETTER_IDS[:k], f"{tag}: letter ids {go['letter_ids']} != spec 07 §1")
    print(f"(a) worked examples A-D: {len(EXAMPLES)} spec digests checked on {os.path.basename(d)}")


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"index {i}: {x} vs {y}"
    return f"length {len(a)} vs {len(b)}"


# ---------------------------------------------------------------- (b) decide vs reference

COMPUTED = ("probabilities", "noul", "score", "confidence")


class Stats:
    def __init__(self):
        self.dp = self.ds = self.dc = 0.0
        self.answers = 0


def compare_answer(tag, exp, got_f, got_l, legend_lit, st):
    """exp: reference answer (dict); got_f: decide's answer with floats (Obj);
    got_l: the same with literal numbers; legend_lit: the request's levels, literal."""
    ok = True
    keys = [k for k, _ in got_f]
    ok &= check(keys == list(exp), f"{tag}: keys {keys}, expected {list(exp)}")
    g = dict(got_f)
    ok &= check(g.get("type") == exp["type"], f"{tag}: type {g.get('type')}, expected {exp['type']}")
    if exp["type"] == "choice":
        ok &= check(g.get("choice") == exp["choice"], f"{tag}: choice {g.get('choice')!r}, expected {exp['choice']!r}"
                    f" (p {dict(g.get('probabilities') or [])} vs {exp['probabilities']})")
    if "probabilities" in exp:
        gp = g.get("probabilities")
        ok &= check(isinstance(gp, Obj) and [k for k, _ in gp] == list(exp["probabilities"]),
                    f"{tag}: probability keys {[k for k, _ in gp] if isinstance(gp, Obj) else gp}")
        if isinstance(gp, Obj):
            for (k, v) in gp:
                e = exp["probabilities"].get(k)
                if isinstance(v, float) and e is not None:
                    st.dp = max(st.dp, abs(v - e))
                    ok &= check(abs(v - e) <= TOL, f"{tag}: p[{k}] = {v!r}, reference {e!r} (|Δ| {abs(v - e):.3g})")
    if "noul" in exp:
        v = g.get("noul")
        if check(isinstance(v, float), f"{tag}: noul {v!r} is not a number"):
            st.dp = max(st.dp, abs(v - exp["noul"]))
            ok &= check(abs(v - exp["noul"]) <= TOL, f"{tag}: noul {v!r}, reference {exp['noul']!r}")
    if "score" in exp:
        v = g.get("score")
        if check(isinstance(v, float), f"{tag}: score {v!r} is not a number"):
            st.ds = max(st.ds, abs(v - exp["score"]))
            ok &= check(abs(v - exp["score"]) <= TOL, f"{tag}: score {v!r}, reference {exp['score']!r}")
    if "confidence" in exp:
        v = g.get("confidence")
        if check(isinstance(v, float), f"{tag}: confidence {v!r} is not a number"):
            st.dc = max(st.dc, abs(v - exp["confidence"]))
            ok &= check(abs(v - exp["confidence"]) <= TOL, f"{tag}: confidence {v!r}, reference {exp['confidence']!r}")
    if exp["type"] == "multi":
        ok &= check(g.get("selected") == exp["selected"], f"{tag}: selected {g.get('selected')}, expected {exp['selected']}"
                    f" (p {dict(g.get('probabilities') or [])} vs {exp['probabilities']})")
        ok &= check(g.get("threshold") == exp["threshold"] and isinstance(g.get("threshold"), float),
                    f"{tag}: threshold {g.get('threshold')!r}, expected {exp['threshold']!r}")
        v = g.get("set_confidence")
        tol = TOL * max(1, len(exp["probabilities"]))  # a product of n values each within TOL
        ok &= check(isinstance(v, float) and abs(v - exp["set_confidence"]) <= tol,
                    f"{tag}: set_confidence {v!r}, reference {exp['set_confidence']!r}")
    if exp["type"] == "act":
        for k in ("action", "answer", "refused", "max_error", "calibration"):
            ok &= check(g.get(k) == exp.get(k), f"{tag}: {k} {g.get(k)!r}, expected {exp.get(k)!r}")
        ge = g.get("expected_costs")
        if check(isinstance(ge, Obj) and [k for k, _ in ge] == list(exp["expected_costs"]),
                 f"{tag}: expected_costs keys {ge!r}, expected {list(exp['expected_costs'])}"):
            for k, v in ge:
                e = exp["expected_costs"][k]
                # p within TOL moves E by at most TOL * sum |C|; round6 adds 1e-6
                tol = TOL * max(1.0, abs(e)) * 10 + 1.1e-6
                ok &= check(isinstance(v, float) and abs(v - e) <= tol, f"{tag}: expected_costs[{k}] = {v!r}, reference {e!r}")
    if "legend" in exp:
        gl = dict(got_l).get("legend")
        ok &= check(gl == legend_lit, f"{tag}: legend {gl!r}, expected the request's values {legend_lit!r}")
    st.answers += 1
    return ok


def request_legends(body):
    """question id -> score levels as the request wrote them (literal numbers)."""
    out = {}
    for qid, q in dict(literal(body)).get("questions", []):
        if not isinstance(q, Obj):
            continue
        q = dict(q)
        if q.get("type") != "score":
            continue
        f = q.get("criteria")
        if f is None:
            f = q.get("levels")
        if isinstance(f, Obj):
            out[qid] = f
        elif isinstance(f, list):
            out[qid] = Obj((str(i), v) for i, v in enumerate(f))
    return out


def compare_response(tag, exp, out, body, st):
    got_f = json.loads(out, object_pairs_hook=Obj)
    got_l = literal(out)
    top = [k for k, _ in got_f]
    check(top == ["model", "answers", "usage"], f"{tag}: top-level keys {top}")
    g, gl = dict(got_f), dict(got_l)
    check(g.get("model") == exp["model"], f"{tag}: model {g.get('model')!r}")
    ga, gla = g.get("answers"), gl.get("answers")
    if not check(isinstance(ga, Obj) and [k for k, _ in ga] == list(exp["answers"]),
                 f"{tag}: answer ids {[k for k, _ in ga] if isinstance(ga, Obj) else ga}, expected {list(exp['answers'])}"):
        return
    legends = request_legends(body)
    for (qid, a), (_, al) in zip(ga, gla):
        compare_answer(f"{tag} {qid}", exp["answers"][qid], a, al, legends.get(qid), st)
    gu = g.get("usage")
    uk = [k for k, _ in gu] if isinstance(gu, Obj) else gu
    check(uk == list(exp["usage"]), f"{tag}: usage keys {uk} (no latency_ms in decide)")
    if isinstance(gu, Obj):
        for k, v in gu:
            check(v == exp["usage"].get(k) and type(v) is int, f"{tag}: usage.{k} = {v!r}, reference {exp['usage'].get(k)!r}")


def compare_prepare(tag, ref, got):
    refitems = {it["item"]["question"]: it for it in ref["items"] if "orders" in it}
    ids = [it["item"]["question"] for it in got]
    check(sorted(ids) == sorted(refitems), f"{tag}: prepared items {ids}, expected {sorted(refitems)} (single-option questions have none)")
    for g in got:
        qid = g["item"]["question"]
        r = refitems.get(qid)
        if r is None:
            continue
        check(list(g["item"]) == ["question", "type", "lang", "keys", "options"], f"{tag} {qid}: item keys {list(g['item'])}")
        for k in ("type", "lang", "keys", "options"):
            check(g["item"].get(k) == r["item"][k], f"{tag} {qid}: item.{k} {g['item'].get(k)!r}, reference {r['item'][k]!r}")
        if not check(len(g["orders"]) == 2, f"{tag} {qid}: {len(g['orders'])} orders"):
            continue
        for o, (go, ro) in enumerate(zip(g["orders"], r["orders"])):
            t = f"{tag} {qid} order {o}"
            check(go["perm"] == ro["perm"], f"{t}: perm {go['perm']}, expected {ro['perm']}")
            check(go["prompt"] == ro["prompt"], f"{t}: prompt differs from the reference at character "
                  f"{first_diff(go['prompt'], ro['prompt'])}")
            check(go["input_ids"] == ro["input_ids"], f"{t}: input_ids differ from the oracle ({first_diff(go['input_ids'], ro['input_ids'])})")
            k = len(r["item"]["keys"])
            check(go["letter_ids"] == ro["letter_ids"] == LETTER_IDS[:k],
                  f"{t}: letter ids {go['letter_ids']}, oracle {ro['letter_ids']}, spec {LETTER_IDS[:k]}")


def variant(name, calibration):
    """tiny-bias with another CALIBRATION.json (None: without one)."""
    src = os.path.abspath(os.path.join(FIXTURES, "tiny-bias"))
    dst = os.path.join(TMP, name)
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f not in ("CALIBRATION.json",) and not f.startswith("."):
            p = os.path.join(dst, f)
            if not os.path.lexists(p):
                os.symlink(os.path.join(src, f), p)
    if calibration is not None:
        with open(os.path.join(dst, "CALIBRATION.json"), "w") as f:
            f.write(calibration)
    return dst


with open(os.path.join(ROOT, "tests/data/protocol-e2e-multi-act.jsonl"), encoding="utf-8") as f:
    MULTI_ACT = [ln for ln in f.read().split("\n") if ln.strip()]


def decide_raw(d, body):
    return run([BASAL, "decide", "--model", d, "--request", "-"], body)


def part_c():
    """multi and act (03 §1-§2) against the reference."""
    models = [os.path.join(FIXTURES, "tiny-bias"), os.path.join(FIXTURES, "tiny-nobias"),
              variant("tiny-bias-act", '{"temperature_per_prim": {"noul": 0.7, "choice": 1.0, "score": 1.6}, '
                      '"thresholds": {"0.05": {"confidence": 0.45}, "0.1": {"confidence": 0.3}, "1": {"confidence": 0.9}}}'),
              variant("tiny-bias-nocal", None)]
    seen = {"selected": set(), "action": set(), "refused": 0, "no_threshold": 0, "validated": 0, "refusal_422": 0}
    results = {}
    for d in models:
        t0 = time.time()
        name, label = model_name(d), os.path.basename(d)
        bodies = [b.replace("@MODEL@", name) for b in MULTI_ACT]
        try:
            ref = protocol_ref.run(d, bodies, with_detail=True, with_forward=True)
        except protocol_ref.RefError as e:
            check(False, f"{label}: protocol_ref: {e}")
            continue
        st = Stats()
        before = nfail
        for i, (body, r) in enumerate(zip(bodies, ref)):
            tag = f"{label} multi/act request {i}"
            got = prepare(d, body)
            if got is not None:
                compare_prepare(tag, r, got)
            exp = r["response"]
            if "status" in exp:  # act refusal without a defer action (03 §2.5)
                rc, out, err = decide_raw(d, body)
                check(rc == 2 and literal(out) == literal(json.dumps(exp["body"])),
                      f"{tag}: refusal exit {rc} body {out.strip()[:300]}, expected {json.dumps(exp['body'])}")
                seen["refusal_422"] += 1
                continue
            out = decide(d, body)
            if out is not None:
                compare_response(tag, exp, out, body, st)
            for a in exp["answers"].values():
                if a["type"] == "multi":
                    seen["selected"].add(len(a["selected"]))
                elif a["type"] == "act":
                    seen["action"].add(a["action"])
                    seen["refused"] += "refused" in a
                    seen["no_threshold"] += "max_error" in a
                    seen["validated"] += a["calibration"] == "validated"
        results[label] = ref
        print(f"(c) {label}: {len(bodies)} multi/act requests, {st.answers} answers: max |Δp| {st.dp:.3g}, "
              f"max |Δconfidence| {st.dc:.3g}{'' if nfail == before else ', FAILURES'} ({time.time() - t0:.1f} s)")
    # the requests reach every branch of the rules (so the agreement is not vacuous)
    check(len(seen["selected"]) >= 4, f"multi selections of only {sorted(seen['selected'])} labels")
    check(seen["refused"] > 0 and seen["no_threshold"] > 0 and seen["validated"] > 0 and seen["refusal_422"] > 0,
          f"act branches not all reached: {seen}")
    # 03 §1.3: the card branch of request 0 is the spec's prompt (BOS <s>)
    r0 = results.get("tiny-bias")
    if r0:
        card = [it for it in r0[0]["items"] if it["item"]["question"] == "tematy#1"]
        check(card and sha(card[0]["orders"][0]["prompt"]) ==
              "f0a8a710b2076bdec29f332ab23eeb86e1e007ab03f8a630ebaf31f64982738b"
              and len(card[0]["orders"][0]["prompt"]) == 610 and len(card[0]["orders"][0]["prompt"].encode()) == 634,
              "03 §1.3 multi prompt: reference SHA-256 / length differ from the spec")
        got = prepare(os.path.join(FIXTURES, "tiny-bias"), MULTI_ACT[0].replace("@MODEL@", model_name(os.path.join(FIXTURES, "tiny-bias"))))
        if got:
            g = [it for it in got if it["item"]["question"] == "tematy#1"]
            check(g and sha(g[0]["orders"][0]["prompt"]) == "f0a8a710b2076bdec29f332ab23eeb86e1e007ab03f8a630ebaf31f64982738b",
                  "03 §1.3 multi prompt: basal prepare's SHA-256 differs from the spec")
    # the calibration variant moves the answers (T and thresholds are used)
    a, b = results.get("tiny-bias"), results.get("tiny-bias-act")
    if a and b:
        check(a[16]["response"]["answers"]["a"] != b[16]["response"]["answers"]["a"],
              "tiny-bias-act: the other CALIBRATION.json did not change request 16's answer")


def model_variant():
    """tiny-bias with its own CALIBRATION.json: choice T exactly 1.0 (no calibration),
    score T 2.5, noul missing (T 1); exercises 01 §8's T == 1 branch and other T."""
    src = os.path.abspath(os.path.join(FIXTURES, "tiny-bias"))
    dst = os.path.join(TMP, "tiny-bias-cal")
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f not in ("CALIBRATION.json",) and not f.startswith("."):
            p = os.path.join(dst, f)
            if not os.path.lexists(p):
                os.symlink(os.path.join(src, f), p)
    with open(os.path.join(dst, "CALIBRATION.json"), "w") as f:
        f.write('{"temperature_per_prim": {"choice": 1.0, "score": 2.5}}')
    return dst


def part_b(models):
    results = {}
    for d, subset in models:
        t0 = time.time()
        name = model_name(d)
        label = os.path.basename(d)
        lines = [i for i in range(len(REQUESTS)) if subset is None or i in subset]
        bodies = [REQUESTS[i].replace("@MODEL@", name) for i in lines]
        try:
            ref = protocol_ref.run(d, bodies, with_detail=True, with_forward=True)
        except protocol_ref.RefError as e:
            check(False, f"{label}: protocol_ref: {e}")
            continue
        st = Stats()
        before = nfail
        for i, body, r in zip(lines, bodies, ref):
            tag = f"{label} request {i}"
            got = prepare(d, body)
            if got is not None:
                compare_prepare(tag, r, got)
            out = decide(d, body)
            if out is not None:
                compare_response(tag, r["response"], out, body, st)
        results[label] = dict(zip(lines, ref))
        print(f"(b) {label}: {len(lines)} requests, {st.answers} answers: max |Δp| {st.dp:.3g}, "
              f"max |Δscore| {st.ds:.3g}, max |Δconfidence| {st.dc:.3g}"
              f"{'' if nfail == before else ', FAILURES'} ({time.time() - t0:.1f} s)")
    return results


def sensitivity(results):
    """The comparisons must be able to fail."""
    # perturbed references are rejected
    exp = {"type": "choice", "choice": "a", "probabilities": {"a": 0.7, "b": 0.3}, "confidence": 0.4}
    out = json.dumps({"type": "choice", "choice": "a", "probabilities": {"a": 0.7 + 2e-5, "b": 0.3 - 2e-5},
                      "confidence": 0.4})
    global npass, nfail, quiet
    saved, quiet = (npass, nfail), True
    ok = compare_answer("selftest", exp, json.loads(out, object_pairs_hook=Obj), literal(out), None, Stats())
    out2 = json.dumps({"type": "choice", "choice": "a", "probabilities": {"a": 0.7, "c": 0.3}, "confidence": 0.4})
    ok2 = compare_answer("selftest", exp, json.loads(out2, object_pairs_hook=Obj), literal(out2), None, Stats())
    (npass, nfail), quiet = saved, False
    check(not ok and not ok2, "self-test: a 2e-5 change or another key must fail the comparison")
    # multi / act: another selected set or action must fail
    saved, quiet = (npass, nfail), True
    em = {"type": "multi", "selected": ["a"], "probabilities": {"a": 0.6, "b": 0.4}, "threshold": 0.5, "set_confidence": 0.36}
    om = json.dumps(dict(em, selected=["a", "b"]))
    okm = compare_answer("selftest", em, json.loads(om, object_pairs_hook=Obj), literal(om), None, Stats())
    ea = {"type": "act", "action": "x", "expected_costs": {"x": 1.0, "y": 2.0}, "answer": "a",
          "probabilities": {"a": 0.6, "b": 0.4}, "confidence": 0.6, "calibration": "unvalidated"}
    oa = json.dumps(dict(ea, action="y"))
    oka = compare_answer("selftest", ea, json.loads(oa, object_pairs_hook=Obj), literal(oa), None, Stats())
    oc = json.dumps(dict(ea, expected_costs={"x": 1.001, "y": 2.0}))
    okc = compare_answer("selftest", ea, json.loads(oc, object_pairs_hook=Obj), literal(oc), None, Stats())
    (npass, nfail), quiet = saved, False
    check(not okm and not oka and not okc, "self-test: another selected set, action or expected cost must fail")
    # the models really differ (the agreement is not trivial)
    a, b = results.get("tiny-bias"), results.get("tiny-nobias")
    if a and b:
        diff = 0.0
        for i in a:
            ra, rb = a[i], b[i]
            for qid, x in ra["response"]["answers"].items():
                y = rb["response"]["answers"][qid]
                for k in ("noul", "score"):
                    if k in x:
                        diff = max(diff, abs(x[k] - y[k]))
                for k, v in x.get("probabilities", {}).items():
                    diff = max(diff, abs(v - y["probabilities"][k]))
        check(diff > 1e-2, f"tiny-bias and tiny-nobias answers differ by only {diff:.3g}")
    # the re-calibrated variant really changes the calibrated answers (request 7: scores, T 2.5 vs 0.9)
    c = results.get("tiny-bias-cal")
    if a and c:
        x, y = a[7]["response"]["answers"]["s1"], c[7]["response"]["answers"]["s1"]
        check(abs(x["score"] - y["score"]) > 1e-3, f"CALIBRATION.json change moved s1's score by only {abs(x['score'] - y['score']):.3g}")
    # tiny-always: honouring the file's "always" would change the ids (01 §1.4 rule 1 is tested)
    d = os.path.join(FIXTURES, "tiny-always")
    if os.path.isdir(d):
        md = protocol_ref.ModelDir(d)
        p = protocol_ref.plan_request(md, REQUESTS[0].replace("@MODEL@", md.name))[0]["orders"][0]["prompt"]
        first, always = protocol_ref.oracle_tokenize([(md.tokenizer, "first", [p]), (md.tokenizer, None, [p])])
        check(first[0] != always[0], "tiny-always: prepend_scheme always and first give the same ids")


def finite_or_null(v):
    """The reference response as the response writer prints it: a non-finite
    float is null (02 §1.2)."""
    if isinstance(v, float):
        return v if v == v and abs(v) != float("inf") else None
    if isinstance(v, dict):
        return {k: finite_or_null(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite_or_null(x) for x in v]
    return v


def same_json(exp, got, path="$"):
    """exp: plain JSON (dict); got: parsed with Obj pairs. Key order, strings,
    nulls and ints exact, floats within TOL. Returns the first difference or None."""
    if isinstance(exp, dict):
        if not isinstance(got, Obj) or [k for k, _ in got] != list(exp):
            return f"{path}: keys {[k for k, _ in got] if isinstance(got, Obj) else got!r}, expected {list(exp)}"
        for k, v in got:
            d = same_json(exp[k], v, f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(exp, list):
        if not isinstance(got, list) or len(got) != len(exp):
            return f"{path}: {got!r}, expected {exp!r}"
        for i, (x, y) in enumerate(zip(exp, got)):
            d = same_json(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(exp, float) and isinstance(got, float):
        return None if abs(exp - got) <= TOL else f"{path}: {got!r}, reference {exp!r}"
    return None if type(exp) is type(got) and exp == got else f"{path}: {got!r}, expected {exp!r}"


def part_d():
    """01 §8 with a temperature so small (5e-324) that ln(p)/T overflows: the
    calibrated distribution is NaN, printed null; act refuses (basal-rs's
    confidence is -inf), multi keeps the labels' order for min."""
    d = variant("tiny-bias-tiny-t", '{"temperature_per_prim": {"choice": 5e-324, "noul": 5e-324, "score": 5e-324}, '
                '"thresholds": {"0.05": {"confidence": 0.5}}}')
    name = model_name(d)
    qs = ['{"type": "choice", "instructions": "x", "criteria": {"a": null, "b": "B", "c": null}}',
          '{"type": "score", "instructions": "x", "criteria": ["low", "mid", "high"]}',
          '{"type": "noul", "instructions": "Czy?"}',
          '{"type": "act", "instructions": "x", "costs": {"go": {"true": 0, "false": 10}, '
          '"human": {"true": 1, "false": 1}}, "max_error": 0.05}',
          '{"type": "act", "instructions": "x", "costs": {"go": {"true": 0, "false": 10}, '
          '"stop": {"true": 5, "false": 0}}, "max_error": 0.05}',
          '{"type": "multi", "instructions": "x", "criteria": ["a", "b", "c"], "min": 2}']
    bodies = ['{"model": "%s", "state": "Stan sprawy.", "questions": {"q": %s}}' % (name, q) for q in qs]
    ref = protocol_ref.run(d, bodies, with_detail=False, with_forward=True)
    for i, (body, exp) in enumerate(zip(bodies, ref)):
        tag = f"tiny temperature request {i}"
        if "status" in exp:
            rc, out, err = decide_raw(d, body)
            check(rc == 2 and literal(out) == literal(json.dumps(exp["body"])),
                  f"{tag}: refusal exit {rc} body {out.strip()[:300]}, expected {json.dumps(exp['body'])}")
            continue
        out = decide(d, body)
        if out is None:
            continue
        diff = same_json(finite_or_null(exp), json.loads(out, object_pairs_hook=Obj))
        check(diff is None, f"{tag}: {diff}")
    # the requests reach what they are meant to (the check is not vacuous)
    a = [r.get("answers", {}).get("q") for r in ref]
    check(a[0]["probabilities"]["a"] != a[0]["probabilities"]["a"] and a[3].get("refused") == "go"
          and ref[4].get("status") == 422 and a[5]["selected"] == ["a", "b"],
          f"tiny temperature: the reference does not give NaN / refusal / the label order ({a})")


def main():
    part_a()
    models = [(os.path.join(FIXTURES, "tiny-bias"), None), (os.path.join(FIXTURES, "tiny-nobias"), None)]
    cheap = {0, 1, 4, 9, 10, 11}
    for extra in ("tiny-v10", "tiny-always"):
        if check(os.path.isdir(os.path.join(FIXTURES, extra)), f"fixture {extra} missing"):
            models.append((os.path.join(FIXTURES, extra), cheap))
    models.append((model_variant(), {1, 2, 6, 7, 9}))
    results = part_b(models)
    sensitivity(results)
    part_c()
    part_d()
    print(f"{npass} passed, {nfail} failed")
    return 0 if nfail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
