#!/usr/bin/env python3
"""Independent reference for `basal eval`: reads the same item files, asks a
running `basal serve` for every graded item itself (http.client), and computes
the metrics from their definitions in plain Python, and again with
scikit-learn (and numpy) where it has them. Prints one JSON object on stdout.

usage: tools/eval_ref.py --url URL --served NAME[,NAME...] ITEMS.jsonl...

Definitions (the same words as `basal eval --help` and the report's
"definitions"): a decision's distribution is the answer's probabilities
(choice, score, act), (noul, 1 - noul) for noul, (P, 1 - P) per multi label;
prediction = first option of maximal probability; confidence = its
probability; accuracy; macro-F1 = mean of 2TP/(2TP+FP+FN) over the (question,
answer key) classes expected or predicted at least once; log-loss = mean of
-ln(max(p[expected], 1e-15)); Brier = mean of sum over options of
(p_i - [i = expected])^2; ECE = sum over 15 bins (b/15 < c <= (b+1)/15, bin 0
also takes 0) of n_b/n * |accuracy_b - mean confidence_b|. A question is a
(question id, type, multi label) across items.

options:
  --url URL        the server (default http://127.0.0.1:8000)
  --served NAMES   comma-separated served model names, one setting each (required)
  --no-sklearn     skip the scikit-learn computation
  -h, --help       this text
"""
import argparse
import http.client
import json
import math
import sys
import urllib.parse

BINS = 15
CLIP = 1e-15
TYPES = ["choice", "noul", "score", "multi", "act"]


def fail(msg):
    print(f"eval_ref: {msg}", file=sys.stderr)
    sys.exit(2)


# ---- items ----

def simple_request(rec):
    """A basal-run simple item as basal-run sends it (question "q")."""
    kind = rec.get("type", "choice")
    opts = rec["options"]
    if kind == "noul":
        criteria = {"true": opts[0], "false": opts[1]}
        question = {"type": "noul", "instructions": rec["question"], "criteria": criteria}
        keys = ["true", "false"]
    else:
        criteria = {}
        for i, o in enumerate(opts):
            criteria[str(i)] = o
        question = {"type": kind, "instructions": rec["question"], "criteria": criteria, "option_keys": "hide"}
        keys = list(criteria)
    return {"state": rec["state"], "questions": {"q": question}}, [("q", kind, None, keys, rec["gold"])]


def question_keys(q):
    """The answer keys of a question of our form, in canonical order."""
    kind = q.get("type")
    crit = q.get("criteria", q.get("levels"))
    if kind == "noul":
        return ["true", "false"]
    if kind == "score" and isinstance(crit, list):
        return [str(i) for i in range(len(crit))]
    if kind == "act" and (crit is None or (isinstance(crit, dict) and set(crit) <= {"true", "false"})):
        return ["true", "false"]
    if isinstance(crit, list):
        out = []
        for c in crit:
            if c not in out:
                out.append(c)
        return out
    return list(crit)


def ours_targets(rec):
    targets = []
    questions = rec["request"]["questions"]
    for qid, want in rec["expected"].items():
        q = questions[qid]
        kind = q["type"]
        if kind == "multi":
            crit = q["criteria"]
            labels = list(crit) if isinstance(crit, dict) else list(dict.fromkeys(crit))
            if isinstance(want, list):
                gold = {lab: (lab in want) for lab in labels}
            else:
                gold = dict(want)
            for lab in labels:
                if lab in gold:
                    targets.append((qid, kind, lab, ["true", "false"], 0 if gold[lab] else 1))
            continue
        keys = question_keys(q)
        if want is True or want is False:
            g = 0 if want else 1
        elif isinstance(want, int):
            g = want
        else:
            g = keys.index(want)
        targets.append((qid, kind, None, keys, g))
    return targets


def read_items(paths):
    items, ungraded = [], 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines, 1):
            if not line.strip(" \t\r"):
                continue
            rec = json.loads(line)
            where = f"{path}:{n}"
            if "request" in rec:
                body = {k: v for k, v in rec["request"].items() if k != "model"}
                items.append((where, body, ours_targets(rec)))
            elif "questions" in rec or "gold" not in rec:
                ungraded += 1
            else:
                body, targets = simple_request(rec)
                items.append((where, body, targets))
    return items, ungraded


# ---- answers ----

def post(url, body):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=120)
    c.request("POST", "/v1/systemone", json.dumps(body).encode(), {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def distribution(answer, kind, label, keys):
    if kind == "noul":
        p = answer["noul"]
        return [p, 1.0 - p]
    if kind == "multi":
        p = answer["probabilities"][label]
        return [p, 1.0 - p]
    return [answer["probabilities"][k] for k in keys]


def decide_all(url, model, items):
    """[(where, qid, kind, label, keys, gold, p or None)], errors"""
    decisions, errors = [], []
    for where, body, targets in items:
        req = dict(body)
        req = {"model": model, **req}
        status, data = post(url, req)
        answers = json.loads(data)["answers"] if status == 200 else None
        if answers is None:
            errors.append({"item": where, "status": status})
        for qid, kind, label, keys, gold in targets:
            p = distribution(answers[qid], kind, label, keys) if answers is not None else None
            decisions.append((where, qid, kind, label, keys, gold, p))
    return decisions, errors


# ---- metrics, from the definitions ----

def argmax_first(p):
    best = 0
    for i in range(1, len(p)):
        if p[i] > p[best]:
            best = i
    return best


def bin_of(c):
    for b in range(BINS):
        if c <= (b + 1) / BINS:
            return b
    return BINS - 1


def metrics(rows):
    """rows: [(group key, keys, gold, p)] answered decisions."""
    n = len(rows)
    if n == 0:
        return {"n": 0, "accuracy": None, "macro_f1": None, "f1_classes": 0, "log_loss": None, "brier": None,
                "ece": None, "mean_confidence": None,
                "bins": [{"count": 0, "mean_confidence": None, "accuracy": None} for _ in range(BINS)]}
    correct = conf = ll = brier = 0.0
    bn = [0] * BINS
    bc = [0.0] * BINS
    bk = [0.0] * BINS
    tp, fp, fn = {}, {}, {}
    for g, keys, gold, p in rows:
        k = argmax_first(p)
        ok = 1.0 if k == gold else 0.0
        correct += ok
        conf += p[k]
        ll += -math.log(max(p[gold], CLIP))
        brier += sum((p[i] - (1.0 if i == gold else 0.0)) ** 2 for i in range(len(p)))
        b = bin_of(p[k])
        bn[b] += 1
        bc[b] += p[k]
        bk[b] += ok
        cg, ck = (g, keys[gold]), (g, keys[k])
        for d in (tp, fp, fn):
            d.setdefault(cg, 0)
            d.setdefault(ck, 0)
        if cg == ck:
            tp[cg] += 1
        else:
            fp[ck] += 1
            fn[cg] += 1
    f1 = [2 * tp[c] / (2 * tp[c] + fp[c] + fn[c]) for c in tp]
    ece = 0.0
    bins = []
    for b in range(BINS):
        if bn[b]:
            acc_b, conf_b = bk[b] / bn[b], bc[b] / bn[b]
            ece += bn[b] / n * abs(acc_b - conf_b)
            bins.append({"count": bn[b], "mean_confidence": conf_b, "accuracy": acc_b})
        else:
            bins.append({"count": 0, "mean_confidence": None, "accuracy": None})
    return {"n": n, "accuracy": correct / n, "macro_f1": sum(f1) / len(f1), "f1_classes": len(f1),
            "log_loss": ll / n, "brier": brier / n, "ece": ece, "mean_confidence": conf / n, "bins": bins}


def group_key(d):
    return (d[1], d[2], d[3])  # question id, type, label


def reference(decisions):
    answered = [d for d in decisions if d[6] is not None]
    rows = lambda ds: [(group_key(d), d[4], d[5], d[6]) for d in ds]
    out = {"overall": metrics(rows(answered)), "by_type": {}, "questions": []}
    for t in TYPES:
        if any(d[2] == t for d in decisions):
            out["by_type"][t] = metrics(rows([d for d in answered if d[2] == t]))
    groups = []
    for d in decisions:
        if group_key(d) not in [g[0] for g in groups]:
            groups.append((group_key(d), []))
        classes = dict(groups)[group_key(d)]
        for k in d[4]:
            if k not in classes:
                classes.append(k)
    for key, classes in groups:
        ds = [d for d in answered if group_key(d) == key]
        cm = [[0] * len(classes) for _ in classes]
        for d in ds:
            cm[classes.index(d[4][d[5]])][classes.index(d[4][argmax_first(d[6])])] += 1
        out["questions"].append({"question": key[0], "type": key[1], "label": key[2], "classes": classes,
                                 "confusion": cm, "metrics": metrics(rows(ds))})
    return out


# ---- the same with scikit-learn ----

def sklearn_reference(decisions):
    import warnings
    import numpy as np
    from sklearn.metrics import accuracy_score, brier_score_loss, confusion_matrix, f1_score, log_loss
    warnings.filterwarnings("ignore")
    answered = [d for d in decisions if d[6] is not None]

    def label(d, i):
        return "\x1f".join([d[1], d[2], d[3] or "", d[4][i]])

    def block(ds):
        if not ds:
            return None
        y_true = [label(d, d[5]) for d in ds]
        y_pred = [label(d, int(np.argmax(np.array(d[6])))) for d in ds]
        labels = sorted({label(d, i) for d in ds for i in range(len(d[4]))})
        index = {l: j for j, l in enumerate(labels)}
        probs = np.zeros((len(ds), len(labels)))
        for r, d in enumerate(ds):
            for i, p in enumerate(d[6]):
                probs[r, index[label(d, i)]] = p
        out = {"accuracy": accuracy_score(y_true, y_pred), "macro_f1": f1_score(y_true, y_pred, average="macro"),
               "log_loss": log_loss(y_true, probs, labels=labels, eps=CLIP)}
        # multi-class Brier with numpy: one-hot against the padded probabilities
        onehot = np.zeros_like(probs)
        for r, y in enumerate(y_true):
            onehot[r, index[y]] = 1.0
        out["brier"] = float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))
        if all(len(d[4]) == 2 for d in ds):  # binary: scikit-learn's own Brier score, times two
            out["brier_binary_x2"] = 2 * brier_score_loss([1 if d[5] == 0 else 0 for d in ds], [d[6][0] for d in ds])
        conf = np.array([max(d[6]) for d in ds])
        ok = np.array([1.0 if y_true[r] == y_pred[r] else 0.0 for r in range(len(ds))])
        b = np.clip(np.ceil(conf * BINS).astype(int) - 1, 0, BINS - 1)
        ece = 0.0
        for k in range(BINS):
            m = b == k
            if m.any():
                ece += m.sum() / len(ds) * abs(ok[m].mean() - conf[m].mean())
        out["ece"] = float(ece)
        return out

    res = {"overall": block(answered), "by_type": {}, "confusion": []}
    for t in TYPES:
        ds = [d for d in answered if d[2] == t]
        if ds:
            res["by_type"][t] = block(ds)
    keys = []
    for d in decisions:
        if group_key(d) not in keys:
            keys.append(group_key(d))
    for key in keys:
        ds = [d for d in answered if group_key(d) == key]
        classes = []
        for d in decisions:
            if group_key(d) == key:
                classes += [k for k in d[4] if k not in classes]
        y_true = [d[4][d[5]] for d in ds]
        y_pred = [d[4][int(np.argmax(np.array(d[6])))] for d in ds]
        cm = confusion_matrix(y_true, y_pred, labels=classes).tolist() if ds else [[0] * len(classes) for _ in classes]
        res["confusion"].append(cm)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 usage=argparse.SUPPRESS, add_help=False)
    ap.add_argument("-h", "--help", action="store_true")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--served")
    ap.add_argument("--no-sklearn", action="store_true")
    ap.add_argument("items", nargs="*")
    a = ap.parse_args()
    if a.help:
        print(__doc__)
        return 0
    if not a.served or not a.items:
        fail("give --served NAMES and at least one item file (see --help)")
    items, ungraded = read_items(a.items)
    out = {"items": len(items), "ungraded": ungraded, "decisions": sum(len(t) for _, _, t in items), "settings": []}
    for name in a.served.split(","):
        decisions, errors = decide_all(a.url, name, items)
        s = {"model": name, "errors": errors, **reference(decisions)}
        if not a.no_sklearn:
            s["sklearn"] = sklearn_reference(decisions)
        s["predictions"] = [None if d[6] is None else argmax_first(d[6]) for d in decisions]
        out["settings"].append(s)
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
