#!/usr/bin/env bash
# The README's two commands each work alone on a fresh clone (issue 18 item 9):
# `make test`, like `make run`, first installs what is missing (Debian packages,
# then the npm oracles) and only then builds; .ci/run runs exactly the README's
# test command. Checked here: the README's quick-start block, the order of the
# steps `make test` runs (make -n), install-deps.sh being quick and
# silent when everything is installed (it must not call apt), and .ci/run.
set -u
. "$(dirname "$0")/lib.sh"
block=$(awk '/^## Quick start/{q=1} q && /^```sh/{f=1; next} f && /^```/{exit} f' README.md)
cmds=$(printf '%s\n' "$block" | sed 's/[[:space:]]*#.*//' | sed '/^$/d')
if [ "$cmds" = $'make run\nmake test' ]; then ok; else bad "README quick start: $(printf '%q' "$cmds")"; fi
# the steps of `make test`, in order (nothing is run: -n; recursive makes print theirs)
steps=$(make -n --no-print-directory test 2>/dev/null | grep -E '^(tools/install-deps.sh|make|cd tests/oracle|.*tests/run.sh)' |
        sed -E 's/^make( -j[0-9]+)?/make/' | awk '!seen[$0]++' | head -6)
first=$(printf '%s\n' "$steps" | head -1)
if [ "$first" = tools/install-deps.sh ]; then ok; else bad "make test starts with: $first"; fi
i_deps=$(printf '%s\n' "$steps" | grep -n '^make deps$' | cut -d: -f1)
i_build=$(printf '%s\n' "$steps" | grep -n '^make all asan$' | cut -d: -f1)
if [ -n "$i_deps" ] && [ -n "$i_build" ] && [ "$i_deps" -lt "$i_build" ]; then ok; else bad "make test order: $steps"; fi
runs=$(make -n --no-print-directory test 2>/dev/null | grep -c 'tests/run.sh')
if [ "$runs" -eq 2 ]; then ok; else bad "make test runs tests/run.sh $runs times, expected 2 (release, asan)"; fi
# installed already: quick, exit 0, apt never called (a PATH with apt-get
# and sudo that fail loudly)
mkdir -p "$tmp/bin"
for c in apt-get sudo; do printf '#!/bin/sh\necho "%s called" >&2\nexit 97\n' "$c" >"$tmp/bin/$c"; chmod +x "$tmp/bin/$c"; done
start=$(date +%s%N)
PATH=$tmp/bin:$PATH tools/install-deps.sh >"$tmp/out" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [ "$rc" -eq 0 ] && ! grep -q called "$tmp/out"; then ok; else bad "install-deps.sh with all installed: rc $rc $(cat "$tmp/out")"; fi
if [ "$ms" -lt 10000 ]; then ok; else bad "install-deps.sh with all installed took $ms ms"; fi
# .ci/run: `make test` is its first make command, as the README writes it
ci=$(grep -E '^\s*make( |$)' .ci/run | head -1 | sed 's/^[[:space:]]*//')
if [ "$ci" = "make test" ]; then ok; else bad ".ci/run first make command: $ci"; fi
if ! grep -qE 'install-deps|make (deps|all|asan)' .ci/run; then ok; else bad ".ci/run still runs setup steps of its own"; fi
finish
