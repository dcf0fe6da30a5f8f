#!/usr/bin/env bash
# The front door of the command line (issue 18, item 1; spec 06 §2):
# - every command's --help (also -h and `basal help CMD`) is on stdout, exit 0,
#   nothing on stderr; the flags it lists are exactly the flags the parser
#   accepts, found independently by offering every "--flag" string of the
#   command's source file to the binary and watching for "unknown option";
# - `--flag=value` behaves as `--flag value` (prepare and decide outputs equal);
# - misspelt flags, commands and YAML keys get "did you mean" (exit 2 for the
#   command line; a YAML error is a configuration failure as before);
# - `basal version`, -V and --version agree, name `git rev-parse --short HEAD`
#   and the backends, checked against /proc/cpuinfo and the linked libraries;
# - --color / NO_COLOR / CLICOLOR_FORCE, and colour only on a terminal;
# - `basal init` writes YAML that Python's yaml parses, that names every key
#   src/server/config.c accepts, whose defaults are spec 06 §4.2's, that doctor
#   and serve accept (also with every default uncommented), and that is never
#   overwritten without --force.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias"
mkdir -p "$tmp/probe" "$tmp/hf"
BASAL=$BASAL FIXTURES=$FIXTURES TMP=$tmp "$PY" - <<'PYEOF'
import json, os, re, subprocess, sys, time, yaml

B, FX, TMP = os.environ["BASAL"], os.environ["FIXTURES"], os.environ["TMP"]
PROBE = os.path.join(TMP, "probe")
MODEL = os.path.join(FX, "tiny-bias")
passed = failed = 0

def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)
    return cond

# A clean environment: no configuration or model found by accident, no colour forced.
ENV = {k: v for k, v in os.environ.items()
       if k not in ("BASAL_CONFIG", "BASAL_ADDR", "NO_COLOR", "CLICOLOR_FORCE", "BASAL_ACCESS_LOG")}
ENV["HF_HOME"] = os.path.join(TMP, "hf")

def run(args, stdin=b"", env=None, cwd=PROBE, timeout=60):
    e = dict(ENV)
    e.update(env or {})
    p = subprocess.run([B] + args, input=stdin, capture_output=True, env=e, cwd=cwd, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

# ---- the commands, from the sources: every `const cli_doc cli_doc_X = { "NAME", ...` ----
src = {}
for d, _, files in sorted(os.walk("src/cli")):  # the shell and its product folders
    for f in sorted(files):
        if f.endswith(".c"):
            src[os.path.join(d, f)] = open(os.path.join(d, f)).read()
cmd_file = {}
for f, text in src.items():
    for m in re.finditer(r'const cli_doc cli_doc_\w+ = \{\s*"([a-z0-9-]+)"', text):
        cmd_file[m.group(1)] = f
commands = sorted(cmd_file)
check(len(commands) >= 14, f"commands found in the sources: {commands}")
device_flags = re.findall(r'"(--[a-z][a-z0-9-]*)"', open("src/cli/cli.h").read())

rc, top, err = run([])
check(rc == 0 and err == "", f"basal without arguments: exit {rc}, stderr {err!r}")
for c in commands:
    check(re.search(rf"^  {re.escape(c)} +\S", top, re.M), f"basal lists {c} with a description")
check(run(["--help"])[1] == top and run(["help"])[1] == top and run(["-h"])[1] == top, "basal --help/-h/help = basal")

FLAG_IN_HELP = re.compile(r"^  (?:-h, )?(--[a-z][a-z0-9-]*)", re.M)
for c in commands:
    rc, out, err = run([c, "--help"])
    check(rc == 0 and out.startswith(f"usage: basal {c}") and err == "",
          f"{c} --help: exit {rc}, stdout {out[:60]!r}, stderr {err[:200]!r}")
    check(run([c, "-h"]) == (rc, out, err), f"{c} -h = --help")
    check(run(["help", c]) == (rc, out, err), f"basal help {c} = {c} --help")
    listed = set(FLAG_IN_HELP.findall(out))
    check({"--help", "--color"} <= listed, f"{c} --help lists --help and --color")
    for line in out.splitlines():
        m = FLAG_IN_HELP.match(line)
        if m and m.group(1) not in ("--help",):
            rest = line[m.end():].strip()
            check(re.search(r"\S\s{2,}\S|^\S+\s{2,}\S|[a-z]", rest) is not None, f"{c} {m.group(1)}: a description")
    # the flags the parser accepts: offered one by one, without a value
    text = src[cmd_file[c]] + ("\n".join(device_flags) if "CLI_DEVICE_ROWS" in src[cmd_file[c]] else "")
    candidates = set(re.findall(r'"(--[a-z][a-z0-9-]*)', text)) | listed
    candidates.discard("--help")
    accepted = set()
    for fl in sorted(candidates):
        rc2, out2, err2 = run([c, fl], timeout=120)
        if "unknown option" not in err2:
            accepted.add(fl)
    check(accepted == listed - {"--help"},
          f"{c}: accepted but not in --help {sorted(accepted - listed)}, in --help but refused {sorted(listed - accepted - {'--help'})}")

# ---- errors: did you mean, exit 2, the help pointer ----
def usage_err(args, want, what):
    rc, out, err = run(args)
    check(rc == 2 and want in err and out == "", f"{what}: exit {rc}, stderr {err.strip()[:300]!r}")

usage_err(["serve", "--modle", MODEL], "unknown option --modle (did you mean --model?)", "serve --modle")
usage_err(["decide", "--model", MODEL, "--requets", "x"], "did you mean --request?", "decide --requets")
usage_err(["client", "--ask", "x", "--treshold", "0.2"], "did you mean --threshold?", "client --treshold")
usage_err(["bench", "--lat_n", "3"], "did you mean --lat-n?", "bench --lat_n")
usage_err(["serve", "--frobnicate"], "unknown option --frobnicate", "serve --frobnicate")
usage_err(["serv"], "unknown command 'serv' (did you mean serve?)", "basal serv")
usage_err(["help", "doctr"], "did you mean doctor?", "basal help doctr")
usage_err(["--verison"], "did you mean --version?", "basal --verison")
usage_err(["prepare", "--model"], "option --model needs a value", "prepare --model without a value")
usage_err(["decide", "--model", MODEL, "--timing=yes"], "option --timing takes no value", "decide --timing=yes")
usage_err(["serve", "--max-inflight=0"], "--max-inflight", "serve --max-inflight=0")
usage_err(["serve", "--schedule=lifo"], "--schedule must be hrrn or fifo", "serve --schedule=lifo")
usage_err(["make-model", os.path.join(TMP, "m"), "--preset=huge"], "unknown preset 'huge'", "make-model --preset=huge")
check(not os.path.exists(os.path.join(TMP, "m")), "no model written after a usage error")

def yml(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path
bad_top = yml("bad_top.yml", f"max_inflgiht: 5\nmodels:\n  - path: {MODEL}\n")
bad_model = yml("bad_model.yml", f"models:\n  - path: {MODEL}\n    shedule: fifo\n")
far = yml("far.yml", f"models:\n  - path: {MODEL}\n    colour: blue\n")
for path, want in ((bad_top, "unknown field max_inflgiht (did you mean max_inflight?)"),
                   (bad_model, "unknown field shedule (did you mean schedule?)"),
                   (far, "unknown field colour")):
    rc, out, err = run(["doctor", "--config", path, "--addr", "127.0.0.1:0"])
    check(rc == 1 and want in out, f"doctor {os.path.basename(path)}: exit {rc}, {out[-300:]!r}")
    rc, out, err = run(["serve", "--config", path, "--addr", "127.0.0.1:0"])
    check(rc == 1 and want in err, f"serve {os.path.basename(path)}: exit {rc}, {err[-300:]!r}")
check("did you mean" not in run(["doctor", "--config", far])[1], "no suggestion for a key far from every key")

# ---- --flag=value is --flag value ----
req = json.dumps({"model": "basal-tiny", "state": "Klient pyta o fakturę.",
                  "questions": {"q": {"type": "choice", "instructions": "Temat?",
                                      "criteria": {"billing": None, "shipping": None}},
                                "n": {"type": "noul", "instructions": "Pilne?"}}})
rq = yml("req.json", req)
a = run(["prepare", "--model", MODEL, "--request", rq])
b = run(["prepare", f"--model={MODEL}", f"--request={rq}"])
check(a[0] == 0 and len(a[1]) > 100 and a == b, f"prepare: --flag=value as --flag value ({a[0]}, {b[0]}, {a[2][:200]})")
a = run(["decide", "--model", MODEL, "--threads", "1", "--readout", "bf16"], stdin=req.encode())
b = run(["decide", f"--model={MODEL}", "--threads=1", "--readout=bf16"], stdin=req.encode())
check(a[0] == 0 and '"answers"' in a[1] and a[1] == b[1], f"decide: --flag=value as --flag value ({a[0]}, {b[0]})")
c = run(["decide", "--model", MODEL, "--threads", "1"], stdin=req.encode())
check(c[0] == 0 and c[1] != a[1], "decide --readout=bf16 was applied (differs from the f32 readout)")

# ---- version ----
vs = [run(a)[1] for a in (["version"], ["-V"], ["--version"])]
check(vs[0] == vs[1] == vs[2] and vs[0].count("\n") == 1, f"version, -V, --version agree: {vs}")
m = re.fullmatch(r"(\d+\.\d+\.\d+) \(([0-9a-f]+(?:-dirty)?|unknown), CPU\(([a-z0-9,-]+)\)(\+CUDA\((sm_\d+(?:,sm_\d+)*)\))?\)\n", vs[0])
if check(m is not None, f"version format {vs[0]!r}"):
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        check(m.group(2).split("-")[0] == head.stdout.strip(), f"version commit {m.group(2)} = HEAD {head.stdout.strip()}")
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    want = [n for n, ok in (("avx2", {"avx2", "fma"} <= flags), ("avx512", "avx512f" in flags),
                            ("avx512-bf16", {"avx512f", "avx512_bf16"} <= flags),
                            ("amx", {"amx_tile", "amx_bf16", "avx512_bf16"} <= flags),
                            ("avx-vnni", {"avx2", "fma", "avx_vnni"} <= flags),
                            ("avx512-vnni", {"avx512f", "avx512_vnni", "avx512bw", "avx512dq", "avx512vl"} <= flags),
                            ("amx-int8", {"avx512f", "avx512_vnni", "amx_tile", "amx_int8"} <= flags)) if ok]
    check(m.group(3).split(",") == (want or ["generic"]), f"CPU kernels {m.group(3)} vs /proc/cpuinfo {want}")
    ldd = subprocess.run(["ldd", B], capture_output=True, text=True).stdout
    check((m.group(4) is not None) == ("libcudart" in ldd), f"CUDA listed iff linked with cudart: {m.group(4)}")
usage_err(["version", "extra"], "unexpected argument 'extra'", "version with an argument")

# ---- colour ----
ESC = "\x1b["
def err_of(args, env=None):
    return run(args, env=env)[2]
check(ESC not in err_of(["serve", "--frob"]), "no colour when stderr is not a terminal")
check(ESC in err_of(["--color", "always", "serve", "--frob"]), "--color always before the command")
check(ESC in err_of(["serve", "--color=always", "--frob"]), "--color=always after the command")
check(ESC not in err_of(["serve", "--color", "never", "--frob"], {"CLICOLOR_FORCE": "1"}), "--color never wins over CLICOLOR_FORCE")
check(ESC in err_of(["serve", "--frob"], {"CLICOLOR_FORCE": "1"}), "CLICOLOR_FORCE=1 forces colour")
check(ESC not in err_of(["serve", "--frob"], {"CLICOLOR_FORCE": "0"}), "CLICOLOR_FORCE=0 does not")
usage_err(["--color", "sometimes", "serve"], "--color must be auto, always or never", "--color sometimes")
def on_tty(args, env):  # util-linux script(1) gives the command a terminal
    e = dict(ENV)
    e.update(env)
    cmd = " ".join([B] + args) + " 2>&1"
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, env=e, cwd=PROBE, timeout=60)
    return p.stdout.decode(errors="replace")
if subprocess.run(["which", "script"], capture_output=True).returncode == 0:
    check(ESC in on_tty(["serve", "--frob"], {}), "colour on a terminal")
    check(ESC not in on_tty(["serve", "--frob"], {"NO_COLOR": "1"}), "NO_COLOR on a terminal: no colour")
    check(ESC in on_tty(["--color=always", "serve", "--frob"], {"NO_COLOR": "1"}), "--color always wins over NO_COLOR")

# ---- basal init ----
cfg = os.path.join(TMP, "init", "basal-serve.yml")
os.makedirs(os.path.dirname(cfg))
rc, out, err = run(["init", cfg, "--model", MODEL])
check(rc == 0 and os.path.exists(cfg), f"init: exit {rc} {err}")
text = open(cfg).read()
doc = yaml.safe_load(text)
check(doc == {"models": [{"path": os.path.realpath(MODEL)}]}, f"init: the active YAML {doc}")
check(run(["init", "-", "--model", MODEL])[1] == text, "init - writes the same text on stdout")
# every key the loader accepts is named: active, a default line `#key:` or a prose line `# key:`
accepted_keys = set(re.findall(r'strcmp\(key, "([a-z_]+)"\)', open("src/server/config.c").read()))
named = set(re.findall(r"^\s*(?:- )?#? ?([a-z_]+):", text, re.M))
check(accepted_keys and named == accepted_keys,
      f"init names every key: missing {sorted(accepted_keys - named)}, unknown {sorted(named - accepted_keys)}")
# uncommenting every default line changes nothing the loader refuses; the defaults are spec 06 §4.2's,
# except access_log, which issue 18 turns on by default (the spec's table says false)
full = re.sub(r"^(\s*)#(?=[a-z_]+:)", r"\1", text, flags=re.M)
fdoc = yaml.safe_load(full)
spec_top = {"addr": "127.0.0.1:8000", "max_inflight": 1024, "long_slice_ms": 100, "release_date": "2026-10-05",
            "access_log": True, "metrics": False, "max_body_bytes": 16777216, "backend": "auto", "threads": 0}
spec_model = {"dtype": "auto", "gemm_table": "auto", "max_batch_tokens": 8192, "schedule": "hrrn",
              "long_tokens": 4096, "state_cache_mb": 0, "tree_max_tokens": 32768, "no_prefix_cache": False,
              "aliases": []}
check(all(fdoc.get(k) == v for k, v in spec_top.items()), f"process defaults vs spec 06 §4.2: {fdoc}")
check(all(fdoc["models"][0].get(k) == v for k, v in spec_model.items()), f"model defaults vs spec: {fdoc['models']}")
full_cfg = yml("full.yml", full)
for path in (cfg, full_cfg):
    rc, out, err = run(["doctor", "--config", path, "--addr", "127.0.0.1:0", "--json"])
    checks = json.loads(out)["checks"] if out.startswith("{") else []
    bad_checks = [c for c in checks if c["level"] in ("failure", "warning") and c["area"] in ("configuration", "models", "model")]
    check(checks and not bad_checks, f"doctor accepts {os.path.basename(path)}: {bad_checks or out[:300]}")
    # serve accepts it: ready, then a clean stop
    e = dict(ENV)
    p = subprocess.Popen([B, "serve", "--config", path, "--addr", "127.0.0.1:0", "--threads", "1"],
                         stderr=subprocess.PIPE, env=e, cwd=PROBE)
    log, t0 = b"", time.time()
    os.set_blocking(p.stderr.fileno(), False)
    while b"serving on" not in log and p.poll() is None and time.time() - t0 < 120:
        time.sleep(0.1)
        log += p.stderr.read() or b""
    ready = b"serving on" in log
    p.terminate()
    try:
        code = p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        code = p.wait()
    check(ready and code == 0, f"serve --config {os.path.basename(path)}: ready {ready}, exit {code}, {log[-300:]!r}")
# a repository reference becomes repo/revision
rdoc = yaml.safe_load(run(["init", "-", "--model", "Remek/basal-1.5-mini@1978d070"])[1])
check(rdoc == {"models": [{"repo": "Remek/basal-1.5-mini", "revision": "1978d070"}]}, f"init with a reference: {rdoc}")
# never overwritten without --force
with open(cfg, "a") as f:
    f.write("# edited\n")
rc, out, err = run(["init", cfg, "--model", MODEL])
check(rc == 1 and "exists" in err and open(cfg).read().endswith("# edited\n"), f"init refuses to overwrite: {rc} {err}")
rc, out, err = run(["init", cfg, "--model", MODEL, "--force"])
check(rc == 0 and open(cfg).read() == text, f"init --force overwrites: {rc} {err}")
# the default path is ./basal-serve.yml, which serve then finds by itself
d = os.path.join(TMP, "cwd")
os.makedirs(d)
rc, out, err = run(["init", "--model", MODEL], cwd=d)
check(rc == 0 and open(os.path.join(d, "basal-serve.yml")).read() == text, f"init writes ./basal-serve.yml: {rc} {err}")
rc, out, err = run(["doctor", "--addr", "127.0.0.1:0"], cwd=d)
check("basal-serve.yml" in out and "unknown field" not in out, f"doctor finds ./basal-serve.yml: {out[-400:]}")
# 06 §10: --out FILE, one entry per --model, the total size of the weights when known
multi = os.path.join(TMP, "init", "multi.yml")
rc, out, err = run(["init", "--out", multi, "--model", MODEL, "--model", "4.5B"])
mdoc = yaml.safe_load(open(multi).read()) if rc == 0 else None
check(mdoc == {"models": [{"path": os.path.realpath(MODEL)}, {"repo": "4.5B"}]}, f"init --out with two models: {rc} {mdoc} {err}")
weights = sum(os.path.getsize(os.path.join(MODEL, f)) for f in os.listdir(MODEL) if f.endswith(".safetensors"))
want = f"the weights of the models take {(weights + 9.5e9) / 1e9:.1f} GB"
check(want in err, f"init prints the total size: {want!r} in {err!r}")
rc, out, err = run(["init", "-", "--model", "acme/unknown"])
check(rc == 0 and "take" not in err, f"no size for a model of unknown size: {rc} {err!r}")
rc, out, err = run(["init", multi, "--out", multi + ".2"])
check(rc == 2 and "not both" in err and not os.path.exists(multi + ".2"), f"PATH and --out together: {rc} {err!r}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF
