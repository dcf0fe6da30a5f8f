#!/usr/bin/python3
"""Soak test of `basal serve` (issue: faults): for --minutes, a bounded mix of
clients on 127.0.0.1 — valid requests of both dialects, invalid JSON and
invalid requests, clients that disconnect mid-request or before reading the
answer, half-closed requests, slow headers — while the server's RSS and open
file descriptors are sampled every --sample seconds. Prints one line per
sample and a verdict: the last third's maximum RSS / fd count against the
first third's (flat = within --tolerance). Not part of CI (it runs for minutes).

  bench/soak.py --minutes 30 --clients 4            # tiny-bias fixture, release build
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--basal", default="build/basal", help="binary (default build/basal)")
ap.add_argument("--model", default="build/fixtures/tiny-bias", help="model directory (default tiny-bias, served as basal-tiny)")
ap.add_argument("--minutes", type=float, default=30, help="duration (default 30)")
ap.add_argument("--clients", type=int, default=4, help="concurrent client threads (default 4)")
ap.add_argument("--sample", type=float, default=10, help="seconds between samples (default 10)")
ap.add_argument("--tolerance", type=float, default=0.10, help="allowed growth, last vs first third (default 0.10)")
a = ap.parse_args()

err = tempfile.NamedTemporaryFile(delete=False)
p = subprocess.Popen([a.basal, "serve", "--model", a.model, "--addr", "127.0.0.1:0", "--max-inflight", "64"],
                     stdout=subprocess.DEVNULL, stderr=err)
port = None
for _ in range(600):
    m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", open(err.name, errors="replace").read())
    if m:
        port = int(m.group(1))
        break
    time.sleep(0.05)
if not port:
    p.kill()
    sys.exit("server did not start:\n" + open(err.name, errors="replace").read())

STATE = "Klient pisze, że zapłacił dwa razy za to samo zamówienie i prosi o zwrot. "
def valid(rng):
    qs = {"q": {"type": rng.choice(["noul", "choice", "score"]), "instructions": f"Pytanie {rng.randrange(1000)}?"}}
    if qs["q"]["type"] != "noul":
        qs["q"]["criteria"] = ["a", "b", "c"]
    return json.dumps({"model": "basal-tiny", "state": STATE * rng.randrange(1, 4), "questions": qs}).encode()

stop = time.monotonic() + a.minutes * 60
counts = {}
lock = threading.Lock()
def count(k):
    with lock:
        counts[k] = counts.get(k, 0) + 1

def raw(data, read=True, half=False, linger=0.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(data)
        if half:
            s.shutdown(socket.SHUT_WR)
        if linger:
            time.sleep(linger)
        if read:
            while s.recv(65536):
                pass
    finally:
        s.close()

def client(seed):
    rng = random.Random(seed)
    while time.monotonic() < stop:
        kind = rng.choice(["valid", "valid", "basal", "badjson", "invalid", "gone", "noread", "half", "slowhdr"])
        try:
            if kind in ("valid", "basal", "badjson", "invalid"):
                body = {"valid": valid(rng), "basal": valid(rng), "badjson": b'{"model": "basal-tiny", "state": ',
                        "invalid": b'{"model":"basal-tiny","state":"s","questions":{"q":{"type":"noul","criteria":5}}}'}[kind]
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("POST", "/v1/basal" if kind == "basal" else "/v1/systemone", body=body,
                          headers={"content-type": "application/json"})
                r = c.getresponse()
                r.read()
                c.close()
                count(f"{kind}:{r.status}")
            else:
                body = valid(rng)
                req = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body)) + body
                if kind == "gone":
                    raw(req[: rng.randrange(1, len(req))], read=False)
                elif kind == "noread":
                    raw(req, read=False, linger=0.05)
                elif kind == "half":
                    raw(req, half=True)
                else:
                    s = socket.create_connection(("127.0.0.1", port), timeout=30)
                    s.sendall(req[:20])
                    time.sleep(0.5)
                    s.close()
                count(kind)
        except Exception as ex:  # a refused or reset connection is data too
            count(f"{kind}:{type(ex).__name__}")

def sample():
    rss = int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{p.pid}/status").read()).group(1))
    fds = len(os.listdir(f"/proc/{p.pid}/fd"))
    return rss, fds

threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
for t in threads:
    t.start()
rows = []
t0 = time.monotonic()
print(f"{'min':>6} {'RSS KiB':>9} {'fds':>5}  requests so far", flush=True)
while time.monotonic() < stop:
    time.sleep(a.sample)
    rss, fds = sample()
    rows.append((rss, fds))
    with lock:
        total = sum(counts.values())
    print(f"{(time.monotonic() - t0) / 60:6.1f} {rss:>9} {fds:>5}  {total}", flush=True)
for t in threads:
    t.join(timeout=90)
time.sleep(1)
idle_rss, idle_fds = sample()
p.terminate()
code = p.wait(timeout=60)
n = len(rows)
first, last = rows[: max(1, n // 3)], rows[-max(1, n // 3):]
g_rss = max(r for r, _ in last) / max(r for r, _ in first) - 1
g_fds = max(f for _, f in last) - max(f for _, f in first)
print("outcomes:", json.dumps(dict(sorted(counts.items()))))
print(f"RSS growth last vs first third: {g_rss:+.1%}; fds {g_fds:+d}; idle after the load: {idle_rss} KiB, "
      f"{idle_fds} fds; server exit {code}")
ok = g_rss <= a.tolerance and idle_fds <= max(f for _, f in first) and code == 0
print("flat" if ok else "NOT flat")
os.unlink(err.name)
sys.exit(0 if ok else 1)
