"""`basal eval` (issue 33 item 3), checked from outside.

- Items in both forms (upstream basal-run lines, with and without gold, full
  requests; ours: choice, noul, score by key and index, multi as a list and an
  object, act on a yes/no and a choice readout, unscored questions) on a
  synthetic model with sharp answers, evaluated against a `basal serve`
  serving it twice (orders 1 and 2, two names: --url --served a,b) and
  in-process (--model --orders 1,2): the two reports are equal (metrics,
  bins, matrices, errors, decisions), timings and names aside.
- Every number against tools/eval_ref.py, which builds the requests itself,
  asks the server itself and computes the metrics from their definitions in
  plain Python (within 1e-12), and against scikit-learn 1.2 (accuracy,
  macro-F1, log-loss, confusion matrices, the binary Brier score x 2) and
  numpy (multi-class Brier, ECE) within 1e-9.
- The JSON report against docs/eval-report.schema.json (jsonschema).
- The HTML report in headless chromium (tools/check-eval-html.mjs): no console
  message, no page error, no request, no script; two charts per setting, 15
  bars each, one point per non-empty bin at the JSON's mean confidence and
  accuracy, inside the chart; every number of the metric table and every
  confusion cell equal to the JSON.
- --summary json: basal-run's summary line per setting (its keys, its rounding).
- --dtype f32,bf16: one session each, labelled, metrics equal to the
  reference computed from the --decisions lines.
- A server at --max-inflight 1 answering 529: the items are retried (Retry-After)
  until answered, and the report equals the in-process one.
- An item the model refuses (evidence without a head: 422 at the capability
  step): exit 1, listed with FILE:LINE and 422 in both modes, the others
  evaluated.
- Malformed items: exit 2, FILE:LINE and the reason on stderr, nothing on
  stdout, no report; usage errors exit 2; a server that is not there exit 1.
- Progress: every stderr line timestamped, progress lines at a short
  BASAL_PROGRESS_INTERVAL_MS; on a pty one bar redrawn in place."""
import json
import math
import os
import pty
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from srvlib import BASAL, SLOW, Checks, Server  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import eval_ref  # noqa: E402

C = Checks()
PY = "/usr/bin/python3"
tmp = tempfile.mkdtemp(prefix="eval-", dir=os.environ.get("TMPDIR"))
MODEL = os.path.join(tmp, "model")
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def run(args, env=None, timeout=300):
    e = dict(os.environ)
    e.pop("BASAL_URL", None)
    e.update(env or {})
    p = subprocess.run([BASAL] + args, capture_output=True, env=e, timeout=timeout * SLOW)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def path(name):
    return os.path.join(tmp, name)


def write_lines(name, recs):
    with open(path(name), "w", encoding="utf-8") as f:
        for r in recs:
            f.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n")
    return path(name)


# ---- items ----

rng = random.Random(33)
PL = ["Klient pisze, że od wczoraj nie może zalogować się do bankowości.", "Karta została zablokowana po trzech próbach.",
      "Paczka nie dotarła, a minęło już dziesięć dni.", "Proszę o zmianę adresu korespondencyjnego.",
      "Zapłaciłem dwa razy za to samo zamówienie.", "Terminal płatniczy w oddziale nie działa od rana.",
      "Wniosek kredytowy czeka na decyzję od miesiąca.", "Faktura zawiera błędną kwotę VAT."]
EN = ["The parcel never arrived and I want a refund.", "I was charged twice for one order.",
      "The app crashes when I upload a photo.", "Please change my delivery address.",
      "My card was blocked after a failed payment.", "The invoice shows the wrong tax amount."]


def state():
    return " ".join(rng.sample(PL if rng.random() < 0.6 else EN, 2))


def basal_run_items():
    out = []
    for i in range(18):
        kind = ["choice", "noul", "score"][i % 3]
        if kind == "noul":
            opts = ["Tak", "Nie"]
        elif kind == "score":
            opts = ["niska", "średnia", "wysoka", "krytyczna"][: rng.choice([3, 4])]
        else:
            opts = rng.sample(["Reklamacje kart", "Bankowość elektroniczna", "Kredyty", "Wysyłka", "Inne"], rng.choice([2, 3, 4]))
        rec = {"id": f"r{i}", "state": state(), "question": rng.choice(["Do którego działu?", "Czy to pilne?", "Jak pilne?",
                                                                       "Which team?"]), "options": opts}
        if kind != "choice" or i % 2:
            rec["type"] = kind
        rec["gold"] = rng.randrange(len(opts))
        out.append(rec)
    out.append({"state": "Bez etykiety.", "question": "Czy to pilne?", "options": ["a", "b"]})  # no gold: counted
    out.append({"id": "full", "state": {"ticket": "x"}, "questions": {"u": {"type": "noul", "instructions": "Pilne?"}}})
    return out


def ours_items():
    out = []
    for i in range(16):
        topic = {"type": "choice", "instructions": "Temat zgłoszenia?",
                 "criteria": {"billing": "Płatności", "shipping": "Wysyłka", "access": "Logowanie", "other": None}}
        urgent = {"type": "noul", "instructions": "Czy sprawa jest pilna?"}
        level = {"type": "score", "instructions": "Jak poważna jest sprawa?", "criteria": ["niska", "średnia", "wysoka"]}
        tags = {"type": "multi", "instructions": "Których tematów dotyczy?", "criteria": {"pay": "Płatność", "card": "Karta",
                                                                                        "addr": "Adres"}}
        act = {"type": "act", "instructions": "Czy zwrócić pieniądze?",
               "costs": {"approve": {"true": 0, "false": 100}, "reject": {"true": 50, "false": 0}}}
        act_choice = {"type": "act", "instructions": "Dokąd przekazać?", "criteria": {"a": "Dział A", "b": "Dział B"},
                      "costs": {"wrong": 10, "defer": 1}}
        request = {"state": state(), "questions": {"topic": topic, "urgent": urgent, "level": level, "tags": tags,
                                                   "act": act, "route": act_choice, "context": {"type": "noul",
                                                                                                "instructions": "Kontekst?"}}}
        if i % 4 == 1:  # answered without the model: confidence exactly 1.0, the top edge of the last bin
            request["questions"]["only"] = {"type": "choice", "instructions": "Jedyna opcja?", "criteria": {"sole": None}}
        if i % 3 == 0:
            request["model"] = "some-other-name"  # replaced by the evaluated model
        expected = {"topic": rng.choice(["billing", "shipping", "access", "other"]), "urgent": rng.random() < 0.5,
                    "level": rng.choice([0, 1, 2, "0", "1", "2"]),
                    "tags": rng.sample(["pay", "card", "addr"], rng.randrange(3)) if i % 2 else
                    {"pay": rng.random() < 0.5, "addr": True},
                    "act": rng.choice([True, False, "true", "false"]), "route": rng.choice(["a", "b"])}
        if i % 4 == 3:
            del expected["level"]  # asked, not scored
        if i % 4 == 1:
            expected["only"] = "sole"
        out.append({"id": i, "request": request, "expected": expected})
    return out


RUN = write_lines("run.jsonl", basal_run_items())
with open(path("ours.jsonl"), "w", encoding="utf-8") as f:  # blank lines and CRLF are fine
    for i, r in enumerate(ours_items()):
        f.write(json.dumps(r, ensure_ascii=False) + ("\r\n" if i % 5 == 0 else "\n") + ("\n" if i == 3 else ""))
OURS = path("ours.jsonl")
ITEMS = [RUN, OURS]


def close(a, b, tol):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def same_metrics(got, want, what, tol=1e-12):
    for k in ("n", "f1_classes"):
        if k in want:
            C.eq(got[k], want[k], f"{what}: {k}")
    for k in ("accuracy", "macro_f1", "log_loss", "brier", "ece", "mean_confidence"):
        if k in want:
            C.ok(close(got[k], want[k], tol), f"{what}: {k} {got[k]!r} vs the reference {want[k]!r}")
    if "bins" in want:
        C.eq([b["count"] for b in got["bins"]], [b["count"] for b in want["bins"]], f"{what}: bin counts")
        for i, (g, w) in enumerate(zip(got["bins"], want["bins"])):
            C.ok(close(g["mean_confidence"], w["mean_confidence"], tol) and close(g["accuracy"], w["accuracy"], tol),
                 f"{what}: bin {i} {g} vs {w}")
            C.ok(g["lo"] == i / 15 and g["hi"] == (i + 1) / 15, f"{what}: bin {i} edges")


def strip_run(report):
    """The report without what differs between two runs of the same items
    (times, labels, names, where the answers came from)."""
    r = json.loads(json.dumps(report))
    for k in ("created", "source"):
        r.pop(k)
    for s in r["settings"]:
        for k in ("label", "model", "dtype", "calibration", "seconds", "load_seconds", "items_per_s", "latency_p50_ms"):
            s.pop(k)
    return r


def part_url_model_oracle():
    cfg = path("serve.yml")
    with open(cfg, "w") as f:
        f.write(f"models:\n  - path: {MODEL}\n    name: evo1\n    orders: 1\n  - path: {MODEL}\n    name: evo2\n")
    srv = Server(["--config", cfg])
    try:
        url = f"http://127.0.0.1:{srv.port}"
        rc, out, err = run(["eval", "--url", url, "--served", "evo1,evo2", "--jobs", "8", "--out", path("url.json"),
                            "--html", path("url.html"), "--decisions", path("url.decisions.jsonl")] + ITEMS)
        C.eq(rc, 0, f"eval --url: exit status ({err[-800:]})")
        rc2, out2, err2 = run(["eval", "--model", MODEL, "--orders", "1,2", "--out", path("model.json"),
                               "--decisions", path("model.decisions.jsonl")] + ITEMS)
        C.eq(rc2, 0, f"eval --model: exit status ({err2[-800:]})")
        ref_p = subprocess.run([PY, os.path.join(ROOT, "tools", "eval_ref.py"), "--url", url, "--served", "evo1,evo2"]
                               + ITEMS, capture_output=True, timeout=300 * SLOW)
        C.eq(ref_p.returncode, 0, f"tools/eval_ref.py ran: {ref_p.stderr.decode()[-800:]}")
    finally:
        srv.stop()
    urlr, modr, ref = json.load(open(path("url.json"))), json.load(open(path("model.json"))), json.loads(ref_p.stdout)
    C.eq((urlr["items"], urlr["ungraded"], urlr["decisions"]), (ref["items"], ref["ungraded"], ref["decisions"]),
         "items, ungraded, decisions as the reference reads the files")
    C.eq([i["graded"] for i in urlr["inputs"]], [18, 16], "graded per input file")
    C.eq([(s["label"], s["model"], s["orders"], s["dtype"]) for s in urlr["settings"]],
         [("served evo1", "evo1", 1, None), ("served evo2", "evo2", 2, None)],
         "--url: one setting per served name, orders from x-basal-orders, dtype not named by a CPU server")
    C.eq([(s["label"], s["orders"], s["dtype"]) for s in modr["settings"]],
         [("orders=1 dtype=f32", 1, "f32"), ("orders=2 dtype=f32", 2, "f32")], "--model: one session per --orders value")
    C.eq(strip_run(urlr), strip_run(modr), "--url and --model give the same report for the same items")
    ud = [json.loads(l) for l in open(path("url.decisions.jsonl"))]
    md = [json.loads(l) for l in open(path("model.decisions.jsonl"))]
    C.eq([{k: v for k, v in d.items() if k != "setting"} for d in ud], [{k: v for k, v in d.items() if k != "setting"}
                                                                       for d in md], "--decisions: the same in both modes")
    C.eq(len(ud), 2 * urlr["decisions"], "--decisions: one line per decision and setting")
    for k, (got, want) in enumerate(zip(urlr["settings"], ref["settings"])):
        what = got["label"]
        C.eq(got["errors"], [], f"{what}: no errors")
        same_metrics(got["overall"], want["overall"], f"{what} overall")
        C.eq(sorted(got["by_type"]), sorted(want["by_type"]), f"{what}: the types")
        C.eq(list(got["by_type"]), [t for t in eval_ref.TYPES if t in got["by_type"]], f"{what}: type order")
        for t in want["by_type"]:
            same_metrics(got["by_type"][t], want["by_type"][t], f"{what} {t}")
        C.eq(len(got["questions"]), len(want["questions"]), f"{what}: questions")
        for gq, wq in zip(got["questions"], want["questions"]):
            qn = f"{what} question {wq['question']}/{wq['type']}/{wq['label']}"
            C.eq((gq["question"], gq["type"], gq["label"], gq["classes"]),
                 (wq["question"], wq["type"], wq["label"], wq["classes"]), f"{qn}: identity and classes")
            C.eq(gq["confusion"], wq["confusion"], f"{qn}: confusion matrix")
            same_metrics(gq["metrics"], wq["metrics"], qn)
        mine = [d for d in ud if d["setting"] == got["label"]]
        C.eq([d["probabilities"] and list(d["probabilities"]).index(d["predicted"]) for d in mine], want["predictions"],
             f"{what}: each decision's prediction as the reference predicts it from its own answers")
        sk = want["sklearn"]
        for scope, g, w in [("overall", got["overall"], sk["overall"])] + [(t, got["by_type"][t], sk["by_type"][t])
                                                                          for t in sk["by_type"]]:
            for m in ("accuracy", "macro_f1", "log_loss", "brier", "ece"):
                C.ok(close(g[m], w[m], 1e-9), f"{what} {scope}: {m} {g[m]!r} vs scikit-learn/numpy {w[m]!r}")
            if "brier_binary_x2" in w:
                C.ok(close(g["brier"], w["brier_binary_x2"], 1e-9),
                     f"{what} {scope}: Brier {g['brier']!r} = 2 x sklearn brier_score_loss {w['brier_binary_x2']!r}")
        C.eq([q["confusion"] for q in got["questions"]], sk["confusion"], f"{what}: confusion matrices = sklearn's")
    # a decision with p[expected] under 1e-15 would test the clip; the sharp model should give some near 0 or 1
    confs = [d["confidence"] for d in ud if d["confidence"] is not None]
    C.ok(sum(c > 0.99 for c in confs) >= 5 and sum(c < 0.7 for c in confs) >= 5,
         f"the items spread over the confidence range ({min(confs):.3f}..{max(confs):.3f})")
    C.ok(sum(c == 1.0 for c in confs) >= 8, "confidence exactly 1.0 (single-option questions) is in the data")
    C.ok(len({b for s in urlr["settings"] for b, x in enumerate(s["overall"]["bins"]) if x["count"]}) >= 5,
         "at least 5 non-empty confidence bins")
    return urlr


def part_schema(report):
    import jsonschema
    schema = json.load(open(os.path.join(ROOT, "docs", "eval-report.schema.json")))
    jsonschema.Draft202012Validator.check_schema(schema)
    for name in ("url.json", "model.json"):
        errs = list(jsonschema.Draft202012Validator(schema).iter_errors(json.load(open(path(name)))))
        C.eq([e.message[:200] for e in errs], [], f"{name} against docs/eval-report.schema.json")


def fmt4(v):
    return "-" if v is None else f"{v:.4f}"


def part_html(report):
    shot = path("eval.png")
    p = subprocess.run(["node", os.path.join(ROOT, "tools", "check-eval-html.mjs"), path("url.html"), shot],
                       capture_output=True, timeout=120 * SLOW)
    if not C.ok(p.returncode == 0, f"headless chromium ran: {p.stderr.decode()[-800:]}"):
        return
    h = json.loads(p.stdout)
    C.eq((h["console"], h["errors"], h["requests"], h["scripts"], h["external"]), ([], [], [], 0, []),
         "HTML: no console message, page error, request, script or external resource")
    C.eq(h["title"], "basal eval", "HTML: title")
    C.ok(os.path.getsize(shot) > 20000, "HTML: a screenshot of the page")
    for k, s in enumerate(report["settings"]):
        charts = {c["kind"]: c for c in h["charts"] if c["setting"] == k}
        C.eq(sorted(charts), ["histogram", "reliability"], f"setting {k}: a reliability diagram and a histogram")
        bins = s["overall"]["bins"]
        rel, hist = charts["reliability"], charts["histogram"]
        C.eq([b["bin"] for b in rel["bars"]], list(range(15)), f"setting {k}: 15 reliability bars")
        C.eq([b["count"] for b in rel["bars"]], [b["count"] for b in bins], f"setting {k}: reliability bar counts")
        C.eq([b["accuracy"] for b in rel["bars"]], [fmt4(b["accuracy"]) for b in bins], f"setting {k}: bar accuracies")
        nonempty = [(i, b) for i, b in enumerate(bins) if b["count"]]
        C.eq(len(rel["points"]), len(nonempty), f"setting {k}: one point per non-empty bin")
        C.eq([(p_["bin"], p_["count"], fmt4(p_["x"]), fmt4(p_["y"])) for p_ in rel["points"]],
             [(i, b["count"], fmt4(b["mean_confidence"]), fmt4(b["accuracy"])) for i, b in nonempty],
             f"setting {k}: points at (mean confidence, accuracy) of the JSON")
        C.ok(all(p_["visible"] for p_ in rel["points"]) and all(b["inside"] for b in rel["bars"] + hist["bars"]),
             f"setting {k}: every point and bar drawn inside its chart")
        xs = [p_["cx"] for p_ in rel["points"]]
        C.ok(xs == sorted(xs) and all(b > 0 for b in [rel["width"], rel["height"]]), f"setting {k}: points left to right")
        C.eq([b["count"] for b in hist["bars"]], [b["count"] for b in bins], f"setting {k}: histogram counts")
        hs = [b["height"] for b in hist["bars"]]
        top = max(range(15), key=lambda i: bins[i]["count"])
        C.ok(all((bins[i]["count"] == 0) == (hs[i] == 0) for i in range(15)) and hs[top] == max(hs),
             f"setting {k}: histogram bar heights follow the counts")
        rows = {r["scope"]: r for r in h["metrics"] if r["setting"] == k}
        C.eq(sorted(rows), sorted(["all"] + list(s["by_type"])), f"setting {k}: a table row per scope")
        for scope, m in [("all", s["overall"])] + list(s["by_type"].items()):
            cells = rows[scope]["cells"]
            want = {"n": str(m["n"]), **{x: fmt4(m[x]) for x in ("accuracy", "macro_f1", "log_loss", "brier", "ece",
                                                                   "mean_confidence")},
                    "agreement_with_first": fmt4(s["agreement_with_first"]) if scope == "all" else "-"}
            C.eq(cells, want, f"setting {k} {scope}: the numbers shown equal the JSON")
        tables = [t for t in h["confusion"] if t["setting"] == k]
        C.eq([(t["question"], t["label"] or None, t["classes"], t["cells"]) for t in tables],
             [(q["question"], q["label"], q["classes"], q["confusion"]) for q in s["questions"]],
             f"setting {k}: every confusion matrix as in the JSON")


def part_summary_json():
    rc, out, err = run(["eval", "--model", MODEL, "--orders", "2,1", "--summary", "json", "--out", path("s.json")] + ITEMS)
    C.eq(rc, 0, f"--summary json: exit ({err[-400:]})")
    lines = [json.loads(l) for l in out.splitlines()]
    rep = json.load(open(path("s.json")))
    C.eq([list(l) for l in lines], [["setting", "items", "errors", "seconds", "items_per_s", "server_latency_p50_ms",
                                     "accuracy"]] * 2, "--summary json: basal-run's keys after the setting")
    for l, s in zip(lines, rep["settings"]):
        C.eq((l["setting"], l["items"], l["errors"], l["accuracy"]),
             (s["label"], rep["items"], 0, round(s["overall"]["accuracy"], 4)), f"{s['label']}: summary line")
        C.eq(l["seconds"], round(s["seconds"], 2), f"{s['label']}: seconds rounded as basal-run")
    C.eq([s["orders"] for s in rep["settings"]], [2, 1], "settings in the order --orders lists them")
    C.ok(out.count("\n") == 2, "--summary json: one line per setting and nothing else on stdout")


def part_dtype():
    rc, out, err = run(["eval", "--model", MODEL, "--dtype", "f32,bf16", "--orders", "1", "--out", path("dt.json"),
                        "--decisions", path("dt.jsonl"), OURS])
    C.eq(rc, 0, f"--dtype f32,bf16: exit ({err[-400:]})")
    rep = json.load(open(path("dt.json")))
    C.eq([(s["label"], s["dtype"]) for s in rep["settings"]], [("orders=1 dtype=f32", "f32"), ("orders=1 dtype=bf16", "bf16")],
         "--dtype: one session per compute mode, labelled")
    dec = [json.loads(l) for l in open(path("dt.jsonl"))]
    for s in rep["settings"]:
        ds = [(d["item"], d["question"], d["type"], d["label"], d["classes"] and list(d["probabilities"]),
               list(d["probabilities"]).index(d["expected"]), list(d["probabilities"].values()))
              for d in dec if d["setting"] == s["label"]]
        want = eval_ref.reference(ds)
        same_metrics(s["overall"], want["overall"], f"{s['label']} overall from its decisions")
        for t in want["by_type"]:
            same_metrics(s["by_type"][t], want["by_type"][t], f"{s['label']} {t} from its decisions")
    C.ok(0.0 <= rep["settings"][1]["agreement_with_first"] <= 1.0, "--dtype: agreement of bf16 with f32")


def part_refused():
    bad = {"id": "ev", "request": {"state": "Karta zablokowana.", "questions": {
        "q": {"type": "noul", "instructions": "Pilne?", "evidence": True}}}, "expected": {"q": True}}
    items = write_lines("refused.jsonl", [ours_items()[0], bad, ours_items()[1]])
    srv = Server(["--model", MODEL])
    try:
        rc1, _, err1 = run(["eval", "--url", f"http://127.0.0.1:{srv.port}", "--out", path("ru.json"), items])
    finally:
        srv.stop()
    rc2, out2, err2 = run(["eval", "--model", MODEL, "--out", path("rm.json"), "--html", path("rm.html"), items])
    for rc, name, err in ((rc1, "ru.json", err1), (rc2, "rm.json", err2)):
        C.eq(rc, 1, f"a refused item: exit 1 ({name}; {err[-300:]})")
        rep = json.load(open(path(name)))
        errs = rep["settings"][0]["errors"]
        C.eq([(e["item"], e["id"], e["status"]) for e in errs], [(f"{items}:2", "ev", 422)],
             f"{name}: the refused item with FILE:LINE, its id and 422")
        C.ok("evidence" in errs[0]["message"], f"{name}: the endpoint's reason: {errs[0]['message']!r}")
        C.eq(rep["settings"][0]["answered_items"], 2, f"{name}: the other items answered")
        C.eq(rep["settings"][0]["overall"]["n"], rep["decisions"] - 1, f"{name}: the metrics leave out its decision")
    C.ok(f"{items}:2" in out2 and "evidence" in out2, "the text summary names the refused item")
    C.ok(os.path.exists(path("rm.html")), "the reports are written when an item is refused")


MALFORMED = [
    ("not json", "invalid JSON"),
    ('[1, 2]', "an item must be a JSON object"),
    ('{"foo": 1}', "not an eval item"),
    ('{"state": "s", "question": "q?", "options": ["a", "b"], "gold": 2}', "\"gold\" must be the index"),
    ('{"state": "s", "question": "q?", "options": ["a", "b"], "gold": "1"}', "\"gold\" must be the index"),
    ('{"state": "s", "question": "q?", "options": ["a", "b"], "gold": 1.0}', "\"gold\" must be the index"),
    ('{"state": "s", "question": "q?", "options": "a", "gold": 0}', "\"options\" must be a list"),
    ('{"question": "q?", "options": ["a", "b"], "gold": 0}', "needs \"state\""),
    ('{"state": "s", "options": ["a", "b"], "gold": 0}', "needs \"question\""),
    ('{"state": "s", "question": "q?", "options": ["a", "b", "c"], "type": "noul", "gold": 0}', "exactly two options"),
    ('{"state": "s", "question": "q?", "options": ["a", "b"], "type": "multi", "gold": 0}', "must be choice, noul or score"),
    ('{"state": "s", "question": "q?", "options": [], "gold": 0}', "the request is invalid"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "noul", "instructions": "x"}}}}', "needs \"expected\""),
    ('{"request": "x", "expected": {"q": true}}', "must be a /v1/systemone request object"),
    ('{"request": {"questions": {"q": {"type": "noul", "instructions": "x"}}}, "expected": {"q": true}}',
     "Field required at body.state"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "noul", "instructions": "x"}}}, "expected": {}}',
     "\"expected\" must be an object"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "noul", "instructions": "x"}}}, "expected": {"z": true}}',
     "expected[\"z\"]: no such question (questions: \"q\")"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "noul", "instructions": "x"}}}, "expected": {"q": "yes"}}',
     "expected[\"q\"]: \"yes\" is not an answer of this noul question (true or false)"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"a": null, '
     '"b": null}}}}, "expected": {"q": "c"}}', "\"c\" is not an answer of this choice question (\"a\", \"b\")"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"a": null, '
     '"b": null}}}}, "expected": {"q": 0}}', "0 is not an answer of this choice question"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "score", "instructions": "x", "criteria": ["l", "h"]}}}, '
     '"expected": {"q": 2}}', "or a level index 0..1"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "multi", "instructions": "x", "criteria": ["a", "b"]}}}, '
     '"expected": {"q": ["c"]}}', "\"c\" is not a label of this question (labels: \"a\", \"b\")"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "multi", "instructions": "x", "criteria": ["a", "b"]}}}, '
     '"expected": {"q": ["a", "a"]}}', "\"a\" is listed twice"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "multi", "instructions": "x", "criteria": ["a", "b"]}}}, '
     '"expected": {"q": "a"}}', "a multi question expects the array"),
    ('{"request": {"state": "s", "questions": {"q": {"type": "multi", "instructions": "x", "criteria": ["a", "b"]}}}, '
     '"expected": {"q": {"a": 1}}}', "each label expects true or false"),
]


def part_overload():
    """A full server answers 529 with Retry-After: 1; eval waits and retries."""
    items = write_lines("overload.jsonl", ours_items()[:6])
    srv = Server(["--model", MODEL, "--max-inflight", "1"])
    try:
        rc, out, err = run(["eval", "--url", f"http://127.0.0.1:{srv.port}", "--jobs", "6", "--retries", "10",
                            "--out", path("ov.json"), items])
        log = srv.log()
    finally:
        srv.stop()
    C.eq(rc, 0, f"529s retried: exit ({err[-300:]})")
    C.ok(len(re.findall(r"POST /v1/systemone 529 ", log)) >= 1, "the server did answer 529 (max_inflight 1, 6 jobs)")
    rc2, _, err2 = run(["eval", "--model", MODEL, "--out", path("ov-model.json"), items])
    C.eq(rc2, 0, f"the same items in-process ({err2[-300:]})")
    a, b = json.load(open(path("ov.json"))), json.load(open(path("ov-model.json")))
    C.eq(strip_run(a), strip_run(b), "after the retries the report is the in-process one")


def part_malformed():
    good = json.dumps(ours_items()[0], ensure_ascii=False)
    for k, (line, want) in enumerate(MALFORMED):
        f = write_lines(f"bad{k}.jsonl", [good, "", line, good])
        out_json = path(f"bad{k}.out.json")
        rc, out, err = run(["eval", "--model", MODEL, "--out", out_json, f])
        C.ok(rc == 2 and f"{f}:3: " in err and want in err and out == "" and not os.path.exists(out_json),
             f"malformed item {line[:60]!r}: exit {rc}, stderr {err.strip()[-300:]!r}, want FILE:3 and {want!r}")
        C.ok("loading" not in err, f"malformed item {line[:40]!r}: refused before any model is loaded")
    rc, out, err = run(["eval", "--model", MODEL, path("nope.jsonl")])
    C.ok(rc == 2 and "nope.jsonl" in err, f"a missing item file: exit {rc}, {err.strip()[-200:]!r}")
    only_ungraded = write_lines("ungraded.jsonl", [{"state": "s", "question": "q?", "options": ["a", "b"]}])
    rc, out, err = run(["eval", "--model", MODEL, only_ungraded])
    C.ok(rc == 2 and "nothing to evaluate" in err, f"no graded item: exit {rc}, {err.strip()[-200:]!r}")
    usage = [
        (["eval", RUN], "give --model REF (in-process) or --url URL"),
        (["eval", "--model", MODEL, "--url", "http://127.0.0.1:1", RUN], "not both"),
        (["eval", "--model", MODEL], "at least one item file"),
        (["eval", "--url", "http://127.0.0.1:1", "--orders", "1", RUN], "--served NAME,NAME"),
        (["eval", "--url", "http://127.0.0.1:1", "--dtype", "bf16", RUN], "a server uses its own"),
        (["eval", "--url", "http://127.0.0.1:1", "--no-calibration", RUN], "need --model"),
        (["eval", "--model", MODEL, "--served", "x", RUN], "need --url"),
        (["eval", "--model", MODEL, "--orders", "3", RUN], "--orders takes 1, 2 or 1,2"),
        (["eval", "--model", MODEL, "--orders", "1,1", RUN], "twice"),
        (["eval", "--model", MODEL, "--dtype", "f64", RUN], "--dtype takes a list"),
        (["eval", "--model", MODEL, "--summary", "xml", RUN], "--summary"),
        (["eval", "--model", MODEL, "--out", path("no/such/dir/r.json"), RUN], "cannot write"),
        (["eval", "--model", MODEL, "--jobs", "4", RUN], "need --url"),
    ]
    for args, want in usage:
        rc, out, err = run(args)
        C.ok(rc == 2 and want in err and out == "", f"usage {' '.join(args[1:])[-80:]!r}: exit {rc}, {err.strip()[-300:]!r}")
    rc, out, err = run(["eval", "--url", "http://127.0.0.1:1", RUN])
    C.ok(rc == 1 and "is the server running" in err, f"no server: exit {rc}, {err.strip()[-300:]!r}")
    rc, out, err = run(["eval", "--url", "ftp://x", RUN])
    C.ok(rc == 2 and "http or https" in err, f"a bad URL: exit {rc}")


def part_progress():
    many = write_lines("many.jsonl", ours_items() * 4)
    rc, out, err = run(["eval", "--model", MODEL, many], env={"BASAL_PROGRESS_INTERVAL_MS": "10"})
    lines = err.splitlines()
    C.ok(rc == 0 and lines and all(TS.match(l) for l in lines), f"stderr: every line timestamped: {lines[:3]!r}")
    prog = [l for l in lines if re.search(r"basal: eval orders=2 dtype=f32: \d+% \(\d+ of 64 items\)", l)]
    C.ok(len(prog) >= 2, f"timestamped progress lines of the items: {len(prog)} ({lines[-3:]!r})")
    # a terminal: one bar redrawn in place (every 100 ms: a longer run), ended with a newline
    longer = write_lines("longer.jsonl", ours_items() * 30)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(BASAL, [BASAL, "eval", "--model", MODEL, "--out", path("pty.json"), longer])
    text, deadline = b"", time.time() + 120 * SLOW
    while time.time() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        text += chunk
    _, status = os.waitpid(pid, 0)
    t = text.decode(errors="replace")
    C.ok(os.waitstatus_to_exitcode(status) == 0 and "\r\x1b[K" in t and "eval orders=2 dtype=f32" in t and
         "] done: 480 items" in t, f"on a terminal: a bar redrawn in place ({t[-300:]!r})")


def main():
    rc, out, err = run(["make-model", MODEL, "--seed", "5", "--head-std", "2.5", "--name", "evalm"])
    if not C.ok(rc == 0, f"make-model: {err[-300:]}"):
        return C.report()
    report = part_url_model_oracle()
    part_schema(report)
    part_html(report)
    part_summary_json()
    part_dtype()
    part_refused()
    part_overload()
    part_malformed()
    part_progress()
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
