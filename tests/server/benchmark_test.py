"""`basal benchmark` on the demo-sized fixture model, in seconds: the JSON
report validates against bench/benchmark-report.schema.json (python3-jsonschema)
and its statistics are recomputed here from its own per-request samples
(nearest rank, counts, rates); the HTML report is opened in headless Debian
chromium (tools/check-report-html.mjs, puppeteer-core): no console message,
no page error, no network request, every chart with one visible point per
phase and the values of the JSON, histogram bars equal to the samples binned
here, one table row per phase. Also: --url against a running server, the RAM
guard, and refusing to overwrite an output file."""
import atexit
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(__file__))
from srvlib import BASAL, SLOW, Checks, Server, fixture

import jsonschema

C = Checks()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TMP = tempfile.mkdtemp(prefix="basal-benchmark-")
atexit.register(shutil.rmtree, TMP, True)
SCHEMA = json.load(open(os.path.join(ROOT, "bench", "benchmark-report.schema.json")))
V = jsonschema.Draft202012Validator(SCHEMA)


def run(args, timeout=300):
    p = subprocess.run([BASAL, "benchmark"] + args, capture_output=True, timeout=timeout * SLOW, cwd=ROOT)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def nearest_rank(sorted_v, p):
    k = max(1, min(len(sorted_v), math.ceil(p / 100 * len(sorted_v))))
    return sorted_v[k - 1]


def close(a, b, tol):
    return a is not None and b is not None and abs(a - b) <= tol


def check_stats(st, values, what, tol=0.002):
    v = sorted(values)
    C.eq(st["n"], len(v), f"{what}: n")
    if not v:
        C.ok(all(st[k] is None for k in ("min", "p50", "p95", "p99", "max", "mean")), f"{what}: null when empty")
        return
    want = {"min": v[0], "max": v[-1], "p50": nearest_rank(v, 50), "p95": nearest_rank(v, 95),
            "p99": nearest_rank(v, 99), "mean": sum(v) / len(v)}
    for k, x in want.items():
        C.ok(close(st[k], x, tol), f"{what}: {k} {st[k]} vs {x} recomputed from the samples")


BATCH_BINS = [(1, 2, "1"), (2, 3, "2"), (3, 5, "3-4"), (5, 9, "5-8"), (9, 17, "9-16"), (17, 33, "17-32"),
              (33, 65, "33-64"), (65, math.inf, "65+")]
QUEUE_BINS = [(0, 1, "<1"), (1, 2, "1-2"), (2, 5, "2-5"), (5, 10, "5-10"), (10, 20, "10-20"), (20, 50, "20-50"),
              (50, 100, "50-100"), (100, 200, "100-200"), (200, 500, "200-500"), (500, math.inf, "500+")]


def binned(values, bins):
    return [(name, sum(1 for x in values if lo <= x < hi)) for lo, hi, name in bins]


def check_report(rep, what, started_here):
    errs = list(V.iter_errors(rep))
    C.ok(not errs, f"{what}: schema: {[e.message for e in errs[:3]]}")
    C.eq(rep["server"]["started_here"], started_here, f"{what}: started_here")
    for p in rep["phases"]:
        name = f"{what} {p['workload']} c={p['concurrency']}"
        s = p["samples"]
        C.eq(p["requests"], len(s), f"{name}: one sample per request")
        ok = [x for x in s if x[1] == 200]
        C.eq(p["completed"], len(ok), f"{name}: completed = 200 samples")
        C.eq(p["errors"], len(s) - len(ok), f"{name}: errors")
        C.eq(p["overloaded_529"], sum(1 for x in s if x[1] == 529), f"{name}: 529s")
        st = {}
        for x in s:
            st[str(x[1])] = st.get(str(x[1]), 0) + 1
        C.eq(p["statuses"], st, f"{name}: statuses")
        check_stats(p["latency_ms"], [x[0] for x in s], f"{name} latency")
        check_stats(p["successful_latency_ms"], [x[0] for x in ok], f"{name} successful latency")
        check_stats(p["queue_ms"], [x[2] for x in s if x[2] is not None], f"{name} queue")
        check_stats(p["batch_requests"], [x[3] for x in s if x[3] is not None], f"{name} batch", 1e-4)
        if not C.ok(p["completed"] > 0 and p["wall_s"] > 0, f"{name}: answered requests"):
            continue
        # both sides are written to 4 decimals: compare the wall time they imply
        C.ok(abs(p["completed"] / p["successful_requests_per_second"] - p["wall_s"]) <= 1e-4 + 1e-4 * p["wall_s"],
             f"{name}: req/s = completed / wall_s")
        C.ok(abs(p["questions_answered"] / p["successful_questions_per_second"] - p["wall_s"])
             <= 1e-4 + 1e-4 * p["wall_s"], f"{name}: decisions/s = questions / wall_s")
        C.ok(p["questions_answered"] >= p["completed"], f"{name}: at least one question per answer")
        C.eq(sum(c["requests"] for c in p["per_class"]), p["requests"], f"{name}: classes cover the samples")
        C.eq(p["answer_changes_vs_first_success"], 0, f"{name}: answers never change (batch invariance)")
        C.eq(p["stop_reason"], None, f"{name}: not stopped")
        if started_here:
            t = p["tokens"]
            C.ok(t is not None and 0 < t["computed"] <= t["prompt"], f"{name}: computed <= prompt tokens ({t})")
            C.ok(p["resources"]["peak_rss_mib"] and p["resources"]["peak_rss_mib"] > 1, f"{name}: server RSS sampled")


def check_html(rep, html, shot):
    with open(html, encoding="utf-8") as f:
        text = f.read()
    C.ok("<script" not in text and "src=" not in text and "href=" not in text, "HTML: no script, no linked asset")
    p = subprocess.run(["node", os.path.join(ROOT, "tools", "check-report-html.mjs"), html, shot],
                       capture_output=True, text=True, timeout=120 * SLOW)
    if not C.ok(p.returncode == 0, f"headless chromium ran: {p.stderr[-500:]}"):
        return
    d = json.loads(p.stdout)
    C.eq(d["console"], [], "HTML: no console messages")
    C.eq(d["errors"], [], "HTML: no page errors or failed requests")
    C.eq(d["requests"], [], "HTML: no network request")
    C.eq(sorted(d["charts"]), ["batch", "latency", "queue", "throughput"], "HTML: the four charts")
    phases = rep["phases"]
    for w in rep["workloads"]:
        mine = [p for p in phases if p["workload"] == w["name"]]
        for metric in ("p50", "p95", "p99"):
            pts = d["charts"]["latency"]["points"].get(f"{w['name']} {metric}", [])
            C.eq(len(pts), len(mine), f"latency chart: {w['name']} {metric} has one point per phase")
            for pt in pts:
                ph = [p for p in mine if p["concurrency"] == pt["x"]][0]
                C.ok(close(pt["y"], ph["successful_latency_ms"][metric], 0.001) and pt["visible"],
                     f"latency point {w['name']} {metric} c={pt['x']}: {pt}")
        pts = d["charts"]["throughput"]["points"].get(f"{w['name']} req/s", [])
        C.eq(len(pts), len(mine), f"throughput chart: {w['name']} has one point per phase")
        for pt in pts:
            ph = [p for p in mine if p["concurrency"] == pt["x"]][0]
            C.ok(close(pt["y"], ph["successful_requests_per_second"], 0.001) and pt["visible"],
                 f"throughput point {w['name']} c={pt['x']}: {pt}")
    samples = [x for p in phases for x in p["samples"]]
    bars = [(b["bin"], b["count"]) for b in d["charts"]["batch"]["bars"]]
    C.eq(bars, binned([x[3] for x in samples if x[3] is not None], BATCH_BINS), "batch histogram = samples binned")
    bars = [(b["bin"], b["count"]) for b in d["charts"]["queue"]["bars"]]
    C.eq(bars, binned([x[2] for x in samples if x[2] is not None], QUEUE_BINS), "queue histogram = samples binned")
    C.ok(all(b["inside"] for c in ("batch", "queue") for b in d["charts"][c]["bars"]), "bars inside their charts")
    C.eq(len(d["rows"]), len(phases), "one table row per phase")
    C.ok(os.path.getsize(shot) > 20000, f"screenshot written ({os.path.getsize(shot)} bytes)")


def main():
    out, html, shot = (os.path.join(TMP, n) for n in ("report.json", "report.html", "report.png"))
    rc, stdout, err = run(["--model", fixture("tiny-bias"), "--concurrency", "1,2", "--max-requests", "10",
                           "--out", out, "--html", html])
    C.eq(rc, 0, f"benchmark exit status ({err[-600:]})")
    if rc != 0:
        return C.report()
    rep = json.load(open(out))
    C.eq([(p["workload"], p["concurrency"]) for p in rep["phases"]],
         [("sequential", 1), ("mixed", 1), ("mixed", 2)], "phases: sequential at 1, mixed over the sweep")
    C.eq(len(stdout.strip().splitlines()), 3, "text summary: one line per phase")
    check_report(rep, "loopback", True)
    check_html(rep, html, shot)
    # output files are never overwritten
    rc, _, err = run(["--model", fixture("tiny-bias"), "--concurrency", "1", "--max-requests", "2", "--out", out])
    C.ok(rc == 1 and "exists; choose a new output path" in err, f"existing --out refused ({rc}, {err.strip()})")
    # the RAM guard
    rc, _, err = run(["--model", fixture("tiny-bias"), "--ram-reserve-gib", "100000"])
    C.ok(rc == 1 and "not enough RAM" in err, f"RAM guard ({rc}, {err.strip()})")
    # --url: a running server, a workload of our own
    srv = Server(["--model", fixture("tiny-bias")])
    try:
        req = os.path.join(TMP, "small.jsonl")
        with open(req, "w") as f:
            for i in range(6):
                f.write(json.dumps({"id": f"r{i}", "class": "tiny", "request": {
                    "state": f"Stan {i}", "questions": {"q": {"type": "noul", "instructions": "ok?"}}}}) + "\n")
        out2 = os.path.join(TMP, "url.json")
        rc, _, err = run(["--url", f"http://127.0.0.1:{srv.port}", "--requests", req, "--concurrency", "1,3",
                          "--out", out2])
        C.eq(rc, 0, f"--url run ({err[-400:]})")
        if rc == 0:
            rep2 = json.load(open(out2))
            check_report(rep2, "url", False)
            C.eq([p["completed"] for p in rep2["phases"]], [6, 6], "--url: every request answered in both phases")
            C.ok(all(p["resources"]["peak_rss_mib"] is None for p in rep2["phases"]), "--url: no process sampling")
    finally:
        srv.stop()
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
