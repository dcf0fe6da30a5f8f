"""`basal benchmark` on the demo-sized fixture model, in seconds: the JSON
report (schema_version 2, basal-rs's fields) validates against
bench/benchmark-report.schema.json (python3-jsonschema); its statistics are
recomputed here from its own per-request samples (p50 the median, p95/p99 by
nearest rank, counts, statuses, error kinds, rates, per class), the workload
descriptions from the workload files (model inserted, classes by payload size,
mixed order, payload hashes), the text summary from the report in basal-rs's
layout; the HTML report is opened in headless Debian
chromium (tools/check-report-html.mjs, puppeteer-core): no console message,
no page error, no network request, every chart with one visible point per
phase and the values of the JSON, histogram bars equal to the samples binned
here, one table row per phase. Also: --url against a running server, the RAM
guard, refusing to overwrite an output file, and refusing workload files whose
hash or counts differ from their manifest.json."""
import atexit
import hashlib
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


def median(v):
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def close(a, b, tol):
    return a is not None and b is not None and abs(a - b) <= tol


def check_stats(st, values, what, tol=1e-9):
    """basal-rs's latency(): null without values, p50 the median, p95/p99 by nearest rank."""
    v = sorted(values)
    if not v:
        C.eq(st, None, f"{what}: null without values")
        return
    if not C.ok(isinstance(st, dict), f"{what}: an object for {len(v)} values"):
        return
    C.eq(st["n"], len(v), f"{what}: n")
    want = {"min": v[0], "max": v[-1], "p50": median(v), "p95": nearest_rank(v, 95),
            "p99": nearest_rank(v, 99), "mean": sum(v) / len(v)}
    for k, x in want.items():
        C.ok(close(st[k], x, tol * max(1, abs(x))), f"{what}: {k} {st[k]} vs {x} recomputed from the samples")


BATCH_BINS = [(1, 2, "1"), (2, 3, "2"), (3, 5, "3-4"), (5, 9, "5-8"), (9, 17, "9-16"), (17, 33, "17-32"),
              (33, 65, "33-64"), (65, math.inf, "65+")]
QUEUE_BINS = [(0, 1, "<1"), (1, 2, "1-2"), (2, 5, "2-5"), (5, 10, "5-10"), (10, 20, "10-20"), (20, 50, "20-50"),
              (50, 100, "50-100"), (100, 200, "100-200"), (200, 500, "200-500"), (500, math.inf, "500+")]


def binned(values, bins):
    return [(name, sum(1 for x in values if lo <= x < hi)) for lo, hi, name in bins]


KINDS = ("timeout", "transport", "response_body", "http_status", "invalid_response")


def check_counts(st, rows, what):
    """The counts of a phase or a class against its per-request samples (basal-rs's stats())."""
    C.eq(st["completed"], len(rows), f"{what}: completed = finished requests")
    C.eq(st["errors"], sum(1 for x in rows if x["error"]), f"{what}: errors")
    statuses, kinds = {}, {}
    for x in rows:
        k = str(x["status"]) if x["status"] is not None else "no_response"
        statuses[k] = statuses.get(k, 0) + 1
        if x["error"]:
            kinds[x["error"]] = kinds.get(x["error"], 0) + 1
    C.eq(st["statuses"], statuses, f"{what}: statuses")
    C.eq(st["error_kinds"], kinds, f"{what}: error kinds")
    for x in rows:
        want = None if (x["status"] is not None and 200 <= x["status"] < 300) else "http_status"
        if x["status"] is None:
            C.ok(x["error"] in ("timeout", "transport"), f"{what}: no response is a timeout or transport error")
        elif x["error"] != "invalid_response":
            C.eq(x["error"], want, f"{what}: {x['id']} HTTP {x['status']} -> error {want}")
    check_stats(st["latency_ms"], [x["latency_ms"] for x in rows], f"{what} latency")
    check_stats(st["successful_latency_ms"], [x["latency_ms"] for x in rows if not x["error"]],
                f"{what} successful latency")
    check_stats(st["queue_ms"], [x["queue_ms"] for x in rows if x["queue_ms"] is not None], f"{what} queue")
    check_stats(st["batch_compute_ms"], [x["batch_compute_ms"] for x in rows if x["batch_compute_ms"] is not None],
                f"{what} batch compute")
    check_stats(st["batch_requests"], [x["batch_requests"] for x in rows if x["batch_requests"] is not None],
                f"{what} batch")
    check_stats(st["payload_bytes"], [x["payload_bytes"] for x in rows], f"{what} payload bytes")


def size_class(n):
    return "payload-le-2KiB" if n <= 2048 else "payload-2-to-16KiB" if n <= 16384 else "payload-gt-16KiB"


def expected_order(lines, model, shuffle):
    """The requests a workload sends, recomputed from its file: the model inserted where it is
    null or missing, the class by payload size when a line has none, mixed in ascending
    SHA-256("mixed-v1/7/" + id) order."""
    out = []
    for i, line in enumerate(lines):
        req = dict(line["request"])
        if req.get("model") is None:
            req["model"] = model
        body = json.dumps(req, ensure_ascii=False, separators=(",", ":")).encode()
        out.append({"id": line.get("id", f"request-{i}"), "class": line.get("class") or size_class(len(body)),
                    "body": body, "questions": len(req["questions"])})
    if shuffle:
        out.sort(key=lambda r: hashlib.sha256(("mixed-v1/7/" + r["id"]).encode()).digest())
    return out


def check_report(rep, what, started_here, files=None):
    errs = list(V.iter_errors(rep))
    C.ok(not errs, f"{what}: schema: {[e.message for e in errs[:3]]}")
    C.eq(rep["server"]["started_here"], started_here, f"{what}: started_here")
    C.eq(rep["schema_version"], 2, f"{what}: schema_version 2")
    any_error = any(x["error"] for p in rep["phases"] for x in p["per_request"])
    C.eq(rep["status"], "completed_with_errors" if any_error else "completed", f"{what}: status")
    C.eq(rep["complete"], True, f"{what}: complete")
    first = {}  # payload -> answers are not in the report; answer_changed must be False throughout
    for name, wl in rep["workloads"].items():
        if files and name in files:
            want = [r for r in expected_order(files[name], rep["model"]["name"], name == "mixed")
                    if r["id"] not in {s["id"] for s in wl["skipped"]}]
            C.eq(wl["requests"], len(want), f"{what} {name}: requests within the context limit")
            C.eq(wl["source_requests"], len(files[name]), f"{what} {name}: source requests")
            C.eq(wl["skipped_requests"], len(files[name]) - len(want), f"{what} {name}: skipped")
            cls = {}
            for r in want:
                cls[r["class"]] = cls.get(r["class"], 0) + 1
            C.eq(wl["classes"], cls, f"{what} {name}: classes")
            C.eq(wl["unique_payloads"], len({r["body"] for r in want}), f"{what} {name}: unique payloads")
            C.eq(wl["ordered_payloads_sha256"],
                 hashlib.sha256(b"".join(hashlib.sha256(r["body"]).digest() for r in want)).hexdigest(),
                 f"{what} {name}: ordered payloads SHA-256")
            check_stats(wl["payload_bytes"], [len(r["body"]) for r in want], f"{what} {name} payload bytes")
            for p in rep["phases"]:
                if p["name"] != name:
                    continue
                n = len(p["per_request"])
                C.eq([(x["id"], x["class"], x["payload_bytes"], x["questions"]) for x in p["per_request"]]
                     if p["concurrency"] == 1 else sorted((x["id"], x["class"], x["payload_bytes"], x["questions"])
                                                          for x in p["per_request"]),
                     [(r["id"], r["class"], len(r["body"]), r["questions"]) for r in want[:n]]
                     if p["concurrency"] == 1 else sorted((r["id"], r["class"], len(r["body"]), r["questions"])
                                                          for r in want[:n]),
                     f"{what} {name} c={p['concurrency']}: the requests sent, in workload order")
    for p in rep["phases"]:
        name = f"{what} {p['name']} c={p['concurrency']}"
        s = p["per_request"]
        C.eq(p["planned_requests"], len(s), f"{name}: every planned request finished")
        C.eq(p["submitted_requests"], len(s), f"{name}: submitted")
        C.eq(p["cancelled_requests"], 0, f"{name}: cancelled")
        C.eq((p["complete"], p["reason"]), (True, None), f"{name}: complete")
        check_counts(p, s, name)
        ok = [x for x in s if not x["error"]]
        if not C.ok(len(ok) > 0 and p["wall_s"] > 0, f"{name}: answered requests"):
            continue
        C.ok(close(p["successful_requests_per_second"], len(ok) / p["wall_s"], 1e-9 * len(ok) / p["wall_s"]),
             f"{name}: requests/s = successes / wall_s")
        q = sum(x["questions"] for x in ok)
        C.ok(close(p["successful_questions_per_second"], q / p["wall_s"], 1e-9 * q / p["wall_s"]),
             f"{name}: questions/s = questions of the successes / wall_s")
        classes = {}
        for x in s:
            classes.setdefault(x["class"], []).append(x)
        C.eq(sorted(p["classes"]), sorted(classes), f"{name}: one entry per class sent")
        for c, rows in classes.items():
            if c in p["classes"]:
                check_counts(p["classes"][c], rows, f"{name} class {c}")
        C.eq(p["answer_changes_vs_first_success"], sum(1 for x in s if x["answer_changed"]),
             f"{name}: answer changes = changed samples")
        C.eq(p["answer_changes_vs_first_success"], 0, f"{name}: answers never change (batch invariance)")
        res = p["resources"]
        C.ok(res["samples"] >= 2, f"{name}: resources sampled ({res['samples']})")
        if started_here:
            t = p["tokens"]
            C.ok(t is not None and 0 < t["computed"] <= t["prompt"], f"{name}: computed <= prompt tokens ({t})")
            C.ok(res["lifetime_peak_rss_bytes"] and res["lifetime_peak_rss_bytes"] > 1 << 20,
                 f"{name}: server peak RSS sampled ({res['lifetime_peak_rss_bytes']})")
            C.ok(all(isinstance(x["input_tokens"], int) and x["input_tokens"] > 0 for x in s),
                 f"{name}: input tokens planned for every request")
        else:
            C.ok(all(x["input_tokens"] is None for x in s), f"{name}: --url: no input tokens")
    if started_here:
        C.ok(rep["backend"] and rep["backend"].startswith("cpu, dtype "), f"{what}: backend ({rep['backend']})")
        C.ok(rep["model"]["checkpoint_bytes"] and rep["model"]["load_s"] is not None, f"{what}: model size and load_s")
        C.eq(rep["settings"]["max_batch_tokens"], 8192, f"{what}: settings recorded")
        # spec 06 §7.6: the weights' SHA-256, against hashlib over the fixture's files
        d = fixture("tiny-bias")
        want = {f: hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
                for f in sorted(os.listdir(d)) if f.endswith(".safetensors")}
        C.eq(rep["model"]["weights_sha256"], want, f"{what}: weights SHA-256")
        C.ok(not any("SHA-256 is not computed" in x for x in rep["limitations"]), f"{what}: no hash limitation")
    else:
        C.eq(rep["model"]["weights_sha256"], None, f"{what}: --url: no weights hash")


def fmt(v, div=1.0):
    return "n/a" if v is None else f"{v / div:.2f}"


def expected_text(rep):
    """basal-rs's print_summary() recomputed from the JSON report."""
    out = [f"benchmark: {rep['status']}"]
    for name in sorted(rep["workloads"]):
        w = rep["workloads"][name]
        if w["skipped_requests"]:
            out.append(f"{name}: skipped {w['skipped_requests']} requests exceeding the model context limit")
    for p in rep["phases"]:
        out.append(f"{p['name']} / {p['concurrency']} clients: {p['completed']}/{p['planned_requests']} completed, "
                   f"{p['errors']} errors")
        s = p["successful_latency_ms"]
        if s and p["successful_requests_per_second"] is not None:
            out.append(f"  HTTP: min {s['min']:.2f} ms, p50 {s['p50']:.2f} ms, p99 {s['p99']:.2f} ms; "
                       f"{p['successful_requests_per_second']:.2f} requests/s")
        out.append(f"  p99: queue {fmt(p['queue_ms'] and p['queue_ms']['p99'])} ms, whole-batch compute "
                   f"{fmt(p['batch_compute_ms'] and p['batch_compute_ms']['p99'])} ms")
        r = p["resources"]
        out.append(f"  sampled headroom: RAM {fmt(r['min_available_ram_bytes_sampled'], 1073741824.0)} GiB, GPU "
                   f"{fmt(r['min_available_gpu_bytes_sampled'], 1073741824.0)} GiB; CPU "
                   f"{fmt(r['mean_process_cpu_cores'])} cores; lifetime peak RSS "
                   f"{fmt(r['lifetime_peak_rss_bytes'], 1073741824.0)} GiB")
        for c in sorted(p["classes"]):
            st = p["classes"][c]
            if st["successful_latency_ms"]:
                out.append(f"  {c}: p99 {st['successful_latency_ms']['p99']:.2f} ms, {st['completed']} completed, "
                           f"{st['errors']} errors")
    out.append(f"Global swap growth: {fmt(rep['resources']['max_global_swap_growth_bytes'], 1048576.0)} MiB")
    if rep.get("reason"):
        out.append(f"Reason: {rep['reason']}")
    return out


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
    for wname in rep["workloads"]:
        w = {"name": wname}
        mine = [p for p in phases if p["name"] == wname]
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
    samples = [x for p in phases for x in p["per_request"]]
    bars = [(b["bin"], b["count"]) for b in d["charts"]["batch"]["bars"]]
    C.eq(bars, binned([x["batch_requests"] for x in samples if x["batch_requests"] is not None], BATCH_BINS),
         "batch histogram = samples binned")
    bars = [(b["bin"], b["count"]) for b in d["charts"]["queue"]["bars"]]
    C.eq(bars, binned([x["queue_ms"] for x in samples if x["queue_ms"] is not None], QUEUE_BINS),
         "queue histogram = samples binned")
    C.ok(all(b["inside"] for c in ("batch", "queue") for b in d["charts"][c]["bars"]), "bars inside their charts")
    C.eq(len(d["rows"]), len(phases), "one table row per phase")
    C.ok(os.path.getsize(shot) > 20000, f"screenshot written ({os.path.getsize(shot)} bytes)")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def main():
    out, html, shot = (os.path.join(TMP, n) for n in ("report.json", "report.html", "report.png"))
    wdir = os.path.join(ROOT, "bench", "workloads")
    files = {n: read_jsonl(os.path.join(wdir, n + ".jsonl")) for n in ("sequential", "mixed")}
    rc, stdout, err = run(["--model", fixture("tiny-bias"), "--concurrency", "1,2", "--max-requests", "10",
                           "--out", out, "--html", html])
    C.eq(rc, 0, f"benchmark exit status ({err[-600:]})")
    if rc != 0:
        return C.report()
    rep = json.load(open(out))
    C.eq([(p["name"], p["concurrency"]) for p in rep["phases"]],
         [("sequential", 1), ("mixed", 1), ("mixed", 2)], "phases: sequential at 1, mixed over the sweep")
    C.eq(stdout.splitlines(), expected_text(rep), "text summary: basal-rs's lines, recomputed from the report")
    C.ok(all(w["checked_against_manifest"] for w in rep["source"]["workloads"].values()),
         "workload files checked against manifest.json")
    C.ok(rep["workloads"]["mixed"]["skipped_requests"] > 0, "documents over the fixture's 2048 positions skipped")
    check_report(rep, "loopback", True, files)
    check_html(rep, html, shot)
    # output files are never overwritten
    rc, _, err = run(["--model", fixture("tiny-bias"), "--concurrency", "1", "--max-requests", "2", "--out", out])
    C.ok(rc == 1 and "must not exist" in err, f"existing --out refused ({rc}, {err.strip()})")
    # the RAM guard
    rc, _, err = run(["--model", fixture("tiny-bias"), "--ram-reserve-gib", "100000"])
    C.ok(rc == 1 and "not enough RAM" in err, f"RAM guard ({rc}, {err.strip()})")
    # hashes and counts are checked against manifest.json before a run (spec 06 §7.5)
    bad = os.path.join(TMP, "bad-workloads")
    shutil.copytree(wdir, bad)
    with open(os.path.join(bad, "sequential.jsonl"), "ab") as f:
        f.write(b"\n")  # a blank line: same requests, another file hash
    out2, html2 = os.path.join(TMP, "refused.json"), os.path.join(TMP, "refused.html")
    rc, _, err = run(["--model", fixture("tiny-bias"), "--workloads", bad, "--scenario", "sequential",
                      "--max-requests", "2", "--out", out2, "--html", html2])
    C.ok(rc == 1 and "SHA-256" in err and "sequential" not in _, f"a changed file is refused ({rc}, {err.strip()})")
    C.ok(not os.path.exists(out2) and not os.path.exists(html2),
         "a run refused before it starts leaves no empty --out/--html behind (a rerun may create them)")
    man = json.load(open(os.path.join(wdir, "manifest.json")))
    shutil.copy(os.path.join(wdir, "sequential.jsonl"), os.path.join(bad, "sequential.jsonl"))
    man["workloads"]["sequential.jsonl"]["questions"] += 1
    with open(os.path.join(bad, "manifest.json"), "w") as f:
        json.dump(man, f)
    rc, _, err = run(["--model", fixture("tiny-bias"), "--workloads", bad, "--scenario", "sequential",
                      "--max-requests", "2"])
    C.ok(rc == 1 and "questions 90" in err, f"a count differing from the manifest is refused ({rc}, {err.strip()})")
    os.unlink(os.path.join(bad, "manifest.json"))
    out3 = os.path.join(TMP, "nomanifest.json")
    rc, _, err = run(["--model", fixture("tiny-bias"), "--workloads", bad, "--scenario", "sequential",
                      "--max-requests", "2", "--out", out3])
    C.ok(rc == 0 and not json.load(open(out3))["source"]["workloads"]["sequential.jsonl"]["checked_against_manifest"],
         f"no manifest.json: nothing to check ({rc}, {err[-300:]})")
    # --url: a running server, a workload of our own (replaces both workloads, as basal-rs's --requests)
    srv = Server(["--model", fixture("tiny-bias")])
    try:
        req = os.path.join(TMP, "small.jsonl")
        lines = []
        for i in range(6):
            line = {"id": f"r{i}", "request": {"state": f"Stan {i % 4}", "questions": {"q": {"type": "noul",
                                                                                       "instructions": "ok?"}}}}
            if i % 2:
                line["class"] = "tiny"
            lines.append(line)
        with open(req, "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        out2 = os.path.join(TMP, "url.json")
        rc, stdout, err = run(["--url", f"http://127.0.0.1:{srv.port}", "--requests", req, "--concurrency", "1,3",
                               "--out", out2])
        C.eq(rc, 0, f"--url run ({err[-400:]})")
        if rc == 0:
            rep2 = json.load(open(out2))
            check_report(rep2, "url", False, {"sequential": lines, "mixed": lines})
            C.eq([(p["name"], p["concurrency"], p["completed"]) for p in rep2["phases"]],
                 [("sequential", 1, 6), ("mixed", 1, 6), ("mixed", 3, 6)], "--url: every request answered")
            C.ok(all(p["resources"]["lifetime_peak_rss_bytes"] is None for p in rep2["phases"]),
                 "--url: no process sampling")
            C.eq(stdout.splitlines(), expected_text(rep2), "--url: text summary")
    finally:
        srv.stop()
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
