"""POST /v1/lens, the playground's logit lens (issue 33), and its view in the
playground page in a real headless browser (tools/check-playground.mjs with
"lens": true: Debian chromium driven by puppeteer-core).

Server: the lens document of a request is `basal lens`'s for the same body
(the CLI goes through the public session API, the route through the engine's
lanes), its "answer" is byte for byte what POST /v1/systemone answers (but
latency_ms); lens requests batched with decisions change neither (the same
documents and answers as alone); errors are /v1/systemone's bodies (400,
422), GET is 405, the API key applies, --no-ui turns the route into the 404
of unknown paths, and lens requests are not decisions for the decision log.

Page: a user fills in the form, sends it, then presses "Logit lens": no
console message, no page error, no foreign request; the page's lens
response is the server's document for the request the page built; one chart
per question readout and option order (and the order mean), each with one
line per option and exactly layers x options points whose probabilities are
the document's, all drawn inside the chart; each order's prompt is shown in
its parts (template / state / question / options) with the document's token
counts. The screenshot goes to $BUILD/playground-lens.png. Run by
tests/e2e/t_lens_page.sh."""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvlib import BASAL, SLOW, Checks, Server, fixture, run_parallel, strip_latency  # noqa: E402
from playground_test import request_of, run_browser  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
TMP = os.environ.get("TMPDIR", "/tmp")
C = Checks()

PLAN = {
    "state": "Klient pisze: paczka przyszła uszkodzona, a pieniądze pobrano dwa razy. Proszę o zwrot.",
    "questions": [
        {"id": "topic", "type": "choice", "instructions": "Czego dotyczy wiadomość?",
         "options": [["billing", "płatności"], ["shipping", "dostawa"], ["other", ""]]},
        {"id": "refund", "type": "noul", "instructions": "Czy klient prosi o zwrot?", "true": "", "false": ""},
        {"id": "topics", "type": "multi", "example": True},
        {"id": "urgency", "type": "score", "example": True},
    ],
    "lens": True,
}


def answer_bytes(doc_body):
    """The raw "answer" value at the end of a lens document."""
    i = doc_body.rindex(b',"answer":')
    return doc_body[i + len(b',"answer":'):-1]


def without_answer(doc):
    return {k: v for k, v in doc.items() if k != "answer"}


def check_route(srv, model, model_dir):
    req = request_of(dict(PLAN, model=model))
    st, h, body = srv.post("/v1/lens", req)
    if not C.eq(st, 200, f"POST /v1/lens: {body[:300]!r}"):
        return None, None
    C.eq(h.get("content-type"), "application/json", "lens content type")
    C.ok(re.fullmatch(r"[0-9a-f]{32}", h.get("x-typesafe-request-id", "")), "lens request id")
    C.eq(h.get("x-basal-orders"), "2", "x-basal-orders")
    doc = json.loads(body)
    st2, _, direct = srv.post("/v1/systemone", req)
    C.eq(st2, 200, "POST /v1/systemone")
    C.eq(strip_latency(answer_bytes(body)), strip_latency(direct), "the lens answer is /v1/systemone's")
    # the same document from `basal lens` (the public session API)
    p = subprocess.run([BASAL, "lens", "--model", model_dir], input=json.dumps(req, ensure_ascii=False).encode(),
                       capture_output=True, timeout=120 * SLOW)
    if C.eq(p.returncode, 0, f"basal lens: {p.stderr[-300:]!r}"):
        cli = json.loads(p.stdout)
        C.ok(without_answer(cli) == without_answer(doc), "POST /v1/lens = basal lens (the document)")
        a = dict(doc["answer"], usage={k: v for k, v in doc["answer"]["usage"].items() if k != "latency_ms"})
        C.eq(json.dumps(a), json.dumps(cli["answer"]), "POST /v1/lens = basal lens (the answer)")
    L = doc["layers"]
    for q in doc["questions"]:
        for ro in q["readouts"]:
            for od in ro["orders"]:
                C.ok(len(od["probabilities"]) == L and all(len(r) == len(ro["keys"]) for r in od["probabilities"]),
                     f"{q['id']}: a row per layer, a column per option")
    # batched with decisions: nothing changes
    reqs = [("/v1/lens" if i % 2 else "/v1/systemone", req) for i in range(16)]
    outs = run_parallel(lambda it: srv.post(*it), reqs)
    for (path, _), (st3, _, b) in zip(reqs, outs):
        C.eq(st3, 200, f"concurrent {path}")
        if path == "/v1/lens":
            C.ok(json.loads(b)["questions"] == doc["questions"], "a batched lens document is the one alone")
        else:
            C.eq(strip_latency(b), strip_latency(direct), "a decision batched with lens requests is unchanged")
    return req, doc


def check_errors(srv, model):
    for what, body in [("invalid JSON", b"{"), ("validation", json.dumps({"model": model, "state": 1}).encode()),
                       ("unknown model", json.dumps({"model": "nope", "state": "x", "questions": {
                           "q": {"type": "noul", "instructions": "?"}}}).encode()),
                       ("no criteria", json.dumps({"model": model, "state": "x", "questions": {
                           "q": {"type": "choice", "instructions": "?"}}}).encode())]:
        st, _, b = srv.request("POST", "/v1/lens", body, {"Content-Type": "application/json"})
        st2, _, b2 = srv.request("POST", "/v1/systemone", body, {"Content-Type": "application/json"})
        C.ok(st == st2 and st in (400, 422) and b == b2, f"{what}: /v1/lens {st} {b[:200]!r} = /v1/systemone {st2}")
    st, h, b = srv.request("GET", "/v1/lens")
    C.eq(st, 405, "GET /v1/lens")
    C.eq(h.get("allow"), "POST", "GET /v1/lens: Allow")


def check_off_and_key(model_dir, model, req):
    srv = Server(["--model", model_dir, "--no-ui"])
    try:
        st, h, b = srv.post("/v1/lens", req)
        C.eq(st, 404, "--no-ui: POST /v1/lens")
        C.ok(json.loads(b) == {"detail": "Not Found"}, f"--no-ui: the 404 of unknown paths: {b!r}")
        C.eq(srv.post("/v1/systemone", req)[0], 200, "--no-ui: /v1/systemone stays")
    finally:
        C.eq(srv.stop(), 0, "--no-ui server exit")
    srv = Server(["--model", model_dir, "--api-key-env", "LENS_KEY"], env={"LENS_KEY": "sekret"})
    try:
        C.eq(srv.post("/v1/lens", req)[0], 403, "API key: none sent")
        C.eq(srv.post("/v1/lens", req, {"Authorization": "Bearer wrong"})[0], 401, "API key: a wrong one")
        C.eq(srv.post("/v1/lens", req, {"Authorization": "Bearer sekret"})[0], 200, "API key: the right one")
    finally:
        C.eq(srv.stop(), 0, "API key server exit")
    log = os.path.join(TMP, "lens-decisions.jsonl")
    srv = Server(["--model", model_dir, "--log-decisions", log])
    try:
        C.eq(srv.post("/v1/lens", req)[0], 200, "with a decision log: lens")
        C.eq(srv.post("/v1/systemone", req)[0], 200, "with a decision log: decision")
        C.eq(srv.post("/v1/lens", req)[0], 200, "with a decision log: lens again")
    finally:
        C.eq(srv.stop(), 0, "decision log server exit")
    with open(log) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    C.eq([x["endpoint"] for x in lines], ["/v1/systemone"], "the decision log has the decision only")


def check_page(srv, model, doc_direct):
    shot = os.path.join(BUILD, "playground-lens.png")
    out = run_browser(srv.port, dict(PLAN, model=model), shot)
    if not C.ok(out is not None, "the browser session ran"):
        return
    C.eq(out["console"], [], "no console message")
    C.eq(out["errors"], [], "no page error or failed request")
    C.eq(out["foreign"], [], "no request to another origin")
    C.ok("POST /v1/lens" in out["requests"], f"the page asked /v1/lens: {out['requests']}")
    C.eq(out["unlabelled"], [], "every form control has a label")
    lens = out.get("lens") or {}
    C.eq(lens.get("status"), "200", f"the lens status shown: {lens.get('error')}")
    doc = json.loads(lens.get("response") or "{}")
    C.ok(without_answer(doc) == without_answer(doc_direct), "the page's lens response is the server's document")
    charts = lens.get("charts", [])
    want = []
    for q in doc.get("questions", []):
        for ri, ro in enumerate(q["readouts"]):
            for od in ro["orders"]:
                names = [f"{l}: {o}" for l, o in zip(od["letters"], od["options"])]
                want.append((q["id"], ri, str(od["order"]), names, od["probabilities"], od["parts"]))
            if len(ro["orders"]) > 1:
                want.append((q["id"], ri, "mean", ro["keys"], ro["mean"], None))
    C.eq(len(charts), len(want), "one chart per question readout and order, and each order mean")
    L = doc.get("layers", 0)
    for ch, (qid, ri, order, names, rows, parts) in zip(charts, want):
        what = f"chart {qid}/{ri}/{order}"
        C.ok((ch["qid"], ch["readout"], ch["order"]) == (qid, ri, order), f"{what}: in document order: {ch['qid']} "
                                                                          f"{ch['readout']} {ch['order']}")
        k = len(names)
        C.ok(ch["visible"], f"{what}: drawn")
        C.eq((ch["layers"], ch["options"]), (L, k), f"{what}: layers and options")
        C.eq(len(ch["points"]), L * k, f"{what}: layers x options points")
        C.eq(ch["lines"], k, f"{what}: one line per option")
        C.eq(ch["legend"], names, f"{what}: the legend")
        got = sorted((p["option"], p["layer"], p["p"]) for p in ch["points"])
        exp = sorted((names[j], l + 1, rows[l][j]) for l in range(L) for j in range(k))
        C.ok(got == exp, f"{what}: every point is the document's probability")
        C.ok(all(p["inside"] for p in ch["points"]), f"{what}: every point inside the chart")
        if parts is not None:
            C.eq([(p["part"], p["tokens"], p["text"]) for p in ch["parts"]],
                 [(p["part"], p["tokens"], p["text"]) for p in parts], f"{what}: the prompt's parts")
            counts = {}
            for p in parts:
                counts[p["part"]] = counts.get(p["part"], 0) + p["tokens"]
            C.eq(dict(ch["counts"]), counts, f"{what}: the token counts shown")
    with open(shot, "rb") as f:
        png = f.read()
    C.ok(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000, f"screenshot {shot} ({len(png)} bytes)")


def main():
    model_dir = fixture("tiny-bias")
    srv = Server(["--model", model_dir])
    try:
        model = json.loads(srv.request("GET", "/v1/models")[2])["models"][0]["name"]
        req, doc = check_route(srv, model, model_dir)
        check_errors(srv, model)
        if doc is not None:
            check_page(srv, model, doc)
    finally:
        C.eq(srv.stop(), 0, "server exit status")
    if req is not None:
        check_off_and_key(model_dir, model, req)
    return C.report()


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print(f"lens_test: {time.time() - t0:.1f} s")
    sys.exit(rc)
