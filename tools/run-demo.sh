#!/usr/bin/env bash
# `make run`: from a fresh Debian 12 checkout to a serving demo. Installs the
# system packages and the pinned Node oracles (the demo model borrows the
# tokenizer file shipped with one of them), builds build/basal, writes a
# synthetic tiny model to ./demo-model once, and serves it on 127.0.0.1:8000
# (extra arguments go to `basal serve`, e.g. --addr 127.0.0.1:9000 --metrics).
# The demo model has random weights: its answers are well-formed, not meaningful.
set -euo pipefail
usage() {
    cat <<'EOF'
Installs what is missing, builds build/basal, writes ./demo-model once and serves it (`make run`).
usage: tools/run-demo.sh [SERVE-FLAGS ...]
  SERVE-FLAGS   passed to `basal serve --model demo-model` (default: none, i.e. 127.0.0.1:8000);
                `build/basal serve --help` lists them
  -h, --help    this text
It reads no environment variables.
EOF
}
case ${1:-} in -h|--help) usage; exit 0 ;; esac
cd "$(dirname "$0")/.."
tools/install-deps.sh
make deps
make -j"$(nproc)" build/basal
if [ ! -f demo-model/basal.json ]; then
    rm -rf demo-model
    build/basal make-model demo-model --preset tiny
fi
exec build/basal serve --model demo-model "$@"
