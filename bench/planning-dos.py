#!/usr/bin/python3
"""Planning cost under a huge request (issue: quadratic planning): starts
`basal serve` on a fixture model with the request limits raised out of the
way, sends one request of N noul questions on a short state, and 0.5 s later a
normal one-question request; prints how long each took. Run it for two
binaries to compare (same machine, same run):

  bench/planning-dos.py --basal build/basal --model build/fixtures/tiny-bias -n 1000,4000,12000
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time


def post(port, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    c.request("POST", "/v1/systemone", body=body, headers={"content-type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--basal", default="build/basal", help="binary (default build/basal)")
    ap.add_argument("--model", default="build/fixtures/tiny-bias", help="model directory (default tiny-bias; its served name is basal-tiny)")
    ap.add_argument("-n", default="1000,4000,12000", help="question counts (default 1000,4000,12000)")
    ap.add_argument("--timeout", type=float, default=120, help="per request, seconds (default 120)")
    ap.add_argument("--limit-flags", action="store_true",
                    help="pass --max-questions/--max-request-tokens high (binaries that have them; default off)")
    a = ap.parse_args()
    err = tempfile.NamedTemporaryFile(delete=False)
    argv = [a.basal, "serve", "--model", a.model, "--addr", "127.0.0.1:0"]
    if a.limit_flags:
        argv += ["--max-questions", "1000000", "--max-request-tokens", "2000000000"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    try:
        port = None
        for _ in range(600):
            m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", open(err.name, errors="replace").read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.05)
        if not port:
            sys.exit("server did not start:\n" + open(err.name, errors="replace").read())
        normal = json.dumps({"model": "basal-tiny", "state": "Klient pyta o zwrot.", "questions": {
            "q": {"type": "noul", "instructions": "Czy to zwrot?"}}})
        print(f"{'questions':>9} {'body KB':>8} {'status':>6} {'huge s':>8} {'normal s':>9}")
        for n in [int(x) for x in a.n.split(",")]:
            qs = {f"q{i}": {"type": "noul", "instructions": f"Czy zgłoszenie {i} dotyczy zwrotu?"} for i in range(n)}
            huge = json.dumps({"model": "basal-tiny", "state": "Klient pyta o zwrot towaru.", "questions": qs})
            res = {}
            t = threading.Thread(target=lambda: res.update(h=post(port, huge, a.timeout)))
            t.start()
            time.sleep(0.5)
            ns, nt = post(port, normal, a.timeout)
            t.join()
            hs, ht = res["h"]
            print(f"{n:>9} {len(huge) / 1024:>8.0f} {hs:>6} {ht:>8.2f} {nt:>9.3f}  (normal status {ns})", flush=True)
    finally:
        p.kill()
        p.wait()
        os.unlink(err.name)


main()
