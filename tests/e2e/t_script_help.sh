#!/usr/bin/env bash
# The helper scripts keep the project's command-line standard, as `basal`
# does (t_cli_help.sh): every script of bench/, tools/ and tests/ (found by
# globbing, so a new one without --help fails here) answers --help and -h with
# a usage text on stdout, exit 0 and nothing on stderr, within 20 s, before
# doing any work: nothing in the tree it runs in and nothing in its temporary
# directory may appear or change. An unknown mode of bench/cpu-bench.sh is
# refused with exit 2, again creating nothing. The scripts run in a copy of
# the tree (tracked and untracked files, no build outputs), so that others
# working in the repository meanwhile cannot make this test fail.
set -u
. "$(dirname "$0")/lib.sh"

# imported by other scripts, never run: no command line to document
modules=" tests/e2e/checks.py "
scripts=()
for f in bench/*.sh bench/*.py tools/*.sh tools/*.py tools/*.js tools/*.mjs tests/run.sh tests/e2e/*.py tests/e2e/hub/*.py tests/e2e/hub/*.mjs tests/e2e/hub/*.sh tests/e2e/api/*.py \
         examples/client/*.sh examples/client/*.py examples/client/node/*.mjs; do
    [ -f "$f" ] || continue
    case $modules in *" $f "*) continue ;; esac
    scripts+=("$f")
done
if [ "${#scripts[@]}" -ge 30 ]; then ok; else bad "scripts found: expected at least 30, got ${#scripts[@]}"; fi

mkdir -p "$tmp/work" "$tmp/tree"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tmp/tree" 2>/dev/null
cd "$tmp/tree" || exit 1
# The state a script could change: every path of the copy and of the
# script's temporary directory, with its size and modification time (a file
# rewritten with the same bytes counts).
snapshot() {
    find . "$tmp/work" -printf '%p %s %T@\n' | LC_ALL=C sort
}
# run SCRIPT ARGS...: sets rc and leaves stdout/stderr in $tmp/out, $tmp/err and
# what changed in $tmp/changed. Bytecode caches are Python's, not the script's.
run() {
    local f=$1 interp
    shift
    case $f in *.py) interp=/usr/bin/python3 ;; *.js|*.mjs) interp=node ;; *) interp=bash ;; esac
    snapshot >"$tmp/before"
    TMPDIR=$tmp/work PYTHONDONTWRITEBYTECODE=1 timeout -k 5 20 "$interp" "$f" "$@" \
        </dev/null >"$tmp/out" 2>"$tmp/err"
    rc=$?
    snapshot >"$tmp/after"
    diff "$tmp/before" "$tmp/after" | grep '^[<>]' >"$tmp/changed"
}
show() { head -c "${2:-300}" "$1" | tr '\n' '|'; }

for f in "${scripts[@]}"; do
    run "$f" --help
    what="$f --help"
    if [ "$rc" -eq 0 ]; then ok; else bad "$what: exit status expected 0, got $rc$([ "$rc" -eq 124 ] && echo ' (timed out after 20 s)')"; fi
    if grep -qi usage "$tmp/out"; then ok; else bad "$what: stdout expected a text containing 'usage', got '$(show "$tmp/out")'"; fi
    if [ ! -s "$tmp/err" ]; then ok; else bad "$what: stderr expected empty, got '$(show "$tmp/err" 600)'"; fi
    if [ ! -s "$tmp/changed" ]; then ok; else bad "$what: expected no file created or modified, got: $(show "$tmp/changed" 600)"; fi
    cp "$tmp/out" "$tmp/long"
    run "$f" -h
    if [ "$rc" -eq 0 ] && cmp -s "$tmp/out" "$tmp/long" && [ ! -s "$tmp/err" ] && [ ! -s "$tmp/changed" ]; then ok
    else bad "$f -h: expected exit 0, the --help text, empty stderr, nothing written; got exit $rc, stdout '$(show "$tmp/out" 120)', stderr '$(show "$tmp/err")', changed '$(show "$tmp/changed")'"; fi
done

# a misspelt mode must not start a benchmark nor leave an empty results directory
run bench/cpu-bench.sh bogus-mode
if [ "$rc" -eq 2 ]; then ok; else bad "cpu-bench.sh bogus-mode: exit status expected 2, got $rc"; fi
if grep -q "bogus-mode" "$tmp/err" && grep -qi usage "$tmp/err"; then ok; else bad "cpu-bench.sh bogus-mode: stderr expected the mode named and the usage, got '$(show "$tmp/err")'"; fi
if [ ! -s "$tmp/out" ]; then ok; else bad "cpu-bench.sh bogus-mode: stdout expected empty, got '$(show "$tmp/out")'"; fi
if [ ! -s "$tmp/changed" ]; then ok; else bad "cpu-bench.sh bogus-mode: expected nothing created, got: $(show "$tmp/changed" 600)"; fi

finish
