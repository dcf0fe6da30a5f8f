"""The int8 mode (issue 34, --dtype int8: W8A8 with smoothing) end to end.

- The W8A8 product against numpy: `test_gemm_i8 --dump` writes random x and
  w and the outputs of every int8 kernel this CPU runs (and of the AMX path
  with its emulated tiles); numpy's s = amax/127, q = rint(v/s) per row of
  both, exact int64 sums and float32 (float)acc * (sx * sw) must equal every
  kernel's output bit for bit.
- Calibration and smoothing against references (tiny-bias, a private copy):
  the cache file basal writes (<BASAL_HOME>/.cache/int8/<key>.safetensors,
  model/quant_cache.h) holds the calibration tokens, the per-channel maxima,
  the factors and the quantized weights; the maxima equal the PyTorch f32
  reference forward's (tools/torch_ref.py --act-max) within 1e-4 relative;
  numpy's factors s = a^alpha / w^(1-alpha) from those maxima and the stored
  weights' column maxima equal the file's to 1 ulp; numpy's q and scale of
  every projection from the stored weights and the file's factors equal
  the file's byte for byte.
- The cache: the second start reads it and answers the same bits; a
  truncated file, one for another source, or one holding -128 is never used
  (quantized again, the same answers); another alpha and a touched weights
  file give other keys.
- Kernels and batching: the answers of every int8 kernel this CPU runs
  (BASAL_INT8=portable, avx2, avx-vnni, avx512-vnni), on 1 and 2 threads, are the
  same bytes; over HTTP, answers of requests sent 16 at a time (packed into
  shared forwards) equal those sent one at a time.
- Agreement with f32 over 200 requests per question type on fixtures, next
  to bf16's: every decision with an f32 margin above 0.1 is the same, and
  int8's agreement is within 2 points of bf16's (decisions with an f32
  margin >= 0.01; most random-model yes/no answers are coin flips below it).
- An outlier fixture (make-model --outliers: a few hidden channels 50x the
  rest, as real checkpoints have), with and without smoothing side by side:
  smoothing keeps int8 within those bounds (the numbers without smoothing are
  printed, not bounded).
- /v1/models says "dtype":"int8"; --dtype int8 with --backend cuda is refused."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from srvlib import BASAL, FIXTURES, SMOKE_REQUESTS, SLOW, STATISTICS, Checks, Server, strip_latency  # noqa: E402
from agreement import TIE, distribution, requests  # noqa: E402

C = Checks()
tmp = tempfile.mkdtemp(prefix="int8a-", dir=os.environ.get("TMPDIR"))
HOME = os.path.join(tmp, "home")
ENV = {"BASAL_HOME": HOME}
BUILD = os.environ.get("BUILD", os.path.join(os.path.dirname(BASAL)))
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MATS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj"]
GROUPS = {"qkv": [0, 1, 2], "gate_up": [4, 5], "o": [3], "down": [6]}
F32 = np.float32


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        buf = data[b:e]
        if t["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(buf, dtype={"F32": "<f4", "F16": "<f2", "I8": "i1", "I32": "<i4"}[t["dtype"]])
            if t["dtype"] == "F16":
                a = a.astype(np.float32)
        out[name] = a.reshape(t["shape"])
    return hdr.get("__metadata__", {}), out


def fwht(v, b):
    """The block Walsh-Hadamard transform of every row, as the butterflies of cpu/hadamard.c
    (float32: (a + c, a - c) per pair, stage h = 1, 2, ... b/2)."""
    v = v.astype(np.float32).copy()
    k = v.shape[-1]
    h = 1
    while h < b:
        x = v.reshape(*v.shape[:-1], k // (2 * h), 2, h)
        a, c = x[..., 0, :].copy(), x[..., 1, :].copy()
        x[..., 0, :] = a + c
        x[..., 1, :] = a - c
        h *= 2
    return v


def numpy_rows(v):
    """The per-row rule: s = amax/127 (float32), q = rint(v/s), 0 where s is 0."""
    v = v.astype(np.float32)
    amax = np.abs(v).max(axis=1)
    s = (amax / F32(127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s[:, None] > 0, np.rint(v / s[:, None]), 0)
    return np.clip(q, -127, 127).astype(np.int8), s


# ---- the product ---------------------------------------------------------------------

def part_product():
    d = os.path.join(tmp, "dump")
    p = subprocess.run([os.path.join(BUILD, "tests", "test_gemm_i8"), "--dump", d], capture_output=True, timeout=120)
    if not C.eq(p.returncode, 0, f"test_gemm_i8 --dump ({p.stderr.decode()[-200:]})"):
        return
    meta = json.load(open(os.path.join(d, "meta.json")))
    m, n, k = meta["m"], meta["n"], meta["k"]
    x = np.fromfile(os.path.join(d, "x.bin"), dtype="<f4").reshape(m, k)
    w = np.fromfile(os.path.join(d, "w.bin"), dtype="<f4").reshape(n, k)
    qx, sx = numpy_rows(x)
    qw, sw = numpy_rows(w)
    acc = qx.astype(np.int64) @ qw.astype(np.int64).T
    want = acc.astype(np.float32) * (sx[:, None] * sw[None, :]).astype(np.float32)
    for i, name in enumerate(meta["kernels"]):
        y = np.fromfile(os.path.join(d, f"y{i}.bin"), dtype="<f4").reshape(m, n)
        C.ok(np.array_equal(y.view(np.uint32), want.view(np.uint32)),
             f"W8A8 product of {name} equals numpy's bit for bit ({m}x{k} times {n}x{k}, "
             f"{int(np.sum(y.view(np.uint32) != want.view(np.uint32)))} differ)")
    C.ok(len(meta["kernels"]) >= 2, f"kernels compared: {meta['kernels']}")


# ---- calibration, smoothing and the cache -----------------------------------------------

def decide(model, body, dtype="int8", extra=(), env=None):
    p = subprocess.run([BASAL, "decide", "--model", model, "--dtype", dtype, *extra], input=json.dumps(body).encode(),
                       capture_output=True, timeout=120 * SLOW, env=dict(os.environ, **ENV, **(env or {})))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def cache_files():
    d = os.path.join(HOME, ".cache", "int8")
    return sorted(os.path.join(d, f) for f in os.listdir(d)) if os.path.isdir(d) else []


def check_smoothing(src, meta, q, stored, cfg):
    """The file's maxima against torch, its factors and weights against numpy."""
    L, hd, nh, nkv = cfg["num_hidden_layers"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    ids = [int(i) for i in q["calibration.ids"]]
    C.ok(len(ids) > 100, f"calibration: {len(ids)} tokens")
    with open(os.path.join(tmp, "ids.json"), "w") as f:
        json.dump({"ids": ids}, f)
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "torch_ref.py"), "--model", src, "--act-max",
                        os.path.join(tmp, "ids.json")], capture_output=True, timeout=300)
    if not C.eq(p.returncode, 0, f"torch_ref --act-max ({p.stderr.decode()[-300:]})"):
        return
    ref = json.loads(p.stdout)
    alpha = float(meta["rule"].split("alpha ")[1].split(",")[0])
    smoothed = [g for g in GROUPS if f"model.layers.0.smooth.{g}" in q]
    C.eq(smoothed, ["qkv", "gate_up"], "inputs smoothed by default")
    worst, bad_s, bad_q = 0.0, [], []
    for l in range(L):
        fac = {}
        for g in smoothed:
            got = q[f"model.layers.{l}.act_max.{g}"].astype(np.float64)
            want = np.array(ref[g][l], dtype=np.float64)
            worst = max(worst, float(np.max(np.abs(got - want) / np.maximum(want, 1e-30))))
            cols = np.zeros(got.shape[0], dtype=np.float32)
            for i in GROUPS[g]:
                cols = np.maximum(cols, np.abs(stored[f"model.layers.{l}.{MATS[i]}.weight"]).max(axis=0))
            a, wm = got.astype(np.float32), cols
            if g == "o":  # one factor per kv head and dimension
                rep = nh // nkv
                a = a.reshape(nkv, rep, hd).max(axis=1).reshape(-1)
                wm = wm.reshape(nkv, rep, hd).max(axis=1).reshape(-1)
            with np.errstate(divide="ignore"):
                s = np.power(a.astype(np.float64), alpha) / np.power(wm.astype(np.float64), 1 - alpha)
            s = np.where((a > 0) & (wm > 0) & np.isfinite(s), np.clip(s, 2.0 ** -16, 2.0 ** 16), 1.0).astype(np.float32)
            have = q[f"model.layers.{l}.smooth.{g}"]
            ulps = np.abs(have.view(np.int32).astype(np.int64) - s.view(np.int32).astype(np.int64))
            if ulps.max() > 1:
                bad_s.append(f"{l}.{g}: {int(ulps.max())} ulp")
            fac[g] = have
        for i, mat in enumerate(MATS):
            w = stored[f"model.layers.{l}.{mat}.weight"].astype(np.float32)
            col = fac["qkv"] if i < 3 and "qkv" in fac else fac["gate_up"] if i in (4, 5) and "gate_up" in fac else None
            v = w * col[None, :] if col is not None else w
            if i == 6 and "rotate down" in meta["rule"]:  # the rows rotated, divided by the block (exact)
                b = 1
                while b < 256 and w.shape[1] % (2 * b) == 0:
                    b *= 2
                v = fwht(w, b) * np.float32(1.0 / b)
            wq, ws = numpy_rows(v)
            base = f"model.layers.{l}.{mat}.weight"
            if not (np.array_equal(q[base + ".q"], wq) and np.array_equal(q[base + ".scale"].view(np.uint32), ws.view(np.uint32))):
                bad_q.append(base)
    C.ok(worst <= 1e-4, f"calibration maxima equal torch's (max relative difference {worst:.2e})")
    C.eq(bad_s, [], "smoothing factors equal numpy's within 1 ulp")
    C.eq(bad_q, [], f"q and scale of every projection equal numpy's from the smoothed weights ({L * 7} matrices)")


def part_cache_and_kernels():
    src = os.path.join(tmp, "tiny-bias")  # a private copy: its mtime is ours to change
    shutil.copytree(os.path.join(FIXTURES, "tiny-bias"), src)
    name = json.load(open(os.path.join(src, "basal.json")))["name"]
    body = {"model": name, "state": "Zamówienie 1234 nie dotarło, proszę o zwrot pieniędzy.",
            "questions": {"q": {"type": "choice", "instructions": "Intencja?",
                                "criteria": {"a": "zwrot", "b": "reklamacja", "c": "pytanie"}},
                          "s": {"type": "score", "instructions": "Jak pilne?", "criteria": ["niskie", "wysokie"]}}}
    rc, out1, err1 = decide(src, body)
    C.eq(rc, 0, f"int8 decide ({err1[-300:]})")
    files = cache_files()
    if not C.eq(len(files), 1, "one int8 cache file written"):
        return
    path = files[0]
    C.ok("int8 weights kept in" in err1 and "dtype int8 (alpha 0.5, smooth qkv+gate_up, int8w down" in err1,
         f"the first start says what it did ({err1[-400:]})")
    meta, q = read_safetensors(path)
    C.eq(meta.get("format"), "basal-int8-v1", "cache format")
    _, stored = read_safetensors(os.path.join(src, "model.safetensors"))
    check_smoothing(src, meta, q, stored, json.load(open(os.path.join(src, "config.json"))))
    rc, out2, err2 = decide(src, body)
    C.ok(rc == 0 and "int8 weights (alpha 0.5, smooth qkv+gate_up, int8w down) read from" in err2,
         "the second start reads the cache")
    C.eq(out2, out1, "answers from the cache equal answers after quantizing")
    # every kernel, 1 and 2 threads: the same bytes
    for kern in ("portable", "avx2", "avx-vnni", "avx512-vnni"):
        for th in ("1", "2"):
            rc, o, e = decide(src, body, extra=("--threads", th), env={"BASAL_INT8": kern})
            ran = "cannot run it" not in e  # a kernel this CPU lacks falls back, with a warning
            C.ok(rc == 0 and o == out1, f"BASAL_INT8={kern} --threads {th}: the same answers{'' if ran else ' (fell back)'}")
    # truncated: never used, re-quantized, the same answers
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 3)
    rc, o, e = decide(src, body)
    C.ok(rc == 0 and "quantizing the weights again" in e and "read from" not in e, f"a truncated cache file is not used")
    C.eq(o, out1, "the same answers after re-quantizing")
    C.eq(os.path.getsize(path), size, "the truncated file was replaced")
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = raw[8:8 + n].decode()
    forged = hdr.replace(json.loads(hdr)["__metadata__"]["source"], "0" * 64)
    open(path, "wb").write(raw[:8] + forged.encode() + raw[8 + n:])
    rc, o, e = decide(src, body)
    C.ok(rc == 0 and "another format or source" in e and o == out1, "a file for another source is not used")
    raw = bytearray(open(path, "rb").read())
    raw[8 + n] = 0x80
    open(path, "wb").write(bytes(raw))
    rc, o, e = decide(src, body)
    C.ok(rc == 0 and "-128" in e and o == out1, "a cache file holding -128 is not used")
    before = set(cache_files())
    rc, o, e = decide(src, body, extra=("--int8-smooth-alpha", "0.7"))
    C.ok(rc == 0 and "alpha 0.7" in e and len(set(cache_files()) - before) == 1, "another alpha: another cache file")
    rc, o, e = decide(src, body, extra=("--int8-smooth-alpha", "0"))
    C.ok(rc == 0 and "smooth none" in e, f"--int8-smooth-alpha 0: no smoothing ({e[-200:]})")
    os.utime(os.path.join(src, "model.safetensors"), None)
    before = set(cache_files())
    rc, o, e = decide(src, body)
    C.ok(rc == 0 and len(set(cache_files()) - before) == 1 and o == out1, "a touched weights file gets its own cache file")
    # down_proj W8A8 with its input rotated (BASAL_INT8_WEIGHT_ONLY=none: the plan's rotation applies)
    before = set(cache_files())
    env = {"BASAL_INT8_WEIGHT_ONLY": "none"}
    rc, o_rot, e = decide(src, body, env=env)
    new = sorted(set(cache_files()) - before)
    C.ok(rc == 0 and "rotate down" in e and len(new) == 1, f"BASAL_INT8_WEIGHT_ONLY=none rotates down_proj's input")
    if new:
        meta, q = read_safetensors(new[0])
        _, stored = read_safetensors(os.path.join(src, "model.safetensors"))
        bad = []
        for l in range(json.load(open(os.path.join(src, "config.json")))["num_hidden_layers"]):
            base = f"model.layers.{l}.mlp.down_proj.weight"
            w = stored[base].astype(np.float32)
            b = 1
            while b < 256 and w.shape[1] % (2 * b) == 0:
                b *= 2
            wq, ws = numpy_rows(fwht(w, b) * np.float32(1.0 / b))
            if not (np.array_equal(q[base + ".q"], wq) and np.array_equal(q[base + ".scale"].view(np.uint32), ws.view(np.uint32))):
                bad.append(base)
        C.eq(bad, [], "rotated down_proj weights (block Walsh-Hadamard / b, then per row) equal numpy's")
    for kern in ("portable", "avx2", "avx512-vnni"):
        rc, o, e = decide(src, body, extra=("--threads", "1"), env=dict(env, BASAL_INT8=kern))
        C.ok(rc == 0 and o == o_rot, f"rotated plan, BASAL_INT8={kern}: the same answers")
    # settings that make no sense are refused with a message, never half-used
    for extra, env, want in ((("--int8-smooth-alpha", "1.5"), {}, "a number in [0, 1]"),
                             (("--int8-smooth-alpha", "x"), {}, "a number in [0, 1]"),
                             ((), {"BASAL_INT8": "bogus"}, "unknown int8 kernel"),
                             ((), {"BASAL_INT8_SMOOTH": "qkv,bogus"}, "BASAL_INT8_SMOOTH=qkv,bogus"),
                             ((), {"BASAL_INT8_WEIGHT_ONLY": "lm_head"}, "BASAL_INT8_WEIGHT_ONLY=lm_head"),
                             ((), {"BASAL_INT8_ROTATE": "qkv"}, "BASAL_INT8_ROTATE=qkv")):
        rc, o, e = decide(src, body, extra=extra, env=env)
        C.ok(rc != 0 and want in e, f"refused: {' '.join(extra)} {env}: {e.strip()[-160:]}")
    bad = os.path.join(tmp, "bad-alpha.yml")
    with open(bad, "w") as f:
        f.write(f"models:\n  - path: {src}\n    dtype: int8\n    int8_smooth_alpha: 2\n")
    p = subprocess.run([BASAL, "doctor", "--config", bad], capture_output=True, timeout=60, env=dict(os.environ, **ENV))
    C.ok(p.returncode != 0 and b"int8_smooth_alpha: expected a number in [0, 1]" in p.stdout + p.stderr,
         "serve.yml int8_smooth_alpha: 2 is refused (doctor, as serve would)")
    rc, o, e = decide(src, body, extra=("--backend", "cuda"))
    C.ok(rc != 0 and ("int8" in e or "CUDA" in e), f"int8 on cuda is refused: {e[-200:]}")


# ---- doctor's fit table ------------------------------------------------------------------------

def part_doctor():
    """basal doctor's resident weights per mode against sizes computed here from the
    safetensors header: f32 as stored, bf16 2 bytes a weight, int8w 1 byte a weight
    and a 4-byte scale a row, int8 the W8A8 strips (32 rows, K padded to 64, a scale
    and a row sum per row; down_proj as int8w); fits when 2 GiB spare remain."""
    src = os.path.join(FIXTURES, "tiny-deep")
    cfg = os.path.join(tmp, "doctor.yml")
    with open(cfg, "w") as f:
        f.write(f"models:\n  - path: {src}\n    dtype: int8\n    int8_smooth_alpha: 0.6\n")
    p = subprocess.run([BASAL, "doctor", "--config", cfg], capture_output=True, timeout=120, env=dict(os.environ, **ENV))
    out = p.stdout.decode() + p.stderr.decode()
    line = next((l for l in out.splitlines() if "resident weights" in l), "")
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    need = [0, 0, 0, 0]
    for name, t in hdr.items():
        if name == "__metadata__" or ".layers." not in name or not name.endswith("_proj.weight"):
            continue
        r, k = t["shape"]
        b, e = t["data_offsets"]
        strips, kp = (r + 31) // 32, (k + 63) // 64 * 64
        need[0] += e - b
        need[1] += 2 * r * k
        need[2] += r * k + 4 * r
        need[3] += r * k + 4 * r if "mlp.down_proj" in name else strips * 32 * kp + strips * 32 * 8
    avail = next(int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemAvailable:"))
    def size(v):
        return f"{v / 2**30:.2f} GiB" if v >= 2**30 / 10 else f"{v / 2**20:.1f} MiB"
    want = ", ".join(f"{m} {size(v)}" for m, v in zip(("f32", "bf16", "int8w", "int8"), need))
    C.ok(f"resident weights {want} (" in line, f"doctor's fit table: {line.strip()} (want {want})")
    fits = ", ".join(f"{m} {'fits' if v + 2 * 2**30 <= avail else 'does not fit'}"
                     for m, v in zip(("f32", "bf16", "int8w", "int8"), need))
    C.ok(f"({fits} here)" in line, f"doctor's fit verdicts ({fits})")
    C.ok("dtype int8: int8 weights and activations smoothed with alpha 0.6" in out, "doctor names the int8 mode and its alpha")


# ---- agreement -------------------------------------------------------------------------------

POOL = {}  # (pool, mode, question type) -> [agreeing decisions, decisions] with an f32 margin >= TIE


def part_agreement(label, src, orders, modes, bounded, pool, per_type=200, serial_check=0):
    """modes: served name -> (dtype, extra YAML lines). For the modes in bounded: every
    decision with an f32 margin above 0.1 must be the same; every mode's agreement is
    added to POOL[pool] for the per-type bound."""
    per_type = per_type if STATISTICS else SMOKE_REQUESTS
    cfg = os.path.join(tmp, f"{label}-{orders}.yml")
    with open(cfg, "w") as f:
        f.write("models:\n" + "".join(f"  - path: {src}\n    name: {nm}\n    dtype: {d}\n    orders: {orders}\n{extra}"
                                      for nm, (d, extra) in modes.items()))
    label = f"{label} (orders {orders})"
    srv = Server(["--config", cfg], env=ENV, timeout=120)
    try:
        st, h, b = srv.request("GET", "/v1/models")
        listed = {m["name"]: m for m in json.loads(b)["models"]}
        for nm, (d, _) in modes.items():
            if d == "int8":
                C.eq(listed.get(nm, {}).get("dtype"), "int8", f"{label}: /v1/models names dtype int8 for {nm}")
        for qtype in ("choice", "noul", "score"):
            reqs = requests("x", qtype, per_type, zlib.crc32(f"{label} {qtype}".encode()))
            dists, bodies = {}, {}
            for nm in modes:
                def ask(r, nm=nm):
                    st, h, b = srv.post("/v1/systemone", dict(r, model=nm), timeout=120)
                    return (distribution(json.loads(b)), b) if st == 200 else ((st, b[:300]), None)
                with ThreadPoolExecutor(16) as ex:  # packed into shared forwards by the server
                    res = list(ex.map(ask, reqs))
                dists[nm] = [r[0] for r in res]
                bodies[nm] = [r[1] for r in res]
            ok = all(isinstance(x, list) for nm in dists for x in dists[nm])
            if not C.ok(ok, f"{label} {qtype}: every request answered in every mode"):
                continue
            if serial_check:  # batch invariance: one at a time, the same bytes
                for nm in bounded:
                    same = sum(strip_latency(srv.post("/v1/systemone", dict(r, model=nm), timeout=120)[2]) ==
                               strip_latency(bodies[nm][i]) for i, r in enumerate(reqs[:serial_check]))
                    C.eq(same, serial_check, f"{label} {qtype} {nm}: {serial_check} answers alone equal them batched")
            ref = [int(np.argmax(p)) for p in dists["f32"]]
            margin = [sorted(p)[-1] - sorted(p)[-2] for p in dists["f32"]]
            pick = [i for i, mg in enumerate(margin) if mg >= TIE]
            sure = sum(1 for mg in margin if mg > 0.1)
            line = []
            for nm in modes:
                if nm == "f32":
                    continue
                agree = sum(int(np.argmax(dists[nm][i])) == ref[i] for i in pick)
                miss = sum(1 for p, r, mg in zip(dists[nm], ref, margin) if mg > 0.1 and int(np.argmax(p)) != r)
                line.append(f"{nm} {agree}/{len(pick)} ({agree / max(1, len(pick)):.3f}), {miss} above 0.1 differ")
                acc = POOL.setdefault((pool, nm, qtype), [0, 0])
                acc[0] += agree
                acc[1] += len(pick)
                if nm in bounded:
                    C.eq(miss, 0, f"{label} {qtype}: every decision with an f32 margin > 0.1 is the same in {nm}")
            print(f"{label} {qtype}: {per_type} requests, {len(pick)} with an f32 margin >= {TIE} ({sure} above 0.1), "
                  f"agreeing with f32: " + "; ".join(line), flush=True)
    finally:
        srv.stop()


def pooled_bound(pool, modes, least):
    """Per question type, over the fixtures of pool: each mode within 2 points of bf16."""
    if not STATISTICS:
        print(f"{pool}: agreement bounds checked in the release build; here a sample of {SMOKE_REQUESTS} per type", flush=True)
        return
    for qtype in ("choice", "noul", "score"):
        bf = POOL.get((pool, "bf16", qtype), [0, 0])
        for nm in modes:
            a = POOL.get((pool, nm, qtype), [0, 0])
            if not C.ok(a[1] >= least and bf[1] == a[1], f"{pool} {qtype}: {a[1]} decisions compared (at least {least})"):
                continue
            ra, rb = a[0] / a[1], bf[0] / bf[1]
            C.ok(ra >= rb - 0.02, f"{pool} {qtype}: {nm} agrees with f32 on {a[0]}/{a[1]} = {ra:.3f}, bf16 on "
                 f"{bf[0]}/{bf[1]} = {rb:.3f} (within 2 points)")


three = {"f32": ("f32", ""), "bf16": ("bf16", ""), "int8": ("int8", "")}


part_product()
part_doctor()
part_cache_and_kernels()
# The fixtures, 200 requests per question type each; the 2-point bound per question type over the
# decisions of all three (random-weight models answer many questions near a tie, where any reduced
# precision flips at random; pooled, each type has 400-600 decisions). Orders 2 averages away the position
# bias of a random model, which leaves most of its yes/no answers at 0.5 (below TIE); orders 1 keeps it.
part_agreement("tiny-bias", os.path.join(FIXTURES, "tiny-bias"), 1, three, ["int8"], "fixtures", serial_check=10)
part_agreement("tiny-bias", os.path.join(FIXTURES, "tiny-bias"), 2, three, ["int8"], "fixtures")
part_agreement("tiny-deep", os.path.join(FIXTURES, "tiny-deep"), 1, three, ["int8"], "fixtures",
               per_type=120 if SLOW > 1 else 200)
pooled_bound("fixtures", ["int8"], 200 if SLOW == 1 else 120)
# The outlier fixture (tools/make-fixtures.sh: tiny-bias whose norm outputs carry four channels 50x the
# rest): with and without smoothing side by side; the bounds hold for the smoothed mode.
w = read_safetensors(os.path.join(FIXTURES, "tiny-outliers", "model.safetensors"))[1]
ln = np.abs(w["model.layers.0.input_layernorm.weight"])
C.ok(np.sort(ln)[-4] > 20 * np.median(ln), "the outlier fixture's norm weights have four outlier channels")
big = np.argsort(ln)[-4:]
rest = np.setdiff1d(np.arange(ln.size), big)
qw = np.abs(w["model.layers.0.self_attn.q_proj.weight"])
C.ok(qw[:, big].mean() < qw[:, rest].mean() / 20, "the columns of q_proj that read them are divided (compensated)")
part_agreement("tiny-outliers", os.path.join(FIXTURES, "tiny-outliers"), 1,
               dict(three, **{"int8-unsmoothed": ("int8", "    int8_smooth_alpha: 0\n")}), ["int8"], "outliers")
pooled_bound("outliers", ["int8"], 150)
tot = {"int8": [0, 0], "int8-unsmoothed": [0, 0]}
for q in ("choice", "noul", "score"):
    a, u = POOL.get(("outliers", "int8", q), [0, 1]), POOL.get(("outliers", "int8-unsmoothed", q), [0, 1])
    print(f"tiny-outliers {q}: int8 agrees with f32 on {a[0]}/{a[1]} with smoothing, {u[0]}/{u[1]} without", flush=True)
    for nm, v in (("int8", a), ("int8-unsmoothed", u)):
        tot[nm][0] += v[0]
        tot[nm][1] += v[1]
a, u = tot["int8"], tot["int8-unsmoothed"]
C.ok(not STATISTICS or u[0] / u[1] < a[0] / a[1] - 0.05, f"tiny-outliers: without smoothing int8 agrees on {u[0]}/{u[1]}, with it on "
     f"{a[0]}/{a[1]} (the outliers matter, and the smoothing answers them)")
sys.exit(C.report())
