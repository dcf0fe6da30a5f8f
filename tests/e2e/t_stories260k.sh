#!/usr/bin/env bash
# stories260K golden test (spec 07 §4): convert the llama2.c checkpoint with
# `basal convert-llama2c`, then `basal generate --steps 200` from BOS must print
# llama2.c's greedy output byte for byte.
set -u
. "$(dirname "$0")/lib.sh"
src="$SHARED/models/stories260K"
if "$BASAL" convert-llama2c "$src/stories260K.bin" "$src/tok512.bin" "$tmp/model" 2> "$tmp/err"; then
    pass=$((pass+1))
else
    echo "convert failed: $(cat "$tmp/err")"; fail=$((fail+1))
fi
if "$BASAL" generate --model "$tmp/model" --steps 200 > "$tmp/out.txt" 2> "$tmp/err" \
    && cmp "$tmp/out.txt" "$src/expected-greedy-200.txt"; then
    echo "greedy 200 steps: $(wc -c < "$tmp/out.txt") bytes identical to expected-greedy-200.txt"
    pass=$((pass+1))
else
    echo "generate differs from the golden text:"; cat "$tmp/err"; head -c 600 "$tmp/out.txt"; echo
    fail=$((fail+1))
fi
# Converting into an existing directory is refused (spec 06 §2).
if "$BASAL" convert-llama2c "$src/stories260K.bin" "$src/tok512.bin" "$tmp/model" 2> "$tmp/err"; then
    echo "convert overwrote an existing directory"; fail=$((fail+1))
elif grep -q "exists; choose a new output path" "$tmp/err"; then
    pass=$((pass+1))
else
    echo "unexpected message: $(cat "$tmp/err")"; fail=$((fail+1))
fi
# A truncated checkpoint is a clear error, never a crash.
head -c 5000 "$src/stories260K.bin" > "$tmp/trunc.bin"
"$BASAL" convert-llama2c "$tmp/trunc.bin" "$src/tok512.bin" "$tmp/m2" 2> "$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "trunc.bin" "$tmp/err"; then
    pass=$((pass+1))
else
    echo "truncated checkpoint: exit $rc, message: $(cat "$tmp/err")"; fail=$((fail+1))
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
