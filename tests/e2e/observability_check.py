#!/usr/bin/env python3
"""The metrics documentation against a real server (tests/e2e/t_observability.sh).

Drives a running `basal serve --metrics --max-inflight 1 --log-decisions FILE`
(answered requests on both endpoints, a 40-option choice, a 422, a burst that
gets 529s), scrapes /metrics and reads it with prometheus_client's parser (the
reference reader of the text format). Then checks:
  - the metric families of src/server/metrics.c are exactly the scraped ones;
  - docs/OBSERVABILITY.md's table lists exactly those, each with the scraped
    type and label set;
  - every PromQL expression of the document and of docs/grafana-basal.json
    names only sample names of the scrape, and only labels those series carry
    (in matchers, by/without clauses, legends, label_values); a matcher's
    value is one the server can emit (the label domains of metrics.c);
  - the dashboard is a well-formed Grafana dashboard whose panels use the
    declared data source variable and cover every family but the constant
    basal_output_tokens_total.
Prints one line per failure and "N passed, N failed"; exit 1 on a failure.
"""
import argparse
import json
import re
import sys
import threading
import urllib.error
import urllib.request


def post(url, body, timeout=60):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def traffic(base, model):
    """Requests that make every family and the label values the docs query appear."""
    choice = {"model": model, "state": "Klient: nie mogę zalogować się do bankowości internetowej.",
              "questions": {"q": {"type": "choice", "instructions": "Który dział?",
                                  "criteria": {"cards": "Karty", "online": "Bankowość", "loans": "Kredyty"}}}}
    seen = []
    for ep in ("/v1/systemone", "/v1/systemone", "/v1/basal"):
        seen.append(post(base + ep, choice)[0])
    many = {f"k{i}": f"opcja {i}" for i in range(40)}
    seen.append(post(base + "/v1/systemone", {"model": model, "state": choice["state"], "questions": {
        "q": {"type": "choice", "instructions": "Która kategoria?", "criteria": many}}})[0])
    seen.append(post(base + "/v1/systemone", {"model": model, "state": "x"})[0])  # no questions: 422
    burst = []
    lock = threading.Lock()

    def one():
        s = post(base + "/v1/systemone", choice)[0]
        with lock:
            burst.append(s)
    for _ in range(3):  # max_inflight 1: most of a burst is refused
        ts = [threading.Thread(target=one) for _ in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if 529 in burst:
            break
    return seen, burst


def families_of_source(path):
    src = open(path).read()
    names = set(re.findall(r'"(basal_[a-z0-9_]+)"', src))
    domains = {}
    for label, const in (("lane", "LANE"), ("outcome", "OUTCOME"), ("endpoint", "ENDPOINT")):
        m = re.search(r"\b%s\[[^]]*\]\s*=\s*\{([^}]*)\}" % const, src)
        domains[label] = set(re.findall(r'"([^"]*)"', m.group(1))) if m else set()
    return names, domains


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="usage example: observability_check.py --url http://127.0.0.1:8000 --model basal-tiny")
    ap.add_argument("--url", required=True, help="base URL of the running server (no default)")
    ap.add_argument("--model", required=True, help="the served model name (no default)")
    ap.add_argument("--root", default=".", help="repository root (default: .)")
    a = ap.parse_args()
    from prometheus_client.parser import text_string_to_metric_families

    passed = failed = 0

    def check(cond, what):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print("FAIL:", what)

    seen, burst = traffic(a.url, a.model)
    check(seen == [200, 200, 200, 200, 422], f"statuses of the requests: {seen}")
    check(529 in burst and 200 in burst, f"burst statuses: {sorted(set(burst))}")
    with urllib.request.urlopen(a.url + "/metrics", timeout=30) as r:
        ctype = r.headers.get("content-type")
        text = r.read().decode()
    check(ctype == "text/plain; version=0.0.4", f"content-type {ctype}")
    fams = list(text_string_to_metric_families(text))
    exported = {}   # exported family name -> (type, label names)
    samples = {}    # sample name -> list of label dicts
    for f in fams:
        name = f.name + "_total" if f.type == "counter" else f.name
        labels = set()
        for s in f.samples:
            samples.setdefault(s.name, []).append(s.labels)
            labels |= set(s.labels) - {"le"}
        exported[name] = (f.type, labels)

    src_names, domains = families_of_source(f"{a.root}/src/server/metrics.c")
    check(src_names == set(exported), f"metrics.c vs scrape: only in the source {sorted(src_names - set(exported))}, "
          f"only scraped {sorted(set(exported) - src_names)}")

    doc = open(f"{a.root}/docs/OBSERVABILITY.md").read()
    rows = re.findall(r"^\| `(basal_[a-z0-9_]+)` \| (\w+) \| ([^|]*) \|", doc, re.M)
    documented = {}
    for name, typ, labels in rows:
        documented[name] = (typ, set(re.findall(r"`(\w+)`", labels)))
    check(set(documented) == set(exported), f"documented vs scraped: only documented {sorted(set(documented) - set(exported))}, "
          f"missing {sorted(set(exported) - set(documented))}")
    for name, (typ, labels) in documented.items():
        if name in exported:
            check(exported[name] == (typ, labels), f"{name}: documented {typ} {sorted(labels)}, scraped "
                  f"{exported[name][0]} {sorted(exported[name][1])}")

    def labels_of(sample):
        out = set()
        for l in samples.get(sample, []):
            out |= set(l)
        return out

    def check_expr(expr, where, legend=None):
        sel = re.findall(r"\b(basal_[a-z0-9_]+)\b(\{[^}]*\})?", expr)
        check(sel, f"{where}: no basal metric in {expr}")
        metric_labels = set()
        for name, matchers in sel:
            check(name in samples, f"{where}: {name} is not in the scrape ({expr})")
            have = labels_of(name)
            metric_labels |= have
            for lab, op, val in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
                check(lab in have, f"{where}: {name} has no label {lab}")
                if op != "=" or "$" in val:
                    continue
                if lab in domains:
                    ok = val in domains[lab]
                elif lab == "status":
                    ok = val == "cancelled" or re.fullmatch(r"[1-5][0-9][0-9]", val) is not None
                else:
                    ok = any(l.get(lab) == val for l in samples.get(name, []))
                check(ok, f"{where}: {lab}=\"{val}\" is not a value the server emits")
        for clause in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
            for lab in [x.strip() for x in clause.split(",") if x.strip()]:
                check(lab in metric_labels, f"{where}: by/without ({lab}) names no label of its metrics ({expr})")
        for lab in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend or ""):
            check(lab in metric_labels, f"{where}: legend {{{{{lab}}}}} is no label of its metrics")
        return {n for n, _ in sel}

    blocks = re.findall(r"```promql\n(.*?)```", doc, re.S)
    exprs = []
    for b in blocks:  # a line that starts with an operator continues the previous expression
        for line in b.splitlines():
            if exprs and re.match(r"\s+[/*+-]", line):
                exprs[-1] += " " + line.strip()
            elif line.strip():
                exprs.append(line.strip())
    check(len(exprs) >= 15, f"PromQL examples in the document: {len(exprs)}")
    for e in exprs:
        check_expr(e, "OBSERVABILITY.md")
    for need in ("basal_http_request_duration_seconds_bucket", "basal_queue_duration_seconds_bucket", 'status="529"'):
        check(any(need in e for e in exprs), f"the document has no example with {need}")

    dash = json.load(open(f"{a.root}/docs/grafana-basal.json"))
    var = {v["name"]: v for v in dash["templating"]["list"]}
    check(var.get("datasource", {}).get("type") == "datasource" and var["datasource"].get("query") == "prometheus",
          "the datasource variable")
    ids = [p["id"] for p in dash["panels"]]
    check(len(ids) == len(set(ids)) and len(ids) >= 10, f"panel ids {ids}")
    used = set()
    for p in dash["panels"]:
        where = f"panel {p['id']} '{p['title']}'"
        check(p.get("datasource", {}).get("uid") == "${datasource}", f"{where}: datasource {p.get('datasource')}")
        check(set(p.get("gridPos", {})) == {"x", "y", "w", "h"}, f"{where}: gridPos")
        check(p.get("targets"), f"{where}: no targets")
        refs = [t.get("refId") for t in p["targets"]]
        check(len(refs) == len(set(refs)) and all(refs), f"{where}: refIds {refs}")
        for t in p["targets"]:
            used |= check_expr(t["expr"], where, t.get("legendFormat"))
    q = var.get("model", {}).get("query", {})
    m = re.fullmatch(r"label_values\((basal_[a-z0-9_]+),\s*(\w+)\)", q.get("query", "") if isinstance(q, dict) else q)
    check(m is not None and m.group(1) in samples and m.group(2) in labels_of(m.group(1)), f"model variable query {q}")
    fams_used = {n for n in exported if any(u == n or u.startswith(n + "_") for u in used)}
    check(fams_used == set(exported) - {"basal_output_tokens_total"},
          f"families without a panel: {sorted(set(exported) - fams_used - {'basal_output_tokens_total'})}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
