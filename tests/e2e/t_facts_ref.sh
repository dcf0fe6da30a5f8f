#!/usr/bin/env bash
# facts: "auto" (spec 03 §3) against tools/facts_ref.py, a reference written
# from the spec with Python's own re, decimal and datetime:
#  - the \d, \w, \s classes of the C matcher against Python's re over every
#    code point (differences allowed only where this Python's Unicode database
#    has no character yet: the spec's tables are CPython 3.12's Unicode 15.0,
#    whose range counts are 64, 748 and 10);
#  - the reference itself against the fixed vectors (the spec's §3.9 table and
#    the ones worked out from basal-rs facts.rs), so that a misreading of the
#    spec shared by both implementations cannot pass unnoticed;
#  - the facts lines (or the exception text) of generated Polish/English
#    states: a fixed seed and a fresh one (printed for replay: FACTS_SEED=N),
#    FACTS_N states each (default 2000), 100% identical required;
#  - the fixed seed once more with every regex search through the matcher's
#    visited-state bitmap (the path hostile states take): byte-identical.
set -u
. "$(dirname "$0")/lib.sh"
bin="$BUILD/tests/test_facts"
need "$bin"
n=${FACTS_N:-2000}

"$bin" --classes >"$tmp/classes.txt" || bad "test_facts --classes failed"
if $PY - "$tmp/classes.txt" <<'EOF'; then ok; else bad "Unicode classes differ from Python's re"; fi
import re, sys, unicodedata
lines = open(sys.argv[1]).read().split("\n")
fail = 0
for name, line, nranges in zip("dws", lines, (64, 748, 10)):
    got = set()
    toks = line.split()[1:]
    for tok in toks:
        a, _, b = tok.partition("-")
        got.update(range(int(a, 16), int(b or a, 16) + 1))
    rx = re.compile("\\" + name)
    want = {c for c in range(0x110000) if rx.match(chr(c))}
    other = [hex(c) for c in want ^ got if unicodedata.category(chr(c)) != "Cn"]
    print(f"\\{name}: C {len(got)} code points in {len(toks)} ranges, Python {unicodedata.unidata_version} "
          f"{len(want)}; differences outside Python-unassigned code points: {len(other)} {other[:10]}")
    fail |= bool(other) or len(toks) != nranges
sys.exit(fail)
EOF

if $PY tools/facts_ref.py vectors tests/data/facts_vectors.jsonl tests/data/facts_vectors_rust.jsonl; then ok
else bad "tools/facts_ref.py differs from the fixed vectors"; fi

fresh=${FACTS_SEED:-$(( ($(date +%s%N) / 1000) % 1000000007 ))}
for seed in 1 "$fresh"; do
    echo "seed $seed ($n states)"
    $PY tools/facts_ref.py gen "$seed" "$n" >"$tmp/states.jsonl"
    if ! "$bin" --stdin <"$tmp/states.jsonl" >"$tmp/c.jsonl"; then bad "test_facts --stdin failed (seed $seed)"; continue; fi
    if $PY tools/facts_ref.py check "$tmp/states.jsonl" <"$tmp/c.jsonl"; then ok; else bad "facts differ (seed $seed)"; fi
done
# the matcher's guard against backtracking blow-up must not change a match:
# the fixed seed again with every search through the visited-state bitmap
$PY tools/facts_ref.py gen 1 "$n" >"$tmp/states.jsonl"
if "$bin" --stdin --memo <"$tmp/states.jsonl" >"$tmp/m.jsonl" && "$bin" --stdin <"$tmp/states.jsonl" >"$tmp/c.jsonl" &&
   cmp -s "$tmp/m.jsonl" "$tmp/c.jsonl"; then ok; else bad "the visited-state bitmap changes the facts"; fi
finish
