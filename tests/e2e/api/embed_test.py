#!/usr/bin/env python3
"""The public in-process API (include/basal.h, issue 32) against the server:
every request of tests/data/protocol-e2e-*.jsonl, plus refusals, decided by
examples/embed (C, libbasal) and by the Python bindings (bindings/python,
ctypes over libbasal.so) gives the status and the bytes `basal serve`
answers on POST /v1/systemone, usage.latency_ms apart.

usage: embed_test.py [-h]
  Environment: BASAL, BUILD (the build directory: its examples/embed and,
  in the release build, libbasal.so), FIXTURES. Run by tests/e2e/t_embed.sh."""
import ctypes
import json
import os
import re
import subprocess
import sys

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import srvlib  # noqa: E402

BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
MODEL = srvlib.fixture("tiny-bias")
c = srvlib.Checks()


def requests():
    out = []
    for name in ("protocol-e2e-requests.jsonl", "protocol-e2e-multi-act.jsonl"):
        with open(os.path.join(ROOT, "tests", "data", name), encoding="utf-8") as f:
            out += [line.strip().replace("@MODEL@", "basal-tiny") for line in f if line.strip()]
    # refusals: validation, an unknown model, not JSON, not an object
    out += ['{"state": "x", "questions": {}}', '{"model": "nope", "state": "x", "questions": {"q": {"type": "noul", '
            '"instructions": "?"}}}', '{"model": "basal-tiny", "state": "x", "questions": {"q": {"type": "rank"}}}',
            '[1, 2]', '{"model": "basal-tiny", "state": "zażółć \\u0000 😀", "questions": {"q": {"type": "noul", '
            '"instructions": "Czy?"}}}']
    return out


def without_latency(body):
    return re.sub(rb',"latency_ms":[-0-9.eE+]+', b"", body)


reqs = requests()
srv = srvlib.Server(["--model", MODEL, "--threads", "2"])
want = []
for r in reqs:
    st, h, body = srv.request("POST", "/v1/systemone", r.encode(), {"content-type": "application/json"})
    want.append((st, without_latency(body)))
srv.stop()
c.ok(sum(1 for st, _ in want if st == 200) >= 40 and sum(1 for st, _ in want if st != 200) >= 5,
     f"the requests hold answers and refusals ({[st for st, _ in want]})")

# ---- C: examples/embed ----
embed = os.path.join(BUILD, "examples", "embed")
p = subprocess.run([embed, MODEL], input="\n".join(reqs).encode() + b"\n", capture_output=True,
                   timeout=300 * srvlib.SLOW)
c.eq(p.returncode, 0, f"embed exit ({p.stderr.decode()[-400:]})")
lines = p.stdout.split(b"\n")[:-1]
c.eq(len(lines), len(reqs), "embed: one line per request")
for i, line in enumerate(lines[:len(reqs)]):
    st, _, body = line.partition(b" ")
    c.eq((int(st), body), want[i], f"embed, request {i}: status and bytes equal the server's")
# --batch: every request in one basal_decide_batch call (their forwards packed
# together) gives the same status and bytes as the server, refusals included
p = subprocess.run([embed, MODEL, "--batch"], input="\n".join(reqs).encode() + b"\n", capture_output=True,
                   timeout=300 * srvlib.SLOW)
c.eq(p.returncode, 0, f"embed --batch exit ({p.stderr.decode()[-400:]})")
lines = p.stdout.split(b"\n")[:-1]
c.eq(len(lines), len(reqs), "embed --batch: one line per request")
for i, line in enumerate(lines[:len(reqs)]):
    st, _, body = line.partition(b" ")
    c.eq((int(st), body), want[i], f"embed --batch, request {i}: status and bytes equal the server's")
p = subprocess.run([embed, "/no/such/model"], capture_output=True, timeout=60)
c.ok(p.returncode == 1 and b"/no/such/model: no such directory" in p.stderr, f"embed: a bad model path ({p.stderr!r})")

if os.path.exists(os.path.join(BUILD, "libbasal.so")):
    # ---- the exported symbols: the public API only ----
    nm = subprocess.run(["nm", "-D", "--defined-only", os.path.join(BUILD, "libbasal.so")], capture_output=True,
                        text=True).stdout
    syms = sorted(l.split()[-1] for l in nm.splitlines() if l.split()[-2] in ("T", "D", "B", "R"))
    c.ok(syms and all(s.startswith("basal_") or s in ("bs_fail", "bs_strerror") for s in syms),
         f"libbasal.so exports only include/basal.h ({syms[:12]})")
    # ---- pkg-config describes the build tree: the example builds with it alone ----
    env = dict(os.environ, PKG_CONFIG_PATH=BUILD)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "basal"], capture_output=True, text=True, env=env)
    c.eq(flags.returncode, 0, f"pkg-config basal ({flags.stderr})")
    exe = os.path.join(os.environ.get("TMPDIR", "/tmp"), "embed-pc")
    cc = subprocess.run(["cc", "-std=c11", os.path.join(ROOT, "examples", "embed.c"), *flags.stdout.split(),
                         "-Wl,-rpath," + BUILD, "-o", exe], capture_output=True, text=True)
    c.eq(cc.returncode, 0, f"cc examples/embed.c $(pkg-config --cflags --libs basal) ({cc.stderr[-400:]})")
    if cc.returncode == 0:
        p = subprocess.run([exe, MODEL], input=reqs[0].encode() + b"\n", capture_output=True, timeout=120)
        c.eq(p.stdout.rstrip(b"\n").partition(b" ")[2], want[0][1], "the pkg-config build answers alike")

    # a C++ program includes basal.h (extern "C") and links against libbasal.so
    cxx_src = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ver.cc")
    open(cxx_src, "w").write('#include <basal.h>\n#include <cstdio>\nint main() { std::printf("%s\\n", basal_version()); '
                             'basal_options o; basal_options_init(&o); return o.threads; }\n')
    cxx_exe = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ver")
    cc = subprocess.run(["g++", "-Wall", "-Wextra", "-Werror", cxx_src, *flags.stdout.split(), "-Wl,-rpath," + BUILD,
                         "-o", cxx_exe], capture_output=True, text=True)
    c.eq(cc.returncode, 0, f"g++ builds a C++ program against basal.h and libbasal.so ({cc.stderr[-400:]})")
    if cc.returncode == 0:
        p = subprocess.run([cxx_exe], capture_output=True, text=True)
        c.eq((p.returncode, p.stdout.strip()), (0, re.search(r'#define BASAL_VERSION "([^"]+)"', open(
            os.path.join(ROOT, "include", "basal.h"), encoding="utf-8").read()).group(1)), "the C++ program runs")

    # make install (the libraries, basal.h, the installed basal.pc): tests/e2e/t_install.sh

    # ---- Python ----
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import basal

    # the versions: header macros, basal_version(), basal.pc and the bindings agree
    hdr = open(os.path.join(ROOT, "include", "basal.h"), encoding="utf-8").read()
    parts = [re.search(rf"#define BASAL_VERSION_{k} (\d+)", hdr).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    macro = re.search(r'#define BASAL_VERSION "([^"]+)"', hdr).group(1)
    pcv = subprocess.run(["pkg-config", "--modversion", "basal"], capture_output=True, text=True, env=env).stdout.strip()
    c.eq([macro, basal.library_version(), pcv, basal.__version__], [".".join(parts)] * 4,
         "BASAL_VERSION, the MAJOR/MINOR/PATCH macros, basal_version(), basal.pc and basal.__version__")

    # the ctypes structures have the C structures' size and every field's offset and
    # size, as the C compiler lays them out for include/basal.h (a field the
    # bindings name that C lacks fails to compile; one C has more changes sizeof)
    structs = (("basal_options", basal._Options), ("basal_result", basal._Result), ("bs_err", basal._Err))
    prog = ["#include <stddef.h>", "#include <stdio.h>", "#include <basal.h>", "int main(void) {"]
    for cname, py in structs:
        prog.append(f'    printf("{cname} %zu\\n", sizeof({cname}));')
        for f in py._fields_:
            prog.append(f'    printf("{cname}.{f[0]} %zu %zu\\n", offsetof({cname}, {f[0]}), '
                        f'sizeof((({cname} *)0)->{f[0]}));')
    prog += ["    return 0;", "}"]
    src = os.path.join(os.environ.get("TMPDIR", "/tmp"), "layout.c")
    open(src, "w").write("\n".join(prog) + "\n")
    lay = os.path.join(os.environ.get("TMPDIR", "/tmp"), "layout")
    cc = subprocess.run(["cc", "-std=c11", "-I" + os.path.join(ROOT, "include"), src, "-o", lay], capture_output=True,
                        text=True)
    c.eq(cc.returncode, 0, f"the layout probe compiles: every ctypes field exists in C ({cc.stderr[-400:]})")
    if cc.returncode == 0:
        got = subprocess.run([lay], capture_output=True, text=True).stdout.split("\n")
        mine = []
        for cname, py in structs:
            mine.append(f"{cname} {ctypes.sizeof(py)}")
            for f in py._fields_:
                d = getattr(py, f[0])
                mine.append(f"{cname}.{f[0]} {d.offset} {d.size}")
        c.eq(got[:-1], mine, "ctypes sizeof, offsets and field sizes equal the C compiler's")
    c.eq(os.path.realpath(basal.library_path()), os.path.realpath(os.path.join(BUILD, "libbasal.so.0")),
         "the bindings load the build tree's library")
    with basal.Model(MODEL, threads=2) as m:
        c.eq(m.name, "basal-tiny", "Model.name")
        for i, r in enumerate(reqs):
            c.eq(m.decide_raw(r), want[i], f"Python decide_raw, request {i}")
        ok = json.loads(reqs[0])
        c.eq(m.decide(ok), json.loads(want[0][1]), "decide(dict) returns the answer")
        # one basal_decide_batch call for all of them: the server's bytes, refusals included
        c.eq(m.decide_raw_many(reqs), want, "Python decide_raw_many: every request in one call")
        c.eq(m.decide_raw_many([]), [], "decide_raw_many([])")
        good = [i for i, (st, _) in enumerate(want) if st == 200]
        c.eq(m.decide_many([json.loads(reqs[i]) for i in good[:7]]), [json.loads(want[i][1]) for i in good[:7]],
             "decide_many(dicts) returns the answers")
        bad = next(i for i, (st, _) in enumerate(want) if st != 200)
        try:
            m.decide_many([reqs[good[0]], reqs[bad]])
            c.ok(False, "decide_many with a refused request raises")
        except basal.RequestError as e:
            c.ok(e.index == 1 and e.status == want[bad][0], f"decide_many: RequestError index {e.index}, {e.status}")
        try:
            m.decide({"model": "basal-tiny"})
            c.ok(False, "a refused request raises")
        except basal.RequestError as e:
            c.ok(e.status == 422 and e.body["detail"][0]["type"] == "missing", f"RequestError: {e.status} {e.body}")
    # the knobs of basal_options (orders, calibration, the int8 mode's alpha) through the bindings: the
    # same answers as `basal decide` with the same flags (the int8 weights cached in this test's directory)
    os.environ["BASAL_HOME"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), "embed-home")
    for kw, flags in (({"orders": 1}, ["--orders", "1"]), ({"calibration": False}, ["--no-calibration"]),
                      ({"orders": 1, "calibration": os.path.join(MODEL, "CALIBRATION.json")},
                       ["--orders", "1", "--calibration", os.path.join(MODEL, "CALIBRATION.json")]),
                      ({"dtype": "int8"}, ["--dtype", "int8"]),
                      ({"dtype": "int8", "int8_smooth_alpha": 0}, ["--dtype", "int8", "--int8-smooth-alpha", "0"]),
                      ({"dtype": "int8", "int8_smooth_alpha": 0.8}, ["--dtype", "int8", "--int8-smooth-alpha", "0.8"])):
        p = subprocess.run([srvlib.BASAL, "decide", "--model", MODEL, *flags], input=reqs[0].encode(), capture_output=True,
                           timeout=120)
        with basal.Model(MODEL, threads=2, **kw) as mk:
            c.eq(mk.decide(json.loads(reqs[0])), json.loads(p.stdout) if p.returncode == 0 else p.stderr.decode(),
                 f"Python Model(**{kw}) = basal decide {' '.join(flags)}")
    try:
        basal.Model(MODEL, orders=3)
        c.ok(False, "orders=3 raises")
    except ValueError:
        c.ok(True, "orders=3 raises")
    try:
        m.decide_raw(reqs[0])
        c.ok(False, "a closed model raises")
    except basal.BasalError as e:
        c.ok("closed" in str(e), f"closed: {e}")
    try:
        basal.Model("/no/such/model")
        c.ok(False, "a bad path raises")
    except basal.BasalError as e:
        c.ok(e.code < 0 and "/no/such/model: no such directory" in str(e), f"BasalError: {e.code} {e}")
else:
    print("libbasal.so is built in the release build only: the pkg-config and Python checks ran there")

sys.exit(c.report())
