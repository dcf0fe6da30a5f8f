#!/usr/bin/python3
"""Denial-of-service attacks on `basal serve`'s HTTP layer (issue 15), with
the numbers before and after: run it once with the old binary and once with
the new one.

  python3 bench/http-dos.py --basal build/basal --model build/fixtures/tiny-bias [--legacy] [--seconds 20]

closewait  --max-inflight 1; --n (1,100) clients send an incomplete header block
           and FIN together and go away. Then: how long until a normal client
           is answered, how many sockets of the server's port sit in
           CLOSE-WAIT, how long SIGTERM takes.
slowloris  --max-inflight 8; --n (1,100) connections trickle header bytes (one a
           second, reconnecting when dropped) for --seconds; meanwhile a normal
           client sends a decision request every 0.5 s from another address.
           Reported: its answered fraction and worst latency. Variant
           `spread`: the connections come from 11 addresses.

Attackers use 127.0.0.2..127.0.0.12, the normal client 127.0.0.1 (Linux
routes all of 127/8 to the loopback). --legacy omits flags the old server
does not know (none are needed: the defaults are measured)."""
import argparse
import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--basal", required=True, help="binary to attack (required)")
ap.add_argument("--model", required=True, help="model directory it serves (required)")
ap.add_argument("--seconds", type=float, default=20, help="slowloris duration (default %(default)s)")
ap.add_argument("--n", type=int, default=1100, help="attacking connections (default %(default)s)")
ap.add_argument("--only", choices=["closewait", "slowloris", "spread"], help="one attack (default: all)")
ap.add_argument("--legacy", action="store_true", help="omit flags the old server does not know (default off)")
A = ap.parse_args()

BODY = json.dumps({"model": "basal-tiny", "state": "Klient pisze: proszę o zwrot.",
                   "questions": {"q": {"type": "noul", "instructions": "Czy klient prosi o zwrot?"}}}).encode()
REQ = b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY


def start(args):
    err = tempfile.NamedTemporaryFile(prefix="basal-dos-", delete=False)
    atexit.register(os.unlink, err.name)
    p = subprocess.Popen([A.basal, "serve", "--model", A.model, "--addr", "127.0.0.1:0"] + args,
                         stdout=subprocess.DEVNULL, stderr=err)
    for _ in range(3000):
        with open(err.name, "rb") as f:
            m = re.search(rb"serving on http://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return p, int(m.group(1))
        time.sleep(0.01)
    p.kill()
    sys.exit("server did not start")


def stop(p):
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        return None
    return time.time() - t0


def close_wait(port):
    n = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            next(f)
            for line in f:
                p = line.split()
                if p[3] == "08" and int(p[1].rsplit(":", 1)[1], 16) == port:
                    n += 1
    return n


def normal_request(port, timeout=5.0):
    """(status or None, seconds) of one decision request from 127.0.0.1."""
    t0 = time.time()
    try:
        s = socket.socket()
        s.settimeout(timeout)
        s.bind(("127.0.0.1", 0))
        s.connect(("127.0.0.1", port))
        s.sendall(REQ)
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
        s.close()
        return int(out.split(b" ", 2)[1]), time.time() - t0
    except (OSError, IndexError, ValueError):
        return None, time.time() - t0


def closewait():
    p, port = start(["--max-inflight", "1"])
    for i in range(A.n):
        s = socket.socket()
        s.settimeout(2)
        s.bind(("127.0.0.2", 0))
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Le")
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        s.close()
    t0 = time.time()
    answered = None
    while time.time() - t0 < 30:
        st, _ = normal_request(port, 2)
        if st == 200:
            answered = time.time() - t0
            break
        time.sleep(0.2)
    time.sleep(1)
    cw = close_wait(port)
    took = stop(p)
    print(f"closewait: {A.n} incomplete requests with FIN at --max-inflight 1: normal request answered after "
          f"{'%.2f s' % answered if answered is not None else 'NOT within 30 s'}; CLOSE-WAIT sockets 1 s later: {cw}; "
          f"SIGTERM took {took:.1f} s", flush=True)


def slowloris(addrs):
    p, port = start(["--max-inflight", "8"])
    stop_at = time.time() + A.seconds
    socks = {}
    refused = [0]

    def attacker():
        per = A.n // len(addrs)
        slots = [(a, k) for a in addrs for k in range(per)]
        while time.time() < stop_at:
            for key in slots:
                ent = socks.get(key)
                if ent is None:
                    s = socket.socket()
                    s.setblocking(False)
                    s.bind((key[0], 0))
                    try:
                        s.connect(("127.0.0.1", port))
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        continue
                    ent = socks[key] = [s, True]
                s = ent[0]
                try:
                    s.send(b"GET /health HTTP/1.1\r\n" if ent[1] else b"X")
                    ent[1] = False
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    refused[0] += 1
                    s.close()
                    socks.pop(key, None)
                    continue
                try:
                    # a server that answered (503/408) and closed: reconnect
                    if not s.recv(4096, socket.MSG_DONTWAIT):
                        raise OSError
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    refused[0] += 1
                    s.close()
                    socks.pop(key, None)
            time.sleep(1)

    t = threading.Thread(target=attacker)
    t.start()
    time.sleep(3)
    results = []
    while time.time() < stop_at:
        results.append(normal_request(port, 5))
        time.sleep(0.5)
    t.join()
    held = len(socks)
    for ent in socks.values():
        ent[0].close()
    took = stop(p)
    ok = [r for r in results if r[0] == 200]
    worst = max((r[1] for r in ok), default=float("nan"))
    print(f"slowloris {'from 11 addresses' if len(addrs) > 1 else 'from one address'}: {A.n} trickling connections "
          f"for {A.seconds:.0f} s at --max-inflight 8: normal client answered {len(ok)}/{len(results)} "
          f"(worst {worst:.2f} s); attacker connections dropped or refused {refused[0]}, held at the end {held}; "
          f"SIGTERM took {took:.1f} s", flush=True)


if A.only in (None, "closewait"):
    closewait()
if A.only in (None, "slowloris"):
    slowloris(["127.0.0.2"])
if A.only in (None, "spread"):
    slowloris([f"127.0.0.{i}" for i in range(2, 13)])
