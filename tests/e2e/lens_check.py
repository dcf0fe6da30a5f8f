"""The logit lens of `basal lens` (issue 33) against independent oracles, on
one fixture model, for every question type (choice, noul, score, multi, act,
and the round-1 groups and finalists of a choice with 12 options), option
orders 1 and 2, dtypes f32 and bf16:

* last layer, bit for bit: each readout's order-averaged distribution after
  the last layer (and, with one order, the order's own distribution) equals
  the probabilities `basal decide --no-calibration` serves for the same
  request (float equality after Python's json parse), and the "calibrated"
  field equals what `basal decide` serves with the model's calibration; the
  document's "answer" is decide's answer byte for byte as JSON.
* every layer, f32: the letter logits after each layer against the PyTorch
  f32 reference (tools/torch_ref.py --layers: the residual stream after each
  decoder layer at the prompt's last token, final RMSNorm, lm_head rows) on
  the prompts, token ids and letter ids of the independent protocol
  reference (tools/protocol_ref.py --detail --no-forward: prompts from the
  spec text, ids from the npm tokenizer): max |d logit| <= 1e-4, the bound
  tests/e2e/t_forward_torch.sh holds the final logits to (both sides are f32
  evaluations of one function that differ only in the order of their sums;
  an intermediate layer is a prefix of the same computation, so its error is
  no larger — the measured worst case is printed), and every probability
  within 1e-4 of softmax(torch) (softmax is 1/2-Lipschitz per logit in max
  norm). bf16 against the same f32 reference: |d p| <= 0.05 (bf16 keeps 8
  bits: the rounding of activations and weights moves these random-weight
  logits by up to a few tenths; measured and printed).
* the prompt view: the parts' texts joined are the reference prompt; the
  state part is the state, the question part the question text, the options
  part the lettered option block of the reference's order; each part's token
  count is the number of the npm tokenizer's tokens that start in it
  (offsets rebuilt here from the token pieces of tokenizer.json); the counts
  add up to the prompt's length; letters and letter ids as the reference's.

usage: lens_check.py BASAL MODEL_DIR TMPDIR [--dtypes f32,bf16] [--orders 1,2] [--no-torch]"""
import argparse
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"
C = Checks()
TOL_LOGIT_F32 = 1e-4
TOL_P_F32 = 1e-4
TOL_P_BF16 = 0.05

REQUESTS = [
    {"state": "Klient pisze: zapłaciłem dwa razy za to samo zamówienie (nr 1234), proszę o zwrot 149,99 zł.",
     "questions": {
         "topic": {"type": "choice", "instructions": "Czego dotyczy wiadomość?",
                   "criteria": {"billing": "płatności i faktury", "shipping": None, "other": "coś innego"}},
         "refund": {"type": "noul", "instructions": "Czy klient prosi o zwrot pieniędzy?"},
         "urgency": {"type": "score", "instructions": "Jak pilna jest sprawa?",
                     "criteria": ["może poczekać", "w tym tygodniu", "dziś", "natychmiast"]}}},
    {"state": "The parcel arrived damaged, the invoice is wrong and nobody answers the phone.",
     "questions": {
         "topics": {"type": "multi", "instructions": "Which topics does the ticket raise?",
                    "criteria": {"delivery": "delivery problems", "billing": "billing", "support": None}},
         "decision": {"type": "act", "instructions": "Should the refund be approved?",
                      "costs": {"approve": {"true": 0, "false": 1240}, "reject": {"true": 300, "false": 0},
                                "human": {"true": 15, "false": 15}}},
         "team": {"type": "choice", "instructions": "Which team?", "option_keys": "hide",
                  "criteria": {f"t{i}": f"team number {i}" for i in range(10)}}}},
    {"state": "Short note: please route this.",
     "questions": {"big": {"type": "choice", "instructions": "Which queue?",
                           "criteria": [f"queue {c}" for c in "abcdefghijkl"]}}},
]


def run(cmd, stdin=None):
    p = subprocess.run(cmd, capture_output=True, input=stdin, timeout=600)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def lens(basal, model, req_file, dtype, orders, calib):
    cmd = [basal, "lens", "--model", model, req_file, "--dtype", dtype, "--orders", str(orders)]
    if not calib:
        cmd.append("--no-calibration")
    rc, out, err = run(cmd)
    if not C(rc == 0, f"basal lens {dtype} orders {orders}: exit {rc}: {err[-500:]}"):
        return None
    return json.loads(out)


def decide(basal, model, req_file, dtype, orders, calib):
    cmd = [basal, "decide", "--model", model, "--request", req_file, "--dtype", dtype, "--orders", str(orders)]
    if not calib:
        cmd.append("--no-calibration")
    rc, out, err = run(cmd)
    if not C(rc == 0, f"basal decide {dtype} orders {orders}: exit {rc}: {err[-500:]}"):
        return None
    return json.loads(out)


def served_dist(ans, q, ro):
    """The served probabilities of readout ro of question q, by ro's keys."""
    a = ans["answers"][q["id"]]
    keys = ro["keys"]
    if a["type"] == "noul":
        return [a["noul"] if k == "true" else None for k in keys], ["true"]
    if a["type"] == "multi":
        return [a["probabilities"][ro["label"]] if k == "true" else None for k in keys], ["true"]
    return [a["probabilities"][k] for k in keys], keys


def check_exact(C, doc, ans_nc, ans_cal, doc_cal, what):
    C(json.dumps(doc_cal["answer"]) == json.dumps(ans_cal), f"{what}: the document's answer is decide's")
    C(json.dumps(doc["answer"]) == json.dumps(ans_nc), f"{what}: the document's answer is decide's (no calibration)")
    n = 0
    for q, qc in zip(doc["questions"], doc_cal["questions"]):
        for ro, roc in zip(q["readouts"], qc["readouts"]):
            if ro["kind"] in ("group", "final"):  # a large choice's answer is its Luce fit, not a readout
                continue
            want, keys = served_dist(ans_nc, q, ro)
            last = ro["mean"][-1]
            for i, k in enumerate(ro["keys"]):
                if k not in keys:
                    continue
                n += 1
                C(last[i] == want[i], f"{what}: {q['id']}/{ro.get('label', '')}/{k}: last layer {last[i]!r} "
                                      f"!= served {want[i]!r}")
                if len(ro["orders"]) == 1:  # one order: its own distribution is the answer
                    od = ro["orders"][0]
                    C(od["probabilities"][-1][od["options"].index(k)] == want[i], f"{what}: {q['id']}/{k}: order 0")
            wantc, _ = served_dist(ans_cal, qc, roc)
            for i, k in enumerate(roc["keys"]):
                if k in keys:
                    C(roc["calibrated"][i] == wantc[i], f"{what}: {q['id']}/{k}: calibrated {roc['calibrated'][i]!r} "
                                                        f"!= served {wantc[i]!r}")
    return n


# ---- the npm tokenizer's tokens, located in the prompt from their pieces ----

def pieces_of(model):
    with open(os.path.join(model, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    pieces = {i: s for s, i in tok["model"]["vocab"].items()}
    for a in tok.get("added_tokens", []):
        pieces[a["id"]] = a["content"]
    return pieces


def token_starts(pieces, ids, prompt):
    """Byte offset in prompt of each token: a piece is its UTF-8 text (U+2581 a
    space), a byte token <0xHH> one byte."""
    raw = prompt.encode("utf-8")
    at, starts = 0, []
    for t in ids:
        p = pieces[t]
        starts.append(at)
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            at += 1
        else:
            at += len(p.replace("\u2581", " ").encode("utf-8"))
    return starts, at == len(raw)


def options_block(options, perm):
    return "\n".join(f"{'ABCDEFGHIJ'[p]}. {options[i]}" for p, i in enumerate(perm))


def check_parts(od, ref_item, ref_order, pieces, state, question, what):
    parts = od["parts"]
    C("".join(p["text"] for p in parts) == ref_order["prompt"], f"{what}: the parts make the reference prompt")
    kinds = [p["part"] for p in parts if p["part"] != "template"]
    C(kinds == ["state", "question", "options"], f"{what}: parts in order: {kinds}")
    by = {p["part"]: p for p in parts if p["part"] != "template"}
    C(by.get("state", {}).get("text") == state, f"{what}: the state part")
    C(by.get("options", {}).get("text") == options_block(ref_item["item"]["options"], ref_order["perm"]),
      f"{what}: the options part")
    C(by.get("question", {}).get("text") == question, f"{what}: the question part")
    ids = ref_order["input_ids"]
    C(od["tokens"] == len(ids), f"{what}: tokens {od['tokens']} = {len(ids)}")
    C(sum(p["tokens"] for p in parts) == len(ids), f"{what}: the part counts add up")
    starts, whole = token_starts(pieces, ids, ref_order["prompt"])
    if C(whole, f"{what}: the token pieces rebuild the prompt"):
        at = 0
        for p in parts:
            end = at + len(p["text"].encode("utf-8"))
            want = sum(1 for s in starts if at <= s < end or (p is parts[-1] and s >= end))
            C(p["tokens"] == want, f"{what}: {p['part']} part: {p['tokens']} tokens, the oracle counts {want}")
            at = end
    C(od["letter_ids"] == ref_order["letter_ids"], f"{what}: letter ids")
    C(od["letters"] == list("ABCDEFGHIJ"[:len(od["letters"])]), f"{what}: letters")
    keys = ref_item["item"]["keys"]
    C(od["options"] == [keys[i] for i in ref_order["perm"]], f"{what}: option keys by letter")


def question_text(body, q, ro):
    """The question as the prompt shows it: the instructions, or for a multi
    label the reference's own branch question (spec 03 §1.3)."""
    spec = body["questions"][q["id"]]
    if spec["type"] != "multi":
        return spec["instructions"]
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import protocol_ref
    desc = spec["criteria"][ro["label"]]
    return protocol_ref.multi_question(q["lang"], spec["instructions"], ro["label"] if desc is None else desc)


def softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = sum(e)
    return [v / s for v in e]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("basal", help="the basal binary under test (no default)")
    ap.add_argument("model", help="a fixture model directory (no default)")
    ap.add_argument("tmp", help="a directory for the request files (no default)")
    ap.add_argument("--dtypes", default="f32,bf16", help="compute modes to check (default %(default)s)")
    ap.add_argument("--orders", default="1,2", help="option orders to check (default %(default)s)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch comparison (default off)")
    a = ap.parse_args()
    name = json.load(open(os.path.join(a.model, "basal.json")))["name"]
    pieces = pieces_of(a.model)
    torch_jobs = []  # (what, lens order, ref ids, letter ids, dtype)
    served = {}  # (request, orders) -> [(dtype, doc, answer, calibrated answer, calibrated doc)]
    exact = 0
    for ri, body in enumerate(REQUESTS):
        body = dict(body, model=name)
        req_file = os.path.join(a.tmp, f"lens-req{ri}.json")
        with open(req_file, "w") as f:
            json.dump(body, f, ensure_ascii=False)
        for orders in [int(o) for o in a.orders.split(",")]:
            rc, out, err = run([PY, os.path.join(ROOT, "tools", "protocol_ref.py"), "--model", a.model, "--request",
                                req_file, "--detail", "--no-forward", "--orders", str(orders)])
            if not C(rc == 0, f"protocol_ref: {err[-400:]}"):
                continue
            ref_items = json.loads(out)["items"]
            for dtype in a.dtypes.split(","):
                what = f"request {ri} {dtype} orders {orders}"
                doc = lens(a.basal, a.model, req_file, dtype, orders, False)
                doc_cal = lens(a.basal, a.model, req_file, dtype, orders, True)
                ans = decide(a.basal, a.model, req_file, dtype, orders, False)
                ans_cal = decide(a.basal, a.model, req_file, dtype, orders, True)
                if None in (doc, doc_cal, ans, ans_cal):
                    continue
                C(doc["dtype"] == dtype and doc["orders"] == orders, f"{what}: dtype and orders {doc['dtype']} "
                                                                      f"{doc['orders']}")
                exact += check_exact(C, doc, ans, ans_cal, doc_cal, what)
                served.setdefault((ri, orders), []).append((dtype, doc, ans, ans_cal, doc_cal))
                readouts = [(q, ro) for q in doc["questions"] for ro in q["readouts"] if ro["kind"] != "final"]
                # the reference's round-1 items: one per readout (no final without a forward)
                if not C(len(readouts) == len(ref_items), f"{what}: {len(readouts)} readouts, reference "
                                                          f"{len(ref_items)}"):
                    continue
                L = doc["layers"]
                for (q, ro), ref in zip(readouts, ref_items):
                    C(len(ro["orders"]) == len(ref["orders"]), f"{what}: {q['id']}: orders")
                    C(ro["keys"] == [ref["item"]["keys"][i] for i in ref["orders"][0]["perm"]]
                      if ro["kind"] == "group" else ro["keys"] == ref["item"]["keys"], f"{what}: {q['id']}: keys")
                    for od, rod in zip(ro["orders"], ref["orders"]):
                        w = f"{what}: {q['id']} {ro.get('label', ro.get('group', ''))} order {od['order']}"
                        C(len(od["logits"]) == L and len(od["probabilities"]) == L, f"{w}: one row per layer")
                        if dtype == a.dtypes.split(",")[0]:
                            check_parts(od, ref, rod, pieces, body["state"], question_text(body, q, ro), w)
                        torch_jobs.append((w, od, rod["input_ids"], rod["letter_ids"], dtype))
    C(exact > 0, "some distributions were compared bitwise")
    # the comparison can fail: one dtype's lens against the other's served answers differs somewhere
    for (ri, orders), runs in served.items():
        if len(runs) == 2:
            (_, d0, _, _, dc0), (_, _, a1, ac1, _) = runs
            probe = Checks(quiet=True)
            check_exact(probe, d0, a1, ac1, dc0, "probe")
            C(probe.failed > 0, f"request {ri} orders {orders}: the bitwise check tells the dtypes apart")
    if not a.no_torch and torch_jobs:
        # one torch run for every distinct prompt
        uniq = {}
        for _, _, ids, lids, _ in torch_jobs:
            uniq.setdefault((tuple(ids), tuple(lids)), len(uniq))
        keys = sorted(uniq, key=uniq.get)
        inp = json.dumps({"prompts": [list(k[0]) for k in keys], "ids": [list(k[1]) for k in keys]})
        rc, out, err = run([PY, os.path.join(ROOT, "tools", "torch_ref.py"), "--model", a.model, "--input", "-",
                            "--layers"], stdin=inp.encode())
        if C(rc == 0, f"torch_ref --layers: {err[-400:]}"):
            ref = json.loads(out)["layers"]
            worst = {"f32": [0.0, 0.0], "bf16": [0.0, 0.0]}
            for w, od, ids, lids, dtype in torch_jobs:
                tl = ref[uniq[(tuple(ids), tuple(lids))]]
                for l, (row, trow) in enumerate(zip(od["logits"], tl)):
                    dl = max(abs(x - y) for x, y in zip(row, trow))
                    dp = max(abs(x - y) for x, y in zip(od["probabilities"][l], softmax(trow)))
                    worst[dtype][0] = max(worst[dtype][0], dl)
                    worst[dtype][1] = max(worst[dtype][1], dp)
                    if dtype == "f32":
                        C(dl <= TOL_LOGIT_F32, f"{w}: layer {l + 1}: |d logit| {dl:.3g} vs torch")
                        C(dp <= TOL_P_F32, f"{w}: layer {l + 1}: |d p| {dp:.3g} vs torch")
                    else:
                        C(dp <= TOL_P_BF16, f"{w}: layer {l + 1}: bf16 |d p| {dp:.3g} vs torch f32")
            for dt, (dl, dp) in worst.items():
                if dt in a.dtypes.split(","):
                    print(f"{os.path.basename(a.model)} {dt}: every layer vs torch f32: max |d logit| {dl:.3g}, "
                          f"max |d p| {dp:.3g} ({len(torch_jobs)} orders)")
    print(f"{os.path.basename(a.model)}: {exact} served probabilities equal the last layer bit for bit")
    print(C.summary())
    return 0 if C.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
