"""Progress output of long commands (issue 18 item 4), checked from outside:

- not a terminal (stderr a file): timestamped lines `<UTC ISO time> basal:
  <what>: <pct>% (<done> of <total>), ...` at the interval of
  BASAL_PROGRESS_INTERVAL_MS (shortened here so that a small run is "long"),
  times inside the run's wall-clock window, spaced by at least the interval
  (no spam), percentages not decreasing, and a closing `done:` line whose
  amount is the independent total (the tensor bytes read back from the
  safetensors header by Python; the decision count of `bench`'s options);
- the default interval (5 s) writes nothing for short work; BASAL_PROGRESS=off
  writes nothing at all;
- a terminal (a pty): one line redrawn with \\r and ESC[K, a full bar at the
  end and a final newline;
- a forward of >= 1024 tokens: `decide` draws one line for it, counted in the
  model's layers (config.json's num_hidden_layers), and `bench-requests` notes
  "forward of N tokens: layer k of L" on its requests line (N = the forward
  tokens of its report); a short forward shows nothing.
Usage: progress_check.py BASAL FIXTURES TMPDIR"""
import argparse
import datetime
import json
import os
import pty
import re
import struct
import subprocess
import sys
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("basal", metavar="BASAL", help="the binary under test")
ap.add_argument("fixtures", metavar="FIXTURES", help="the fixtures directory")
ap.add_argument("tmp", metavar="TMPDIR", help="a scratch directory")
A = ap.parse_args()
BASAL, FIXTURES, TMP = A.basal, A.fixtures, A.tmp
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)
    return cond


LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z basal: (.*?): (.*)$")


def run(args, env_extra, cwd=None):
    env = dict(os.environ)
    env.pop("BASAL_PROGRESS", None)
    env.pop("BASAL_PROGRESS_INTERVAL_MS", None)
    env.update(env_extra)
    t0 = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    p = subprocess.run([BASAL] + args, env=env, capture_output=True, cwd=cwd, timeout=600)
    t1 = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return p.returncode, p.stderr.decode(), t0, t1


def progress_lines(err, what):
    out = []
    head = f"Z basal: {what}: "
    for line in err.splitlines():
        m = LINE.match(line)
        if m and line[23:].startswith(head):
            out.append((datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f"), line[23 + len(head):]))
    return out


def si(v):
    """The decimal kB/MB/GB form of base/progress.c, written again here."""
    if v < 1000:
        return f"{v} B"
    for i, u in enumerate(["kB", "MB", "GB", "TB"]):
        x = v / 1000 ** (i + 1)
        if x < 1000 or u == "TB":
            return f"{x:.1f} {u}"


def tensor_bytes(d):
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    return sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items() if k != "__metadata__")


def check_series(lines, t0, t1, interval_ms, total_text, final_text, what):
    check(len(lines) >= 2, f"{what}: at least one progress line and the closing one ({len(lines)})")
    if not lines:
        return
    slack = datetime.timedelta(milliseconds=50)
    check(all(t0 - slack <= t <= t1 + slack for t, _ in lines), f"{what}: timestamps inside the run {t0}..{t1}")
    gaps = [(b[0] - a[0]).total_seconds() * 1000 for a, b in zip(lines[:-2], lines[1:-1])]
    check(all(g >= interval_ms * 0.8 for g in gaps), f"{what}: lines at least {interval_ms} ms apart: {gaps[:8]}")
    body = [s for _, s in lines[:-1]]
    pct = []
    for s in body:
        m = re.match(r"(\d+)% \((.+) of (.+?)(, [\d.]+ (?:B|kB|MB|GB|TB)/s)?\), ([\d.]+ s|\d+ min \d+ s) elapsed"
                     r"(, about .* left)?$", s)
        if check(m is not None, f"{what}: progress line form: {s!r}"):
            pct.append(int(m.group(1)))
            check(m.group(3) == total_text, f"{what}: total {m.group(3)!r} = {total_text!r}")
    check(pct == sorted(pct) and all(0 <= p <= 100 for p in pct), f"{what}: percentages do not decrease: {pct}")
    check(re.fullmatch(re.escape(final_text) + r" in [\d.]+ s", lines[-1][1]) is not None,
          f"{what}: closing line {lines[-1][1]!r}, expected {final_text!r} in ... s")


# ---- make-model, line form ----
out = os.path.join(TMP, "m1")
rc, err, t0, t1 = run(["make-model", out, "--preset", "tiny"], {"BASAL_PROGRESS_INTERVAL_MS": "10"})
check(rc == 0, f"make-model exit {rc}: {err[-400:]}")
if rc == 0:
    total = tensor_bytes(out)
    what = f"make-model: writing the weights of {out}"
    lines = progress_lines(err, what)
    check_series(lines, t0, t1, 10, f"{si(total)}", f"done: {si(total)}", "make-model")

# ---- the default interval: nothing for short work; off: nothing ----
for env, name in (({}, "default interval"), ({"BASAL_PROGRESS": "off", "BASAL_PROGRESS_INTERVAL_MS": "10"}, "off")):
    o = os.path.join(TMP, "m-" + name.replace(" ", "-"))
    rc, err, t0, t1 = run(["make-model", o, "--preset", "tiny"], env)
    check(rc == 0 and not LINE.search(err) and "%" not in err and "\r" not in err,
          f"make-model ({name}): no progress output: {err[-300:]!r}")
    check((t1 - t0).total_seconds() < 5, f"make-model ({name}) ran under the 5 s interval")

# ---- bench: item i/N and the throughput phase ----
model = os.path.join(FIXTURES, "tiny-bias")
rc, err, t0, t1 = run(["bench", "--model", model, "--lat-n", "2", "--state-tokens", "40", "--throughput-items", "32",
                       "--threads", "1", "--out", os.path.join(TMP, "bench.json")], {"BASAL_PROGRESS_INTERVAL_MS": "10"})
check(rc == 0, f"bench exit {rc}: {err[-400:]}")
if rc == 0:
    items = re.findall(r"^item (\d+)/(\d+)( \(discarded\))?: lat1", err, re.M)
    # --lat-n 2 plus the 5 discarded items (spec 06 §7.1)
    check([(int(a), int(b), bool(c)) for a, b, c in items] == [(i, 7, i <= 5) for i in range(1, 8)],
          f"bench: item i/N lines: {items}")
    what = "bench: throughput, 3 passes of 32 decisions"
    lines = progress_lines(err, what)
    # warm-up group of 16 (the group size) then 3 passes of 32
    check_series(lines, t0, t1, 10, "112 decisions", "done: 112 decisions", "bench")

# ---- bench-requests ----
reqs = os.path.join(TMP, "reqs.jsonl")
with open(reqs, "w") as f:
    for i in range(12):
        f.write(json.dumps({"id": f"r{i}", "request": {"state": f"Zgłoszenie {i}: " + "słowo " * 30, "questions": {
            "q": {"type": "choice", "instructions": "Dział?", "criteria": ["a", "b", "c"]}}}}, ensure_ascii=False) + "\n")
rc, err, t0, t1 = run(["bench-requests", "--model", model, "--requests", reqs, "--batching", "tree", "--reps", "3",
                       "--threads", "1", "--out", os.path.join(TMP, "br.json")], {"BASAL_PROGRESS_INTERVAL_MS": "10"})
check(rc == 0, f"bench-requests exit {rc}: {err[-400:]}")
if rc == 0:
    check_series(progress_lines(err, "bench-requests: tree batching"), t0, t1, 10, "12 requests", "done: 12 requests",
                 "bench-requests")

# ---- long forwards: decide draws one line per forward of >= 1024 tokens, ----
# ---- bench-requests notes the layer on its requests line ----
deep = os.path.join(FIXTURES, "tiny-deep")
with open(os.path.join(deep, "config.json")) as f:
    n_layers = json.load(f)["num_hidden_layers"]
with open(os.path.join(deep, "basal.json")) as f:
    deep_name = json.load(f)["name"]
long_req = {"state": "Zgłoszenie: " + "słowo " * 630,  # about 2000 tokens: under the fixture's 2048 positions
            "questions": {"q": {"type": "choice", "instructions": "Dział?", "criteria": ["a", "b", "c"]}}}
req_path = os.path.join(TMP, "long.json")
with open(req_path, "w") as f:
    json.dump(dict(long_req, model=deep_name), f, ensure_ascii=False)
rc, err, t0, t1 = run(["decide", "--model", deep, "--request", req_path, "--threads", "1"],
                      {"BASAL_PROGRESS_INTERVAL_MS": "10"})
check(rc == 0, f"decide (long state) exit {rc}: {err[-400:]}")
fw = [ln for ln in err.splitlines() if " basal: decide: forward of " in ln]
m = re.search(r"decide: forward of (\d+) tokens: ", fw[0]) if fw else None
if check(m is not None, f"decide: a forward progress line: {err[-400:]!r}"):
    tokens = int(m.group(1))
    check(1024 <= tokens <= 2048, f"decide: the watched forward has {tokens} tokens (>= 1024, within the positions)")
    check_series(progress_lines(err, f"decide: forward of {tokens} tokens"), t0, t1, 10, f"{n_layers} layers",
                 f"done: {n_layers} layers", "decide forward")
short_path = os.path.join(TMP, "short.json")
with open(short_path, "w") as f:
    json.dump(dict(long_req, model=deep_name, state="Zgłoszenie: " + "słowo " * 40), f, ensure_ascii=False)
rc, err, t0, t1 = run(["decide", "--model", deep, "--request", short_path, "--threads", "1"],
                      {"BASAL_PROGRESS_INTERVAL_MS": "10"})
check(rc == 0 and "forward of" not in err, f"decide (short state): no forward progress: {rc} {err[-300:]!r}")

long_reqs = os.path.join(TMP, "long.jsonl")
with open(long_reqs, "w") as f:
    f.write(json.dumps({"id": "long", "request": long_req}, ensure_ascii=False) + "\n")
br_out = os.path.join(TMP, "br-long.json")
rc, err, t0, t1 = run(["bench-requests", "--model", deep, "--requests", long_reqs, "--reps", "2", "--threads", "1",
                       "--out", br_out], {"BASAL_PROGRESS_INTERVAL_MS": "10"})
check(rc == 0, f"bench-requests (long state) exit {rc}: {err[-400:]}")
if rc == 0:
    with open(br_out) as f:
        fwd_tokens = json.load(f)["modes"][0]["forward_tokens"]
    lines = progress_lines(err, "bench-requests: tree batching")
    notes = [re.search(r"; forward of (\d+) tokens: layer (\d+) of (\d+)$", s) for _, s in lines[:-1]]
    noted = [(int(n.group(1)), int(n.group(2)), int(n.group(3))) for n in notes if n]
    check(len(noted) >= 2, f"bench-requests: layer notes on the requests line: {[s for _, s in lines[:4]]}")
    check(all(t == fwd_tokens and 1 <= k <= L == n_layers for t, k, L in noted),
          f"bench-requests: notes name the forward ({fwd_tokens} tokens) and layer k of {n_layers}: {noted[:5]}")
    check(all(re.match(r"\d+% \(\d of 1 requests\)", s) for _, s in lines[:-1]),
          f"bench-requests: the requests count stays first: {lines[:2]}")

# ---- a terminal: the bar ----
def on_pty(args, clean_env=False, limit_s=None):
    """Runs basal with args on a pseudo-terminal: (wait status, its output)."""
    pid, fd = pty.fork()
    if pid == 0:
        if clean_env:
            os.environ.pop("BASAL_PROGRESS", None)
            os.environ.pop("BASAL_PROGRESS_INTERVAL_MS", None)
        os.execv(BASAL, [BASAL] + args)
    buf = b""
    deadline = time.time() + limit_s if limit_s else None
    while deadline is None or time.time() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    _, status = os.waitpid(pid, 0)
    return status, buf.decode("utf-8", "replace")


o = os.path.join(TMP, "m-tty")
status, text = on_pty(["make-model", o, "--preset", "tiny"], clean_env=True, limit_s=120)
check(os.WEXITSTATUS(status) == 0, f"make-model on a terminal: exit {status}")
redraws = text.count("\r\x1b[K")
what = f"make-model: writing the weights of {o}"
if redraws:  # drawn at most every 100 ms: a fast run may finish before the first
    check(f"{what} [{'#' * 24}] done: " in text, f"terminal: full bar at the end: {text[-300:]!r}")
    check(re.search(r"\[#*\.+\] \d+% ", text) is not None or redraws == 1, "terminal: a partial bar")
    check(not LINE.search(text), "terminal: no timestamped lines")
else:
    check("%" not in text, f"terminal, under 100 ms: nothing drawn: {text!r}")
# a slower one on the terminal: mini layers, so that the bar is drawn
o2 = os.path.join(TMP, "m-tty2")
status, text = on_pty(["make-model", o2, "--preset", "tiny-hd128", "--dtype", "f32", "--layers", "24"])
what = f"make-model: writing the weights of {o2}"
check(os.WEXITSTATUS(status) == 0, f"make-model tiny-hd128 on a terminal: exit {status}")
check(text.count("\r\x1b[K") >= 2, f"terminal: the bar was redrawn: {text[:300]!r}")
check(re.search(re.escape(what) + r" \[#{24}\] done: [\d.]+ MB in [\d.]+ s\r?\n", text) is not None,
      f"terminal: closing bar and newline: {text[-300:]!r}")
check(not LINE.search(text), "terminal: no timestamped lines")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
