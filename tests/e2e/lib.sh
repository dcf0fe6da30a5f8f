# Sourced by every tests/e2e/t_*.sh (`. "$(dirname "$0")/lib.sh"`): the repository
# root as the working directory and in $root; absolute paths in BASAL (the
# binary under test), BUILD, FIXTURES and SHARED, which tests/run.sh exports
# and which default to the release build; PY, the Debian Python that has the
# oracles (torch, jinja2, jsonschema); a temporary directory $tmp removed on
# exit; pass/fail counters with ok, bad, need and finish.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
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

# run_servers_py LIMIT LIMIT_ASAN SCRIPT [ARGS...]: runs a Python test that
# starts `basal serve` processes (tests/server/srvlib.py registers each in
# $SERVER_PIDS), bounded by LIMIT seconds (LIMIT_ASAN for a sanitizer build);
# every server left behind is killed on exit. Its status is the script's, or a
# failure line when it timed out.
run_servers_py() {
    local limit=$1 limit_asan=$2 script=$3
    shift 3
    case $BASAL in *asan*) limit=$limit_asan ;; esac
    export SERVER_PIDS=$tmp/pids
    : >"$SERVER_PIDS"
    trap 'while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$SERVER_PIDS"; rm -rf "$tmp"' EXIT
    BASAL=$BASAL FIXTURES=$FIXTURES SHARED=$SHARED TMPDIR=$tmp timeout -k 10 "$limit" "$PY" -B "$script" "$@"
    local rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "$(basename "$0" .sh): timed out after $limit s"; echo "0 passed, 1 failed"; return 1
    fi
    return "$rc"
}
