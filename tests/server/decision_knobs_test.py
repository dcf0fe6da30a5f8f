"""Upstream's serving knobs and the decision log (issue 33 items 1-2).

Oracle of the knobs: tools/protocol_ref.py (prompts from the spec text, the
npm tokenizer, the torch f32 forward, float64 decision math) run with the
same --orders / --calibration / --no-calibration:
- `basal decide` with orders 1|2 x calibration model|none|FILE on several
  requests: probabilities within 1e-5 of the reference, the same argmax, and
  usage.input_tokens exactly (orders 1 = half the prompt tokens);
- `basal serve --orders 1 --no-calibration --name X` answers byte for byte as
  `basal decide` with the same knobs (latency aside), with x-basal-orders: 1,
  basal_model_option_orders 1, and serves X instead of basal.json's name;
- a YAML configuration serving one directory twice (name:, orders:,
  calibration:, no_calibration:) answers each name with its own knobs;
- errors: a missing or broken calibration file (exit 1, the file named),
  usage errors (exit 2), bad YAML values.
Decision log, against the responses themselves:
- under 48 concurrent requests every 200 has exactly one line, with its
  x-typesafe-request-id, the answers and usage exactly as the client got
  them (same JSON text), the SHA-256 of the body it sent, the model's
  members; failed requests have none; the API key appears nowhere; the state
  only with --log-decisions-state;
- SIGHUP reopens the file (rotate, HUP, the next line lands in the new file);
- a full disk (/dev/full): every request still answered, the failure logged
  once, basal_decision_log_failed_total counts the lost lines."""
import datetime
import fcntl
import hashlib
import json
import time
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from srvlib import BASAL, FIXTURES, SLOW, Checks, Server, metric, parse_metrics, run_parallel, wait_until  # noqa: E402

C = Checks()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY = "/usr/bin/python3"
tmp = tempfile.mkdtemp(prefix="knobs-", dir=os.environ.get("TMPDIR"))
MODEL = os.path.join(FIXTURES, "tiny-f32")
NAME = json.load(open(os.path.join(MODEL, "basal.json")))["name"]
TOL = 1e-5

CUSTOM_CAL = os.path.join(tmp, "my-calibration.json")
with open(CUSTOM_CAL, "w") as f:
    json.dump({"temperature_per_prim": {"choice": 1.7, "noul": 0.6, "score": 2.5}}, f)

REQUESTS = [
    {"state": "Paczka nie dotarła, żądam zwrotu pieniędzy!",
     "questions": {"q": {"type": "choice", "instructions": "Jaka jest intencja?",
                         "criteria": {"refund": "zwrot", "info": "informacja", "other": "inne"}},
                   "n": {"type": "noul", "instructions": "Czy klient jest zły?"}}},
    {"state": {"ticket": 17, "text": "The app crashes when I upload a photo."},
     "questions": {"s": {"type": "score", "instructions": "How severe is it?",
                         "criteria": ["low", "medium", "high", "critical"]},
                   "c": {"type": "choice", "instructions": "Which team?",
                         "criteria": ["mobile", "backend", "billing", "design", "support"],
                         "option_keys": "hide"}}},
    {"state": "Dzień dobry, chciałbym zmienić adres dostawy i numer telefonu.",
     "questions": {"m": {"type": "multi", "instructions": "Czego dotyczy prośba?",
                         "criteria": {"addr": "adres", "phone": "telefon", "pay": "płatność"}}}},
    # act (max_error uses the file's certified thresholds: none without calibration) and a large
    # choice (round 1 in one order; with orders 1 its finalists in order 0 alone too)
    {"state": "Zamówienie 1 240 zł, dostarczone 6 dni temu. Klientka odstępuje od umowy.",
     "questions": {"refund": {"type": "act", "instructions": "Czy zwrot przysługuje?",
                              "criteria": {"true": "Przysługuje", "false": "Nie przysługuje"},
                              "costs": {"approve": {"true": 0, "false": 1240}, "reject": {"true": 300, "false": 0},
                                        "human": {"true": 15, "false": 15}}, "max_error": 0.05},
                   "route": {"type": "act", "instructions": "Dokąd skierować?", "option_keys": "hide",
                             "criteria": {"a": "dział A", "b": "dział B", "c": "dział C"},
                             "costs": {"wrong": 50, "defer": 2}},
                   "big": {"type": "choice", "instructions": "Który temat?",
                           "criteria": {f"t{i}": f"temat numer {i}" for i in range(13)}}}},
]
LARGE = {3}  # requests with a large choice: orders 1 halves only their finalists' prompts
for r in REQUESTS:
    r["model"] = NAME

KNOBS = [  # (label, decide/serve flags, protocol_ref flags)
    ("orders 2, model calibration", [], []),
    ("orders 1, model calibration", ["--orders", "1"], ["--orders", "1"]),
    ("orders 2, no calibration", ["--no-calibration"], ["--no-calibration"]),
    ("orders 1, no calibration", ["--orders", "1", "--no-calibration"], ["--orders", "1", "--no-calibration"]),
    ("orders 2, calibration FILE", ["--calibration", CUSTOM_CAL], ["--calibration", CUSTOM_CAL]),
]


def decide(body, flags, model=MODEL):
    p = subprocess.run([BASAL, "decide", "--model", model, *flags], input=json.dumps(body, ensure_ascii=False).encode(),
                       capture_output=True, timeout=120 * SLOW)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def reference(bodies, flags):
    path = os.path.join(tmp, "ref-in.jsonl")
    with open(path, "w") as f:
        for b in bodies:
            f.write(json.dumps(b, ensure_ascii=False) + "\n")
    p = subprocess.run([PY, os.path.join(ROOT, "tools/protocol_ref.py"), "--model", MODEL, "--requests", path, *flags],
                       capture_output=True, timeout=600)
    if p.returncode:
        raise RuntimeError("protocol_ref.py: " + p.stderr.decode()[-2000:])
    return json.loads(p.stdout)


def differences(got, ref, path=""):
    """Where got differs from the reference: numbers beyond TOL (relative above 1: expected
    costs), anything else (keys, their order, strings, actions, flags) at all."""
    if isinstance(ref, float) or isinstance(got, float):
        ok = isinstance(got, (int, float)) and isinstance(ref, (int, float)) and \
            abs(got - ref) <= TOL * max(1.0, abs(ref))
        return [] if ok else [f"{path}: {got!r} vs {ref!r}"]
    if isinstance(ref, dict) and isinstance(got, dict):
        if list(got) != list(ref):
            return [f"{path}: keys {list(got)} vs {list(ref)}"]
        return [d for k in ref for d in differences(got[k], ref[k], f"{path}.{k}")]
    if isinstance(ref, list) and isinstance(got, list) and len(got) == len(ref):
        return [d for i, (g, r) in enumerate(zip(got, ref)) for d in differences(g, r, f"{path}[{i}]")]
    return [] if got == ref else [f"{path}: {got!r} vs {ref!r}"]


def compare_to_reference(tag, got, ref):
    C.eq(got["usage"]["input_tokens"], ref["usage"]["input_tokens"], f"{tag}: usage.input_tokens")
    diff = differences(got["answers"], ref["answers"], "answers")
    C.ok(not diff, f"{tag}: the answers differ from the torch reference: {diff[:4]}")


def part_decide():
    tokens = {}
    for label, flags, rflags in KNOBS:
        refs = reference(REQUESTS, rflags)
        for i, body in enumerate(REQUESTS):
            rc, out, err = decide(body, flags)
            if not C.eq(rc, 0, f"decide {label} #{i}: exit ({err[-300:]})"):
                continue
            got = json.loads(out)
            compare_to_reference(f"decide {label} #{i}", got, refs[i])
            tokens[(label, i)] = got["usage"]["input_tokens"]
    for i in range(len(REQUESTS)):  # one order: exactly half the prompt tokens of two
        t2, t1 = tokens.get(("orders 2, model calibration", i)), tokens.get(("orders 1, model calibration", i))
        if i in LARGE:
            C.ok(t1 is not None and t2 is not None and t1 < t2, f"#{i}: orders 1 tokens {t1} < {t2}")
        else:
            C.ok(t1 is not None and t2 is not None and 2 * t1 == t2, f"#{i}: orders 1 tokens {t1} = half of {t2}")
    # the knobs change the answer (the test above would pass for ignored flags only if the reference ignored them too)
    base = json.loads(decide(REQUESTS[0], [])[1])["answers"]["q"]["probabilities"]
    one = json.loads(decide(REQUESTS[0], ["--orders", "1"])[1])["answers"]["q"]["probabilities"]
    C.ok(base != one, "orders 1 gives another distribution than orders 2")
    # errors
    rc, out, err = decide(REQUESTS[0], ["--calibration", os.path.join(tmp, "missing.json")])
    C.ok(rc == 1 and "missing.json" in err and "does not exist" in err, f"missing calibration file: {rc} {err[-300:]}")
    bad = os.path.join(tmp, "broken.json")
    with open(bad, "w") as f:
        f.write('{"temperature_per_prim": {"choice": -1}}')
    rc, out, err = decide(REQUESTS[0], ["--calibration", bad])
    C.ok(rc == 1 and "broken.json" in err and "positive" in err, f"broken calibration file: {rc} {err[-300:]}")
    rc, out, err = decide(REQUESTS[0], ["--orders", "3"])
    C.eq(rc, 2, f"--orders 3 is a usage error ({err[-200:]})")


def strip_latency(text):
    d = json.loads(text)
    d["usage"].pop("latency_ms", None)
    return json.dumps(d, ensure_ascii=False, sort_keys=True)


def part_serve_flags():
    dlog = os.path.join(tmp, "orders1.jsonl")
    srv = Server(["--model", MODEL, "--orders", "1", "--no-calibration", "--name", "tiny-one", "--metrics",
                  "--log-decisions", dlog])
    used = {}  # usage.input_tokens of the answers, per orders
    try:
        for i, body in enumerate(REQUESTS):
            b = dict(body, model="tiny-one")
            st, h, data = srv.post("/v1/systemone", b)
            used[1] = used.get(1, 0) + json.loads(data)["usage"]["input_tokens"]
            C.eq(st, 200, f"serve knobs #{i}: status")
            C.eq(h.get("x-basal-orders"), "1", f"serve knobs #{i}: x-basal-orders")
            # decide serves basal.json's name: compare with that request and the name swapped
            rc, out, err = decide(body, ["--orders", "1", "--no-calibration"])
            want = json.loads(out)
            want["model"] = "tiny-one"
            C.eq(strip_latency(data.decode()), json.dumps(want, ensure_ascii=False, sort_keys=True),
                 f"serve --orders 1 --no-calibration #{i} = decide with the same knobs")
        st, h, data = srv.post("/v1/systemone", REQUESTS[0])  # basal.json's name is not served any more
        C.eq(st, 400, "the basal.json name is not served under --name")
        C.eq(h.get("x-basal-served-models"), "tiny-one", "x-basal-served-models names --name")
        st, h, data = srv.request("GET", "/v1/models")
        C.eq([m["name"] for m in json.loads(data)["models"]], ["tiny-one"], "/v1/models lists --name")
        ms = srv.metrics()
        C.eq(metric(ms, "basal_model_option_orders", model="tiny-one"), 1.0, "basal_model_option_orders")
        C.eq(metric(ms, "basal_input_tokens_total", model="tiny-one"), float(used[1]),
             "orders 1: basal_input_tokens_total is the answers' usage")
        forward1 = metric(ms, "basal_forward_tokens_total", model="tiny-one")
        C.ok("1 option order, calibration off" in srv.log(), "the serving line names orders and calibration")
        wait_until(lambda: os.path.exists(dlog) and len(open(dlog).read().splitlines()) >= len(REQUESTS), 10)
        lines = read_lines(dlog)
        C.eq([(ln["model"], ln["orders"], ln["calibration"]) for ln in lines], [("tiny-one", 1, "off")] * len(REQUESTS),
             "decision log under the knobs: the served name, orders 1, calibration off")
    finally:
        srv.stop()
    srv = Server(["--model", MODEL, "--metrics", "--no-calibration"])
    try:
        used[2] = sum(json.loads(srv.post("/v1/systemone", b)[2])["usage"]["input_tokens"] for b in REQUESTS)
        ms = srv.metrics()
        C.eq(metric(ms, "basal_input_tokens_total", model=NAME), float(used[2]), "orders 2: basal_input_tokens_total")
        forward2 = metric(ms, "basal_forward_tokens_total", model=NAME)
        C.ok(used[1] < used[2] and forward1 < forward2,
             f"orders 1 packs fewer tokens: usage {used[1]} < {used[2]}, forward {forward1} < {forward2}")
    finally:
        srv.stop()
    srv = Server(["--model", MODEL, "--metrics"])
    try:
        st, h, data = srv.post("/v1/systemone", REQUESTS[0])
        C.eq(h.get("x-basal-orders"), "2", "default: x-basal-orders 2")
        C.eq(metric(srv.metrics(), "basal_model_option_orders", model=NAME), 2.0, "default: option orders 2")
        C.ok("basal_decision_log" not in srv.request("GET", "/metrics")[2].decode(),
             "no decision log: no decision log families")
    finally:
        srv.stop()


def part_serve_yaml():
    cfg = os.path.join(tmp, "knobs.yml")
    with open(cfg, "w") as f:
        f.write(f"""models:
  - path: {MODEL}
    name: fast
    orders: 1
    calibration: {CUSTOM_CAL}
  - path: {MODEL}
    name: exact
    no_calibration: true
""")
    srv = Server(["--config", cfg])
    try:
        for name, flags in (("fast", ["--orders", "1", "--calibration", CUSTOM_CAL]), ("exact", ["--no-calibration"])):
            st, h, data = srv.post("/v1/systemone", dict(REQUESTS[1], model=name))
            C.eq(st, 200, f"YAML {name}: status")
            want = json.loads(decide(REQUESTS[1], flags)[1])
            want["model"] = name
            C.eq(strip_latency(data.decode()), json.dumps(want, ensure_ascii=False, sort_keys=True),
                 f"YAML model {name} answers with its own knobs")
    finally:
        srv.stop()
    for text, want in (("orders: 3", "expected 1 or 2"), ("name: ''", "non-empty"), ("ordres: 1", "did you mean orders")):
        with open(cfg, "w") as f:
            f.write(f"models:\n  - path: {MODEL}\n    {text}\n")
        p = subprocess.run([BASAL, "serve", "--config", cfg, "--addr", "127.0.0.1:0"], capture_output=True,
                           timeout=60 * SLOW)
        C.ok(p.returncode != 0 and want in p.stderr.decode(), f"YAML {text!r}: {p.returncode} {p.stderr.decode()[-300:]}")
    with open(cfg, "w") as f:
        f.write(f"models:\n  - path: {MODEL}\n    calibration: {tmp}/nope.json\n")
    p = subprocess.run([BASAL, "serve", "--config", cfg, "--addr", "127.0.0.1:0"], capture_output=True, timeout=60 * SLOW)
    C.ok(p.returncode == 1 and "nope.json" in p.stderr.decode(), "YAML calibration: a missing file stops the start")
    # init writes every knob; doctor reports them and fails on what would fail the start
    ini = os.path.join(tmp, "init.yml")
    p = subprocess.run([BASAL, "init", "--model", MODEL, "--out", ini], capture_output=True, timeout=60)
    text = open(ini).read() if p.returncode == 0 else ""
    for k in ("#orders: 2", "#no_calibration: false", "# name: NAME", "# calibration: FILE", "# decision_log: PATH",
              "#decision_log_state: false"):
        C.ok(k in text, f"basal init writes {k!r}")
    with open(cfg, "w") as f:
        f.write(f"decision_log: {tmp}/no-such-dir/d.jsonl\nmodels:\n  - path: {MODEL}\n    orders: 1\n"
                f"    name: doc\n")
    p = subprocess.run([BASAL, "doctor", "--config", cfg], capture_output=True, timeout=120 * SLOW)
    out = p.stdout.decode()
    C.ok("doc: 1 option order per question" in out, "doctor: orders")
    C.ok("doc: calibration" in out and "temperatures choice 0.9" in out, "doctor: the calibration in use")
    C.ok(p.returncode != 0 and "no-such-dir" in out, f"doctor: an unwritable decision log fails ({p.returncode})")
    with open(cfg, "w") as f:
        f.write(f"models:\n  - path: {MODEL}\n    calibration: {tmp}/broken.json\n")
    p = subprocess.run([BASAL, "doctor", "--config", cfg], capture_output=True, timeout=120 * SLOW)
    C.ok(p.returncode != 0 and "broken.json" in p.stdout.decode(), "doctor: a broken calibration file fails")
    # --help names every knob with its default (stdout, exit 0)
    for cmd, flags in ((["serve"], ["--orders 1|2", "(default 2)", "--calibration FILE", "--no-calibration",
                                    "--name NAME", "(default basal.json name)", "--log-decisions FILE|-", "(default off)",
                                    "--log-decisions-state"]),
                       (["decide"], ["--orders 1|2", "--calibration FILE", "--no-calibration"])):
        p = subprocess.run([BASAL, *cmd, "--help"], capture_output=True, timeout=30)
        out = p.stdout.decode()
        C.ok(p.returncode == 0 and all(f in out for f in flags),
             f"basal {cmd[0]} --help lists the knobs: {[f for f in flags if f not in out]}")
    for args, what in ((["--model", MODEL, "--model", MODEL, "--name", "x"], "--name with two models"),
                       (["--model", MODEL, "--log-decisions-state"], "--log-decisions-state alone"),
                       (["--model", MODEL, "--orders", "0"], "--orders 0")):
        p = subprocess.run([BASAL, "serve", *args, "--addr", "127.0.0.1:0"], capture_output=True, timeout=60 * SLOW)
        C.eq(p.returncode, 2, f"usage error: {what} ({p.stderr.decode()[-200:]})")
    p = subprocess.run([BASAL, "serve", "--model", MODEL, "--log-decisions", "/nonexistent-dir/d.jsonl",
                        "--addr", "127.0.0.1:0"], capture_output=True, timeout=60 * SLOW)
    C.ok(p.returncode == 1 and "/nonexistent-dir/d.jsonl" in p.stderr.decode(),
         f"an unwritable decision log stops the start, naming it ({p.stderr.decode()[-200:]})")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(ln) for ln in f.read().splitlines()]


def upstream_sha256(body):
    """basal-serve's request_sha256 (qooba/basal server.py log_decision), computed by Python's json."""
    b = json.loads(body)
    return hashlib.sha256(json.dumps([b.get("state"), b.get("questions")], sort_keys=True, ensure_ascii=False,
                                     default=str).encode()).hexdigest()


LINE_KEYS = ["ts", "time", "request_id", "endpoint", "model", "revision", "version", "dtype", "orders", "calibration",
             "request_sha256", "body_sha256", "latency_ms", "queue_ms", "compute_ms", "answers", "usage", "reviewed"]


def line_matches(ln, body, resp_text, h, t0, t1):
    """What a decision log line must say of its request: [] or the differences."""
    bad = []
    resp = json.loads(resp_text)
    want = {"request_id": h.get("x-typesafe-request-id"), "answers": resp["answers"], "usage": resp["usage"],
            "request_sha256": upstream_sha256(body), "body_sha256": hashlib.sha256(body).hexdigest(),
            "reviewed": None}
    for k, v in want.items():
        if ln.get(k) != v:
            bad.append(f"{k}: {str(ln.get(k))[:80]} vs {str(v)[:80]}")
    if json.dumps(ln.get("answers"), ensure_ascii=False) != answers_text(resp_text, "answers"):
        bad.append("answers text")
    ts = ln.get("ts")
    if not isinstance(ts, float) or not t0 - 1 <= ts <= t1 + 1:
        bad.append(f"ts {ts!r} outside [{t0}, {t1}]")
    else:  # time is ts in UTC, to the millisecond
        tm = datetime.datetime.strptime(ln.get("time", ""), "%Y-%m-%dT%H:%M:%S.%fZ")
        tm = tm.replace(tzinfo=datetime.timezone.utc).timestamp()
        if abs(tm - ts) > 0.0011:
            bad.append(f"time {ln.get('time')} is not ts {ts}")
    return bad


def answers_text(body_text, key):
    """The verbatim JSON text of a top-level member, as the client got it."""
    d = json.loads(body_text)
    return json.dumps(d[key], ensure_ascii=False)


def part_decision_log():
    path = os.path.join(tmp, "decisions.jsonl")
    key = "sekret-klucz-123"
    srv = Server(["--model", MODEL, "--log-decisions", path, "--metrics", "--api-key-env", "KNOBS_KEY"],
                 env={"KNOBS_KEY": key})
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    try:
        bodies = []
        for i in range(48):
            b = json.loads(json.dumps(REQUESTS[i % len(REQUESTS)]))
            b["state"] = (b["state"] + f" #{i}") if isinstance(b["state"], str) else dict(b["state"], n=i)
            bodies.append(json.dumps(b, ensure_ascii=False).encode())
        # key order, spacing and number spellings of their own: upstream's request_sha256 is of the
        # sorted canonical JSON, body_sha256 of these bytes
        for i in range(2):
            bodies.append(('{ "questions" : {"z": {"type":"multi","instructions":"Co?","criteria":["b","a"],'
                           '"threshold":5E-1}, "a":{"type":"noul" , "instructions":"Czy %d?"}},'
                           '"state":{"ź":1.50,"a":[1,2.0e0,-0,1e400, "x\\u00e9"]},"model":"%s"}' % (i, NAME)).encode())
        n = len(bodies)
        bad = json.dumps({"model": NAME, "state": "x", "questions": {}}).encode()
        t0 = time.time()
        res = run_parallel(lambda data: srv.request("POST", "/v1/systemone", data, auth), bodies + [bad, bad])
        t1 = time.time()
        ok = [(bodies[i], r) for i, r in enumerate(res[:n]) if not isinstance(r, Exception) and r[0] == 200]
        C.eq(len(ok), n, f"{n} concurrent requests answered")
        C.eq([r[0] if not isinstance(r, Exception) else r for r in res[n:]], [422, 422], "two invalid requests refused")
        wait_until(lambda: os.path.exists(path) and len(open(path).read().splitlines()) >= n, 20)
        lines = read_lines(path)
        C.eq(len(lines), n, "one line per answered request, none for the refused ones")
        by_id = {ln["request_id"]: ln for ln in lines}
        C.eq(len(by_id), n, "request ids unique")
        raw = open(path, encoding="utf-8").read()
        C.ok(key not in raw, "the API key is not in the decision log")
        C.eq(list(lines[0]), LINE_KEYS, "line members, in order")
        C.eq({(ln["model"], ln["orders"], ln["dtype"], ln["endpoint"], ln["revision"], ln["calibration"])
              for ln in lines}, {(NAME, 2, "f32", "/v1/systemone", None, os.path.join(MODEL, "CALIBRATION.json"))},
             "the model's members in every line")
        C.ok(all("state" not in ln for ln in lines), "no state without --log-decisions-state")
        matched, shown = 0, 0
        for body, (st, h, data) in ok:
            ln = by_id.get(h.get("x-typesafe-request-id"))
            if not C.ok(ln is not None, "a line for each response's x-typesafe-request-id"):
                continue
            bad_fields = line_matches(ln, body, data.decode(), h, t0, t1)
            matched += not bad_fields
            if bad_fields and shown < 3:
                shown += 1
                C.ok(False, f"line of {h.get('x-typesafe-request-id')}: {bad_fields[:3]}")
        C.eq(matched, n, "every line equals its response (request id, answers text, usage, time, both hashes)")
        C.eq(len({ln["request_sha256"] for ln in lines}), n, "request_sha256 differs between the requests")
        # the answers' numbers are the response's literals, at full precision
        body, (st, h, data) = ok[0]
        line_text = next(t for t in raw.splitlines() if h["x-typesafe-request-id"] in t)
        C.ok(answers_text(data.decode(), "answers").replace(" ", "") in line_text.replace(" ", ""),
             "the answers object appears verbatim in its line")
        C.eq(metric(srv.metrics(), "basal_decision_log_lines_total"), float(n), "basal_decision_log_lines_total")
        # SIGHUP: rotate, reopen, the next line goes to the new file
        os.rename(path, path + ".1")
        os.kill(srv.pid, signal.SIGHUP)
        C.ok(wait_until(lambda: "decision log reopened" in srv.log(), 10), "SIGHUP: decision log reopened")
        st, h, data = srv.request("POST", "/v1/systemone", bodies[0], auth)
        C.ok(wait_until(lambda: os.path.exists(path) and len(open(path).read().splitlines()) == 1, 10),
             "after SIGHUP the next line is in the new file")
        C.eq(len(read_lines(path + ".1")), n, "the rotated file keeps its lines")
    finally:
        C.eq(srv.stop(), 0, "decision log server exits 0")
    # the state, with the explicit option only; /v1/basal lines too
    srv = Server(["--model", MODEL, "--log-decisions", path + ".state", "--log-decisions-state"])
    try:
        st, h, data = srv.post("/v1/systemone", REQUESTS[1])
        st2, h2, data2 = srv.post("/v1/basal", REQUESTS[0])
        C.eq((st, st2), (200, 200), "state log: answered")
    finally:
        srv.stop()
    lines = read_lines(path + ".state")
    C.eq(len(lines), 2, "state log: two lines")
    if len(lines) == 2:
        C.eq(lines[0].get("state"), REQUESTS[1]["state"], "--log-decisions-state: the state as sent")
        C.eq(list(lines[0])[-2:], ["state", "reviewed"], "state before reviewed")
        C.eq(lines[1]["endpoint"], "/v1/basal", "a /v1/basal decision is logged with its endpoint")
    # a full disk: answered anyway, logged once, counted
    srv = Server(["--model", MODEL, "--log-decisions", "/dev/full", "--metrics"])
    try:
        sts = [srv.post("/v1/systemone", REQUESTS[0])[0] for _ in range(5)]
        C.eq(sts, [200] * 5, "disk full: every decision still answered")
        C.ok(wait_until(lambda: metric(srv.metrics(), "basal_decision_log_failed_total") == 5.0, 10),
             "disk full: basal_decision_log_failed_total counts the lost lines")
        C.eq(srv.log().count("No space left on device"), 1, "disk full: logged once")
    finally:
        C.eq(srv.stop(), 0, "disk full: the server still stops cleanly")


def read_fifo_lines(fd, want, timeout):
    """Reads a non-blocking FIFO until it holds want whole lines (or timeout s)."""
    buf, end = b"", time.time() + timeout
    while buf.count(b"\n") < want and time.time() < end:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk is None:
            time.sleep(0.01)
        elif chunk:
            buf += chunk
        else:  # no writer has it open at the moment
            time.sleep(0.01)
    return [json.loads(x) for x in buf.split(b"\n")[:-1]]


def part_fifo():
    """A log no one reads never holds a decision: a FIFO without a reader (its lines wait), one whose
    reader stopped reading (a bounded queue, then drops, counted), SIGHUP and SIGTERM while it is stuck."""
    fifo = os.path.join(tmp, "decisions.fifo")
    os.mkfifo(fifo)
    srv = Server(["--model", MODEL, "--log-decisions", fifo, "--metrics"],
                 env={"BASAL_TEST_DLOG_QUEUE_BYTES": "20000"})
    rfd = None
    try:
        C.ok("a FIFO no one reads yet" in srv.log(), "a FIFO without a reader: said at the start")
        sent = []
        for i in range(3):
            body = json.dumps(dict(REQUESTS[0], state=f"bez czytelnika #{i}"), ensure_ascii=False).encode()
            t = time.time()
            st, h, data = srv.request("POST", "/v1/systemone", body, timeout=30 * SLOW)
            C.eq(st, 200, f"no reader #{i}: answered")
            sent.append((body, h, data, t, time.time()))
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        fcntl.fcntl(rfd, fcntl.F_SETPIPE_SZ, 4096)  # a small pipe: a few lines fill it
        lines = read_fifo_lines(rfd, 3, 20 * SLOW)
        C.eq([ln["request_id"] for ln in lines], [h.get("x-typesafe-request-id") for _, h, _, _, _ in sent],
             "the lines waited for the reader, in order")
        for ln, (body, h, data, t0, t1) in zip(lines, sent):
            C.eq(line_matches(ln, body, data.decode(), h, t0, t1), [], "a waiting line equals its response")
        # the reader keeps the FIFO open and stops reading: its pipe fills, then the 60 kB queue
        m0 = srv.metrics()
        bodies = [json.dumps(dict(REQUESTS[i % len(REQUESTS)], state=f"nikt nie czyta #{i}"), ensure_ascii=False).encode()
                  for i in range(160)]
        t = time.time()
        res = run_parallel(lambda b: srv.request("POST", "/v1/systemone", b, timeout=60 * SLOW), bodies[:80])
        res += [srv.request("POST", "/v1/systemone", b, timeout=60 * SLOW) for b in bodies[80:]]
        took = time.time() - t
        C.eq(sum(1 for r in res if not isinstance(r, Exception) and r[0] == 200), len(bodies),
             f"a reader that does not read: every decision answered ({took:.1f} s)")
        ms = srv.metrics()
        dropped = metric(ms, "basal_decision_log_dropped_total") - metric(m0, "basal_decision_log_dropped_total")
        C.ok(dropped > 0, f"a reader that does not read: the full queue drops lines ({dropped:.0f}), counted")
        # SIGHUP while the writer waits on the full FIFO: the signal thread is not held (SIGTERM later works)
        os.kill(srv.pid, signal.SIGHUP)
        C.ok(wait_until(lambda: "decision log reopened" in srv.log(), 10 * SLOW), "SIGHUP reopens while stuck")
        after = json.dumps(dict(REQUESTS[0], state="po SIGHUP"), ensure_ascii=False).encode()
        r_after = srv.request("POST", "/v1/systemone", after, timeout=30 * SLOW)
        C.eq(r_after[0], 200, "answered after a SIGHUP while stuck")
        # reading again: every line that was not dropped arrives whole, and equals its response
        answered = len(bodies) + 1
        dropped = metric(srv.metrics(), "basal_decision_log_dropped_total")  # the queue may still be full
        want = answered - int(dropped)
        got = read_fifo_lines(rfd, want, 30 * SLOW)
        ids = {r[1].get("x-typesafe-request-id"): (b, r)
               for b, r in zip(bodies + [after], res + [r_after]) if not isinstance(r, Exception)}
        good = sum(1 for ln in got if ln["request_id"] in ids and not line_matches(
            ln, ids[ln["request_id"]][0], ids[ln["request_id"]][1][2].decode(), ids[ln["request_id"]][1][1], t - 1,
            time.time()))
        C.ok(len(got) == want and good == want,
             f"after the stall: {len(got)} lines (want {want}), {good} equal to their responses")

        def accounted():
            ms = srv.metrics()
            return sum(metric(ms, f"basal_decision_log_{k}_total") for k in ("lines", "dropped", "failed"))
        C.ok(wait_until(lambda: accounted() == answered + 3, 10), f"written + dropped + failed = answered "
             f"({accounted()} vs {answered + 3})")
        # stuck again at the shutdown: the server still stops, within the writer's grace
        for b in bodies[:40]:
            srv.request("POST", "/v1/systemone", b, timeout=60 * SLOW)
        t = time.time()
        rc = srv.stop(timeout=60 * SLOW)
        took = time.time() - t
        C.eq(rc, 0, "SIGTERM with a stuck decision log: exit 0")
        C.ok(took < 20 * SLOW, f"SIGTERM with a stuck decision log: stopped in {took:.1f} s")
        C.ok("could not be written at the shutdown" in srv.log(), "the lines lost at the shutdown are logged")
    finally:
        if rfd is not None:
            os.close(rfd)
        srv.kill()


part_decide()
part_serve_flags()
part_serve_yaml()
part_decision_log()
part_fifo()
sys.exit(C.report())
