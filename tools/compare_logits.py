#!/usr/bin/env python3
"""Compares two {"logits": [[...], ...]} files (basal logits vs tools/torch_ref.py).

Prints the max |difference| and whether the argmax (lowest index on ties) agrees
for every prompt; exits 1 if the difference exceeds --tol or any argmax differs.
"""
import argparse
import json
import sys


def argmax(v):
    best = 0
    for i, x in enumerate(v):
        if x > v[best]:
            best = i
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("got", help="`basal logits` output to check")
    ap.add_argument("expected", help="the reference logits")
    ap.add_argument("--tol", type=float, default=1e-4, help="largest allowed |difference| (default %(default)s)")
    ap.add_argument("--label", default="", help="name printed with the result (default: none)")
    a = ap.parse_args()
    got = json.load(open(a.got))["logits"]
    exp = json.load(open(a.expected))["logits"]
    if len(got) != len(exp) or any(len(g) != len(e) for g, e in zip(got, exp)):
        print(f"{a.label}: shape mismatch", file=sys.stderr)
        return 1
    worst = max(abs(x - y) for g, e in zip(got, exp) for x, y in zip(g, e))
    bad_argmax = sum(1 for g, e in zip(got, exp) if len(g) > 1 and argmax(g) != argmax(e))
    n = sum(len(g) for g in got)
    ok = worst <= a.tol and bad_argmax == 0
    print(f"{a.label}: {len(got)} prompts, {n} logits, max |dlogit| {worst:.3g} (tol {a.tol:g}), "
          f"argmax mismatches {bad_argmax} -> {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
