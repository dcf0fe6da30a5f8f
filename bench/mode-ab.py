#!/usr/bin/env python3
"""Compares CPU modes (dtypes) of one model decision by decision, in one server.

cpu-bench.sh int8-ratio starts one process per mode and run; on a VM whose speed drifts by 10-30% within
minutes its per-run ratios scatter widely. Here one `basal serve` holds the model once per mode and the same
decision is asked of each mode in turn (A, B, C, A, B, C, ...), so that every ratio compares requests
seconds apart. Prints each round's latency per mode, each mode's speed-up over the first one per round, and
the medians (with min and max).

usage: bench/mode-ab.py [--model DIR] [--modes bf16,int8w,int8] [--rounds 12] [--warmup 1] [--state-words 100]
                        [--threads 0] [--basal build/basal]
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("klient zamówienie paczka dostawa reklamacja zwrot faktura płatność konto hasło karta przelew "
         "termin umowa sklep").split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        t0 = time.monotonic()
        c.request("POST", "/v1/systemone", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        return r.status, data, (time.monotonic() - t0) * 1000.0
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bench/models/mini-shape", help="model directory (default: %(default)s)")
    ap.add_argument("--modes", default="bf16,int8w,int8", help="dtypes, the first the baseline (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=12, help="decisions per mode (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=1, help="rounds not counted (default: %(default)s)")
    ap.add_argument("--state-words", type=int, default=100, help="words of the request's state (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=0, help="server compute threads, 0 = online CPUs (default: %(default)s)")
    ap.add_argument("--basal", default="build/basal", help="the basal binary (default: %(default)s)")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    if len(modes) < 2:
        ap.error("--modes needs at least two dtypes")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")

    state = " ".join(WORDS[(i * 7) % len(WORDS)] + ("." if i % 9 == 8 else "") for i in range(a.state_words))
    body = {"state": state, "questions": {"q": {"type": "choice", "instructions": "Czego dotyczy zgłoszenie?",
                                                "criteria": {"a": "zwrot", "b": "reklamacja", "c": "dostawa",
                                                             "d": "płatność"}}}}
    tmp = tempfile.mkdtemp(prefix="mode-ab-")
    cfg = os.path.join(tmp, "serve.yml")
    with open(cfg, "w") as f:
        f.write("models:\n" + "".join(f"  - path: {os.path.abspath(a.model)}\n    name: m-{m}\n    dtype: {m}\n"
                                      for m in modes))
    port = free_port()
    log = open(os.path.join(tmp, "serve.log"), "w")
    srv = subprocess.Popen([a.basal, "serve", "--config", cfg, "--addr", f"127.0.0.1:{port}", "--threads",
                            str(a.threads), "--access-log", "off", "--no-ui"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 600
        while True:  # every model loaded (and quantized) before the first request
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if srv.poll() is not None or time.time() > deadline:
                log.flush()
                last = open(log.name, errors="replace").read().strip().splitlines()[-1:]
                sys.exit(f"mode-ab: the server did not start ({last[0] if last else 'no output'}); its log: {log.name}")
            time.sleep(1)
        lat = {m: [] for m in modes}
        for rnd in range(a.warmup + a.rounds):
            line = []
            for m in modes:
                st, data, ms = post(port, dict(body, model=f"m-{m}"), 600)
                if st != 200:
                    sys.exit(f"mode-ab: {m}: HTTP {st}: {data[:300]!r}")
                if rnd >= a.warmup:
                    lat[m].append(ms)
                line.append(f"{m} {ms:.0f} ms")
            if rnd == 0:
                print(f"the request: {json.loads(data).get('usage', {}).get('input_tokens')} input tokens (usage), "
                      f"{a.state_words} words of state, one choice question", flush=True)
            tag = "warm-up" if rnd < a.warmup else f"round {rnd - a.warmup + 1}"
            print(f"{tag}: " + ", ".join(line), flush=True)
        base = modes[0]
        for m in modes[1:]:
            r = [b / x for b, x in zip(lat[base], lat[m])]
            print(f"mode-ab: {m} speed-up over {base}, median {statistics.median(r):.3f}x "
                  f"(min {min(r):.3f}, max {max(r):.3f}) over {len(r)} rounds; median latency "
                  f"{statistics.median(lat[m]):.0f} ms against {statistics.median(lat[base]):.0f} ms")
    finally:
        srv.terminate()
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
        log.close()


if __name__ == "__main__":
    main()
