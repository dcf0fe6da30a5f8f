#!/usr/bin/env python3
"""Closed-loop HTTP load against a running `basal serve` (spec 06 §7.3, B2
style): C clients, each with one keep-alive connection, send single-question
/v1/systemone requests back to back; prints requests/s and latency
percentiles per concurrency, and checks that every answer to the same request
is byte-identical (except usage.latency_ms) across phases.

  tools/loadtest.py --url http://127.0.0.1:8000 --model basal-tiny --clients 1,32 --requests 400
"""
import argparse
import http.client
import json
import re
import statistics
import threading
import time
import urllib.parse

STATES = [
    "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot.",
    "Paczka nie dotarła, a śledzenie pokazuje doręczenie od tygodnia.",
    "The invoice lists a product I never ordered; please correct it.",
    "Czy mogę zmienić adres dostawy po złożeniu zamówienia?",
]
QUESTIONS = [
    {"type": "choice", "instructions": "Czego dotyczy zgłoszenie?",
     "criteria": {"billing": None, "shipping": None, "account": None, "other": None}},
    {"type": "noul", "instructions": "Czy chodzi o płatność?"},
    {"type": "score", "instructions": "Jak pilne jest zgłoszenie?", "criteria": ["niska", "średnia", "wysoka"]},
]


def workload(model):
    out = []
    for i, st in enumerate(STATES):
        for j, q in enumerate(QUESTIONS):
            out.append(json.dumps({"model": model, "state": st, "questions": {f"q{i}{j}": q}},
                                  ensure_ascii=False).encode())
    return out


def phase(url, bodies, clients, total):
    u = urllib.parse.urlparse(url)
    lat, answers, errors = [], {}, []
    lock = threading.Lock()
    counter = iter(range(total))

    def client():
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        while True:
            with lock:
                k = next(counter, None)
            if k is None:
                break
            body = bodies[k % len(bodies)]
            t = time.perf_counter()
            try:
                conn.request("POST", "/v1/systemone", body=body)
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as e:
                errors.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
                continue
            dt = time.perf_counter() - t
            with lock:
                lat.append(dt)
                if r.status != 200:
                    errors.append(f"status {r.status}: {data[:200]!r}")
                answers.setdefault(k % len(bodies), set()).add(re.sub(rb'"latency_ms":[^}]*', b"", data))
        conn.close()
    ths = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    wall = time.perf_counter() - t0
    return wall, lat, answers, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="server (default %(default)s)")
    ap.add_argument("--model", default="basal-tiny", help="served model name (default %(default)s)")
    ap.add_argument("--clients", default="1,32", help="concurrent client counts (default %(default)s)")
    ap.add_argument("--requests", type=int, default=400, help="requests of each phase (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=24, help="requests before measuring (default %(default)s)")
    a = ap.parse_args()
    bodies = workload(a.model)
    phase(a.url, bodies, 1, a.warmup)
    seen = {}
    for c in [int(x) for x in a.clients.split(",")]:
        wall, lat, answers, errors = phase(a.url, bodies, c, a.requests)
        lat.sort()
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3
        print(f"clients {c:3d}: {len(lat) / wall:8.1f} req/s  p50 {statistics.median(lat) * 1e3:7.2f} ms  "
              f"p95 {p(0.95):7.2f} ms  max {lat[-1] * 1e3:7.2f} ms  errors {len(errors)}")
        for e in errors[:3]:
            print("   ", e)
        for k, v in answers.items():
            seen.setdefault(k, set()).update(v)
    differ = sum(1 for v in seen.values() if len(v) > 1)
    print(f"answers identical across phases: {'yes' if not differ else f'NO ({differ} requests differ)'}")


if __name__ == "__main__":
    main()
