"""Helpers for the tests that drive the real `basal serve` binary over
127.0.0.1: start a server on a free port (port 0, read back from its log),
talk to it with http.client only, stop it, and count checks.

Every server started here is registered in $SERVER_PIDS (one pid a line) so
that the calling shell script's trap can kill leftovers; every wait is
bounded."""
import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BASAL = os.environ.get("BASAL", "build/basal")
FIXTURES = os.environ.get("FIXTURES", "build/fixtures")
SHARED = os.environ.get("SHARED", "../shared")
# Sanitizer builds are several times slower; every time budget scales with it.
SLOW = 4.0 if "asan" in BASAL else 1.0
# Agreement bounds are statistics over hundreds of requests, and the answers are the same bits in
# every build, so they are checked in the release build (or with BASAL_TEST_FULL=1, `make
# test-full`); a sanitizer build sends a small sample through the same paths (SMOKE_REQUESTS requests).
STATISTICS = SLOW == 1 or os.environ.get("BASAL_TEST_FULL") == "1"
SMOKE_REQUESTS = 24


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what, flush=True)
        return cond

    def eq(self, got, want, what):
        return self.ok(got == want, f"{what}: got {shorten(got)!r}, expected {shorten(want)!r}")

    def report(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 1 if self.failed else 0


def shorten(v, n=600):
    s = v if isinstance(v, (str, bytes)) else repr(v)
    return s if len(s) <= n else s[:n] + (b"..." if isinstance(s, bytes) else "...")


class Server:
    """A running `basal serve`; .port, .pid, .log()"""

    def __init__(self, args, env=None, expect_start=True, timeout=60, auto_addr=True, preexec=None):
        self.dir = tempfile.mkdtemp(prefix="basal-srv-")
        # the server's stderr lives here: gone when the test ends (KEEP_TMP=1 keeps it for a post-mortem)
        if not os.environ.get("KEEP_TMP"):
            atexit.register(shutil.rmtree, self.dir, True)
        self.errpath = os.path.join(self.dir, "stderr")
        full_env = dict(os.environ)
        full_env.pop("BASAL_ADDR", None)
        full_env.pop("BASAL_CONFIG", None)
        if env:
            full_env.update(env)
        argv = [BASAL, "serve"] + list(args)
        if auto_addr and not any(a == "--addr" for a in args) and "BASAL_ADDR" not in (env or {}):
            argv += ["--addr", "127.0.0.1:0"]
        self.err = open(self.errpath, "wb")
        # preexec: run in the child before exec (e.g. a lower descriptor limit)
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.err, env=full_env,
                                     cwd=(env or {}).get("_CWD"), preexec_fn=preexec)
        self.pid = self.proc.pid
        pidfile = os.environ.get("SERVER_PIDS")
        if pidfile:
            with open(pidfile, "a") as f:
                f.write(f"{self.pid}\n")
        self.port = None
        if not expect_start:
            return
        deadline = time.time() + timeout * SLOW
        while time.time() < deadline:
            m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if self.port is None:
            self.kill()
            raise RuntimeError(f"server did not start: {' '.join(argv)}\n{self.log()}")

    def log(self):
        with open(self.errpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_exit(self, timeout=60):
        try:
            return self.proc.wait(timeout=timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def stop(self, timeout=60):
        """SIGTERM, then the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def rss_kib(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def request(self, method, path, body=None, headers=None, timeout=30):
        return request(self.port, method, path, body, headers, timeout)

    def post(self, path, obj, headers=None, timeout=30):
        body = obj if isinstance(obj, (bytes, bytearray)) else json.dumps(obj, ensure_ascii=False).encode()
        return request(self.port, "POST", path, body, headers, timeout)

    def metrics(self):
        st, h, body = self.request("GET", "/metrics")
        return parse_metrics(body.decode()) if st == 200 else None

    def model_inflight(self, model):
        """basal_model_inflight_requests of one model (needs --metrics)."""
        return metric(self.metrics(), "basal_model_inflight_requests", model=model)


def request(port, method, path, body=None, headers=None, timeout=30):
    """One request on a fresh connection: (status, {lowercase header: value}, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout * SLOW)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def raw_exchange(port, data, timeout=30):
    """Sends raw bytes, reads until the server closes: the whole response."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * SLOW)
    try:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def send_post(port, path, data, timeout=30):
    """Sends one POST of the bytes data on a raw socket and returns the socket
    unread: for a client that hangs up while its request waits."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * SLOW)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


def run_parallel(fn, items, join_s=300):
    """fn(item) for every item, each in its own thread, all at once: the
    results in item order, an exception standing for a failed client."""
    res = [None] * len(items)

    def work(i):
        try:
            res[i] = fn(items[i])
        except Exception as e:  # noqa: BLE001 - a failed client is a test result
            res[i] = e
    ths = [threading.Thread(target=work, args=(i,)) for i in range(len(items))]
    for t in ths:
        t.start()
    for t in ths:
        t.join(join_s * SLOW)
    return res


def wait_until(cond, timeout, poll=0.002):
    """Polls cond() until it holds or timeout seconds (scaled by SLOW) pass:
    whether it held."""
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(poll)
    return False


def run_basal(cmd, model, payload, *args, ensure_ascii=False, timeout=120 * SLOW):
    """`basal CMD --model MODEL ARGS...` with payload as JSON on stdin: the
    CompletedProcess (stdout and stderr captured). timeout is in seconds, as
    given (not scaled here)."""
    return subprocess.run([BASAL, cmd, "--model", model, *args],
                          input=json.dumps(payload, ensure_ascii=ensure_ascii).encode(), capture_output=True,
                          timeout=timeout)


def parse_raw_response(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text 0.0.4 → {(name, frozenset(labels)): value}; raises on a
    malformed line or a sample without HELP/TYPE before it."""
    out = {}
    typed = set()
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if line.startswith("# TYPE "):
                if parts[3] not in ("counter", "gauge", "histogram"):
                    raise ValueError(f"bad TYPE line {line!r}")
                typed.add(parts[2])
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"bad sample line {line!r}")
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in typed and base not in typed:
            raise ValueError(f"sample before its TYPE: {line!r}")
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        out[(name, labels)] = float(m.group(4))
    return out


def metric(ms, name, **labels):
    return ms.get((name, frozenset(labels.items())), None)


def metric_sum(ms, name, **labels):
    """Sum over the series of `name` whose labels include the given ones."""
    want = set(labels.items())
    return sum(v for (n, ls), v in ms.items() if n == name and want <= set(ls))


def strip_latency(body):
    return re.sub(rb'"latency_ms":[-0-9.eE+]+', b'"latency_ms":_', body)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def fixture(name):
    return os.path.join(FIXTURES, name)


def load_openapi():
    with open(os.path.join(SHARED, "spec", "typesafe-openapi.json")) as f:
        return json.load(f)


def validator(doc, schema_name):
    """A Draft 2020-12 validator for components/schemas/<name>, its $refs
    resolved against the whole OpenAPI document (07 §7)."""
    import jsonschema
    root = dict(doc)
    root["$ref"] = f"#/components/schemas/{schema_name}"
    root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    v = jsonschema.Draft202012Validator(root)
    return v


def log(*a):
    print(*a, file=sys.stderr, flush=True)
