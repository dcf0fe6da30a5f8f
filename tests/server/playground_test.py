"""The playground page of `basal serve` (GET /, issue 18), in a real headless
browser (Debian chromium driven by puppeteer-core: tools/check-playground.mjs).

A user's session on the fixture model: the page loads with no console message,
no page error and no request outside the server; every control has a label;
the state, a choice question (options with and without descriptions) and a
noul question are typed in and sent. Oracles: the request the page built is
the one this script builds from the same plan (as JSON, key order included);
the answers the page stores (data-answer) and draws (bars: data-p and width)
equal the answers of the same request sent directly with http.client, to the
last bit; the page's curl command, run by bash, returns the same answers; the
timing headers are shown. Then the page is served byte for byte from
web/playground.html with a Content-Security-Policy, uses no external asset,
and --no-ui / YAML `ui: false` turn it into the JSON 404 of unknown paths.
The screenshot goes to $BUILD/playground.png (docs/playground.png is a copy).
Run by tests/e2e/t_playground.sh."""
import html.parser
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvlib import SLOW, Checks, Server, fixture, strip_latency  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
C = Checks()
with open(os.path.join(ROOT, "web", "playground.html"), "rb") as f:
    PAGE = f.read()

PLAN = {
    "state": "Klient pisze: zapłaciłem dwa razy za to samo zamówienie (nr 1234), proszę o zwrot 149,99 zł.",
    "questions": [
        {"id": "topic", "type": "choice", "instructions": "Czego dotyczy wiadomość?",
         "options": [["billing", "płatności i faktury"], ["shipping", ""], ["other", "coś innego, np. \"reklamacja\""]]},
        {"id": "refund", "type": "noul", "instructions": "Czy klient prosi o zwrot pieniędzy?",
         "true": "prosi o zwrot", "false": ""},
    ],
}

# every other type as the page fills it in when added (its example), and the
# question object that must be sent for it (spec 02 §4.2, spec 03 §1.1, §2.1)
EXAMPLES = {
    "score": {"type": "score", "instructions": "Jak pilna jest sprawa?",
              "criteria": ["może poczekać", "w tym tygodniu", "dziś"]},
    "multi": {"type": "multi", "instructions": "Których tematów dotyczy zgłoszenie?",
              "criteria": {"refund": "zwrot", "delivery": "dostawa", "complaint": "reklamacja"}, "threshold": 0.5},
    "act": {"type": "act", "instructions": "Czy wniosek spełnia warunki zwrotu?",
            "costs": {"approve": {"true": 0, "false": 1240}, "reject": {"true": 300, "false": 0},
                      "human": {"true": 15, "false": 15}}},
}
PLAN_ALL = {
    "state": "Zamówienie 1234 nie dotarło, a pieniądze pobrano dwa razy. Proszę o zwrot.",
    "questions": [{"id": "urgency", "type": "score", "example": True}, {"id": "topics", "type": "multi", "example": True},
                  {"id": "decision", "type": "act", "example": True}, PLAN["questions"][1]],
}


def request_of(plan):
    """The request body the plan describes, built here from spec 02 §4.1."""
    qs = {}
    for q in plan["questions"]:
        if q.get("example"):
            qs[q["id"]] = EXAMPLES[q["type"]]
        elif q["type"] == "choice":
            qs[q["id"]] = {"type": "choice", "instructions": q["instructions"],
                           "criteria": {k: (d or None) for k, d in q["options"]}}
        else:
            crit = {}
            if q.get("true"):
                crit["true"] = q["true"]
            if q.get("false"):
                crit["false"] = q["false"]
            qs[q["id"]] = {"type": "noul", "instructions": q["instructions"]}
            if crit:
                qs[q["id"]]["criteria"] = crit
    return {"model": plan["model"], "state": plan["state"], "questions": qs}


class AssetScan(html.parser.HTMLParser):
    """Every URL the markup would load: src/href attributes and CSS url()."""

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("src", "href", "srcset", "poster", "data", "action") and v is not None:
                self.urls.append(f"{tag}.{k}={v}")

    def handle_data(self, data):
        self.urls += [f"url({u})" for u in re.findall(r"url\(\s*['\"]?([^)'\"]*)", data)]
        self.urls += [f"import {u}" for u in re.findall(r"@import\s+['\"]?([^;'\"]+)", data)]


def run_browser(port, plan, shot):
    p = subprocess.run(["node", os.path.join(ROOT, "tools", "check-playground.mjs"), f"http://127.0.0.1:{port}/",
                        shot, json.dumps(plan)], capture_output=True, timeout=120 * SLOW)
    if p.returncode != 0:
        print(p.stderr.decode(errors="replace")[-3000:])
        return None
    return json.loads(p.stdout)


def check_page_bytes(srv):
    st, h, body = srv.request("GET", "/")
    C.eq(st, 200, "GET / status")
    C.eq(h.get("content-type"), "text/html; charset=utf-8", "GET / content type")
    C.ok(body == PAGE, "GET / serves web/playground.html byte for byte")
    csp = h.get("content-security-policy", "")
    C.ok("default-src 'none'" in csp and "connect-src 'self'" in csp, f"GET / sends a strict CSP: {csp!r}")
    st, h, body = srv.request("HEAD", "/")
    C.ok(st == 200 and body == b"" and h.get("content-length") == str(len(PAGE)), "HEAD /")
    st, h, body = srv.request("POST", "/", b"{}")
    C.eq(st, 405, "POST / is 405")
    C.eq(h.get("allow"), "GET, HEAD", "POST / Allow")
    scan = AssetScan()
    scan.feed(PAGE.decode())
    C.eq([u for u in scan.urls if not u.split("=", 1)[-1].startswith("data:") and not u.startswith("url(data:")],
         [], "the page references no asset but data: URLs")


def check_session(srv, model, plan, shot):
    plan = dict(plan, model=model)
    want_req = request_of(plan)
    out = run_browser(srv.port, plan, shot)
    if not C.ok(out is not None, "the browser session ran"):
        return
    C.eq(out["page_status"], 200, "page status in the browser")
    C.eq(out["console"], [], "no console message")
    C.eq(out["errors"], [], "no page error or failed request")
    C.eq(out["foreign"], [], "no request to another origin")
    C.eq(sorted(set(out["requests"])), sorted({"GET /", "GET /v1/models", "GET /health", "POST /v1/systemone"}),
         "the page's requests")
    C.eq(out["unlabelled"], [], "every form control has a label")
    C.eq(out["models"], [model], "the model list")
    C.eq(out["form_error"], "", "no form error")
    # the request the page built, read back from its curl command
    m = re.search(r"--data-raw '((?:[^']|'\\'')*)'", out["curl"])
    if C.ok(m, f"curl command has the body: {out['curl']!r}"):
        page_req = json.loads(m.group(1).replace("'\\''", "'"))
        C.eq(json.dumps(page_req, ensure_ascii=False), json.dumps(want_req, ensure_ascii=False),
             "the page sends the planned request")
    st, h, direct = srv.post("/v1/systemone", want_req)
    C.eq(st, 200, "direct POST status")
    C.eq(out["http_status"], "200", "the page's status")
    direct_json = json.loads(direct)
    C.eq(strip_latency(out["response"].encode()), strip_latency(direct), "the page's response text = direct POST")
    answers = {a["qid"]: a for a in out["answers"]}
    C.eq(list(answers), list(want_req["questions"]), "one answer card per question, in order")
    for qid, want in direct_json["answers"].items():
        a = answers.get(qid)
        if not C.ok(a is not None, f"answer card {qid}"):
            continue
        # values (a JavaScript number has no int/float distinction: 0 == 0.0)
        C.ok(a["answer"] == want and list(a["answer"]) == list(want), f"{qid}: shown answer {a['answer']} = direct {want}")
        if want["type"] == "noul":
            exp = [("true", want["noul"]), ("false", 1 - want["noul"])]
        else:
            exp = list(want["probabilities"].items())
        if want["type"] == "choice":
            C.ok(want["choice"] in a["headline"], f"{qid}: headline names the choice")
        if want["type"] == "act":
            C.ok(f"action: {want['action']}" in a["headline"], f"{qid}: headline names the action")
        C.eq([(b["key"], b["p"]) for b in a["bars"]], exp, f"{qid}: bars (key, data-p)")
        for b, (_, p) in zip(a["bars"], exp):
            C.ok(b["visible"] and abs(b["width"] - p) < 0.01, f"{qid}/{b['key']}: bar width {b['width']} for p {p}")
            C.ok(b["shown"].endswith("%") and abs(float(b["shown"].split()[0]) - 100 * p) <= 0.05 + 1e-9,
                 f"{qid}/{b['key']}: shown {b['shown']} for p {p}")
    t = out["timings"]
    for k in ("x-basal-queue-ms", "x-basal-compute-ms"):
        C.ok(re.fullmatch(r"\d+\.\d{3} ms", t.get(k, "")), f"timing {k} shown: {t.get(k)!r}")
    C.ok(re.fullmatch(r"\d+ request\(s\)", t.get("x-basal-batch-requests", "")), f"batch shown: {t}")
    C.ok(re.fullmatch(r"[0-9a-f]{32}", t.get("x-typesafe-request-id", "")), f"request id shown: {t}")
    lat = json.loads(out["response"])["usage"]["latency_ms"]
    C.ok(re.fullmatch(r"[0-9.e-]+ ms", t.get("latency_ms", "")) and float(t["latency_ms"].split()[0]) == lat,
         f"latency_ms shown: {t.get('latency_ms')!r} for {lat}")
    # the curl command as shown, run by a shell
    p = subprocess.run(["bash", "-c", out["curl"]], capture_output=True, timeout=60 * SLOW)
    C.eq(p.returncode, 0, f"the curl command runs: {p.stderr[-300:]!r}")
    if p.returncode == 0:
        C.eq(strip_latency(p.stdout), strip_latency(direct), "the curl command's answer = direct POST")
    with open(shot, "rb") as f:
        png = f.read()
    C.ok(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000, f"screenshot {shot} ({len(png)} bytes)")


def check_off(model_dir, tmp):
    """--no-ui and YAML ui: false answer / like an unknown path; ui: true keeps it."""
    cases = [("--no-ui", ["--model", model_dir, "--no-ui"], 404)]
    for val, want in (("false", 404), ("true", 200)):
        cfg = os.path.join(tmp, f"ui-{val}.yml")
        with open(cfg, "w") as f:
            f.write(f"models:\n  - path: {model_dir}\nui: {val}\n")
        cases.append((f"ui: {val}", ["--config", cfg], want))
    for what, args, want in cases:
        srv = Server(args)
        try:
            st, h, body = srv.request("GET", "/")
            C.eq(st, want, f"{what}: GET / status")
            if want == 404:
                # the 404 of any unknown path (spec 02 §10: {"detail":"Not Found"}), not the page
                C.eq(h.get("content-type"), "application/json", f"{what}: content type")
                C.ok(isinstance(json.loads(body), dict) and "detail" in json.loads(body), f"{what}: body {body!r}")
                st, h, body = srv.request("GET", "/openapi.json")
                C.eq(st, 200, f"{what}: /openapi.json stays")
        finally:
            C.eq(srv.stop(), 0, f"{what}: exit status")
    cfg = os.path.join(tmp, "ui-bad.yml")
    with open(cfg, "w") as f:
        f.write(f"models:\n  - path: {model_dir}\nui: 3\n")
    srv = Server(["--config", cfg], expect_start=False)
    rc = srv.wait_exit(60)
    C.ok(rc not in (0, None) and re.search(r"\bui\b", srv.log()), f"ui: 3 is refused: {rc} {srv.log()[-300:]!r}")


def main():
    model_dir = fixture("tiny-bias")
    srv = Server(["--model", model_dir])
    try:
        model = json.loads(srv.request("GET", "/v1/models")[2])["models"][0]["name"]
        check_page_bytes(srv)
        check_session(srv, model, PLAN, os.path.join(BUILD, "playground.png"))
        check_session(srv, model, PLAN_ALL, os.path.join(os.environ.get("TMPDIR", "/tmp"), "playground-all.png"))
    finally:
        C.eq(srv.stop(), 0, "server exit status")
    check_off(model_dir, os.environ.get("TMPDIR", "/tmp"))
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
