#!/usr/bin/env bash
# `basal doctor` (spec 06 §8, §3, §4.1–§4.2): the checks of a good fixture,
# broken model directories (config.json, a truncated model.safetensors), a
# port in use, duplicate served names, an unserved default_model, a YAML
# syntax error (the loader's message, as `basal serve` prints it), usage
# errors, the portable CPU kernel, a repository missing from the cache, and
# where the configuration and the address come from, cuBLAS loading (CUDA
# builds). Every --json output is
# parsed by Python's json module and its fields checked there.
set -u
. "$(dirname "$0")/lib.sh"
src="$FIXTURES/tiny-bias"
listener=
cleanup() {
    if [ -n "$listener" ]; then kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# An isolated environment: no configuration file, no address from the
# environment, an empty Hugging Face cache.
unset BASAL_CONFIG BASAL_ADDR BASAL_CPU
export HF_HOME="$tmp/hf"
mkdir -p "$HF_HOME"

free_port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# copy NAME: a copy of the fixture in $tmp/NAME (weights copied when $2 is
# "weights", else linked); prints the path
copy() {
    local d="$tmp/$1"
    mkdir -p "$d"
    for f in "$src"/*; do
        case "$(basename "$f")" in
            model.safetensors) if [ "${2:-}" = weights ]; then cp "$f" "$d/"; else ln -s "$f" "$d/"; fi ;;
            *) cp "$f" "$d/" ;;
        esac
    done
    echo "$d"
}

# jcase NAME EXPECTED-EXIT PYTHON-CONDITION [doctor args...]: runs
# `basal doctor --json ARGS`, parses stdout with Python, checks the shape every
# output must have, then the condition: d = the object, checks(area) its checks
# in that area, has(area, level, text) = a check there with that level whose
# `what` contains text, E = os.environ.
jcase() {
    local name=$1 want=$2 cond=$3
    shift 3
    local out rc why
    out=$("$BASAL" doctor --json "$@" 2>"$tmp/stderr"); rc=$?
    if [ "$rc" -ne "$want" ]; then
        bad "$name: exit $rc, expected $want; stdout: $out; stderr: $(cat "$tmp/stderr")"
        return
    fi
    why=$($PY -c '
import json, os, sys
E = os.environ
d = json.load(sys.stdin)
def checks(area): return [c for c in d["checks"] if c["area"] == area]
def has(area, level, text=""): return any(c["level"] == level and text in c["what"] for c in checks(area))
assert set(d) == {"ok", "checks"}, "keys %r" % sorted(d)
assert isinstance(d["ok"], bool) and isinstance(d["checks"], list) and d["checks"], "ok/checks types"
for c in d["checks"]:
    assert set(c) == {"area", "level", "what", "fix"}, "check keys %r" % sorted(c)
    assert c["area"] in ("build", "os/cpu", "memory", "gpu", "configuration", "models", "disk", "port"), c
    assert c["level"] in ("ok", "info", "warning", "failure"), c
    assert isinstance(c["what"], str) and c["what"], c
    if c["level"] in ("warning", "failure"):
        assert isinstance(c["fix"], str) and c["fix"], "no fix: %r" % c
    else:
        assert c["fix"] is None, "fix on ok/info: %r" % c
assert d["ok"] == (not any(c["level"] == "failure" for c in d["checks"])), "ok disagrees with the levels"
for a in ("build", "os/cpu", "memory", "configuration", "disk", "port"):
    assert checks(a), "no %s check" % a
assert eval("(" + sys.argv[1] + "\n)"), "condition failed"
' "$cond" <<<"$out" 2>&1 >/dev/null) || { bad "$name: $(tail -1 <<<"$why"); output: $out"; return; }
    ok
}

# usage NAME ARGS...: exit 2, nothing on stdout
usage() {
    local name=$1 out rc
    shift
    out=$("$BASAL" doctor "$@" 2>/dev/null); rc=$?
    if [ "$rc" -eq 2 ] && [ -z "$out" ]; then ok; else bad "$name: exit $rc (expected 2), stdout: $out"; fi
}

# ---- 1. a good model directory ----
export DIR="$src" PORT=$(free_port)
jcase good 0 'd["ok"] and has("models", "ok", "basal-tiny: " + E["DIR"] + " (3 layers, 64 hidden, BF16, ")
    and has("port", "ok", "127.0.0.1:" + E["PORT"]) and len(checks("memory")) == 1
    and checks("memory")[0]["level"] == "ok" and has("build", "ok", "0.1.0")
    and has("configuration", "info", "--model") and has("disk", "ok", E["DIR"])
    and (has("os/cpu", "ok", "CPU kernel: avx2-fma") or has("os/cpu", "ok", "CPU kernel: avx512") or has("os/cpu", "info", "CPU kernel: generic"))
    and [c["area"] for c in d["checks"]] == sorted((c["area"] for c in d["checks"]),
        key=["build", "os/cpu", "memory", "gpu", "configuration", "models", "disk", "port"].index)' \
    --model "$src" --addr "127.0.0.1:$PORT"
# evidence_head.pt (03 §4): reported when present (with its d and k), its absence said
jcase no-evidence-head 0 'd["ok"] and has("models", "info", "basal-tiny: no evidence_head.pt")' \
    --model "$src" --addr "127.0.0.1:$PORT"
d=$(copy with-head)
$PY tools/make_evidence_head.py --hidden 64 --k 8 --seed 1 --out "$d/evidence_head.pt" >/dev/null
export DIR3="$d"
jcase evidence-head 0 'd["ok"] and has("models", "ok", "basal-tiny: evidence head evidence_head.pt (d 64, k 8)")' \
    --model "$d" --addr "127.0.0.1:$PORT"
# the same with a sharded checkpoint, and two models (weights summed)
export DIR2="$FIXTURES/tiny-sharded"
jcase sharded 0 'd["ok"] and has("models", "ok", E["DIR2"]) and has("models", "ok", E["DIR"])
    and len([c for c in checks("models") if c["level"] == "ok"]) == 2' \
    --model "$src" --model "$DIR2" --addr "127.0.0.1:$PORT"

# ---- 2. text mode ----
out=$("$BASAL" doctor --model "$src" --addr "127.0.0.1:$PORT"); rc=$?
njson=$("$BASAL" doctor --json --model "$src" --addr "127.0.0.1:$PORT" | $PY -c 'import json, sys; print(len(json.load(sys.stdin)["checks"]))')
if [ "$rc" -eq 0 ] && grep -q '✓ models .*basal-tiny' <<<"$out" && grep -q '✓ port ' <<<"$out" &&
    [ "$(grep -c . <<<"$out")" -eq "$njson" ] && ! grep -qv '^[✓·!✗] ' <<<"$out"; then ok
else bad "text mode: exit $rc, $njson JSON checks, output: $out"; fi

# ---- 3. broken model directories ----
d=$(copy no-head-dim)
$PY -c 'import json, sys; p = sys.argv[1] + "/config.json"; v = json.load(open(p)); del v["head_dim"]; json.dump(v, open(p, "w"))' "$d"
export BROKEN="$d/config.json"
jcase config-head-dim 1 'not d["ok"] and has("models", "failure", E["BROKEN"]) and has("models", "failure", "head_dim")' \
    --model "$d" --addr "127.0.0.1:$PORT"
d=$(copy truncated weights)
$PY -c 'import os, sys; p = sys.argv[1] + "/model.safetensors"; os.truncate(p, os.path.getsize(p) // 2)' "$d"
export BROKEN="$d/model.safetensors"
jcase truncated-weights 1 'not d["ok"] and has("models", "failure", E["BROKEN"])' --model "$d" --addr "127.0.0.1:$PORT"
d=$(copy no-weights)
rm "$d/model.safetensors"
export BROKEN="$d"
jcase no-weights 1 'not d["ok"] and has("models", "failure", "no weights")' --model "$d" --addr "127.0.0.1:$PORT"
# a text-mode failure line carries its fix
out=$("$BASAL" doctor --model "$d" --addr "127.0.0.1:$PORT"); rc=$?
if [ "$rc" -eq 1 ] && grep -q '^✗ models .*no weights.* — fix: ' <<<"$out"; then ok; else bad "text failure line: exit $rc, $out"; fi

# ---- memory: a checkpoint larger than any RAM (a sparse file; its header is
# all doctor reads) fails the memory check, and its size is the sum of the
# tensor bytes of the header ----
d="$tmp/huge"; mkdir -p "$d"
if gib=$($PY -c '
import json, os, shutil, struct, sys
src, d = sys.argv[1], sys.argv[2]
for f in os.listdir(src):
    if f != "model.safetensors": shutil.copy(os.path.join(src, f), d)
c = json.load(open(os.path.join(d, "config.json")))
H, I, hd = 65536, 1048576, 16384  # 3 layers: about 1.2 TiB of BF16
dims = {c["hidden_size"]: H, c["intermediate_size"]: I, c["num_key_value_heads"] * c["head_dim"]: c["num_key_value_heads"] * hd}
c.update(hidden_size=H, intermediate_size=I, head_dim=hd)
json.dump(c, open(os.path.join(d, "config.json"), "w"))
raw = open(os.path.join(src, "model.safetensors"), "rb").read(1 << 20)
hdr = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
off, out = 0, {}
for name, t in sorted(hdr.items()):
    if name == "__metadata__": continue
    shape = [dims.get(x, x) for x in t["shape"]]
    size = {"BF16": 2, "F16": 2, "F32": 4}[t["dtype"]]
    for x in shape: size *= x
    out[name] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [off, off + size]}
    off += size
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.truncate(8 + len(h) + off)
print("%.2f" % (off / 2**30))
' "$src" "$d" 2>"$tmp/huge.err"); then
    export DIR="$d" GIB="$gib"
    jcase huge-weights 1 'not d["ok"] and has("models", "ok", E["DIR"] + " (3 layers, 65536 hidden, BF16, " + E["GIB"] + " GiB weights)")
        and has("memory", "failure", "less than the " + E["GIB"] + " GiB of weights")
        and [c["area"] for c in d["checks"] if c["level"] == "failure"] == ["memory"]' --model "$d" --addr "127.0.0.1:$PORT"
else
    echo "huge-weights: skipped (cannot create a sparse file here: $(cat "$tmp/huge.err"))"
fi
rm -rf "$d"
export DIR="$src"

# ---- 4. port in use ----
$PY -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(120)' "$tmp/busy.tmp" &
listener=$!
for _ in $(seq 100); do [ -s "$tmp/busy.tmp" ] && break; sleep 0.05; done
export BUSY=$(cat "$tmp/busy.tmp")
jcase port-in-use 1 'not d["ok"] and has("port", "failure", "127.0.0.1:" + E["BUSY"]) and has("port", "failure", "address in use")
    and "another --addr" in checks("port")[0]["fix"] and not any(c["level"] == "failure" for c in d["checks"] if c["area"] != "port")' \
    --model "$src" --addr "127.0.0.1:$BUSY"
kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null; listener=

# ---- 5. configuration files ----
a=$(copy dup-a); b=$(copy dup-b)
printf 'addr: 127.0.0.1:%s\nmodels:\n  - path: %s\n  - path: %s\n' "$PORT" "$a" "$b" >"$tmp/dup.yml"
export CFG="$tmp/dup.yml"
jcase duplicate-names 1 'not d["ok"] and has("configuration", "failure", "basal-tiny configured twice")
    and has("configuration", "info", E["CFG"]) and has("configuration", "ok", "valid YAML, 2 models")
    and len([c for c in checks("models") if c["level"] == "ok"]) == 2 and has("port", "ok", "from YAML addr")' \
    --config "$tmp/dup.yml"
# an alias equal to another model's served name is a duplicate too
printf 'addr: 127.0.0.1:%s\nmodels:\n  - path: %s\n    aliases: [jev]\n  - path: %s\n    aliases: [basal-tiny]\n' \
    "$PORT" "$src" "$DIR2" >"$tmp/alias.yml"
jcase duplicate-alias 1 'has("configuration", "failure", "basal-tiny configured twice")' --config "$tmp/alias.yml"
printf 'addr: 127.0.0.1:%s\nmodels:\n  - path: %s\n    aliases: [jev]\n' "$PORT" "$src" >"$tmp/good.yml"
jcase aliases-ok 0 'd["ok"] and has("configuration", "ok", "unique")' --config "$tmp/good.yml"
printf 'models:\n  - path: [unclosed\n' >"$tmp/syntax.yml"
# the oracle for the loader's message: what `basal serve` prints for the same file
export SERVE_MSG=$("$BASAL" serve --config "$tmp/syntax.yml" 2>&1 >/dev/null | sed -n 's/^[0-9T:.Z-]* ERROR serve: //p' | head -1)
jcase yaml-syntax 1 'E["SERVE_MSG"] and has("configuration", "failure", E["SERVE_MSG"])
    and not has("models", "ok") and not has("models", "failure")' --config "$tmp/syntax.yml" --addr "127.0.0.1:$PORT"
printf 'models:\n  - path: %s\n    colour: red\n' "$src" >"$tmp/unknown.yml"
jcase yaml-unknown-field 1 'has("configuration", "failure", "unknown field colour")' --config "$tmp/unknown.yml" --addr "127.0.0.1:$PORT"
jcase config-missing 1 'has("configuration", "failure", "nosuch.yml")' --config "$tmp/nosuch.yml" --addr "127.0.0.1:$PORT"
jcase config-directory 1 'has("configuration", "failure", "Is a directory")' --config "$tmp" --addr "127.0.0.1:$PORT"
# one YAML document, as basal-rs's serde_yaml::from_str requires (PyYAML's
# safe_load refuses the file too, checked here as the oracle); serve refuses
# it before binding, with the doctor's message
printf 'models:\n  - path: %s\n---\ncolour: red\n' "$src" >"$tmp/two-docs.yml"
if $PY -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' "$tmp/two-docs.yml" 2>/dev/null; then
    bad "PyYAML accepted two documents"; else ok; fi
jcase yaml-two-documents 1 'has("configuration", "failure", "two-docs.yml:4: more than one YAML document")' \
    --config "$tmp/two-docs.yml" --addr "127.0.0.1:$PORT"
msg=$(timeout 20 "$BASAL" serve --config "$tmp/two-docs.yml" --addr 127.0.0.1:0 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 1 ] && grep -q 'more than one YAML document' <<<"$msg" && ! grep -q listening <<<"$msg"; then ok
else bad "serve with two documents: exit $rc, $msg"; fi
# a bad BASAL_ADDR is named as the source (basal-rs: `BASAL_ADDR "..."`), exit 1 before binding
BASAL_ADDR=localhost:1 jcase env-addr-bad 1 'has("configuration", "failure", "BASAL_ADDR: invalid IP address localhost")' \
    --config "$tmp/good.yml"
msg=$(BASAL_ADDR=localhost:1 timeout 20 "$BASAL" serve --config "$tmp/good.yml" 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 1 ] && grep -q 'BASAL_ADDR: invalid IP address localhost' <<<"$msg"; then ok
else bad "serve with BASAL_ADDR=localhost:1: exit $rc, $msg"; fi

# ---- 6. default_model ----
printf 'addr: 127.0.0.1:%s\ndefault_model: nosuch\nmodels:\n  - path: %s\n' "$PORT" "$src" >"$tmp/default.yml"
jcase default-unknown 1 'not d["ok"] and has("configuration", "failure", "default model nosuch is not served")
    and has("models", "ok", "basal-tiny")' --config "$tmp/default.yml"
printf 'addr: 127.0.0.1:%s\ndefault_model: jev\nmodels:\n  - path: %s\n    aliases: [jev]\n' "$PORT" "$src" >"$tmp/default-alias.yml"
jcase default-alias 0 'd["ok"] and has("configuration", "ok", "default_model jev is served")' --config "$tmp/default-alias.yml"

# ---- 7. usage errors ----
usage config-and-model --config "$tmp/good.yml" --model "$src"
usage unknown-option --frobnicate
usage model-without-value --model
usage bad-addr --model "$src" --addr localhost:80
out=$("$BASAL" doctor --help); rc=$?
if [ "$rc" -eq 0 ] && grep -q '^usage: basal doctor' <<<"$out"; then ok; else bad "--help: exit $rc, $out"; fi

# ---- 8. the portable kernel ----
BASAL_CPU=generic jcase generic-kernel 0 'has("os/cpu", "info", "CPU kernel: generic") and has("os/cpu", "info", "BASAL_CPU=generic")' \
    --model "$src" --addr "127.0.0.1:$PORT"

# ---- 8b. the kernel of the opt-in bf16 mode, against the CPU's flags in /proc/cpuinfo ----
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
bf16hw=no; want_bf16=bf16-portable
if [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* && $flags == *" avx512_bf16 "* ]]; then
    bf16hw=yes; want_bf16=avx512-bf16
elif [[ $flags == *" avx2 "* && $flags == *" fma "* ]]; then
    want_bf16=bf16-avx2  # the VDPBF16PS steps as FMAs (gemm_bf16_avx2.c)
fi
export BF16HW=$bf16hw WANT_BF16=$want_bf16 AMXHW=$([[ $flags == *" amx_bf16 "* && $bf16hw == yes ]] && echo yes || echo no)
jcase bf16-kernel 0 '(has("os/cpu", "info", "dtype bf16 (opt-in): kernel amx-bf16 (AVX512-BF16 yes, AMX tiles granted)")
        if E["AMXHW"] == "yes" else
    has("os/cpu", "info", "dtype bf16 (opt-in): kernel " + E["WANT_BF16"] + " (AVX512-BF16 " + E["BF16HW"] + ", AMX tiles no)"))' \
    --model "$src" --addr "127.0.0.1:$PORT"
BASAL_BF16=portable jcase bf16-kernel-forced 0 'has("os/cpu", "info", "dtype bf16 (opt-in): kernel bf16-portable (")
    and has("os/cpu", "info", "; BASAL_BF16=portable")' --model "$src" --addr "127.0.0.1:$PORT"

# ---- 9. a repository that is not in the cache ----
jcase not-cached 1 'not d["ok"] and has("models", "failure", "model nosuch/model@main is not available locally")
    and has("models", "failure", E["HF_HOME"])' --model nosuch/model --addr "127.0.0.1:$PORT"
# ... and one that is (owner/name@revision in $HF_HOME/hub)
snap="$HF_HOME/hub/models--acme--tiny/snapshots/0123456789abcdef"
mkdir -p "$snap" "$HF_HOME/hub/models--acme--tiny/refs"
cp -r "$src"/. "$snap"/
echo 0123456789abcdef >"$HF_HOME/hub/models--acme--tiny/refs/main"
export SNAP="$snap"
jcase cached 0 'd["ok"] and has("models", "ok", E["SNAP"])' --model acme/tiny --addr "127.0.0.1:$PORT"

# ---- the cache directory's free space (06 §8 disk, §3 R3 directories) ----
export BH="$tmp/bh" XC="$tmp/xdg"
BASAL_HOME="$BH" jcase cache-basal-home 0 'has("disk", "ok", "free for the cache directory " + E["BH"] + "/.cache (from BASAL_HOME, not created yet)")' \
    --model "$src" --addr "127.0.0.1:$PORT"
mkdir -p "$XC/basal"
BASAL_HOME= XDG_CACHE_HOME="$XC" jcase cache-xdg 0 'has("disk", "ok", "free for the cache directory " + E["XC"] + "/basal (from XDG_CACHE_HOME)")' \
    --model "$src" --addr "127.0.0.1:$PORT"
BASAL_HOME= XDG_CACHE_HOME=relative/dir jcase cache-home 0 'has("disk", "ok", "free for the cache directory " + E["HOME"] + "/.cache/basal (from HOME")' \
    --model "$src" --addr "127.0.0.1:$PORT"

# ---- where the configuration and the address come from (06 §4.1) ----
mkdir -p "$tmp/cwd"
printf 'addr: 127.0.0.1:%s\nmodels:\n  - path: %s\n' "$PORT" "$src" >"$tmp/cwd/basal-serve.yml"
root=$(pwd)
cd "$tmp/cwd"
jcase cwd-yml 0 'has("configuration", "info", "basal-serve.yml (from ./basal-serve.yml)") and has("port", "ok", "YAML addr")'
BASAL_CONFIG="$tmp/good.yml" jcase env-config 0 'has("configuration", "info", "good.yml (from BASAL_CONFIG)")'
jcase flag-over-yml 0 'has("configuration", "info", "--model") and has("port", "ok", "from --addr")' \
    --model "$src" --addr "127.0.0.1:$PORT"
cd "$tmp"
jcase builtin-default 1 'has("configuration", "info", "built-in default") and has("models", "failure", "model Remek/basal-1.5-4.5B@")
    and has("disk", "info", "not checked")' --addr "127.0.0.1:$PORT"
cd "$root"
BASAL_ADDR="127.0.0.1:$PORT" jcase env-addr 0 'has("port", "ok", "from BASAL_ADDR")' --config "$tmp/good.yml"
BASAL_ADDR="nonsense" jcase env-addr-bad 1 'has("port", "failure", "invalid address nonsense")' --model "$src"

# ---- cuBLAS: loaded only when the CUDA backend starts; doctor tries it ----
# (a CUDA build: the version must be the one of the headers it was built
# with, read here from cublas_api.h; a library that cannot be loaded, via
# LD_LIBRARY_PATH ahead of the run path, is reported with what to do)
hdr="${CUDA_HOME:-/usr/local/cuda}/include/cublas_api.h"
if [ -f "$hdr" ]; then
    export CUBLAS_VER=$(awk '/#define CUBLAS_VER_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END{print v}' "$hdr")
    jcase cublas-loads 0 '(not has("build", "ok", "CPU, CUDA") and not checks("gpu"))
        or has("gpu", "ok", "cuBLASLt " + E["CUBLAS_VER"] + " loads")' --model "$src" --addr "127.0.0.1:$PORT"
    mkdir -p "$tmp/badlib"
    : >"$tmp/badlib/libcublasLt.so.${CUBLAS_VER%%.*}"
    LD_LIBRARY_PATH="$tmp/badlib" jcase cublas-broken 0 '(not has("build", "ok", "CPU, CUDA"))
        or has("gpu", "info", "cannot load libcublasLt.so.") and has("gpu", "info", "--device cpu")' \
        --model "$src" --addr "127.0.0.1:$PORT"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
