"""`basal client` (spec 06 §5.3) against a live `basal serve` on 127.0.0.1.

Oracle: every answer the client prints is compared byte for byte (apart from
usage.latency_ms) with the body the same server returns when this script
sends the request it expects the client to build, with http.client; every
envelope is rebuilt here with CPython's json module from the input record.
Retries are counted on the server's side (/metrics, 529 responses)."""
import atexit
import json
import os
import pty
import re
import select
import signal
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(__file__))
from srvlib import BASAL, SLOW, Checks, Server, fixture, metric_sum, strip_latency

C = Checks()
MODEL = "basal-tiny"
TMP = tempfile.mkdtemp(prefix="basal-client-")
atexit.register(shutil.rmtree, TMP, True)


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def client(args, stdin=b"", env=None, timeout=120):
    full = dict(os.environ)
    for k in ("BASAL_URL", "BASAL_MODEL", "BASAL_API_KEY"):
        full.pop(k, None)
    full.update(env or {})
    p = subprocess.run([BASAL, "client"] + args, input=stdin, capture_output=True, env=full, timeout=timeout * SLOW)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def direct(srv, req):
    """The server's own answer to req: (status, body bytes)."""
    st, _, b = srv.request("POST", "/v1/systemone", dumps(req).encode(), {"Content-Type": "application/json"})
    return st, b


def noul(q):
    return {"questions": {"result": {"type": "noul", "instructions": q}}}


def request_for(template, state, model=MODEL):
    r = dict(template)
    r["state"] = state
    r["model"] = model
    return r


def envelope_ok(i, inp, body):
    return strip_latency(f'{{"index":{i},"ok":true,"input":{dumps(inp)},"response":'.encode() + body + b"}")


def file(name, data):
    p = os.path.join(TMP, name)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return p


def lines_of(out):
    return out.decode().splitlines()


def check_stream(srv, out, records, what):
    """records: [(input echoed, request the client should send)] in input order."""
    got = out.split(b"\n")
    C.eq(got[-1], b"", f"{what}: output ends with a newline")
    got = got[:-1]
    C.eq(len(got), len(records), f"{what}: one line per record")
    for i, (inp, req) in enumerate(records[:len(got)]):
        st, b = direct(srv, req)
        C.eq(st, 200, f"{what}: direct request {i}")
        if not C.eq(strip_latency(got[i]), envelope_ok(i, inp, b), f"{what}: envelope {i}"):
            return


def test_help():
    rc, out, err = client(["--help"])
    C.eq(rc, 0, "--help exit status")
    text = out.decode()
    for flag in ("--ask", "--choice", "--level", "--label", "--threshold", "--template", "--request", "--state ",
                 "--input", "--state-pointer", "--max-input-bytes", "--value", "--keep-going", "--progress", "--url",
                 "--model", "--key-env", "--jobs", "--timeout", "--retries"):
        C.ok(flag in text, f"--help lists {flag}")
    for default in ("default 0.5", "default 2097152", "default 1)", "default 120", "at most 10) (default 0)",
                    "default BASAL_API_KEY", "default http://127.0.0.1:8000; env BASAL_URL", "env BASAL_MODEL",
                    "default text with --ask/--template, json with --request", "default auto"):
        C.ok(default in text, f"--help states the default {default!r}")
    C.eq(err, "", "--help writes nothing on stderr")


def test_forms(srv, url):
    env = {"BASAL_URL": url}
    q = "Czy klient prosi o zwrot pieniędzy?"
    # text on stdin (trailing newline kept), noul, discovery of the only model
    text = "Klient: zapłaciłem dwa razy, proszę o zwrot.\n"
    rc, out, err = client(["--ask", q], text.encode(), env)
    st, b = direct(srv, request_for(noul(q), text))
    C.eq((rc, st), (0, 200), f"text stdin: exit status ({err})")
    C.eq(strip_latency(out), strip_latency(b) + b"\n", "text stdin: the server's answer to the same request")
    # --state FILE, choice with and without descriptions, --model flag beats BASAL_MODEL
    path = file("state.txt", "Nie działa logowanie do aplikacji.")
    choice = {"questions": {"result": {"type": "choice", "instructions": "Dział?",
                                       "criteria": {"it": "Wsparcie techniczne", "sales": None, "a": "b=x=y"}}}}
    rc, out, err = client(["--state", path, "--ask", "Dział?", "--choice", "it=Wsparcie techniczne", "--choice",
                           "sales", "--choice", "a=b=x=y", "--model", MODEL], b"",
                          dict(env, BASAL_MODEL="not-this-one"))
    st, b = direct(srv, request_for(choice, "Nie działa logowanie do aplikacji."))
    C.eq(rc, 0, f"choice: exit status ({err})")
    C.eq(strip_latency(out), strip_latency(b) + b"\n", "choice from --state FILE (null description, '=' split once)")
    # --value: choice key as text, noul as the number
    rc, out, _ = client(["--state", path, "--ask", "Dział?", "--choice", "it=Wsparcie techniczne", "--choice", "sales",
                         "--choice", "a=b=x=y", "--value"], b"", env)
    C.eq(out.decode(), json.loads(b)["answers"]["result"]["choice"] + "\n", "--value prints the choice key")
    rc, out, _ = client(["--ask", q, "--value"], text.encode(), dict(env, BASAL_MODEL=MODEL))
    st, b = direct(srv, request_for(noul(q), text))
    C.eq(float(out), json.loads(b)["answers"]["result"]["noul"], "--value prints the noul probability")
    # score levels
    score = {"questions": {"result": {"type": "score", "instructions": "Jak pilne?",
                                      "criteria": ["wcale", "trochę", "bardzo"]}}}
    rc, out, _ = client(["--ask", "Jak pilne?", "--level", "wcale", "--level", "trochę", "--level", "bardzo"],
                        text.encode(), env)
    st, b = direct(srv, request_for(score, text))
    C.eq(strip_latency(out), strip_latency(b) + b"\n", "score from --level")
    # --input json: whole value as state, or the pointer's target
    rec = {"id": 7, "ticket": {"a/b": {"text": "Paczka nie dotarła."}}, "n": [1, 2.5, None, True]}
    rc, out, _ = client(["--ask", q, "--input", "json"], dumps(rec).encode(), env)
    st, b = direct(srv, request_for(noul(q), rec))
    C.eq(strip_latency(out), strip_latency(b) + b"\n", "--input json: the object is the state")
    rc, out, _ = client(["--ask", q, "--input", "json", "--state-pointer", "/ticket/a~1b/text"],
                        json.dumps(rec, indent=2).encode(), env)
    st, b = direct(srv, request_for(noul(q), "Paczka nie dotarła."))
    C.eq(strip_latency(out), strip_latency(b) + b"\n", "--state-pointer with ~1")
    # --input lines: CRLF, blank and whitespace-only lines skipped, leading spaces kept
    raw = "pierwszy wiersz\r\n\n   \n  drugi wiersz\ntrzeci bez końca linii"
    rc, out, err = client(["--ask", q, "--input", "lines"], raw.encode(), env)
    C.eq(rc, 0, f"lines: exit status ({err})")
    check_stream(srv, out, [(s, request_for(noul(q), s)) for s in
                            ("pierwszy wiersz", "  drugi wiersz", "trzeci bez końca linii")], "--input lines")
    # --input jsonl with --state-pointer and --template (its own model kept, its questions asked)
    tmpl = {"model": MODEL, "questions": {"pilne": {"type": "noul", "instructions": "Czy to pilne?"},
                                          "dzial": {"type": "choice", "instructions": "Dział?",
                                                    "criteria": {"it": "IT", "hr": "Kadry"}}}}
    tpath = file("template.json", dumps(tmpl))
    recs = [{"id": i, "text": f"Zgłoszenie {i}: " + "słowo " * i} for i in range(5)]
    data = "\n".join(dumps(r) for r in recs[:3]) + "\n\n" + "\n".join(dumps(r) for r in recs[3:]) + "\n"
    rc, out, err = client(["--template", tpath, "--input", "jsonl", "--state-pointer", "/text", "--jobs", "3"],
                          data.encode(), {"BASAL_URL": url + "/"})
    C.eq(rc, 0, f"jsonl template: exit status ({err})")
    check_stream(srv, out, [(r, dict(tmpl, state=r["text"])) for r in recs], "--template with --input jsonl")
    # full requests: --request - (json) and --request FILE --input jsonl
    reqs = [request_for(noul(f"Pytanie {i}?"), f"Stan {i}") for i in range(3)]
    rc, out, _ = client(["--request", "-"], dumps(reqs[0]).encode(), env)
    st, b = direct(srv, reqs[0])
    C.eq(strip_latency(out), strip_latency(b) + b"\n", "--request - (json)")
    rpath = file("requests.jsonl", "".join(dumps(r) + "\n" for r in reqs))
    rc, out, _ = client(["--request", rpath, "--input", "jsonl"], b"", env)
    check_stream(srv, out, [(r, r) for r in reqs], "--request FILE --input jsonl")
    # a request without model gets --model (normalisation keeps unknown names as given)
    bare = {"state": "x", "questions": noul("y?")["questions"]}
    rc, out, _ = client(["--request", "-", "--model", MODEL], dumps(bare).encode(), env)
    st, b = direct(srv, dict(bare, model=MODEL))
    C.eq(strip_latency(out), strip_latency(b) + b"\n", "--model fills a request without model")


def test_order(srv, url):
    # states of very different lengths so that answers complete out of order
    states = [("Zdanie numer %d. " % i) * (1 + (i * 37) % 23) for i in range(200)]
    rc, out, err = client(["--ask", "Czy to ważne?", "--input", "lines", "--jobs", "32"],
                          "".join(s + "\n" for s in states).encode(), {"BASAL_URL": url})
    C.eq(rc, 0, f"--jobs 32: exit status ({err[-300:]})")
    # the states lose their trailing space? no: lines keep everything but the newline
    check_stream(srv, out, [(s, request_for(noul("Czy to ważne?"), s)) for s in states], "--jobs 32 order")


def test_errors(srv, url):
    env = {"BASAL_URL": url}
    good = request_for(noul("ok?"), "stan")
    unknown = dict(good, model="no-such-model")
    invalid = {"model": MODEL, "state": "x"}
    reqs = [good, invalid, unknown, good]
    data = "".join(dumps(r) + "\n" for r in reqs) + "{not json\n"
    rc, out, _ = client(["--request", "-", "--input", "jsonl", "--keep-going", "--jobs", "4"], data.encode(), env)
    C.eq(rc, 1, "--keep-going with failures: exit 1")
    got = lines_of(out)
    C.eq(len(got), 5, "--keep-going: every record answered")
    for i, r in enumerate(reqs):
        st, b = direct(srv, r)
        if st == 200:
            C.eq(strip_latency(got[i].encode()), envelope_ok(i, r, b), f"keep-going record {i}")
        elif st == 422:
            # basal-rs client.rs/http.rs: a record is validated (parse_request) before it is sent; a refused one
            # fails with kind request, message "validation error: <the error list>", the error body as detail and
            # no status (nothing was sent)
            detail = json.loads(b)
            want = {"index": i, "ok": False, "input": r, "error": {
                "kind": "request", "message": "validation error: " + dumps(detail["detail"]), "detail": detail}}
            C.eq(json.loads(got[i]), want, f"error envelope {i} (refused before sending; the server says {st})")
            C.eq(got[i], dumps(want), f"error envelope {i}: compact, key order")
        else:
            want = {"index": i, "ok": False, "input": r,
                    "error": {"kind": "http", "message": f"HTTP {st}", "status": st, "detail": json.loads(b)}}
            C.eq(json.loads(got[i]), want, f"error envelope {i} (HTTP {st})")
            C.eq(got[i], dumps(want), f"error envelope {i}: compact, key order")
    C.eq(json.loads(got[4]), {"index": 4, "ok": False, "input": None, "error": {
        "kind": "input", "message": "invalid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"}}, "invalid JSON record: input null, CPython's message")
    C.eq(direct(srv, invalid)[0], 422, "oracle: missing fields are a 422")
    C.eq(direct(srv, unknown)[0], 400, "oracle: an unknown model is a 400")
    # a stream line is blank when every byte is ASCII whitespace in Rust's sense (u8::is_ascii_whitespace:
    # space, TAB, LF, FF, CR), so a line holding a vertical tab is a record
    rc, out, _ = client(["--ask", "ok?", "--input", "lines", "--model", MODEL], b"a\n \t\x0c\r\n\x0b\nb\n", env)
    C.eq((rc, [json.loads(l)["input"] for l in lines_of(out)]), (0, ["a", "\x0b", "b"]), "blank lines: \\v is not blank")
    # without --keep-going the first failure in output order stops the run
    rc, out, _ = client(["--request", "-", "--input", "jsonl", "--jobs", "4"], data.encode(), env)
    C.eq((rc, len(lines_of(out))), (1, 2), "first failure stops: exit 1 after its envelope")
    # a single json request that fails: error object on stderr, nothing on stdout
    rc, out, err = client(["--request", "-"], dumps(invalid).encode(), env)
    C.eq((rc, out), (1, b""), "single failed request: exit 1, empty stdout")
    C.ok('"kind":"request"' in err and '"status"' not in err and '"detail":{"detail":[' in err,
         f"single refused request: error on stderr ({err})")
    # refused records are not sent: the server's request counter stays where it was
    before = metric_sum(srv.metrics(), "basal_http_requests_total")
    bad_jsonl = "".join(dumps(x) + "\n" for x in (invalid, dict(invalid, model=5), {"model": MODEL, "state": "x",
                        "questions": {}})).encode()
    rc, out, _ = client(["--request", "-", "--input", "jsonl", "--keep-going"], bad_jsonl, env)
    C.eq((rc, [json.loads(l)["error"]["kind"] for l in lines_of(out)]), (1, ["request"] * 3),
         "malformed records: kind request each, exit 1")
    C.eq(metric_sum(srv.metrics(), "basal_http_requests_total") - before, 0,
         "malformed records: nothing sent to the server (its inference request counter)")
    # a request without a model is validated before the model is discovered (with a placeholder model name)
    rc, out, _ = client(["--request", "-", "--input", "jsonl"], (dumps({"state": "x", "questions": {}}) + "\n").encode(),
                        env)
    e = json.loads(out)["error"] if out else {}
    C.eq((rc, e.get("kind"), e.get("detail", {}).get("detail", [{}])[0].get("loc")), (1, "request", ["body", "questions"]),
         "no model and no questions: refused before discovery")
    # a template whose questions the endpoint would refuse: a usage error at the start (basal-rs: "invalid questions
    # in template"), whatever the input
    tpl = file("bad-template.json", dumps({"questions": {"q": {"type": "choice"}}}))
    rc, out, err = client(["--template", tpl], b"x", env)
    C.eq((rc, out), (2, b""), f"template with invalid questions: exit 2 ({err.strip()[:160]})")
    C.ok("invalid questions in template: validation error: [" in err, f"template error names the questions ({err})")
    # connection refused: transport error without status
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    rc, out, _ = client(["--ask", "ok?", "--input", "lines", "--url", f"http://127.0.0.1:{port}", "--model", MODEL],
                        b"a\nb\n", {})
    env_ = json.loads(out.decode().splitlines()[0]) if out else {}
    C.eq(rc, 1, "connection refused: exit 1")
    C.eq(sorted(env_.get("error", {})), ["kind", "message"], "connection refused: kind and message only")
    C.eq(env_.get("error", {}).get("kind"), "transport", "connection refused: kind transport")
    C.ok("onnect" in env_.get("error", {}).get("message", ""), f"connection refused: message ({env_})")
    # --timeout: a listener that never answers
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    t0 = time.time()
    rc, out, _ = client(["--ask", "ok?", "--timeout", "1", "--url", f"http://127.0.0.1:{ls.getsockname()[1]}",
                         "--model", MODEL], b"x", {})
    took = time.time() - t0
    ls.close()
    C.eq(rc, 1, "--timeout 1 against a silent server: exit 1")
    C.ok(1.0 <= took < 10 * SLOW, f"--timeout 1 took {took:.2f} s")
    # usage errors: exit 2
    for args, what in ((["--ask", "x", "--jobs", "0"], "--jobs 0"), (["--ask", "x", "--jobs", "257"], "--jobs 257"),
                       (["--ask", "x", "--retries", "11"], "--retries 11"), (["--ask", "x", "--bogus"], "unknown flag"),
                       (["--ask", "x", "--keep-going"], "--keep-going with text"),
                       (["--ask", "x", "--choice", "a", "--level", "b"], "--choice with --level"),
                       (["--ask", "x", "--threshold", "0.3"], "--threshold without --label"),
                       (["--ask", "x", "--input", "lines", "--state-pointer", "/a"], "--state-pointer with lines"),
                       (["--ask", "x", "--input", "json", "--state-pointer", "a"], "pointer without /"),
                       (["--request", "-", "--input", "lines"], "--request with lines"),
                       (["--ask", "x", "--state", os.path.join(TMP, "missing.txt")], "missing state file"),
                       (["--ask", "x", "--url", "ftp://h"], "non-http URL"),
                       (["--ask", "x", "--choice", "a", "--choice", "a"], "duplicate key"),
                       (["--ask", "x", "--local"], "--local without --model"),
                       (["--ask", "x", "--local", "--model", fixture("tiny-bias"), "--jobs", "2"], "--local --jobs 2"),
                       (["--ask", "x", "--local", "--model", fixture("tiny-bias"), "--url", url], "--local --url"),
                       (["--ask", "x", "--threads", "1"], "--threads without --local"),
                       ([], "no question")):
        rc, out, err = client(args, b"x", env)
        C.eq(rc, 2, f"usage error {what}: exit 2 ({err.strip()[:120]})")
        C.eq(out, b"", f"usage error {what}: empty stdout")


def test_retries():
    srv = Server(["--model", fixture("tiny-bias"), "--max-inflight", "1", "--metrics"])
    try:
        url = f"http://127.0.0.1:{srv.port}"
        states = [f"Wiadomość {i}: " + "tekst " * (20 + i) for i in range(8)]
        data = "".join(s + "\n" for s in states).encode()
        rc, out, err = client(["--ask", "ok?", "--input", "lines", "--jobs", "4", "--retries", "10"], data,
                              {"BASAL_URL": url, "BASAL_MODEL": MODEL})
        m = srv.metrics()
        n529 = metric_sum(m, "basal_http_requests_total", status="529")
        n200 = metric_sum(m, "basal_http_requests_total", status="200")
        said = re.search(r"(\d+) retries", err)
        C.eq(rc, 0, f"529 retries: every record answered ({err[-300:]})")
        C.eq(len(lines_of(out)), 8, "529 retries: 8 envelopes")
        C.ok(n529 > 0, f"--max-inflight 1 with 4 jobs produced 529s ({n529})")
        C.eq(int(said.group(1)) if said else 0, int(n529), "client's retries = the server's 529 responses")
        C.eq(n200, 8, "exactly one 200 per record")
        check_stream(srv, out, [(s, request_for(noul("ok?"), s)) for s in states], "answers after retries")
        # without --retries a 529 is a failed record with the server's body as detail
        rc, out, _ = client(["--ask", "ok?", "--input", "lines", "--jobs", "4", "--keep-going"], data,
                            {"BASAL_URL": url, "BASAL_MODEL": MODEL})
        m2 = srv.metrics()
        new529 = metric_sum(m2, "basal_http_requests_total", status="529") - n529
        fails = [json.loads(l) for l in lines_of(out) if not json.loads(l)["ok"]]
        C.eq(len(fails), int(new529), "no retries: one failed envelope per 529")
        C.ok(all(f["error"]["status"] == 529 and f["error"]["message"] == "HTTP 529"
                 and f["error"]["detail"]["detail"]["error_type"] == "overloaded_error" for f in fails),
             "529 envelopes carry status and the overload body")
        C.eq(rc, 1 if fails else 0, "no retries: exit status")
    finally:
        srv.stop()


def test_auth():
    srv = Server(["--model", fixture("tiny-bias"), "--api-key-env", "BASAL_TEST_KEY"],
                 env={"BASAL_TEST_KEY": "sekret-123"})
    try:
        url = f"http://127.0.0.1:{srv.port}"
        rc, out, err = client(["--ask", "ok?", "--model", MODEL], b"x", {"BASAL_URL": url})
        C.ok(rc == 1 and '"status":403' in err, f"no key: HTTP 403, exit 1 ({err})")
        rc, out, err = client(["--ask", "ok?", "--model", MODEL, "--key-env", "MY_KEY"], b"x",
                              {"BASAL_URL": url, "MY_KEY": "sekret-123"})
        C.eq(rc, 0, f"--key-env: the bearer token is sent ({err})")
        rc, out, err = client(["--ask", "ok?", "--model", MODEL], b"x", {"BASAL_URL": url, "BASAL_API_KEY": "zly"})
        C.ok(rc == 1 and '"status":401' in err, f"a wrong key: HTTP 401 ({err})")
        # a token no header value may hold (a control byte other than TAB: reqwest's HeaderValue rule) is refused
        rc, out, err = client(["--ask", "ok?", "--model", MODEL], b"x", {"BASAL_URL": url, "BASAL_API_KEY": "ab\x01c"})
        C.ok(rc == 2 and out == b"" and "invalid bearer token" in err, f"a control byte in the key: exit 2 ({err})")
    finally:
        srv.stop()


class ScriptedPeer:
    """An HTTP/1.1 peer on 127.0.0.1 that answers POSTs with a scripted list of
    (status, headers) and logs when each request arrived: it produces the
    statuses a basal server cannot be made to send on demand (408, 429, 500,
    502, 503, 504, a long Retry-After)."""

    def __init__(self, script):
        import http.server
        peer = self
        self.script, self.times = list(script), []

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                peer.times.append(time.time())
                status, headers = peer.script.pop(0) if peer.script else (200, {})
                body = (b'{"model":"m","answers":{"r":{"type":"noul","noul":0.5}},"usage":{}}' if status == 200
                        else b'{"detail":"scripted"}')
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_retry_rules():
    """Which statuses are retried, the backoff, and Retry-After (spec 06 §5.3)."""
    def one(script, retries, what):
        peer = ScriptedPeer(script)
        t0 = time.time()
        rc, out, err = client(["--ask", "ok?", "--model", "m", "--url", peer.url, "--retries", str(retries)], b"x", {})
        took = time.time() - t0
        peer.close()
        gaps = [b - a for a, b in zip(peer.times, peer.times[1:])]
        return rc, err, len(peer.times), gaps, took
    rc, err, n, gaps, _ = one([(503, {}), (502, {}), (200, {})], 5, "backoff")
    C.eq((rc, n), (0, 3), f"503, 502 retried, then answered ({err})")
    C.ok(len(gaps) == 2 and 0.95 <= gaps[0] < 1.9 and 1.95 <= gaps[1] < 3.5, f"backoff 1, 2 s: {gaps}")
    for status in (408, 429, 500, 504, 529):
        rc, err, n, gaps, _ = one([(status, {"Retry-After": "0"}), (200, {})], 1, "retry-after 0")
        C.eq((rc, n), (0, 2), f"HTTP {status} retried at once with Retry-After: 0 ({err})")
        C.ok(gaps and gaps[0] < 0.9, f"HTTP {status}: Retry-After 0 beats the 1 s backoff: {gaps}")
    rc, err, n, gaps, _ = one([(529, {"Retry-After": "2"}), (200, {})], 3, "retry-after 2")
    C.ok(rc == 0 and n == 2 and 1.95 <= gaps[0] < 3.5, f"Retry-After: 2 waits 2 s ({gaps})")
    rc, err, n, _, took = one([(529, {"Retry-After": "60"}), (200, {})], 3, "retry-after 60")
    C.ok(rc == 1 and n == 1 and took < 5 and '"status":529' in err, f"Retry-After above 30 s fails at once ({took:.1f} s)")
    rc, err, n, _, _ = one([(503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), (200, {})], 3, "http-date")
    C.eq((rc, n), (1, 1), "a Retry-After date is not shortened: the record fails")
    for status in (400, 401, 404, 413, 422, 501):
        rc, err, n, _, _ = one([(status, {}), (200, {})], 3, "not retried")
        C.eq((rc, n), (1, 1), f"HTTP {status} is not retried")
    rc, err, n, _, _ = one([(500, {"Retry-After": "0"}), (500, {"Retry-After": "0"}), (200, {})], 1, "retries bound")
    C.eq((rc, n), (1, 2), "--retries 1: two attempts, then the record fails")
    rc, err, n, _, _ = one([(500, {})], 0, "no retries")
    C.eq((rc, n), (1, 1), "--retries 0 (the default): one attempt")


def test_sigint(url):
    """Records answered before Ctrl-C are on stdout; the exit status is 130."""
    env = dict(os.environ, BASAL_URL=url, BASAL_MODEL=MODEL)
    p = subprocess.Popen([BASAL, "client", "--ask", "ok?", "--input", "lines"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdin.write(b"jeden\ndwa\ntrzy\n")
    p.stdin.flush()
    got = b""
    deadline = time.time() + 30 * SLOW
    while got.count(b"\n") < 3 and time.time() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.5)
        if r:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            got += chunk
    C.eq(got.count(b"\n"), 3, "answers are written while the input stays open")
    p.send_signal(signal.SIGINT)
    try:
        rest, err = p.communicate(timeout=10 * SLOW)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, err = p.communicate()
    C.eq(p.returncode, 130, "SIGINT: exit 130")
    C.eq(rest, b"", "SIGINT: nothing after the flushed answers")
    C.ok(all(json.loads(l)["ok"] for l in got.decode().splitlines()), "SIGINT: the flushed answers are complete")


def test_progress(url):
    """The progress line appears on a terminal (a pty) and not on a file."""
    path = file("progress.txt", "".join(f"linia {i}\n" for i in range(6)))
    master, slave = pty.openpty()
    env = dict(os.environ, BASAL_URL=url, BASAL_MODEL=MODEL)
    p = subprocess.Popen([BASAL, "client", "--ask", "ok?", "--input", "lines", "--state", path],
                         stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    out, _ = p.communicate(timeout=60 * SLOW)
    tty = b""
    while True:
        try:
            r, _, _ = select.select([master], [], [], 0.2)
            if not r:
                break
            chunk = os.read(master, 65536)
            if not chunk:
                break
            tty += chunk
        except OSError:
            break
    os.close(master)
    C.eq(p.returncode, 0, "progress run: exit 0")
    C.ok(b"6/6 done" in tty and b"rec/s" in tty, f"progress on a terminal: {tty[-200:]!r}")
    rc, out, err = client(["--ask", "ok?", "--input", "lines", "--state", path], b"", {"BASAL_URL": url,
                                                                                     "BASAL_MODEL": MODEL})
    C.ok("done" not in err, "no progress line when stderr is not a terminal")


def no_latency(out):
    """The server's bodies without usage.latency_ms: what --local prints."""
    return re.sub(rb',"latency_ms":[-0-9.eE+]+', b"", out)


def test_local(srv, url):
    """--local decides in-process on the same fixture: the bytes the client
    prints over HTTP, less usage.latency_ms; a refused record fails with kind
    request and the endpoint's error body as detail."""
    env = {"BASAL_URL": url}
    local = ["--local", "--model", fixture("tiny-bias"), "--threads", "1"]
    q = "Czy klient prosi o zwrot pieniędzy?"
    text = "Klient: zapłaciłem dwa razy, proszę o zwrot.\n".encode()
    choice = ["--ask", "Dział?", "--choice", "it=Wsparcie techniczne", "--choice", "sales", "--choice", "a=b=x=y"]
    good = request_for(noul("ok?"), "stan")
    invalid = {"model": MODEL, "state": "x"}
    jsonl = "".join(dumps(r) + "\n" for r in (good, invalid, dict(good, state="inny stan"))).encode()
    cases = [
        ("--ask noul", ["--ask", q], text),
        ("--ask --choice", choice, text),
        ("--request full", ["--request", "-"], dumps(request_for(noul(q), "Paczka nie dotarła.")).encode()),
        ("--input lines", ["--ask", q, "--input", "lines"], b"pierwszy\n\n  drugi\ntrzeci"),
        ("--value noul", ["--ask", q, "--value"], text),
        ("--value choice", choice + ["--value"], text),
    ]
    for what, args, stdin in cases:
        rc_h, out_h, err_h = client(args, stdin, env)
        rc_l, out_l, err_l = client(args + local, stdin)
        C.eq((rc_h, rc_l), (0, 0), f"--local {what}: exit status ({err_l.strip()[-200:]})")
        C.ok(len(out_l) > 1, f"--local {what}: prints an answer")
        C.eq(out_l, no_latency(out_h), f"--local {what}: the HTTP mode's bytes without latency_ms")
        C.ok(b"latency_ms" not in out_l, f"--local {what}: no latency_ms")
    # a stream with an invalid record and --keep-going
    args = ["--request", "-", "--input", "jsonl", "--keep-going"]
    rc_h, out_h, _ = client(args, jsonl, env)
    rc_l, out_l, err_l = client(args + local, jsonl)
    C.eq((rc_h, rc_l), (1, 1), f"--local --keep-going with a failure: exit 1 ({err_l.strip()[-200:]})")
    hl, ll = lines_of(out_h), lines_of(out_l)
    C.eq(len(ll), 3, "--local --keep-going: every record answered")
    st, body = direct(srv, invalid)
    C.eq(st, 422, "the invalid record: the server's 422")
    for i, (h, l) in enumerate(zip(hl, ll)):
        if i != 1:
            C.eq(l.encode(), no_latency(h.encode()), f"--local jsonl: envelope {i} as over HTTP")
            continue
        env_l = json.loads(l)
        C.eq(env_l["ok"], False, "--local jsonl: the invalid record fails")
        C.eq(env_l["input"], invalid, "--local jsonl: its input echoed")
        C.eq(env_l["error"]["kind"], "request", "--local jsonl: error kind request")
        C.eq(env_l["error"]["message"], "validation error: " + dumps(json.loads(body)["detail"]),
             "--local jsonl: message 'validation error: <list>' (basal-rs DecideError Display)")
        C.ok("status" not in env_l["error"], "--local jsonl: no HTTP status")
        C.eq(env_l["error"]["detail"], json.loads(body), "--local jsonl: detail is the server's 422 body")
        C.eq(dumps(env_l["error"]["detail"]).encode(), body, "--local jsonl: detail bytes as the server's")
        C.eq(env_l["error"]["detail"], json.loads(h)["error"]["detail"], "--local jsonl: detail as over HTTP")
    # without --keep-going the first failure stops the stream
    rc, out, _ = client(["--request", "-", "--input", "jsonl"] + local, jsonl)
    C.eq((rc, len(lines_of(out))), (1, 2), "--local without --keep-going: exit 1 after the failed record")
    # BASAL_MODEL names the model too; a missing model directory is a runtime failure
    rc, out, err = client(["--ask", q, "--local", "--threads", "1"], text, {"BASAL_MODEL": fixture("tiny-bias")})
    C.eq(rc, 0, f"--local with BASAL_MODEL: exit 0 ({err.strip()[-200:]})")
    rc, out, err = client(["--ask", q, "--local", "--model", os.path.join(TMP, "no-such-model")], text)
    C.eq((rc, out), (1, b""), f"--local with a missing model: exit 1 ({err.strip()[-120:]})")


def main():
    test_help()
    srv = Server(["--model", fixture("tiny-bias"), "--metrics"])
    try:
        url = f"http://127.0.0.1:{srv.port}"
        test_forms(srv, url)
        test_order(srv, url)
        test_errors(srv, url)
        test_local(srv, url)
        test_sigint(url)
        test_progress(url)
    finally:
        srv.stop()
    test_retries()
    test_retry_rules()
    test_auth()
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
