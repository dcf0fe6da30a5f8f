"""`basal serve` start order, loading state and logs (issue 18), driven over
127.0.0.1 with http.client; JSON log lines are parsed with CPython's json.

- a busy or bad address, an empty API key variable: the start fails before
  any model is loaded (timed against a load slowed by the test-only
  BASAL_TEST_LOAD_DELAY_MS), and `basal doctor --config` fails with serve's
  message for the same file;
- while loading: GET /health 503 {"status":"loading",...} with the progress,
  GET /health/live 200 (liveness),
  the API routes 503 in their dialect's error form with Retry-After, unknown
  paths still 404; then 200 with the ready body, and answers;
- --log-format json (and BASAL_LOG_FORMAT, serve.yml log_format): every
  stderr line is a JSON object with ts, level, component, msg;
- the access log line of a request carries every field, and its request id
  is the response's x-typesafe-request-id (text and JSON forms);
- SIGHUP reopens --access-log-file (rotate, HUP, the next request lands in
  the new file) and does not stop the server."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from srvlib import BASAL, FIXTURES, SLOW, Checks, Server, request  # noqa: E402

C = Checks()
tmp = os.environ.get("TMPDIR", "/tmp")
tb = os.path.join(FIXTURES, "tiny-bias")
tn = os.path.join(FIXTURES, "tiny-nobias")
SO, BA = "/v1/systemone", "/v1/basal"
REQ = {"model": "basal-tiny", "state": "Klient: nie mogę się zalogować.",
       "questions": {"q": {"type": "noul", "instructions": "Czy problem z logowaniem?"}}}
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
DELAY_MS = int(4000 * SLOW)  # per model, BASAL_TEST_LOAD_DELAY_MS (sanitizer builds start slower)


def yml(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def env_without(*names, **extra):
    e = {k: v for k, v in os.environ.items() if k not in names and not k.startswith("BASAL_")}
    e.update(extra)
    return e


def run_serve(args, env, limit=60):
    """Runs serve to its exit: (exit status, seconds, stderr)."""
    t0 = time.time()
    p = subprocess.run([BASAL, "serve"] + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=limit * SLOW)
    return p.returncode, time.time() - t0, p.stderr.decode("utf-8", "replace")


def doctor_json(args, env):
    p = subprocess.run([BASAL, "doctor", "--json"] + args, env=env, capture_output=True, timeout=120 * SLOW)
    try:
        return p.returncode, json.loads(p.stdout)
    except ValueError:
        return p.returncode, {"checks": [], "raw": p.stdout.decode("utf-8", "replace")}


def failures(d):
    return [c["what"] for c in d.get("checks", []) if c["level"] == "failure"]


# ---- 1. fail fast: busy port, bad address, empty API key variable ----
slow_env = env_without(BASAL_TEST_LOAD_DELAY_MS=str(DELAY_MS))
taken = socket.socket()
taken.bind(("127.0.0.1", 0))
taken.listen(1)
busy = f"127.0.0.1:{taken.getsockname()[1]}"
# the oracle for "before loading": the same server with a free port needs the delay to become ready
p = Server(["--model", tb, "--threads", "1"], env={"BASAL_TEST_LOAD_DELAY_MS": str(DELAY_MS)}, timeout=120)
ready_s = re.search(r"ready ([0-9.]+) s after the start", p.log())
C.ok(ready_s and float(ready_s.group(1)) >= DELAY_MS / 1000, f"the delay slows the load: {p.log()[-400:]!r}")
p.stop()
budget = DELAY_MS / 1000 / 2  # far below the load time: a start that loaded first takes > DELAY_MS
for what, args, env, want in (
        ("busy --addr", ["--model", tb, "--addr", busy], slow_env, f"binding {busy}: Address already in use"),
        ("busy BASAL_ADDR", ["--model", tb], dict(slow_env, BASAL_ADDR=busy), f"binding {busy}"),
        ("busy YAML addr", ["--config", yml("busy.yml", f"addr: {busy}\nmodels:\n  - path: {tb}\n")], slow_env,
         f"binding {busy}"),
        ("invalid --addr", ["--model", tb, "--addr", "127.0.0.1:99999"], slow_env, "invalid address 127.0.0.1:99999"),
        ("empty api key variable", ["--model", tb, "--addr", "127.0.0.1:0", "--api-key-env", "BASAL_TEST_NO_KEY"],
         slow_env, "api key variable BASAL_TEST_NO_KEY is empty"),
        ("default model not served", ["--config", yml("def.yml", f"default_model: nope\nmodels:\n  - path: {tb}\n"),
                                      "--addr", "127.0.0.1:0"], slow_env, 'default model nope is not served (["basal-tiny"])'),
        ("duplicate model", ["--model", tb, "--model", tb, "--addr", "127.0.0.1:0"], slow_env,
         "model basal-tiny configured twice"),
        ("unwritable access log", ["--model", tb, "--addr", "127.0.0.1:0", "--access-log-file", "/nonexistent/dir/a.log"],
         slow_env, "cannot create the access log /nonexistent/dir/a.log")):
    code, secs, err = run_serve(args, env)
    # a bad flag value is a usage error (06 §2: exit 2, like every other flag's); the rest fail at run time
    usage = what == "invalid --addr"
    C.eq(code, 2 if usage else 1, f"{what}: exit status ({err[-300:]!r})")
    C.ok(want in err, f"{what}: message {want!r} in {err[-300:]!r}")
    C.ok(secs < budget, f"{what}: failed after {secs:.2f} s, not before the {DELAY_MS} ms load")
    C.ok("loading basal-tiny" not in err, f"{what}: no model load was started")
    if usage:
        C.ok(err.startswith("basal serve: --addr: "), f"{what}: one usage line as for other flags: {err!r}")
    else:
        C.ok(re.search(r"^\d{4}-\S+Z ERROR serve: ", err, re.M) is not None, f"{what}: one error line in the log format")
taken.close()

# ---- 2. doctor --config fails exactly when serve refuses (the same check) ----
key_yml = yml("key.yml", f"api_key_env: BASAL_TEST_KEY\naddr: 127.0.0.1:0\nmodels:\n  - path: {tb}\n")
for key in ("", "s3cret"):
    env = env_without(BASAL_TEST_KEY=key) if key else env_without()
    code, d = doctor_json(["--config", key_yml], env)
    s_code, _, s_err = run_serve(["--config", key_yml], dict(env, BASAL_TEST_LOAD_DELAY_MS="1"), limit=60) \
        if not key else (None, 0, "")
    if not key:
        msg = "api key variable BASAL_TEST_KEY is empty"
        C.eq((code, s_code), (1, 1), "empty key: doctor and serve both fail")
        C.ok(msg in s_err and any(msg in f for f in failures(d)), f"empty key: the same message: {failures(d)!r}")
    else:
        C.eq(code, 0, f"key set: doctor passes: {failures(d)!r}")
        C.ok(any("basal serve accepts this configuration" in c["what"] for c in d["checks"]), "key set: serve accepts")
        srv = Server(["--config", key_yml], env={"BASAL_TEST_KEY": key})
        C.eq(srv.request("GET", "/v1/models", headers={"Authorization": f"Bearer {key}"})[0], 200, "key set: serve runs")
        srv.stop()
# a default_model that is not served: the same message from both
def_yml = yml("def2.yml", f"default_model: nope\naddr: 127.0.0.1:0\nmodels:\n  - path: {tb}\n")
code, d = doctor_json(["--config", def_yml], env_without())
s_code, _, s_err = run_serve(["--config", def_yml], env_without())
line = re.search(r"ERROR serve: (.*)", s_err)
C.ok(code == 1 and s_code == 1 and line and any(line.group(1) in f for f in failures(d)),
     f"default_model: doctor fails with serve's message {s_err[-200:]!r} {failures(d)!r}")

# ---- 3. the loading state ----
def start_loading(args, env):
    srv = Server(args, env=env, expect_start=False)
    deadline = time.time() + 30 * SLOW
    while time.time() < deadline and srv.port is None:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", srv.log())
        if m:
            srv.port = int(m.group(1))
        elif srv.proc.poll() is not None:
            break
        time.sleep(0.01)
    return srv


t0 = time.time()
srv = start_loading(["--model", tb, "--model", tn, "--threads", "1"], {"BASAL_TEST_LOAD_DELAY_MS": str(DELAY_MS)})
C.ok(srv.port is not None, f"listening before loading: {srv.log()[-300:]!r}")
if srv.port:
    listen_s = time.time() - t0
    C.ok(listen_s < DELAY_MS / 1000, f"listening after {listen_s:.2f} s, before the first model loaded")
    st, h, b = srv.request("GET", "/health")
    C.eq(st, 503, "/health while loading")
    C.eq(h.get("retry-after"), "1", "/health while loading: Retry-After")
    C.eq(json.loads(b), {"status": "loading", "models_loaded": 0, "models_total": 2,
                         "models": ["basal-tiny", "basal-tiny-nobias"], "default_model": "basal-tiny"},
         "/health body while loading")
    st, h, b = srv.post(SO, REQ)
    C.eq((st, h.get("retry-after"), json.loads(b)),
         (503, "1", {"detail": {"error_type": "service_unavailable",
                                "message": "The server is loading its models. Retry after a short delay."}}),
         "/v1/systemone while loading")
    C.ok(re.fullmatch(r"[0-9a-f]{32}", h.get("x-typesafe-request-id", "")) is not None, "request id while loading")
    st, h, b = srv.post(BA, REQ)
    C.eq((st, h.get("retry-after"), json.loads(b)),
         (503, "1", {"error": "service unavailable: the server is loading its models"}), "/v1/basal while loading")
    st, h, b = srv.request("GET", "/v1/models")
    C.eq((st, json.loads(b)["detail"]["error_type"]), (503, "service_unavailable"), "/v1/models while loading")
    st, h, b = srv.request("GET", "/health/live")
    C.eq((st, json.loads(b)), (200, {"status": "alive", "ready": False}), "liveness while loading")
    C.eq(srv.request("GET", "/nope")[0], 404, "unknown path while loading")
    C.eq(srv.request("DELETE", "/health")[0], 405, "wrong method while loading")
    seen = set()
    deadline = time.time() + 60 * SLOW
    while time.time() < deadline:
        st, _, b = srv.request("GET", "/health")
        if st == 200:
            break
        seen.add(json.loads(b)["models_loaded"])
        time.sleep(0.1)
    ready_after = time.time() - t0
    C.eq(st, 200, "/health turns 200")
    C.eq(json.loads(b), {"status": "ok", "models": ["basal-tiny", "basal-tiny-nobias"], "default_model": "basal-tiny"},
         "/health ready body")
    # 2 of 2 may show while the engines start (prefix precompute), before ready
    C.ok({0, 1} <= seen <= {0, 1, 2}, f"progress seen while loading: {sorted(seen)}")
    C.ok(ready_after >= 2 * DELAY_MS / 1000, f"ready after {ready_after:.1f} s (two delayed loads)")
    C.ok("serving on http://127.0.0.1:%d" % srv.port in srv.log(), "serving line once ready")
    C.eq(srv.post(SO, REQ)[0], 200, "answers once ready")
    st, h, b = srv.request("GET", "/health/live")
    C.eq((st, json.loads(b)), (200, {"status": "alive", "ready": True}), "liveness once ready")
C.eq(srv.stop(), 0, "stops cleanly")

# a stop signal while loading ends the process (nothing can be in flight)
srv = start_loading(["--model", tb, "--threads", "1"], {"BASAL_TEST_LOAD_DELAY_MS": str(DELAY_MS)})
C.ok(srv.port is not None, "listening (SIGTERM case)")
t0 = time.time()
code = srv.stop()
C.ok(code == 1 and time.time() - t0 < DELAY_MS / 1000, f"SIGTERM while loading: exit {code} at once")


# ---- 4. JSON logs, and the access log's fields and request id ----
def check_json_log(srv, what):
    lines = srv.log().splitlines()
    objs = []
    for ln in lines:
        try:
            o = json.loads(ln)
        except ValueError:
            C.ok(False, f"{what}: not JSON: {ln!r}")
            continue
        C.ok(isinstance(o, dict) and TS.match(o.get("ts", "")) and o.get("level") in ("debug", "info", "warn", "error")
             and isinstance(o.get("component"), str) and isinstance(o.get("msg"), str), f"{what}: fields of {ln!r}")
        objs.append(o)
    C.ok(len(objs) >= 5, f"{what}: {len(objs)} lines")
    return objs


FIELDS = ["request_id", "client", "method", "path", "status", "duration_ms", "model", "questions", "queue_ms",
          "compute_ms", "batch"]
for what, args, env in (("--log-format json", ["--log-format", "json"], None),
                        ("BASAL_LOG_FORMAT=json", [], {"BASAL_LOG_FORMAT": "json"}),
                        ("serve.yml log_format", ["--config", yml("json.yml", f"log_format: json\nmodels:\n  - path: {tb}\n")],
                         None)):
    base = [] if "--config" in args else ["--model", tb]
    srv = Server(base + ["--threads", "1"] + args, env=env)
    st, h, _ = srv.post(SO, REQ)
    rid = h.get("x-typesafe-request-id")
    st404, h404, _ = srv.request("GET", "/v1/%C3%A9%FF%0a%22x")
    srv.stop()
    objs = check_json_log(srv, what)
    acc = [o for o in objs if o["component"] == "access"]
    mine = [o for o in acc if o.get("request_id") == rid]
    C.ok(st == 200 and len(mine) == 1, f"{what}: one access line with the response's request id {rid}")
    if mine:
        o = mine[0]
        C.eq(list(o), ["ts", "level", "component", "msg"] + FIELDS, f"{what}: access fields in order")
        C.eq((o["method"], o["path"], o["status"], o["model"], o["questions"], o["batch"]),
             ("POST", SO, 200, "basal-tiny", 1, 1), f"{what}: access values")
        C.ok(re.fullmatch(r"127\.0\.0\.1:\d+", o["client"]) is not None, f"{what}: client {o['client']!r}")
        C.ok(all(isinstance(o[k], float) and o[k] >= 0 for k in ("duration_ms", "queue_ms", "compute_ms")),
             f"{what}: timings {o!r}")
    odd = [o for o in acc if o["status"] == 404]
    # CPython's own decoding of the percent-decoded path bytes is the oracle (one U+FFFD for the bad byte)
    C.ok(len(odd) == 1 and odd[0]["path"] == b"/v1/\xc3\xa9\xff\n\"x".decode("utf-8", "replace")
         and odd[0]["request_id"] == h404.get("x-typesafe-request-id") and odd[0]["model"] is None
         and odd[0]["queue_ms"] is None, f"{what}: the access line of an odd path: {odd!r}")
# the startup error of a busy port, in JSON too
taken = socket.socket()
taken.bind(("127.0.0.1", 0))
taken.listen(1)
code, _, err = run_serve(["--model", tb, "--addr", f"127.0.0.1:{taken.getsockname()[1]}", "--log-format", "json"],
                         env_without())
taken.close()
try:
    errs = [json.loads(ln) for ln in err.splitlines()]
    C.ok(code == 1 and any(o["level"] == "error" and "binding" in o["msg"] for o in errs), f"JSON start error {err!r}")
except ValueError:
    C.ok(False, f"JSON start error is not JSON: {err!r}")

# text form: the same fields as key=value
srv = Server(["--model", tb, "--threads", "1"])
st, h, _ = srv.post(SO, REQ)
rid = h.get("x-typesafe-request-id")
srv.stop()
m = re.search(r"^(\S+) INFO  access: POST /v1/systemone 200 ([0-9.]+) ms request_id=(\S+) client=(\S+) model=(\S+) "
              r"questions=(\S+) queue_ms=(\S+) compute_ms=(\S+) batch=(\S+)$", srv.log(), re.M)
C.ok(m is not None and TS.match(m.group(1)) and m.group(3) == rid and m.group(5) == "basal-tiny"
     and m.group(6) == "1" and m.group(9) == "1", f"text access line with the request id {rid}: {srv.log()[-500:]!r}")
for ln in srv.log().splitlines():
    C.ok(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO |WARN |ERROR) [a-z]+: ", ln) is not None,
         f"text line in the log format: {ln!r}")

# ---- 5. SIGHUP reopens the access log file ----
log1 = os.path.join(tmp, "access.log")
srv = Server(["--model", tb, "--threads", "1", "--access-log-file", log1])
_, h1, _ = srv.post(SO, REQ)
os.rename(log1, log1 + ".1")
os.kill(srv.pid, signal.SIGHUP)
deadline = time.time() + 10 * SLOW
while time.time() < deadline and "access log reopened" not in srv.log():
    time.sleep(0.02)
C.ok("SIGHUP: access log reopened" in srv.log(), "SIGHUP logged")
_, h2, _ = srv.post(SO, REQ)
C.eq(srv.request("GET", "/health")[0], 200, "alive after SIGHUP")
C.eq(srv.stop(), 0, "stops cleanly after SIGHUP")
old = open(log1 + ".1").read()
new = open(log1).read() if os.path.exists(log1) else ""
r1, r2 = h1.get("x-typesafe-request-id"), h2.get("x-typesafe-request-id")
C.ok(f"request_id={r1}" in old and f"request_id={r2}" not in old, "the first request is in the rotated file only")
C.ok(f"request_id={r2}" in new and f"request_id={r1}" not in new, f"the next request lands in the new file: {new!r}")
C.ok("access:" not in srv.log(), "no access lines on stderr when they go to a file")
# HUP with the access log on stderr: ignored, the server lives on
srv = Server(["--model", tb, "--threads", "1"])
os.kill(srv.pid, signal.SIGHUP)
time.sleep(0.2)
C.eq(srv.request("GET", "/health")[0], 200, "SIGHUP without a log file does not stop the server")
C.eq(srv.stop(), 0, "stops cleanly")

# --access-log off: no access line at all
srv = Server(["--model", tb, "--threads", "1", "--access-log", "off"])
srv.post(SO, REQ)
srv.stop()
C.ok("access:" not in srv.log(), "--access-log off")
sys.exit(C.report())
