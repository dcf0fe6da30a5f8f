#!/usr/bin/env python3
"""Lists the functions longer than a limit in C, C++ and CUDA sources, and
says for each whether the comment above it gives the reason (the guide:
functions under ~120 lines, or a reason written above; the phrase is
"Long on purpose"). Function extents come from Universal Ctags
(--fields=+e: the line of the name to the closing brace).

usage: tools/long-functions.py [--max N] [--quiet] [PATH ...]
  PATH         files or folders to read (default: src)
  --max N      the longest function allowed without a reason, in lines
               (default: 120)
  --quiet      print only the functions without a reason
  -h, --help   this text
Prints one line per function over the limit: LINES FILE:LINE NAME and
"reason" or "NO REASON". Exit status: 0 when every one has its reason, 1 when
one has none, 2 on a usage error or without ctags (apt-get install
universal-ctags)."""
import os
import shutil
import subprocess
import sys

PHRASE = "Long on purpose"
EXTS = (".c", ".h", ".cu", ".cuh", ".cc", ".cpp")


def usage_error(msg):
    print(f"long-functions: {msg} (see --help)", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    limit, quiet, paths = 120, False, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        if a == "--max":
            if i + 1 >= len(argv) or not argv[i + 1].isdigit():
                usage_error("--max needs a number of lines")
            limit = int(argv[i + 1])
            i += 2
            continue
        if a == "--quiet":
            quiet = True
        elif a.startswith("-"):
            usage_error(f"unknown option '{a}'")
        else:
            paths.append(a)
        i += 1
    return limit, quiet, paths or ["src"]


def sources(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            for d, _, fs in os.walk(p):
                out += [os.path.join(d, f) for f in fs if f.endswith(EXTS)]
        elif os.path.isfile(p):
            out.append(p)
        else:
            usage_error(f"{p}: no such file or folder")
    return sorted(out)


def functions(files):
    """(name, file, first line, last line) of every function definition."""
    ctags = shutil.which("ctags-universal") or shutil.which("ctags")
    if not ctags:
        usage_error("ctags not found: apt-get install universal-ctags")
    cmd = [ctags, "-x", "--_xformat=%N\t%F\t%n\t%{end}", "--fields=+ne", "--kinds-C=f", "--kinds-C++=f",
           "--kinds-CUDA=f", "--langmap=CUDA:.cu.cuh", "-o", "-"] + files
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        usage_error(f"ctags failed: {p.stderr.strip()[:300]}")
    out = []
    for line in p.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[2].isdigit() and parts[3].isdigit():
            out.append((parts[0], parts[1], int(parts[2]), int(parts[3])))
    return out


def has_reason(lines, first):
    """Whether the comment just above line `first` (1-based) holds PHRASE. Up to
    three lines between them that are not comments (a template line, a
    __global__ line, the return type) are passed over."""
    i, skipped = first - 2, 0
    while i >= 0 and skipped <= 3:
        t = lines[i].strip()
        if t.endswith("*/") or t.startswith("//"):
            break
        if not t:
            return False
        skipped += 1
        i -= 1
    else:
        return False
    block = []
    while i >= 0:
        t = lines[i].strip()
        block.append(t)
        if t.startswith("//"):
            if i == 0 or not lines[i - 1].strip().startswith("//"):
                break
        elif t.startswith("/*"):
            break
        i -= 1
    return PHRASE in " ".join(reversed(block))


def main():
    limit, quiet, paths = parse_args(sys.argv[1:])
    missing = 0
    texts = {}
    for name, f, a, b in sorted(functions(sources(paths)), key=lambda x: (x[2] - x[3], x[1])):
        n = b - a + 1
        if n <= limit:
            continue
        if f not in texts:
            with open(f, encoding="utf-8", errors="replace") as fh:
                texts[f] = fh.read().split("\n")
        ok = has_reason(texts[f], a)
        missing += not ok
        if not ok or not quiet:
            print(f"{n:5d} {f}:{a} {name}  {'reason' if ok else 'NO REASON'}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
