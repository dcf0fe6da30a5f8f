#!/usr/bin/env bash
# The guide's function length (functions under ~120 lines, or a reason
# written above them, "Long on purpose: ..."): tools/long-functions.py finds
# no function of src/ over 120 lines without its reason. The tool is checked
# first on a file made here: a 130-line function without a reason is found
# (exit 1), the same with the reason passes, one of 100 lines is not listed.
set -u
. "$(dirname "$0")/lib.sh"
need tools/long-functions.py
command -v ctags-universal >/dev/null 2>&1 || command -v ctags >/dev/null 2>&1 || need /usr/bin/ctags-universal
body() { # NAME LINES: a C function of LINES lines
    echo "static int $1(int x) {"
    for ((i = 0; i < $2 - 2; i++)); do echo "    x += $i;"; done
    echo "}"
}
{ echo "/* a helper */"; body short_one 100; echo; echo "/* no reason given */"; body long_one 130; } >"$tmp/a.c"
out=$("$PY" tools/long-functions.py "$tmp/a.c"); rc=$?
if [ $rc -eq 1 ] && [ "$out" = "  130 $tmp/a.c:104 long_one  NO REASON" ]; then ok
else bad "a 130-line function without a reason: expected exit 1 and one line, got $rc: $out"; fi
{ echo "/* Long on purpose: one sequence. */"; body long_one 130; } >"$tmp/b.c"
out=$("$PY" tools/long-functions.py --quiet "$tmp/b.c"); rc=$?
if [ $rc -eq 0 ] && [ -z "$out" ]; then ok; else bad "with its reason: expected exit 0 and nothing, got $rc: $out"; fi
out=$("$PY" tools/long-functions.py --quiet src); rc=$?
if [ $rc -eq 0 ] && [ -z "$out" ]; then ok
else bad "functions of src/ over 120 lines without a reason above them (split them, or say why): $out"; fi
finish
