#!/usr/bin/env python3
"""`basal benchmark --url` through nginx (deploy/nginx/basal.conf) in front of
N local replicas: the issue-17 measurement of scale-out on one machine.

    python3 bench/replicas-bench.py --model DIR --replicas 1,2 [--threads T] [--out-dir DIR] [benchmark flags...]

For each N it starts N `basal serve` replicas on loopback ports (each with
--threads T when given), a foreground nginx with a configuration generated
from the template (every path in a temporary directory), runs `basal
benchmark --url` against nginx with the remaining flags, and writes
OUT/replicas-N.json and .html. On a machine whose cores are already busy with
one replica, more replicas cannot add throughput; the numbers show it."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
sys.dont_write_bytecode = True
from scaleout_test import free_port, nginx_config, wait_port  # noqa: E402
from srvlib import Server  # noqa: E402

BASAL = os.path.join(ROOT, "build", "basal")


def cpu_seconds(pid):
    """user + system CPU seconds of a process (all its threads)"""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Other arguments go to `basal benchmark --url`.")
    ap.add_argument("--model", required=True, help="model directory every replica serves (required)")
    ap.add_argument("--replicas", default="1,2", help="replica counts to measure (default %(default)s)")
    ap.add_argument("--threads", type=int, default=0, help="--threads of each replica, 0: not given (default %(default)s)")
    ap.add_argument("--out-dir", default=".", help="where replicas-N.json and .html go (default %(default)s)")
    args, rest = ap.parse_known_args()
    for n in [int(x) for x in args.replicas.split(",")]:
        tmp = tempfile.mkdtemp(prefix=f"basal-replicas-{n}-")
        extra = ["--threads", str(args.threads)] if args.threads else []
        ports = [free_port() for _ in range(n)]
        reps = [Server(["--model", args.model, "--addr", f"127.0.0.1:{p}"] + extra) for p in ports]
        lb = free_port()
        conf = nginx_config(tmp, lb, ports)
        ngx = subprocess.Popen(["/usr/sbin/nginx", "-p", tmp, "-c", conf, "-g", "daemon off;"])
        try:
            if not wait_port(lb, 20):
                sys.exit("nginx did not start")
            out = os.path.join(args.out_dir, f"replicas-{n}")
            cmd = [BASAL, "benchmark", "--url", f"http://127.0.0.1:{lb}", "--out", out + ".json",
                   "--html", out + ".html"] + rest
            print(f"== {n} replica(s){' x ' + str(args.threads) + ' threads' if args.threads else ''}: "
                  + " ".join(cmd), flush=True)
            cpu0 = sum(cpu_seconds(r.pid) for r in reps)
            subprocess.run(cmd, check=False, cwd=ROOT)
            cpu = sum(cpu_seconds(r.pid) for r in reps) - cpu0
            with open(out + ".json") as f:
                rep = json.load(f)
            done = sum(p["completed"] - p["errors"] for p in rep["phases"])  # report v2: completed = finished
            wall = sum(p["wall_s"] for p in rep["phases"])
            # CPU time the replicas got: on a shared machine, more replicas (more threads) can get a larger
            # share of the same cores from the scheduler without the work per request changing
            print(f"replicas used {cpu:.1f} CPU-s for {done} answered requests in {wall:.1f} s of phases: "
                  f"{1000 * cpu / max(done, 1):.1f} CPU-ms per request, {cpu / max(wall, 1e-9):.2f} cores on average",
                  flush=True)
        finally:
            ngx.send_signal(signal.SIGQUIT)
            ngx.wait(timeout=10)
            for r in reps:
                r.stop()


if __name__ == "__main__":
    main()
