#!/usr/bin/env bash
# Self-check of tests/e2e/hub/fake_hub.py against the REAL client library
# (@huggingface/hub through tests/e2e/hub/hf_js.mjs) and against curl. Not part
# of the test suite: run it by hand after changing fake_hub.py. Prints one
# line per check (ok / FAIL) and NOTE lines describing what @huggingface/hub
# does in situations where its behaviour is the finding, not a requirement.
set -u

usage() {
    cat <<'EOF'
usage: tests/e2e/hub/fake_hub_selfcheck.sh [-h|--help]

Builds two synthetic repositories with build/basal make-model (plus README.md,
original/consolidated.bin, model.gguf, an 11 MiB text file), serves them with
tests/e2e/hub/fake_hub.py and checks, with @huggingface/hub (tests/e2e/hub/hf_js.mjs)
and curl: the cache layout of a snapshot, a second run that downloads nothing,
tags and commits as revisions, gated/private/renamed repositories, errors,
Range requests, the CDN's refusal of Authorization, pagination, and what the
client does under cut/status/corrupt/ignore_range faults.
Needs build/basal and tests/oracle/node_modules (npm install there).
Exit status: 0 when every check passed, 1 otherwise.
EOF
}
case "${1:-}" in
-h | --help) usage; exit 0 ;;
"") ;;
*) echo "fake_hub_selfcheck.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/../.." || exit 2
BASAL=build/basal
[ -x "$BASAL" ] || { echo "needs $BASAL (run make)" >&2; exit 2; }
[ -d tests/oracle/node_modules/@huggingface/hub ] || { echo "needs: cd tests/oracle && npm ci" >&2; exit 2; }
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
npass=0 nfail=0
ok() { npass=$((npass + 1)); echo "ok   $*"; }
bad() { nfail=$((nfail + 1)); echo "FAIL $*"; }
note() { echo "NOTE $*"; }
# expect DESC ACTUAL EXPECTED
expect() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: expected '$3', got '$2'"; fi; }
# expect_match DESC ACTUAL REGEX
expect_match() { if [[ $2 =~ $3 ]]; then ok "$1"; else bad "$1: expected /$3/, got '${2:0:400}'"; fi; }

hfjs() { timeout 120 node tests/e2e/hub/hf_js.mjs "$@" 2>>"$tmp/hfjs.stderr"; }
ctl() { curl -s -X POST -H 'Content-Type: application/json' --data "${2:-[]}" "$HUB/_control/$1" >/dev/null; }
hublog() { curl -s "$HUB/_control/log"; }
hdr() { grep -i "^$1:" | head -1 | cut -d' ' -f2- | tr -d '\r'; }  # a header's value from curl -D
sha256() { sha256sum "$1" | cut -d' ' -f1; }
is_lfs() {
    case $1 in *.safetensors | *.bin | *.gguf) return 0 ;; esac
    [ "$(stat -c %s "$2")" -gt $((10 * 1024 * 1024)) ]
}

# ---- --help of the two tools --------------------------------------------
for cmd in "/usr/bin/python3 $PWD/tests/e2e/hub/fake_hub.py" "node $PWD/tests/e2e/hub/hf_js.mjs"; do
    for opt in --help -h; do
        out=$(cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 $cmd "$opt" 2>"$tmp/err"); rc=$?
        if [ $rc -eq 0 ] && grep -qi usage <<<"$out" && [ ! -s "$tmp/err" ] && [ "$(ls -A "$tmp")" = err ]; then
            ok "${cmd##*/} $opt: usage on stdout, exit 0, nothing written"
        else bad "${cmd##*/} $opt: rc=$rc stderr=$(head -c 200 "$tmp/err") files=$(ls -A "$tmp")"; fi
    done
done
rm -f "$tmp/err"

# ---- repositories --------------------------------------------------------
commit() { printf '%s' "$1" | sha1sum | cut -d' ' -f1; }
C1=$(commit a1) C2=$(commit a2) CB=$(commit b1)
A=Remek/basal-1.5-mini B=Remek/gated-model P=Remek/private-model
"$BASAL" make-model "$tmp/a2" --shards 2 >/dev/null 2>&1 || { echo "make-model failed" >&2; exit 2; }
"$BASAL" make-model "$tmp/b" --shards 2 --seed 2 >/dev/null 2>&1 || exit 2
mkdir -p "$tmp/a2/original" "$tmp/a2/data"
printf '# basal 1.5 mini\n\nSecond revision.\n' >"$tmp/a2/README.md"
head -c 300000 /dev/urandom >"$tmp/a2/original/consolidated.bin"
head -c 65536 /dev/urandom >"$tmp/a2/model.gguf"
python3 -c "import sys; sys.stdout.write(('x' * 1023 + '\n') * 11 * 1024)" >"$tmp/a2/data/big.txt"
cp -r "$tmp/a2" "$tmp/a1"
printf '# basal 1.5 mini\n\nFirst revision.\n' >"$tmp/a1/README.md"
printf '# gated\n' >"$tmp/b/README.md"
cat >"$tmp/config.json" <<EOF
{"repos": [
  {"id": "$A", "renamed_from": "Remek/old-name", "revisions": [
     {"commit": "$C1", "dir": "$tmp/a1", "refs": ["v1.0", "refs/pr/1"], "date": "2026-10-01T00:00:00.000Z", "title": "First"},
     {"commit": "$C2", "dir": "$tmp/a2", "refs": ["main", "v1.5"], "title": "Second"}]},
  {"id": "$B", "gated": "manual", "revisions": [{"commit": "$CB", "dir": "$tmp/b", "refs": ["main"]}]},
  {"id": "$P", "private": true, "revisions": [{"commit": "$CB", "dir": "$tmp/b", "refs": ["main"]}]}],
 "tokens": {"hf_good": ["$B", "$P"], "hf_other": []},
 "page_size": ${PAGE_SIZE:-1000}}
EOF

# start_hub CONFIG NAME: sets HUB, CDN
start_hub() {
    /usr/bin/python3 tests/e2e/hub/fake_hub.py --config "$1" --port-file "$tmp/$2.ports" --log "$tmp/$2.jsonl" &
    pids+=($!)
    for _ in $(seq 100); do [ -s "$tmp/$2.ports" ] && break; sleep 0.1; done
    HUB=$(jq -r .hub "$tmp/$2.ports") CDN=$(jq -r .cdn "$tmp/$2.ports")
}
start_hub "$tmp/config.json" main
expect_match "port file names both listeners" "$HUB $CDN" '^http://127\.0\.0\.1:[0-9]+ http://127\.0\.0\.1:[0-9]+$'

# ---- a full snapshot -----------------------------------------------------
cache=$tmp/cache1
repodir=$cache/models--Remek--basal-1.5-mini
out=$(hfjs snapshot --hub "$HUB" --cache "$cache" --repo "$A")
expect "snapshot of $A@main: path" "$(jq -r .snapshot <<<"$out")" "$repodir/snapshots/$C2"
check_snapshot() {  # SNAPDIR SRCDIR -> "" or the problems
    local snap=$1 src=$2 f link want etag up errs="" n=0
    while IFS= read -r f; do
        n=$((n + 1))
        link=$snap/$f
        if is_lfs "$f" "$src/$f"; then etag=$(sha256 "$src/$f"); else etag=$(git hash-object --no-filters "$src/$f"); fi
        up=$(printf '../%.0s' $(seq $((2 + $(tr -cd / <<<"$f" | wc -c)))))
        want=${up}blobs/$etag
        if [ ! -L "$link" ]; then errs+="$f not a symlink; "
        elif [ "$(readlink "$link")" != "$want" ]; then errs+="$f -> $(readlink "$link") (want $want); "
        elif ! cmp -s "$link" "$src/$f"; then errs+="$f content differs; "; fi
    done < <(cd "$src" && find . -type f | sed 's|^\./||' | sort)
    local got; got=$(find "$snap" -type l | wc -l)
    [ "$got" -eq "$n" ] || errs+="snapshot has $got links for $n files; "
    printf '%s' "$errs"
}
expect "every file is a relative link ../../blobs/<sha256 if LFS, git sha1 else> with the source bytes" \
    "$(check_snapshot "$repodir/snapshots/$C2" "$tmp/a2")" ""
expect "refs/main holds the commit (no newline)" "$(od -An -c "$repodir/refs/main" | tr -d ' \n' | wc -c):$(cat "$repodir/refs/main")" "40:$C2"
expect "blobs: one per distinct content, no .incomplete left" \
    "$(ls "$repodir/blobs" | wc -l) $(ls "$repodir/blobs" | grep -c incomplete)" \
    "$(cd "$tmp/a2" && find . -type f -exec sha256sum {} + | cut -d' ' -f1 | sort -u | wc -l) 0"

scan=$(hfjs scan --cache "$cache")
expect "scan: repo id, commit, refs" \
    "$(jq -c '[.repos[0].id.name, .repos[0].revisions[0].commitOid, .repos[0].revisions[0].refs]' <<<"$scan")" \
    "[\"$A\",\"$C2\",[\"main\"]]"
note "scanCacheDir lists $(jq '.repos[0].revisions[0].files|length' <<<"$scan") files of $(find "$tmp/a2" -type f | wc -l): its scanSnapshotDir skips subdirectories (original/, data/); filesCount (blobs) = $(jq .repos[0].filesCount <<<"$scan")"

# ---- a second run downloads nothing --------------------------------------
ctl reset
out=$(hfjs snapshot --hub "$HUB" --cache "$cache" --repo "$A")
log=$(hublog)
expect "second snapshot: same path" "$(jq -r .snapshot <<<"$out")" "$repodir/snapshots/$C2"
expect "second snapshot: no GET/HEAD of /resolve/ or /lfs/" \
    "$(jq '[.[] | select(.path | test("/resolve/|^/lfs/"))] | length' <<<"$log")" 0
note "second snapshot requested only: $(jq -r '[.[] | .method + " " + (.path | sub("\\?.*"; ""))] | unique | join(", ")' <<<"$log")"

# ---- tag, commit and refs/pr revisions ------------------------------------
ctl reset
out=$(hfjs snapshot --hub "$HUB" --cache "$cache" --repo "$A" --revision v1.5)
expect "tag v1.5: same snapshot, refs/v1.5 written, nothing downloaded" \
    "$(jq -r .snapshot <<<"$out") $(cat "$repodir/refs/v1.5") $(hublog | jq '[.[] | select(.path | test("/resolve/|^/lfs/"))] | length')" \
    "$repodir/snapshots/$C2 $C2 0"
ctl reset
out=$(hfjs snapshot --hub "$HUB" --cache "$cache" --repo "$A" --revision "$C1")
expect "commit C1: its own snapshot, complete" "$(jq -r .snapshot <<<"$out")|$(check_snapshot "$repodir/snapshots/$C1" "$tmp/a1")" "$repodir/snapshots/$C1|"
expect "commit C1: only README.md (the changed file) fetched, other blobs reused" \
    "$(hublog | jq -c '[.[] | select(.path | test("/resolve/")) | .path | sub(".*/"; "")] | unique')" '["README.md"]'
expect "commit revision writes no ref" "$(ls "$repodir/refs" | tr '\n' ' ')" "main v1.5 "
expect "refs%2Fpr%2F1 resolves (api and resolve)" \
    "$(curl -s "$HUB/api/models/$A/revision/refs%2Fpr%2F1" | jq -r .sha) $(curl -sI "$HUB/$A/resolve/refs%2Fpr%2F1/README.md" | hdr x-repo-commit)" "$C1 $C1"

# ---- lastCommit and the file command --------------------------------------
pi=$(curl -s -X POST -H 'Content-Type: application/json' \
    --data '{"paths": ["config.json", "README.md", "original", "nope"], "expand": true}' \
    "$HUB/api/models/$A/paths-info/main")
expect "paths-info (JSON) lastCommit: unchanged file -> C1, changed -> C2, dir kept, missing omitted" \
    "$(jq -c '[.[] | [.path, .type, .lastCommit.id]]' <<<"$pi")" \
    "[[\"config.json\",\"file\",\"$C1\"],[\"README.md\",\"file\",\"$C2\"],[\"original\",\"directory\",\"$C1\"]]"
pi=$(curl -s -d 'paths=config.json&paths=model.gguf&expand=false' "$HUB/api/models/$A/paths-info/main")
expect "paths-info (form, as huggingface_hub sends): LFS entry" \
    "$(jq -c '[.[1].path, .[1].lfs.oid, .[1].lfs.size, .[1].lfs.pointerSize, (.[0]|has("lastCommit"))]' <<<"$pi")" \
    "[\"model.gguf\",\"$(sha256 "$tmp/a2/model.gguf")\",65536,$(printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 65536\n' "$(sha256 "$tmp/a2/model.gguf")" | wc -c),false]"
out=$(hfjs file --hub "$HUB" --cache "$tmp/cache2" --repo "$A" --path config.json)
note "hf.js downloadFileToCacheDir(config.json, revision main) -> $(jq -r '.pointer // .error' <<<"$out" | sed "s|$tmp/cache2/||"): it names the snapshot after the file's lastCommit (C1=$C1), not the branch head, and writes no refs/main ($(ls "$tmp/cache2/models--Remek--basal-1.5-mini/refs" 2>/dev/null | wc -l) refs)"

# ---- gated, private, renamed, errors --------------------------------------
ctl reset
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache3" --repo "$B"); rc=$?
expect_match "gated, no token: exit 1, status 401, GatedRepo message" "$rc $(jq -c '[.status, .error]' <<<"$out")" '^1 \[401,"Access to model Remek/gated-model is restricted\. You must have access'
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache3" --repo "$B" --token hf_other); rc=$?
expect_match "gated, token without access: 403 not in the authorized list" "$rc $(jq -c '[.status, .error]' <<<"$out")" '^1 \[403,".*not in the authorized list'
ctl reset
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache3" --repo "$B" --token hf_good); rc=$?
expect "gated, good token: success, snapshot complete" "$rc $(check_snapshot "$(jq -r .snapshot <<<"$out")" "$tmp/b")" "0 "
log=$(hublog)
expect "token sent to the Hub, never to the CDN" \
    "$(jq -c '[([.[] | select(.server == "hub") | .auth] | unique), ([.[] | select(.server == "cdn") | .auth] | unique)]' <<<"$log")" '[[true],[false]]'
note "after the Hub's 302, Node's fetch (undici) drops Authorization on the cross-origin hop by itself"
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache3" --repo "$A" --token hf_bogus); rc=$?
expect_match "unknown token on a public repo: 401 Invalid credentials" "$rc $(jq -c '[.status, .error]' <<<"$out")" '^1 \[401,"Invalid credentials in Authorization header'
for t in "" hf_other hf_good; do
    code=$(curl -s -o /dev/null -w '%{http_code}' ${t:+-H "Authorization: Bearer $t"} "$HUB/api/models/$P")
    err=$(curl -sI ${t:+-H "Authorization: Bearer $t"} "$HUB/$P/resolve/main/config.json" | hdr x-error-code)
    expect "private repo, token '${t:-none}': api status, resolve X-Error-Code" "$code ${err:--}" \
        "$(case $t in "") echo "401 RepoNotFound" ;; hf_other) echo "404 RepoNotFound" ;; *) echo "200 -" ;; esac)"
done
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache3" --repo "$A" --revision nope); rc=$?
expect_match "unknown revision: 404 Invalid rev id" "$rc $(jq -c '[.status, .error]' <<<"$out")" '^1 \[404,"Invalid rev id: nope'
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache3" --repo Remek/none); rc=$?
expect_match "unknown repo, no token: 401 Repository not found" "$rc $(jq -c '[.status, .error]' <<<"$out")" '^1 \[401,"Repository not found'
expect "unknown repo, valid token: 404" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer hf_other' "$HUB/api/models/Remek/none")" 404
ctl reset
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache4" --repo Remek/old-name); rc=$?
expect "renamed repo (old id): relative 307s followed, snapshot complete" \
    "$rc $(check_snapshot "$(jq -r .snapshot <<<"$out")" "$tmp/a2")" "0 "
expect "renamed: 307 with a relative Location to the new id" \
    "$(curl -sI "$HUB/Remek/old-name/resolve/main/config.json?x=1" | tr -d '\r' | grep -iE '^(HTTP|location)' | tr '\n' ' ')" \
    "HTTP/1.1 307 Temporary Redirect Location: /$A/resolve/main/config.json?x=1 "

# ---- curl: resolve, Range, CDN ----------------------------------------------
shard=$tmp/a2/model-00001-of-00002.safetensors
h=$(curl -sI "$HUB/$A/resolve/main/model-00001-of-00002.safetensors" | tr -d '\r')
expect "HEAD LFS resolve: 302, X-Linked-Etag, X-Linked-Size, X-Repo-Commit, Location on the CDN" \
    "$(head -1 <<<"$h" | cut -d' ' -f2) $(hdr x-linked-etag <<<"$h") $(hdr x-linked-size <<<"$h") $(hdr x-repo-commit <<<"$h") $(hdr location <<<"$h" | sed 's/?.*//')" \
    "302 \"$(sha256 "$shard")\" $(stat -c %s "$shard") $C2 $CDN/lfs/$(sha256 "$shard")"
loc=$(hdr location <<<"$h")
tok=$tmp/a2/tokenizer.json; N=$(stat -c %s "$tok")
h=$(curl -sI "$HUB/$A/resolve/main/tokenizer.json" | tr -d '\r')
expect "HEAD non-LFS resolve: 200, ETag = git blob sha1, Content-Length" \
    "$(head -1 <<<"$h" | cut -d' ' -f2) $(hdr etag <<<"$h") $(hdr content-length <<<"$h") $(hdr x-repo-commit <<<"$h")" \
    "200 \"$(git hash-object "$tok")\" $N $C2"
rangecheck() {  # DESC URL RANGE STATUS CONTENT-RANGE SKIP COUNT
    local code
    code=$(curl -s -D "$tmp/h" -o "$tmp/body" -w '%{http_code}' -H "Range: $3" "$2")
    if [ "$code $(hdr content-range <"$tmp/h")" = "$4 $5" ] &&
        { [ "$4" = 416 ] || cmp -s "$tmp/body" <(tail -c +$(($6 + 1)) "$8" | head -c "$7"); }; then ok "$1"
    else bad "$1: got $code $(hdr content-range <"$tmp/h"), $(stat -c %s "$tmp/body") bytes"; fi
}
rangecheck "Range bytes=1000-1999 on a Hub file: 206, right bytes" "$HUB/$A/resolve/main/tokenizer.json" bytes=1000-1999 206 "bytes 1000-1999/$N" 1000 1000 "$tok"
rangecheck "Range bytes=a- (open): 206 to the end" "$HUB/$A/resolve/main/tokenizer.json" "bytes=$((N - 10))-" 206 "bytes $((N - 10))-$((N - 1))/$N" $((N - 10)) 10 "$tok"
rangecheck "Range past the end: 416, bytes */N" "$HUB/$A/resolve/main/tokenizer.json" "bytes=$N-" 416 "bytes */$N" 0 0 "$tok"
S=$(stat -c %s "$shard")
rangecheck "CDN Range bytes=5-14: 206, right bytes" "$loc" bytes=5-14 206 "bytes 5-14/$S" 5 10 "$shard"
rangecheck "CDN Range bytes=-100 (suffix): 206, last 100" "$loc" bytes=-100 206 "bytes $((S - 100))-$((S - 1))/$S" $((S - 100)) 100 "$shard"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "$loc")
expect "CDN GET: 200 with the whole file" "$code $(cmp -s "$tmp/body" "$shard" && echo same)" "200 same"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Authorization: Bearer hf_good' "$loc")
expect_match "CDN refuses Authorization: 400 Only one auth mechanism allowed" "$code $(cat "$tmp/body")" '^400 .*Only one auth mechanism allowed'
h=$(curl -sI "$HUB/$A/resolve/main/nope.txt" | tr -d '\r')
expect "missing file: 404 EntryNotFound with X-Repo-Commit" \
    "$(head -1 <<<"$h" | cut -d' ' -f2) $(hdr x-error-code <<<"$h") $(hdr x-repo-commit <<<"$h")" "404 EntryNotFound $C2"
h=$(curl -sI "$HUB/$A/resolve/nope/config.json" | tr -d '\r')
expect "missing revision: 404 RevisionNotFound, no X-Repo-Commit" \
    "$(head -1 <<<"$h" | cut -d' ' -f2) $(hdr x-error-code <<<"$h") $(hdr x-repo-commit <<<"$h")" "404 RevisionNotFound "
expect "model info with expand=sha: only _id, id, sha" \
    "$(curl -s "$HUB/api/models/$A?expand=sha" | jq -c 'keys')" '["_id","id","sha"]'
expect "model info: siblings = every file" \
    "$(curl -s "$HUB/api/models/$A" | jq '.siblings | length')" "$(find "$tmp/a2" -type f | wc -l)"
expect "non-recursive tree: one level, directories included" \
    "$(curl -s "$HUB/api/models/$A/tree/main" | jq -c '[.[] | select(.type == "directory") | .path]') $(curl -s "$HUB/api/models/$A/tree/main/original" | jq -c '[.[].path]')" \
    '["data","original"] ["original/consolidated.bin"]'
# git itself computes the tree ids, over a copy where LFS files are their pointers
cp -r "$tmp/a2" "$tmp/g" && git init -q "$tmp/g"
(cd "$tmp/g" && find . -path ./.git -prune -o -type f -print | sed 's|^\./||' | while IFS= read -r f; do
    if is_lfs "$f" "$f"; then
        printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n' "$(sha256 "$f")" "$(stat -c %s "$f")" >"$f.ptr"
        mv "$f.ptr" "$f"
    fi
done && git add -A && git write-tree >../tree)
expect "oids are git's: directories = tree ids, LFS files = the pointer's blob id" \
    "$(curl -s "$HUB/api/models/$A/tree/main?recursive=1" | jq -r '[.[] | select(.path == "original" or .path == "data" or .path == "model.gguf") | .oid] | join(" ")')" \
    "$(git -C "$tmp/g" rev-parse "$(cat "$tmp/tree"):data" "$(cat "$tmp/tree"):model.gguf" "$(cat "$tmp/tree"):original" | tr '\n' ' ' | sed 's/ $//')"

# ---- faults: what @huggingface/hub does ------------------------------------
sha1shard=$(sha256 "$shard")
try_fault() {  # NAME FAULTS-JSON: runs a snapshot into a fresh cache, prints a NOTE
    local name=$1 c=$tmp/cache-$1
    ctl reset; ctl faults "$2"
    out=$(hfjs snapshot --hub "$HUB" --cache "$c" --repo "$A"); rc=$?
    local rd=$c/models--Remek--basal-1.5-mini blob=$c/models--Remek--basal-1.5-mini/blobs/$sha1shard
    note "$name fault: hf.js exit $rc, $(jq -c . <<<"$out" | sed "s|$tmp|TMP|g" | head -c 300)"
    note "$name fault: then blobs: $(ls "$rd/blobs" 2>/dev/null | grep -c .) ($(ls "$rd/blobs" 2>/dev/null | grep -c incomplete) .incomplete), shard blob $( [ -e "$blob" ] && { cmp -s "$blob" "$shard" && echo intact || echo "PRESENT BUT WRONG ($(stat -c %s "$blob") bytes)"; } || echo absent); requests to the faulted URL: $(hublog | jq -c "[.[] | select(.path | test(\"$3\")) | [.method, .status, .bytes]]")"
    ctl faults '[]'
    out=$(hfjs snapshot --hub "$HUB" --cache "$c" --repo "$A"); rc=$?
    note "$name fault: a rerun without the fault: exit $rc, snapshot $( [ $rc -eq 0 ] && [ -z "$(check_snapshot "$rd/snapshots/$C2" "$tmp/a2")" ] && echo complete and correct || echo "WRONG: $(check_snapshot "$rd/snapshots/$C2" "$tmp/a2" | head -c 300)")"
}
try_fault cut "[{\"kind\": \"cut\", \"match\": \"^/lfs/$sha1shard\", \"after\": 100000}]" "^/lfs/$sha1shard"
try_fault status500 '[{"kind": "status", "code": 500, "match": "/resolve/.*/config\\.json$"}]' "config\\\\.json"
try_fault status503 '[{"kind": "status", "code": 503, "retry_after": 1, "match": "/paths-info/", "times": 1}]' "paths-info"
try_fault corrupt "[{\"kind\": \"corrupt\", \"match\": \"^/lfs/$sha1shard\", \"offset\": 123456}]" "^/lfs/$sha1shard"
try_fault ignore_range "[{\"kind\": \"ignore_range\", \"match\": \"^/lfs/$sha1shard\"}]" "^/lfs/$sha1shard"
try_fault drop "[{\"kind\": \"drop\", \"match\": \"^/lfs/$sha1shard\"}]" "^/lfs/$sha1shard"
# the fault machinery itself, seen with curl
ctl reset; ctl faults "[{\"kind\": \"cut\", \"match\": \"^/lfs/\", \"after\": 1000}, {\"kind\": \"status\", \"code\": 429, \"retry_after\": 7, \"match\": \"config\", \"times\": 2}]"
got=$(curl -s -o "$tmp/body" -w '%{http_code}' "$loc"; echo " $(stat -c %s "$tmp/body")")
expect "cut: headers then 1000 bytes, connection closed" "$got" "200 1000"
expect "status 429 twice with Retry-After, then normal" \
    "$(for i in 1 2 3; do curl -s -D - -o /dev/null "$HUB/$A/resolve/main/config.json" | tr -d '\r' | awk 'NR==1{s=$2} tolower($1)=="retry-after:"{r=$2} END{printf "%s/%s ", s, r}'; done)" "429/7 429/7 200/ "
ctl reset; ctl faults "[{\"kind\": \"trickle\", \"match\": \"^/lfs/\", \"rate\": 20000}]"
t0=$(date +%s.%N); curl -s -o /dev/null -H 'Range: bytes=0-39999' "$loc"; t1=$(date +%s.%N)
expect "trickle 20000 B/s: 40000 bytes take about 2 s" "$(python3 -c "print(1.5 < $t1 - $t0 < 3.5)")" True
ctl reset

# ---- pagination ------------------------------------------------------------
sed 's/"page_size": [0-9]*/"page_size": 3/' "$tmp/config.json" >"$tmp/config3.json"
start_hub "$tmp/config3.json" paged
h=$(curl -s -D - -o "$tmp/body" "$HUB/api/models/$A/tree/main?recursive=true" | tr -d '\r')
expect_match "page_size 3: 3 entries and a Link rel=next" "$(jq length "$tmp/body") $(hdr link <<<"$h")" "^3 <$HUB/api/models/$A/tree/main\\?.*cursor=.*>; rel=\"next\"$"
n=0 url="$HUB/api/models/$A/tree/main?recursive=true" pages=0
while [ -n "$url" ]; do
    h=$(curl -s -D - -o "$tmp/body" "$url" | tr -d '\r'); n=$((n + $(jq length "$tmp/body"))); pages=$((pages + 1))
    url=$(hdr link <<<"$h" | sed -n 's/^<\(.*\)>; rel="next"$/\1/p')
done
total=$(( $(find "$tmp/a2" -type f | wc -l) + $(find "$tmp/a2" -mindepth 1 -type d | wc -l) ))
expect "following Link to the end lists every file and directory once" "$n $pages" "$total $(( (total + 2) / 3 ))"
ctl reset
out=$(hfjs snapshot --hub "$HUB" --cache "$tmp/cache5" --repo "$A"); rc=$?
expect "hf.js over pages of 3: snapshot complete" "$rc $(check_snapshot "$(jq -r .snapshot <<<"$out")" "$tmp/a2")" "0 "
expect "hf.js followed every page" "$(hublog | jq '[.[] | select(.path | test("/tree/"))] | length')" "$(( (total + 2) / 3 ))"

# ---- SIGTERM ---------------------------------------------------------------
for p in "${pids[@]}"; do kill -TERM "$p"; done
t0=$SECONDS; for p in "${pids[@]}"; do wait "$p"; done
expect "SIGTERM stops both servers promptly" "$(( SECONDS - t0 < 5 ))" 1
pids=()
lines=$(cat "$tmp"/main.jsonl | wc -l)
expect "--log: one JSON line per request, no token in it" \
    "$(jq -c 'select(has("t") and has("server") and has("status") and has("bytes") and has("auth"))' "$tmp/main.jsonl" | wc -l) $(grep -c hf_good "$tmp/main.jsonl")" "$lines 0"

echo "passed $npass, failed $nfail"
[ "$nfail" -eq 0 ]
