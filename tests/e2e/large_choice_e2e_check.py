#!/usr/bin/python3
"""Choice with 11-255 options end to end (spec 03 §5, 02 §4.6; issue 13),
against tools/protocol_ref.py: prompts built in Python from the spec, ids from
the npm tokenizer oracle, the PyTorch f32 forward, the Luce fit / finalists /
refit / calibration of tools/large_choice_ref.py (numpy float64).
Used by tests/e2e/t_large_choice_e2e.sh.

usage: large_choice_e2e_check.py BASAL FIXTURES SHARED TMPDIR BUILD
(the first four as tests/e2e/protocol_e2e_check.py takes them: its comparison
functions are reused, and it reads the same command line when imported)

(a) The reference in isolation (needs no engine support for large choices):
    the groups of 03 §5.1 for n = 11, 23, 255 as the spec writes them; every
    round-1 prompt's option block, parsed back, names the members that
    `test_large_choice --groups` (the C groups, themselves checked against
    large_choice_ref.py by t_large_choice_ref) gives; every round-1 prompt and
    both final prompts equal, byte for byte and id for id, the prompts the
    reference's established 2..10-option path builds for a plain choice of the
    same texts, with bitwise the same letter logits and p_avg (so the large
    path adds nothing but the grouping); the two-round staging reproduces
    large_choice_ref.answer() on the same logits; `test_large_choice --stdin`
    (the C fit) agrees with the reference on these real-model logits; the
    round-2 group and the choice temperature really change the answer; the
    usage counts one branch and 4 + 2 prompts for 11 options (03 §5.5); the
    benchmark workload bench/workloads/issue13.jsonl is its generator's.
(b) tests/e2e/large_choice_requests.py (34 requests) on tiny-bias, and subsets
    (8-12 requests) on tiny-nobias, tiny-hd128 and tiny-bias without
    CALIBRATION.json and with choice temperature 1.33: `basal prepare` (every round-1 group prompt,
    ids, letter ids, one order each) and `basal decide` against the reference:
    the same answer keys and order, choices identical, every probability and
    confidence within 1e-5, usage identical (one branch per large choice;
    input_tokens = all group prompts + both final prompts).
(c) The same requests on tiny-bias through `basal serve`, 8 concurrent
    clients: each answer equals the reference as in (b) and is bitwise the
    answer `basal decide` gave for the request alone.

Where the reference's fit does not converge in 100 Newton steps, or moving
every letter logit by up to 2e-5 (the f32 forward's agreement with torch)
changes the finalists or moves the answer by more than 5e-6, the spec's
algorithm does not determine the answer to 1e-5 (see compare() in
tools/large_choice_ref.py): that question is compared structurally only
(keys, a valid distribution, its own confidence) and counted, and its final
prompts in input_tokens are those of the finalists that the C forward's
round-1 logits (`basal logits` on the reference's prompts) give in the
reference fit, or, where that fit does not converge either, within the
bounds of c_final_tokens(); at least 85 % of the large choices of every model must be
compared exactly.
Prints one line per request and a last line "N passed, N failed".
"""
import argparse
import concurrent.futures
import copy
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import large_choice_requests  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                             epilog="environment: LARGE_CHOICE_E2E_ONLY, a comma list of fixture labels to rerun "
                                    "(default: all); LARGE_CHOICE_E2E_NO_CACHE=1 recomputes the cached reference "
                                    "(default: unset, use the cache)")
ap.add_argument("basal", metavar="BASAL", help="the binary under test")
ap.add_argument("fixtures", metavar="FIXTURES", help="the fixtures directory")
ap.add_argument("shared", metavar="SHARED", help="the shared/ folder")
ap.add_argument("tmp", metavar="TMPDIR", help="a scratch directory")
ap.add_argument("build", metavar="BUILD", help="the build directory (its tests/unit/test_large_choice)")
A = ap.parse_args()
BASAL, FIXTURES, SHARED, TMP, BUILD = A.basal, A.fixtures, A.shared, A.tmp, A.build
import protocol_e2e_check as pe  # noqa: E402  (parses the same command line)
import large_choice_ref as lcr  # noqa: E402
import numpy as np  # noqa: E402
import protocol_ref  # noqa: E402

check = pe.check
TOL = 1e-5
STABLE = 5e-6       # largest answer move under the logit noise below for an exact comparison
LOGIT_NOISE = 2e-5  # the f32 forward's agreement with torch on the fixtures (max |Δlogit| measured 1.7e-5)
MIN_EXACT = 0.85
REQUESTS = [json.dumps(r, ensure_ascii=False) for r in large_choice_requests.requests()]


def model_name(d):
    return pe.model_name(d)


def large_questions(ref):
    """{question id: (group detail items, final detail item or None)} of one
    reference result (--detail), from the "<q>#<k>" / "<q>#final" items."""
    out = {}
    for it in ref["items"]:
        name = it["item"]["question"]
        if "members" not in it:
            continue
        qid = name.rsplit("#", 1)[0]
        g, f = out.setdefault(qid, ([], [None]))
        if name.endswith("#final"):
            f[0] = it
        else:
            g.append(it)
    return {q: (g, f[0]) for q, (g, f) in out.items()}


# ---------------------------------------------------------------- reference stability

def replay(n, temp, groups, final, noise=None, rng=None):
    """large_choice_ref.answer() on the stored logits (optionally moved by
    uniform noise): (finalists, first fit, final p, both converged)."""
    def mv(v):
        return [x + rng.uniform(-noise, noise) for x in v] if noise else v
    r1 = [mv(g["orders"][0]["logits"]) for g in groups]
    fin, first, p, conv = lcr.answer(n, temp, r1, mv(final["orders"][0]["logits"]), mv(final["orders"][1]["logits"]))
    return fin, first, p, conv[0] and conv[1]


def classify(ref, temp, seed):
    """{question id: None (compare exactly) or the reason it is compared structurally}."""
    rng = np.random.default_rng(seed)
    out = {}
    for qid, (groups, final) in large_questions(ref).items():
        n = len(final["joint"])
        fin, first, p, conv = replay(n, temp, groups, final)
        if not conv or not all(final["converged"]):
            out[qid] = "the reference fit did not converge"
            continue
        move, why = 0.0, None
        for _ in range(3):
            fin2, _, p2, conv2 = replay(n, temp, groups, final, LOGIT_NOISE, rng)
            if fin2 != fin or not conv2:
                why = "logit noise of 2e-5 changes the finalists" if fin2 != fin else "a noisy fit does not converge"
                break
            move = max(move, float(np.max(np.abs(p2 - p))))
        if why is None and move > STABLE:
            why = f"logit noise of 2e-5 moves the answer by {move:.2g}"
        out[qid] = why
    return out


# ---------------------------------------------------------------- (a) the reference in isolation

SPEC_GROUPS = {
    11: [list(range(0, 6)), list(range(6, 11)), [0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9]],
    23: [list(range(0, 8)), list(range(8, 16)), list(range(16, 23)), list(range(0, 23, 3)), list(range(1, 23, 3)),
         list(range(2, 23, 3))],
    255: [list(range(10 * k, 10 * k + 10)) for k in range(21)] + [list(range(210 + 9 * k, 219 + 9 * k)) for k in range(5)]
         + [list(range(k, 255, 26)) for k in range(26)],
}
OPTION_BLOCK = re.compile(r"\n(?:Opcje|Options):\n(.*)\n\n(?:Odpowiedz w formacie|Answer in the format) ", re.S)


def c_groups(n):
    """`test_large_choice --groups n n` → list of member lists."""
    r = subprocess.run([os.path.join(BUILD, "tests", "test_large_choice"), "--groups", str(n), str(n)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    return [[int(x) for x in line.split(":", 1)[1].split()] for line in r.stdout.splitlines() if line.strip()]


def parse_members(prompt, shown):
    """The option indices a prompt shows, read back from its option block
    (None where texts with LF make lines ambiguous)."""
    if any("\n" in s for s in shown):
        return None
    m = OPTION_BLOCK.search(prompt)
    if not m:
        return []
    index = {s: i for i, s in enumerate(shown)}
    out = []
    for p, line in enumerate(m.group(1).split("\n")):
        head = protocol_ref.LETTERS[p] + ". " if p < 10 else None
        if head is None or not line.startswith(head) or line[len(head):] not in index:
            return ["unparsable line " + repr(line)]
        out.append(index[line[len(head):]])
    return out


def plain_request(body, qid, texts):
    """A plain (2..10) choice with the same state, instructions and facts
    whose shown texts are `texts` (keys = texts, descriptions null)."""
    r = json.loads(body)
    q = r["questions"][qid]
    nq = {"type": "choice", "criteria": {t: None for t in texts}}
    if "instructions" in q:
        nq["instructions"] = q["instructions"]
    r["questions"] = {"p": nq}
    return json.dumps(r, ensure_ascii=False)


def part_a(d, results, temp):
    """results: the reference's detail results for REQUESTS on d."""
    t0 = time.time()
    label = os.path.basename(d)
    name = model_name(d)
    # 03 §5.1 examples
    for ri, qid, n in ((0, "temat", 11), (3, "topic", 23), (10, "temat", 255)):
        groups, _ = large_questions(results[ri])[qid]
        check([g["members"] for g in groups] == SPEC_GROUPS[n], f"(a) n = {n}: reference groups differ from 03 §5.1")
    # prompts parsed back against the C groups; the plain path reproduces every prompt
    parsed = plain_checked = staged = 0
    sub_bodies, sub_keys = [], []
    c_cache = {}
    for ri, (body, r) in enumerate(zip(REQUESTS, results)):
        body = body.replace("@MODEL@", name)
        for qid, (groups, final) in large_questions(r).items():
            n = len(final["joint"])
            if n not in c_cache:
                c_cache[n] = c_groups(n)
            if not check(c_cache[n] is not None, f"(a) test_large_choice --groups {n} failed"):
                continue
            shown = json.loads(body)["questions"][qid]["criteria"]
            keys, shown = protocol_ref.choice_options(qid, shown, json.loads(body)["questions"][qid].get("option_keys") == "hide")
            check(len(groups) == len(c_cache[n]), f"(a) request {ri} {qid}: {len(groups)} groups, C {len(c_cache[n])}")
            for k, (g, want) in enumerate(zip(groups, c_cache[n])):
                got = parse_members(g["orders"][0]["prompt"], shown)
                if got is not None:
                    parsed += 1
                    check(got == want, f"(a) request {ri} {qid} group {k}: prompt shows options {got}, C groups {want}")
                check(len(g["orders"]) == 1 and g["orders"][0]["perm"] == list(range(len(want))),
                      f"(a) request {ri} {qid} group {k}: round 1 is one order as written")
            # the plain path: every group once, the final group in both orders
            if ri in PLAIN_CHECKED:
                for g in groups + [final]:
                    sub_bodies.append(plain_request(body, qid, g["item"]["options"]))
                    sub_keys.append((ri, qid, g))
            # staging = large_choice_ref.answer on the same logits (its softmax
            # is numpy's, so equal to the stopping rule's accuracy, 1e-9 as in
            # t_large_choice_ref; where the round-1 groups are not
            # connected (n = 199, 200) the mass between the components is set by
            # rounding, so the first fit is compared within each component; a
            # fit that does not converge is not determined at all)
            fin, first, p, conv = replay(n, temp, groups, final)
            if not conv or not all(final["converged"]):
                continue
            staged += 1
            comps = lcr.component_masses(n, lcr.groups(n))
            check(fin == final["finalists"], f"(a) request {ri} {qid}: finalists {final['finalists']} != answer() {fin}")
            d1 = float(np.max(np.abs(lcr.within_components(np.array(final["first_fit"]), comps)
                                     - lcr.within_components(first, comps))))
            d2 = float(np.max(np.abs(np.array(final["p_cal"]) - p)))
            check(d1 <= 1e-9 and d2 <= 1e-9,
                  f"(a) request {ri} {qid}: the staged fits differ from large_choice_ref.answer() by {d1:.3g} / {d2:.3g}")
    check(parsed > 300, f"(a) only {parsed} round-1 prompts parsed back")
    check(staged >= 30, f"(a) only {staged} large choices staged like large_choice_ref.answer()")
    plain = cached("plain", d, sub_bodies, lambda: protocol_ref.run(d, sub_bodies, with_detail=True, with_forward=True))
    for (ri, qid, g), pr in zip(sub_keys, plain):
        tag = f"(a) request {ri} {g['item']['question']}"
        it = pr["items"][0]
        plain_checked += 1
        check(len(it["orders"]) == 2, f"{tag}: plain path has {len(it['orders'])} orders")
        for o, go in enumerate(g["orders"]):
            po = it["orders"][o]
            check(go["prompt"] == po["prompt"], f"{tag} order {o}: prompt differs from the plain choice path "
                  f"({pe.first_diff(go['prompt'], po['prompt'])})")
            check(go["input_ids"] == po["input_ids"] and go["letter_ids"] == po["letter_ids"],
                  f"{tag} order {o}: ids differ from the plain choice path")
            check(go["logits"] == po["logits"], f"{tag} order {o}: letter logits differ from the plain path")
        if len(g["orders"]) == 2:
            check(g["p_avg"] == it["p_avg"], f"{tag}: final p_avg differs from the plain path's")
        else:
            check(g["p_avg"] == it["orders"][0]["q"], f"{tag}: round-1 target differs from the plain order-0 softmax")
    check(plain_checked >= 40, f"(a) only {plain_checked} groups checked against the plain path")
    # the C fit on these real-model logits (instances as t_large_choice_ref writes them)
    inst = os.path.join(TMP, f"{label}-instances.txt")
    lines = []
    for r in results:
        for qid, (groups, final) in large_questions(r).items():
            vals = [repr(float(np.float32(x))) for g in groups for x in g["orders"][0]["logits"]]
            vals += [repr(float(np.float32(x))) for o in final["orders"] for x in o["logits"]]
            lines.append(f"{len(final['joint'])} {temp!r} " + " ".join(vals))
    with open(inst, "w") as f:
        f.write("\n".join(lines) + "\n")
    outp = inst + ".c"
    with open(inst) as fi, open(outp, "w") as fo:
        rc = subprocess.run([os.path.join(BUILD, "tests", "test_large_choice"), "--stdin"], stdin=fi, stdout=fo,
                            timeout=300).returncode
    if check(rc == 0, f"(a) test_large_choice --stdin exit {rc}"):
        print(f"(a) {label}: the C fit (src/decision/large_choice) on the {len(lines)} large choices' real logits:")
        check(lcr.compare(inst, outp, tol=1e-9, min_compared=len(lines) // 2) == 0,
              "(a) the C fit differs from large_choice_ref on real-model logits")
    # round 2 matters: a uniform final group gives another answer
    moved = 0.0
    for r in results[:12]:
        for qid, (groups, final) in large_questions(r).items():
            members = [g["members"] for g in groups] + [final["finalists"]]
            targets = [np.array(g["p_avg"]) for g in groups]
            uni = np.full(len(final["finalists"]), 1.0 / len(final["finalists"]))
            j1, _ = lcr.fit(len(final["joint"]), members, targets + [np.array(final["p_avg"])])
            j2, _ = lcr.fit(len(final["joint"]), members, targets + [uni])
            moved = max(moved, float(np.max(np.abs(j1 - j2))))
    check(moved > 1e-3, f"(a) the round-2 group moves the joint distribution by only {moved:.3g}")
    # 03 §5.5: 11 options = 4 group prompts + 2 final prompts, one branch
    g, f = large_questions(results[0])["temat"]
    u = results[0]["response"]["usage"]
    check(len(g) == 4 and len(f["orders"]) == 2 and u["branches"] == 1 and
          u["input_tokens"] == sum(len(x["orders"][0]["input_ids"]) for x in g) + sum(len(o["input_ids"]) for o in f["orders"]),
          f"(a) request 0 usage {u}: expected 4 group prompts + 2 final prompts, one branch")
    # list criteria: 13 entries with 2 duplicates = 11 options (large); 12 with 2 = 10 (plain); 256 with 1 = 255
    check(len(large_questions(results[24])["d"][1]["joint"]) == 11, "(a) request 24: 11 options after collapsing")
    check(not large_questions(results[25]) and len(results[25]["items"]) == 1 and
          len(results[25]["items"][0]["orders"]) == 2, "(a) request 25: 10 options after collapsing take the plain path")
    check(len(large_questions(results[26])["d"][1]["joint"]) == 255, "(a) request 26: 255 options after collapsing")
    # the committed benchmark workload of issue 13 is what its generator writes
    rc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make-issue13-workload.py"), "--check",
                         "--tokenizer", os.path.join(d, "tokenizer.json")], capture_output=True, text=True).returncode
    check(rc == 0, "bench/workloads/issue13.jsonl differs from bench/make-issue13-workload.py")
    print(f"(a) {label}: {parsed} round-1 prompts parsed back, {plain_checked} groups against the plain path, "
          f"{staged} large choices staged as large_choice_ref.answer() "
          f"({time.time() - t0:.1f} s)")


PLAIN_CHECKED = {0, 3, 12, 14, 15, 27, 28, 30}


# ---------------------------------------------------------------- (b) prepare / decide

def shown(item, perm):
    """(key, option text) at each position of an order: what the prompt shows."""
    return [(item["keys"][j], item["options"][j]) for j in perm]


def compare_prepare(tag, ref, got):
    """Plan order: every reference item except the final groups (`basal
    prepare` has no weights, so no round 2). For a large choice's group the
    name and the representation are not specified (04 §2 P2): an item may
    carry the group's keys with perm 0..k-1 or the question's n keys with perm
    = the members; what each order shows, its prompt and its ids are."""
    want = [it for it in ref["items"] if "orders" in it and not it["item"]["question"].endswith("#final")]
    if not check(isinstance(got, list) and len(got) == len(want),
                 f"{tag}: prepare printed {len(got) if isinstance(got, list) else got!r} items, the reference plans {len(want)}"):
        return
    for g, r in zip(got, want):
        rq = r["item"]["question"]
        t = f"{tag} item {rq}"
        group = "members" in r
        fields = ("type", "lang") if group else ("type", "lang", "keys", "options")
        if not group:
            check(g["item"].get("question") == rq, f"{t}: prepare names it {g['item'].get('question')!r}")
        for k in fields:
            check(g["item"].get(k) == r["item"][k], f"{t}: item.{k} {g['item'].get(k)!r}, reference {r['item'][k]!r}")
        if not check(len(g["orders"]) == len(r["orders"]), f"{t}: {len(g['orders'])} orders, expected {len(r['orders'])}"):
            continue
        for o, (go, ro) in enumerate(zip(g["orders"], r["orders"])):
            if group:
                try:
                    seq = shown(g["item"], go["perm"])
                except (IndexError, KeyError, TypeError):
                    seq = None
                check(seq == shown(r["item"], ro["perm"]),
                      f"{t} order {o}: shows {seq}, reference {shown(r['item'], ro['perm'])}")
            else:
                check(go["perm"] == ro["perm"], f"{t} order {o}: perm {go['perm']}")
            check(go["prompt"] == ro["prompt"], f"{t} order {o}: prompt differs ({pe.first_diff(go['prompt'], ro['prompt'])})")
            check(go["input_ids"] == ro["input_ids"], f"{t} order {o}: input_ids differ ({pe.first_diff(go['input_ids'], ro['input_ids'])})")
            check(go["letter_ids"] == ro["letter_ids"], f"{t} order {o}: letter ids {go['letter_ids']}, oracle {ro['letter_ids']}")


def loose_answer(tag, exp, got):
    """A large choice the spec does not pin down to 1e-5: a choice answer over
    the same keys, a distribution, its choice its argmax, its own confidence."""
    g = dict(got)
    ok = check([k for k, _ in got] == ["type", "choice", "probabilities", "confidence"] and g.get("type") == "choice",
               f"{tag}: answer keys {[k for k, _ in got]}")
    gp = g.get("probabilities")
    if not check(isinstance(gp, pe.Obj) and [k for k, _ in gp] == list(exp["probabilities"]),
                 f"{tag}: probability keys differ from the criteria order"):
        return False
    p = [v for _, v in gp]
    ok &= check(all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in p) and abs(sum(p) - 1.0) <= 1e-9,
                f"{tag}: probabilities are not a distribution (sum {sum(p)!r})")
    ok &= check(g.get("choice") == [k for k, _ in gp][protocol_ref.argmax(p)], f"{tag}: choice {g.get('choice')!r} is not the argmax")
    ok &= check(isinstance(g.get("confidence"), float) and abs(g["confidence"] - protocol_ref.choice_confidence(p)) <= 1e-12,
                f"{tag}: confidence {g.get('confidence')!r} is not the choice formula of its own p")
    return ok


def c_final_tokens(d, body, qid, groups):
    """The tokens of a large choice's two final prompts as (lo, hi): the C
    forward's letter logits for the reference's round-1 prompts (`basal
    logits`; prepare proved the prompts the same) go through the reference
    fit; where it converges, its finalists' prompts, built and tokenized by
    the reference, give the exact count (lo = hi). Where it does not, the
    finalists are not determined and the count is bounded by the final
    prompts of the 10 options with the fewest and with the most tokens (an
    option's line adds the same tokens wherever it stands: LF is a byte token)."""
    ids = max((g["orders"][0]["letter_ids"] for g in groups), key=len)
    inp = json.dumps({"prompts": [g["orders"][0]["input_ids"] for g in groups], "ids": ids})
    rc, out, err = pe.run([BASAL, "logits", "--model", d, "--input", "-"], inp, timeout=300)
    if not check(rc == 0, f"basal logits exit {rc}: {err.strip()[-300:]}"):
        return None
    lg = json.loads(out)["logits"]
    targets = [lcr.softmax(np.asarray(x[:len(g["members"])], dtype=np.float32).astype(np.float64))
               for x, g in zip(lg, groups)]
    n = sum(len(g["members"]) for g in groups) // 2
    first, conv = lcr.fit(n, [g["members"] for g in groups], targets)
    md = protocol_ref.ModelDir(d)
    it = [q for q in protocol_ref.plan_request(md, body) if q["question"] == qid][0]

    def final_prompts(fin):
        return [protocol_ref.render_prompt(md.bos, it["lang"], it["state_text"], it["qtext"],
                                           [it["options"][i] for i in fin], perm)
                for perm in protocol_ref.order_perms(len(fin))]
    if conv:
        t = sum(len(x) for x in protocol_ref.oracle_tokenize([(md.tokenizer, "first", final_prompts(lcr.finalists(first)))])[0])
        return t, t
    one = [protocol_ref.render_prompt(md.bos, it["lang"], it["state_text"], it["qtext"], [o], [0]) for o in it["options"]]
    size = [len(x) for x in protocol_ref.oracle_tokenize([(md.tokenizer, "first", one)])[0]]
    by_size = sorted(range(n), key=lambda i: (size[i], i))
    lo, hi = [sorted(by_size[:10]), sorted(by_size[-10:])]
    ids = protocol_ref.oracle_tokenize([(md.tokenizer, "first", final_prompts(lo) + final_prompts(hi))])[0]
    return sum(len(x) for x in ids[:2]), sum(len(x) for x in ids[2:])


def expected_usage(d, body, ref, loose):
    """The reference usage and the (lo, hi) range of input_tokens: where a
    question is compared structurally, its final prompts are those of the
    finalists the C forward leads to (c_final_tokens)."""
    u = dict(ref["response"]["usage"])
    lo = hi = 0
    for qid, (groups, final) in large_questions(ref).items():
        if qid in loose:
            t = c_final_tokens(d, body, qid, groups)
            if t is not None:
                own = sum(len(o["input_ids"]) for o in final["orders"])
                lo, hi = lo + t[0] - own, hi + t[1] - own
    return u, (u["input_tokens"] + lo, u["input_tokens"] + hi)


def compare_response(tag, exp, out, body, loose, st, tokens=None):
    """pe.compare_response with the structural comparison for the questions in
    `loose`; tokens: the (lo, hi) range of input_tokens (default: exactly the reference's)."""
    try:
        got_f = json.loads(out, object_pairs_hook=pe.Obj)
        got_l = pe.literal(out)
    except ValueError:
        return check(False, f"{tag}: not JSON: {out[:300]}")
    top = [k for k, _ in got_f]
    ok = check(top == ["model", "answers", "usage"], f"{tag}: top-level keys {top}: {out.strip()[:400]}")
    g, gl = dict(got_f), dict(got_l)
    ok &= check(g.get("model") == exp["model"], f"{tag}: model {g.get('model')!r}")
    ga, gla = g.get("answers"), gl.get("answers")
    if not check(isinstance(ga, pe.Obj) and [k for k, _ in ga] == list(exp["answers"]),
                 f"{tag}: answer ids {[k for k, _ in ga] if isinstance(ga, pe.Obj) else ga}, expected {list(exp['answers'])}"):
        return False
    legends = pe.request_legends(body)
    for (qid, a), (_, al) in zip(ga, gla):
        if qid in loose:
            ok &= loose_answer(f"{tag} {qid}", exp["answers"][qid], a)
        else:
            ok &= pe.compare_answer(f"{tag} {qid}", exp["answers"][qid], a, al, legends.get(qid), st)
    gu = g.get("usage")
    uk = [k for k, _ in gu] if isinstance(gu, pe.Obj) else gu
    ok &= check(uk == list(exp["usage"]), f"{tag}: usage keys {uk}")
    if isinstance(gu, pe.Obj):
        for k, v in gu:
            if k == "input_tokens" and tokens and tokens[0] != tokens[1]:
                ok &= check(type(v) is int and tokens[0] <= v <= tokens[1],
                            f"{tag}: usage.input_tokens = {v!r}, outside {tokens} (finalists not determined)")
            else:
                want = tokens[0] if k == "input_tokens" and tokens else exp["usage"].get(k)
                ok &= check(v == want and type(v) is int, f"{tag}: usage.{k} = {v!r}, reference {want!r}")
    return ok


def variant(name, calibration):
    return pe.variant(name, calibration)


def describe(body):
    """The question kinds of a request, for its report line."""
    out = []
    for qid, q in json.loads(body)["questions"].items():
        c = q.get("criteria")
        n = len(dict.fromkeys(c)) if isinstance(c, list) else len(c) if isinstance(c, dict) else 2
        out.append(f"{q['type']}{n}" if q["type"] in ("choice", "multi", "score") else q["type"])
    return " ".join(out)


def part_b(d, lines, results, loose_by_req):
    t0 = time.time()
    label = os.path.basename(d)
    name = model_name(d)
    st = pe.Stats()
    bad = 0
    outs, usages = {}, {}
    for i, r in zip(lines, results):
        body = REQUESTS[i].replace("@MODEL@", name)
        tag = f"{label} request {i}"
        before = pe.nfail
        loose = {q: why for q, why in loose_by_req[i].items() if why}
        rc, out, err = pe.run([BASAL, "prepare", "--model", d, "--request", "-"], body)
        if check(rc == 0, f"{tag}: prepare exit {rc}: {(out.strip() or err.strip())[:300]}"):
            compare_prepare(tag, r, json.loads(out))
        prep_fail = pe.nfail - before
        rc, out, err = pe.run([BASAL, "decide", "--model", d, "--request", "-"], body, timeout=300)
        dec_ok = False
        if check(rc == 0, f"{tag}: decide exit {rc}: {(out.strip() or err.strip())[:300]}"):
            outs[i] = out
            usages[i] = expected_usage(d, body, r, loose)[1] if loose else None
            dec_ok = compare_response(tag, r["response"], out, body, loose, st, usages[i])
        status = "OK" if pe.nfail == before else "FAIL"
        bad += status == "FAIL"
        notes = []
        if prep_fail:
            notes.append("prepare differs or failed")
        if status == "FAIL" and not dec_ok:
            notes.append("decide differs or failed")
        if loose:
            notes.append("structural only: " + "; ".join(f"{q}: {w}" for q, w in loose.items()))
        print(f"  {status} {tag} [{describe(body)}]" + (f" ({', '.join(notes)})" if notes else ""))
    print(f"(b) {label}: {len(lines)} requests, {bad} failing; compared exactly: {st.answers} answers, max |Δp| {st.dp:.3g}, "
          f"max |Δconfidence| {st.dc:.3g} ({time.time() - t0:.1f} s)")
    return outs, usages


# ---------------------------------------------------------------- (c) the server under concurrency

def part_c(d, results, loose_by_req, decided, usages):
    import srvlib
    t0 = time.time()
    name = model_name(d)
    label = os.path.basename(d)
    try:
        srv = srvlib.Server(["--model", d])
    except RuntimeError as e:
        check(False, f"(c) {e}")
        return
    bodies = [REQUESTS[i].replace("@MODEL@", name) for i in range(len(REQUESTS))]
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda b: srv.post("/v1/systemone", b.encode("utf-8"), timeout=600), bodies))
    finally:
        srv.stop()
    st = pe.Stats()
    bad = 0
    for i, ((status, _, raw), r) in enumerate(zip(got, results)):
        tag = f"{label} HTTP request {i}"
        before = pe.nfail
        text = raw.decode("utf-8", "replace")
        if check(status == 200, f"{tag}: status {status}: {text[:300]}"):
            stripped = re.sub(r',"latency_ms":[0-9.eE+-]+}}$', "}}", text.strip())
            check(stripped != text.strip(), f"{tag}: no usage.latency_ms at the end")
            loose = {q: w for q, w in loose_by_req[i].items() if w}
            compare_response(tag, r["response"], stripped, bodies[i], loose, st, usages.get(i))
            if i in decided:
                check(json.loads(stripped) == json.loads(decided[i]),
                      f"{tag}: the answer under 8 concurrent clients differs from `basal decide` alone")
        if pe.nfail != before:
            bad += 1
            print(f"  FAIL {tag}")
    print(f"(c) {label}: {len(bodies)} requests from 8 concurrent clients, {bad} failing; max |Δp| {st.dp:.3g} "
          f"({time.time() - t0:.1f} s)")


# ---------------------------------------------------------------- the comparisons can fail

def selftest():
    """The structural answer check, the prepare comparison of group items and
    the token range reject what they must (checks counted silently, then one
    check of the outcome)."""
    saved, pe.quiet = (pe.npass, pe.nfail), True
    exp = {"type": "choice", "choice": "a", "probabilities": {"a": 0.5, "b": 0.3, "c": 0.2}, "confidence": 0.25}

    def loose(d):
        t = json.dumps(d)
        return loose_answer("selftest", exp, json.loads(t, object_pairs_hook=pe.Obj))
    good = {"type": "choice", "choice": "b", "probabilities": {"a": 0.3, "b": 0.5, "c": 0.2}, "confidence": 0.25}
    verdicts = [loose(good)]
    verdicts += [not loose(dict(good, choice="a")), not loose(dict(good, confidence=0.3)),
                 not loose(dict(good, probabilities={"a": 0.3, "b": 0.5, "c": 0.3})),
                 not loose(dict(good, probabilities={"b": 0.5, "a": 0.3, "c": 0.2}))]
    ref_item = {"item": {"question": "q#1", "type": "choice", "lang": "en", "keys": ["k1", "k3"], "options": ["o1", "o3"]},
                "members": [1, 3], "orders": [{"perm": [0, 1], "prompt": "P", "input_ids": [1, 2], "letter_ids": [7, 8]}]}
    ref = {"items": [ref_item]}
    full = {"question": "q", "type": "choice", "lang": "en", "keys": ["k0", "k1", "k2", "k3"], "options": ["o0", "o1", "o2", "o3"]}
    for perm, want in (([1, 3], True), ([1, 2], False), ([3, 1], False)):
        before = pe.nfail
        compare_prepare("selftest", ref, [{"item": full, "orders": [dict(ref_item["orders"][0], perm=perm)]}])
        verdicts.append((pe.nfail == before) == want)
    out = json.dumps({"model": "m", "answers": {"q": good}, "usage": {"input_tokens": 10, "output_tokens": 0,
                                                                       "questions": 1, "branches": 1}})
    rexp = {"model": "m", "answers": {"q": exp}, "usage": {"input_tokens": 9, "output_tokens": 0, "questions": 1, "branches": 1}}
    st = pe.Stats()
    verdicts.append(compare_response("selftest", rexp, out, '{"questions": {}}', {"q": "x"}, st, (8, 11)))
    verdicts.append(not compare_response("selftest", rexp, out, '{"questions": {}}', {"q": "x"}, st, (11, 12)))
    verdicts.append(not compare_response("selftest", rexp, out, '{"questions": {}}', {"q": "x"}, st))
    (pe.npass, pe.nfail), pe.quiet = saved, False
    check(all(verdicts), f"self-test of the comparisons: {verdicts}")


# ---------------------------------------------------------------- main

CACHE_DIR = os.path.join(ROOT, "build", "test-cache")
CACHE_SOURCES = ["tools/protocol_ref.py", "tools/large_choice_ref.py", "tools/torch_ref.py", "tools/oracle-tokenizer.js",
                 "tools/facts_ref.py", "tests/e2e/large_choice_e2e_check.py"]


def cached(what, d, extra, compute):
    """compute() (an oracle's output), kept under build/test-cache keyed by the
    SHA-256 of everything it depends on: the oracle sources, the model
    directory's files, numpy/torch versions and `extra` (the inputs). The
    release and the sanitizer runs of `make test` then compute the reference
    once. LARGE_CHOICE_E2E_NO_CACHE=1 recomputes."""
    import hashlib
    import torch
    h = hashlib.sha256()
    h.update(json.dumps([what, extra, np.__version__, torch.__version__], ensure_ascii=False).encode())
    for f in CACHE_SOURCES:
        with open(os.path.join(ROOT, f), "rb") as fh:
            h.update(f.encode() + b"\0" + fh.read())
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        if os.path.isfile(p) and not f.startswith("."):
            with open(p, "rb") as fh:
                h.update(f.encode() + b"\0" + hashlib.sha256(fh.read()).digest())
    path = os.path.join(CACHE_DIR, f"large-choice-{what}-{h.hexdigest()[:32]}.json")
    if os.environ.get("LARGE_CHOICE_E2E_NO_CACHE") != "1" and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    v = compute()
    os.makedirs(CACHE_DIR, exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(v, f, ensure_ascii=False)
    os.replace(tmp, path)
    return v


def reference(d, lines, seed):
    """The reference's detail results for REQUESTS[lines] on d and, per
    request, the classification of its large choices (exact or structural)."""
    name = model_name(d)
    bodies = [REQUESTS[i].replace("@MODEL@", name) for i in lines]

    def compute():
        results = protocol_ref.run(d, bodies, with_detail=True, with_forward=True)
        temp = temperature(d)
        return {"results": results, "loose": [classify(r, temp, seed + i) for i, r in zip(lines, results)]}
    v = cached("ref", d, [bodies, seed], compute)
    return v["results"], {i: c for i, c in zip(lines, v["loose"])}


def temperature(d):
    return protocol_ref.ModelDir(d).temps.get("choice", 1.0)


def main():
    models = [(os.path.join(FIXTURES, "tiny-bias"), None), (os.path.join(FIXTURES, "tiny-nobias"), [1, 6, 10, 12, 13, 18, 20, 23, 26, 29, 30, 33]),
              (os.path.join(FIXTURES, "tiny-hd128"), [0, 5, 11, 13, 14, 19, 22, 33]),
              (variant("tiny-bias-nocal", None), [1, 4, 8, 12, 16, 21, 27, 32]),
              (variant("tiny-bias-t133", '{"temperature_per_prim": {"choice": 1.33, "noul": 0.8}}'), [2, 3, 7, 9, 15, 17, 28, 31])]
    exact = {}
    by_model = {}
    selftest()
    only = os.environ.get("LARGE_CHOICE_E2E_ONLY")  # a comma list of fixture labels, to rerun a part
    for mi, (d, subset) in enumerate(models):
        label = os.path.basename(d)
        if only and label not in only.split(","):
            continue
        lines = list(range(len(REQUESTS))) if subset is None else subset
        t0 = time.time()
        try:
            results, loose_by_req = reference(d, lines, 1000 * mi)
        except protocol_ref.RefError as e:
            check(False, f"{label}: protocol_ref: {e}")
            continue
        temp = temperature(d)
        nq = sum(len(v) for v in loose_by_req.values())
        nexact = sum(1 for v in loose_by_req.values() for w in v.values() if not w)
        exact[label] = (nexact, nq)
        print(f"{label}: reference for {len(lines)} requests, {nq} large choices, {nexact} determined to 1e-5 "
              f"({time.time() - t0:.1f} s)")
        check(nq == 0 or nexact >= MIN_EXACT * nq, f"{label}: only {nexact} of {nq} large choices are determined to 1e-5")
        by_model[label] = dict(zip(lines, results))
        if subset is None and label == "tiny-bias":
            part_a(d, results, temp)
        decided, usages = part_b(d, lines, results, loose_by_req)
        if label == "tiny-bias":
            part_c(d, results, loose_by_req, decided, usages)
    # the calibration variant moves the answers (the choice temperature is applied to the joint p)
    a, b = by_model.get("tiny-bias"), by_model.get("tiny-bias-t133")
    if a and b:
        pa = a[3]["response"]["answers"]["topic"]["probabilities"]
        pb = b[3]["response"]["answers"]["topic"]["probabilities"]
        check(max(abs(pa[k] - pb[k]) for k in pa) > 1e-3, "choice temperature 0.9 vs 1.33 gives the same answer")
    print("exactly compared large choices per model: " + ", ".join(f"{k} {x}/{n}" for k, (x, n) in exact.items()))
    print(f"{pe.npass} passed, {pe.nfail} failed")
    return 0 if pe.nfail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
