"""Three `basal serve` replicas behind nginx, configured from
deploy/nginx/basal.conf, driven by `basal client --jobs 32`; one replica is
killed (SIGKILL) in the middle of the run and started again on its port.

Oracle: every record must be answered exactly once and in order, each answer
byte-identical (usage.latency_ms aside) to the body a separate single server
returns for the same request sent alone with http.client."""
import atexit
import json
import os
import re
import select
import signal
import socket
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(__file__))
from srvlib import BASAL, SLOW, Checks, Server, fixture, metric_sum, request, strip_latency

C = Checks()
MODEL = "basal-tiny"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
N = int(os.environ.get("SCALEOUT_N", "300"))


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def nginx_config(tmp, listen_port, replica_ports):
    """deploy/nginx/basal.conf with loopback replicas, wrapped in a main
    configuration whose every path is inside tmp."""
    with open(os.path.join(ROOT, "deploy", "nginx", "basal.conf")) as f:
        lines = f.read().split("\n")
    out, replaced = [], False
    for line in lines:
        if line.rstrip().endswith("# replica"):
            if not replaced:
                for p in replica_ports:
                    out.append(re.sub(r"server \S+", f"server 127.0.0.1:{p}", line))
                replaced = True
            continue
        if line.rstrip().endswith("# listen"):
            line = f"    listen 127.0.0.1:{listen_port};"
        line = line.replace("/var/log/nginx/basal.access.log", os.path.join(tmp, "access.log"))
        out.append(line)
    with open(os.path.join(tmp, "basal.conf"), "w") as f:
        f.write("\n".join(out))
    user = "user root root;\n" if os.getuid() == 0 else ""
    main = f"""{user}worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/basal.conf;
}}
"""
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(main)
    return path


def wait_port(port, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def replica_served(srv):
    m = srv.metrics()
    return metric_sum(m, "basal_http_requests_total", status="200") if m else 0


def workload(n):
    """n jsonl requests of varied length and type (some repeated)."""
    reqs = []
    for i in range(n):
        state = f"Zgłoszenie {i % 97}: " + "klient opisuje problem z kartą i prosi o pomoc. " * (1 + (i * 7) % 13)
        if i % 3 == 0:
            q = {"dzial": {"type": "choice", "instructions": "Który dział?",
                           "criteria": {"karty": "Karty", "kredyty": "Kredyty", "inne": "Inne"}}}
        elif i % 3 == 1:
            q = {"pilne": {"type": "noul", "instructions": "Czy sprawa jest pilna?"}}
        else:
            q = {"ocena": {"type": "score", "instructions": "Jak bardzo?", "criteria": ["mało", "średnio", "bardzo"]},
                 "pilne": {"type": "noul", "instructions": "Czy sprawa jest pilna?"}}
        reqs.append({"model": MODEL, "state": state, "questions": q})
    return reqs


def main():
    tmp = tempfile.mkdtemp(prefix="basal-scaleout-")
    atexit.register(shutil.rmtree, tmp, True)
    reqs = workload(N)
    # the oracle: each request alone on a single server
    single = Server(["--model", fixture("tiny-bias")])
    want = []
    try:
        for r in reqs:
            st, _, b = request(single.port, "POST", "/v1/systemone", dumps(r).encode(),
                               {"Content-Type": "application/json"})
            C.eq(st, 200, "single server answers")
            want.append(strip_latency(b))
    finally:
        single.stop()
    ports = [free_port() for _ in range(3)]
    args = ["--model", fixture("tiny-bias"), "--metrics"]
    replicas = [Server(args + ["--addr", f"127.0.0.1:{p}"]) for p in ports]
    lb_port = free_port()
    conf = nginx_config(tmp, lb_port, ports)
    t = subprocess.run([NGINX, "-t", "-p", tmp, "-c", conf], capture_output=True, text=True)
    C.ok(t.returncode == 0, f"nginx -t accepts the generated configuration: {t.stderr[-400:]}")
    ngx = subprocess.Popen([NGINX, "-p", tmp, "-c", conf, "-g", "daemon off;"], stdout=subprocess.DEVNULL,
                           stderr=open(os.path.join(tmp, "nginx.stderr"), "wb"))
    pidfile = os.environ.get("SERVER_PIDS")
    if pidfile:
        with open(pidfile, "a") as f:
            f.write(f"{ngx.pid}\n")
    client = None
    try:
        if not C.ok(wait_port(lb_port, 20), "nginx listens"):
            return C.report()
        # request ids: the caller's X-Request-Id comes back, the replica's id passes through
        st, h, b = request(lb_port, "GET", "/health", None, {"X-Request-Id": "test-rid-42"})
        C.eq((st, h.get("x-request-id")), (200, "test-rid-42"), "GET /health through nginx keeps X-Request-Id")
        st, h, b = request(lb_port, "POST", "/v1/systemone", dumps(reqs[0]).encode(),
                           {"Content-Type": "application/json"})
        C.ok(re.fullmatch(r"[0-9a-f]{32}", h.get("x-typesafe-request-id", "")) is not None,
             "the replica's x-typesafe-request-id passes through")
        C.ok(re.fullmatch(r"[0-9a-f]{32}", h.get("x-request-id", "")) is not None, "nginx makes an X-Request-Id")
        env = dict(os.environ, BASAL_URL=f"http://127.0.0.1:{lb_port}")
        client = subprocess.Popen([BASAL, "client", "--request", "-", "--input", "jsonl", "--jobs", "32",
                                   "--keep-going", "--retries", "5", "--timeout", "30"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(os.path.join(tmp, "client.stderr"), "wb"), env=env)
        os.set_blocking(client.stdout.fileno(), False)
        out = b""
        fed = 0
        killed = restarted = False
        last_feed = 0.0
        kill_at, restart_at = N // 4, N // 2
        deadline = time.time() + 120 * SLOW
        # feed the input in small steps so that the run spans the kill and the restart
        while time.time() < deadline:
            done = out.count(b"\n")
            # after the restart, trickle (one record per 0.1 s) until nginx has sent the restarted
            # replica a request again (it waits fail_timeout before trying a failed replica)
            back = restarted and replica_served(replicas[1]) > 0
            slow = restarted and not back
            if fed < N and fed - done < 64 and (not slow or time.time() - last_feed >= 0.1):
                last_feed = time.time()
                chunk = reqs[fed:fed + (1 if slow else 8)]
                client.stdin.write("".join(dumps(r) + "\n" for r in chunk).encode())
                client.stdin.flush()
                fed += len(chunk)
                if fed == N:
                    client.stdin.close()
            if not killed and done >= kill_at:
                os.kill(replicas[1].pid, signal.SIGKILL)
                replicas[1].proc.wait()
                killed = True
                killed_after = done
            if killed and not restarted and done >= restart_at:
                replicas[1] = Server(args + ["--addr", f"127.0.0.1:{ports[1]}"])
                restarted = True
            r, _, _ = select.select([client.stdout], [], [], 0.02)
            if r:
                chunk = client.stdout.read()
                if chunk:
                    out += chunk
                elif client.poll() is not None:
                    break
            if client.poll() is not None and fed == N:
                rest = client.stdout.read()
                out += rest or b""
                break
        try:
            client.wait(timeout=30 * SLOW)
        except subprocess.TimeoutExpired:
            client.kill()
        C.ok(killed and restarted, f"replica killed after {kill_at} and restarted after {restart_at} answers")
        C.eq(client.returncode, 0, "client exit status 0: every record answered")
        got = out.split(b"\n")[:-1]
        C.eq(len(got), N, "one envelope per input record")
        seen = set()
        mismatches = 0
        for i, line in enumerate(got):
            e = json.loads(line)
            seen.add(e["index"])
            if e["index"] != i or not e["ok"]:
                C.ok(False, f"envelope {i}: {line[:300]!r}")
                continue
            body = line[line.index(b',"response":') + len(b',"response":'):-1]
            if strip_latency(body) != want[i]:
                mismatches += 1
                if mismatches < 3:
                    C.eq(strip_latency(body), want[i], f"answer {i} equals the single server's")
        C.eq(seen, set(range(N)), "every index exactly once")
        C.eq(mismatches, 0, "answers byte-identical to a single server's")
        # the load was spread, and the restarted replica took requests again
        with open(os.path.join(tmp, "access.log")) as f:
            log = f.read()
        for p in ports:
            C.ok(f"upstream=127.0.0.1:{p}" in log, f"replica on port {p} served requests through nginx")
        served = replica_served(replicas[1])
        C.ok(served > 0, f"the restarted replica answered {served} requests after its restart")
        with open(os.path.join(tmp, "client.stderr"), "rb") as f:
            err = f.read().decode("utf-8", "replace")
        moved = len(re.findall(r"upstream=\S+, ", log))
        print(f"scale-out: {N} records, replica killed after {killed_after} answers; "
              f"nginx moved {moved} requests to another replica; "
              f"client: {err.strip() or 'no retries'}; restarted replica served {served:.0f}", flush=True)
    finally:
        if client and client.poll() is None:
            client.kill()
        ngx.send_signal(signal.SIGQUIT)
        try:
            ngx.wait(timeout=10)
        except subprocess.TimeoutExpired:
            ngx.kill()
        for r in replicas:
            r.stop()
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
