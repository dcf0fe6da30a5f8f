# Sourced by every tests/t_*.sh (`. "$(dirname "$0")/lib.sh"`): the repository
# root as the working directory and in $root; absolute paths in BASAL (the
# binary under test), BUILD, FIXTURES and SHARED, which tests/run.sh exports
# and which default to the release build; PY, the Debian Python that has the
# oracles (torch, jinja2, jsonschema); a temporary directory $tmp removed on
# exit; pass/fail counters with ok, bad, need and finish.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
abs() { case $1 in /*) echo "$1" ;; *) echo "$root/$1" ;; esac; }
BASAL=$(abs "${BASAL:-build/basal}")
BUILD=$(abs "${BUILD:-build}")
FIXTURES=$(abs "${FIXTURES:-build/fixtures}")
SHARED=$(abs "${SHARED:-../shared}")
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
# Stops the script as one failure when a file it needs is missing.
need() {
    for f in "$@"; do
        if [ ! -e "$f" ]; then echo "missing $f (build, 'make fixtures', 'make deps')"; echo "0 passed, 1 failed"; exit 1; fi
    done
}
# The closing line tests/run.sh reads, and the exit status.
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
