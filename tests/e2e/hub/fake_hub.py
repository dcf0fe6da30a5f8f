#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub, for testing `basal pull`.

usage: fake_hub.py --config CONFIG.json --port-file FILE [--log FILE.jsonl]
                   [--host 127.0.0.1] [--port 0] [--cdn-port 0]

Two listeners: the Hub itself and a "CDN" on another port (another origin, as
cdn-lfs / cas-bridge are for huggingface.co). Once both listen, FILE receives
{"hub": "http://127.0.0.1:P", "cdn": "http://127.0.0.1:Q"} (tmp + rename).
Runs until SIGTERM/SIGINT. Python 3 standard library only.

CONFIG.json
  {"repos": [{"id": "owner/name", "gated": false | "manual", "private": false,
              "renamed_from": "Old/name",                        (optional)
              "old_api": "no_tree" | "bare",                     (optional: an older Hub)
              "extra_entries": [{...}],      (optional: a hostile Hub's listing, below)
              "library_name": "transformers", "tags": [], "pipeline_tag": null,
              "revisions": [{"commit": "<40 hex>", "dir": "/abs/dir",
                             "refs": ["main", "v1.5"],
                             "date": "2026-10-05T00:00:00.000Z", "title": "..."}]}],
   "tokens": {"hf_good": ["owner/gated-or-private"], "hf_other": []},
   "page_size": 1000,
   "resolve_cache": false,
   "path_prefix": "/mirror",                                      (optional)
   "sizes": {"owner/name": {"PATH": N}},   (optional: sizes the Hub claims)
   "faults": [...]}
  Revisions are listed oldest first and read as one linear history: the
  `lastCommit` of a path is the oldest commit of the run of consecutive
  revisions, ending at the one asked about, in which the path is unchanged.
  Every file under "dir" (recursively) is the repository content at that
  commit; files are read into memory once, at start.

Endpoints (hub): GET|HEAD /api/models/O/N[/revision/REV] (query expand=...
restricts the answer to _id, id and the expanded keys, blobs=true adds sizes
and LFS data to siblings), GET /api/models/O/N/tree/REV[/PATH]?recursive=&
expand=&limit=&cursor= (paginated with a Link rel="next" header), POST
/api/models/O/N/paths-info/REV (JSON or form body), GET|HEAD
/O/N/resolve/REV/PATH, and, with "resolve_cache": true, the Hub's relative
307 of small files to GET|HEAD /api/resolve-cache/models/O/N/COMMIT/PATH.
CDN: GET|HEAD /lfs/SHA256?repo=..&file=.. .
With "path_prefix" P, every hub endpoint is also served under P (a mirror
behind a reverse proxy, HF_ENDPOINT=http://host:port/P): the relative
Locations and the Link URLs of such a request carry P.
Control (hub only, not logged): POST /_control/faults (JSON list, replaces
the faults), POST /_control/reset (clears faults and log), GET /_control/log,
POST /_control/sizes (replaces "sizes"). A size in "sizes" replaces the real
one in every listing (tree, paths-info, siblings) and in X-Linked-Size; the
content served stays the real file.

"extra_entries" are sent as they are, after the real entries, in every
listing of the repository's revisions (tree and siblings): names such as
"../../x" or "/abs", malformed oids, huge sizes, duplicates. They are not
files: resolve answers EntryNotFound for them.

Faults: {"kind": K, "match": REGEX searched in path+query, "method": "GET",
"server": "hub"|"cdn", "times": N (default 1, -1 = always)}; K is one of
  status        answer "code" (+ "retry_after" seconds -> Retry-After, "error"
                the message, "headers" {name: value} added: a Location for a
                redirect loop, an X-Error-Code)
  headers       the real answer, with "headers" {name: value} set over its own
                (a huge X-Linked-Size, a malformed ETag)
  endless       file content (or an API answer) as 200 without Content-Length:
                the real bytes (API: "[") then "filler" (default NUL) bytes
                without end, until the client hangs up (at most 4 GiB)
  drop          close the connection without any answer
  cut           send the headers and only "after" bytes of the body, then close
  corrupt       xor 0xFF the byte at absolute file offset "offset"
  trickle       send the body at "rate" bytes per second
  ignore_range  answer 200 with the whole file even to a Range request
status/drop are consumed by any matching request. The others only touch file
content (GET of resolve, resolve-cache, CDN) and are consumed only where they
bite: cut when "after" is shorter than the body, corrupt when its offset is in
the bytes sent, ignore_range when a Range was asked (so a client's 1-byte
probe, as hf.js sends, does not use them up).

Choices where the real Hub is unknown or deliberately simplified:
- Gating: metadata stays public for a gated repo, as on huggingface.co (model
  page, file list and sizes are visible before access is granted): /api/models,
  tree and paths-info answer without a token; only file content (resolve) is
  gated. Private repos answer RepoNotFound everywhere to unauthorized callers.
- An Authorization header with a token not in "tokens" is refused with 401
  "Invalid credentials in Authorization header" (no X-Error-Code) on every Hub
  endpoint, public repos included, as the Hub does with a stale token.
- The 302 to the CDN and the 307s carry a small text body ("Found.
  Redirecting to ...") like the Hub's: their Content-Length is not the file's.
- The CDN answers like a presigned S3 URL: ETag is the MD5 of the content (not
  the sha256), errors are S3 XML, and a request carrying Authorization is
  refused (400 InvalidArgument "Only one auth mechanism allowed"). CloudFront
  would merely ignore that header: the refusal is a deliberate tightening that
  catches a client forwarding the Hub token to another host. No X-Cache
  header is sent (hf.js would then fetch the CDN URL directly, with its token).
- No Xet: large files are plain LFS. No signature/expiry on CDN URLs.
- LFS files: the Hub's default .gitattributes patterns (+ .gguf), or > 10 MiB.
  An LFS entry's top-level "oid" is the git blob id of its pointer file, as on
  the Hub; directory oids are real git tree ids.
- Tree order is git's (ls-tree -r -t): a directory, then its contents.
- "HEAD" as a revision means main. refs/pr/N and refs/convert/X may be sent
  with or without percent-encoding of their slashes.
- Range: a single range (a-b, a-, -n); several ranges or bad syntax are
  ignored (200), as RFC 9110 allows; an unsatisfiable one is 416 with
  Content-Range "bytes */N" (as the Hub answers), so any Range on an empty
  file is 416 (hf.js's bytes=0-0 probe then fails: keep empty files out of
  repositories meant for it).
"""
import argparse, base64, fnmatch, hashlib, json, os, re, signal, socket
import threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_PATTERNS = ["*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5",
                "*.joblib", "*.lfs.*", "*.mlmodel", "*.model", "*.msgpack", "*.npy",
                "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb", "*.pickle", "*.pkl",
                "*.pt", "*.pth", "*.rar", "*.safetensors", "*.tar.*", "*.tar", "*.tflite",
                "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*", "*.gguf"]
LFS_MIN_SIZE = 10 * 1024 * 1024
DEFAULT_DATE = "2026-10-05T00:00:00.000Z"
BODY_FAULTS = ("cut", "corrupt", "trickle", "ignore_range")
OTHER_FAULTS = ("status", "drop", "headers", "endless")


def git_order(children):
    """A directory's (name, kind) entries in git's tree order (a dir sorts as "name/")."""
    return sorted(children.items(), key=lambda kv: kv[0] + ("/" if kv[1] == "dir" else ""))


def git_oid(kind, data):
    return hashlib.sha1(b"%s %d\0" % (kind, len(data)) + data).hexdigest()


class Blob:
    """One file content; shared by every path and revision holding it."""
    def __init__(self, data, sha256):
        self.data, self.size, self.sha256 = data, len(data), sha256
        self.git = git_oid(b"blob", data)
        self.md5 = hashlib.md5(data).hexdigest()
        self.pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                        % (self.sha256, self.size)).encode()


class Revision:
    def __init__(self, cfg, blobs, index):
        self.commit = cfg["commit"].lower()
        if not re.fullmatch(r"[0-9a-f]{40}", self.commit):
            raise SystemExit("fake_hub: bad commit %r" % cfg["commit"])
        self.refs = list(cfg.get("refs", []))
        self.date = cfg.get("date", DEFAULT_DATE)
        self.title = cfg.get("title", "Revision %d" % (index + 1))
        self.files = {}  # path -> (Blob, is_lfs)
        root = cfg["dir"]
        if not os.path.isdir(root):
            raise SystemExit("fake_hub: revision dir %r is not a directory" % root)
        for d, subdirs, names in os.walk(root, followlinks=True):
            subdirs.sort()
            for n in sorted(names):
                full = os.path.join(d, n)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                with open(full, "rb") as f:
                    data = f.read()
                h = hashlib.sha256(data).hexdigest()
                blob = blobs.get(h) or blobs.setdefault(h, Blob(data, h))
                lfs = blob.size > LFS_MIN_SIZE or any(fnmatch.fnmatch(n, p) for p in LFS_PATTERNS)
                self.files[rel] = (blob, lfs)
        self._build_tree()

    def _build_tree(self):
        # children[dir] = {name: ("file"|"dir")}; dir "" is the root
        self.children = {"": {}}
        for p in self.files:
            parts = p.split("/")
            for i in range(len(parts) - 1):
                parent, d = "/".join(parts[:i]), "/".join(parts[:i + 1])
                self.children.setdefault(parent, {})[parts[i]] = "dir"
                self.children.setdefault(d, {})
            self.children["/".join(parts[:-1])][parts[-1]] = "file"
        self.oids = {p: (b.git if not lfs else git_oid(b"blob", b.pointer))
                     for p, (b, lfs) in self.files.items()}

        def tree_oid(d):  # hashes git's tree object, as `git write-tree` would
            raw = b""
            for name, kind in git_order(self.children[d]):
                p = d + "/" + name if d else name
                if kind == "dir":
                    self.oids[p] = tree_oid(p)
                    raw += b"40000 " + name.encode() + b"\0" + bytes.fromhex(self.oids[p])
                else:
                    raw += b"100644 " + name.encode() + b"\0" + bytes.fromhex(self.oids[p])
            return git_oid(b"tree", raw)
        tree_oid("")  # fills self.oids for every directory

    def listing(self, d, recursive):
        """Paths under directory d in git ls-tree -r -t order."""
        out = []
        for name, kind in git_order(self.children[d]):
            p = d + "/" + name if d else name
            out.append(p)
            if kind == "dir" and recursive:
                out.extend(self.listing(p, True))
        return out


class Repo:
    def __init__(self, cfg, blobs):
        self.id = cfg["id"]
        g = cfg.get("gated", False)
        self.gated = "manual" if g is True else (g or False)
        self.private = bool(cfg.get("private", False))
        self.renamed_from = cfg.get("renamed_from")
        # an older Hub: "no_tree" has no tree listing (404 without X-Error-Code, an
        # unknown route); "bare" also ignores blobs=true (siblings are names only)
        self.old_api = cfg.get("old_api")
        self.extra = {k: cfg[k] for k in ("library_name", "tags", "pipeline_tag") if k in cfg}
        self.extra_entries = list(cfg.get("extra_entries", []))
        self.revisions = [Revision(r, blobs, i) for i, r in enumerate(cfg["revisions"])]
        self.by_name = {}
        for r in self.revisions:
            self.by_name[r.commit] = r
            for ref in r.refs:
                self.by_name[ref] = r

    def resolve(self, rev):
        return self.by_name.get("main" if rev == "HEAD" else rev)

    def last_commit(self, rev, path):
        i = self.revisions.index(rev)
        oid = rev.oids[path]
        while i > 0 and self.revisions[i - 1].oids.get(path) == oid:
            i -= 1
        c = self.revisions[i]
        return {"id": c.commit, "title": c.title, "date": c.date}


class HubState:
    def __init__(self, cfg, log_path):
        self.blobs = {}
        self.repos = {}
        self.renamed = {}
        for rc in cfg.get("repos", []):
            repo = Repo(rc, self.blobs)
            self.repos[repo.id] = repo
            if repo.renamed_from:
                self.renamed[repo.renamed_from] = repo.id
        self.tokens = {t: set(ids) for t, ids in cfg.get("tokens", {}).items()}
        self.page_size = int(cfg.get("page_size", 1000))
        self.resolve_cache = bool(cfg.get("resolve_cache", False))
        self.path_prefix = cfg.get("path_prefix", "")
        self.sizes = dict(cfg.get("sizes", {}))
        self.lock = threading.Lock()
        self.log = []
        self.log_file = open(log_path, "a", encoding="utf-8") if log_path else None
        self.set_faults(cfg.get("faults", []))
        self.cdn_base = self.hub_base = None

    def set_faults(self, faults):
        if not isinstance(faults, list):
            raise ValueError("faults must be a JSON list")
        new = []
        for f in faults:
            if f.get("kind") not in OTHER_FAULTS + BODY_FAULTS:
                raise ValueError("unknown fault kind %r" % f.get("kind"))
            f = dict(f)
            f["_re"] = re.compile(f.get("match", ""))
            f["_left"] = int(f.get("times", 1))
            new.append(f)
        with self.lock:
            self.faults = new

    def take_faults(self, server, method, path, kinds, accept=lambda f: True):
        """Consume and return the live faults of `kinds` matching this request."""
        got = []
        with self.lock:
            for f in self.faults:
                if (f["kind"] in kinds and f["_left"] != 0 and f["_re"].search(path)
                        and f.get("method", method).upper() == method
                        and f.get("server", server) == server and accept(f)):
                    if f["_left"] > 0:
                        f["_left"] -= 1
                    got.append(f)
        return got

    def record(self, entry):
        with self.lock:
            self.log.append(entry)
            if self.log_file:
                self.log_file.write(json.dumps(entry) + "\n")
                self.log_file.flush()


def parse_range(header, size):
    """None: serve everything; "416": unsatisfiable; else (start, end_exclusive)."""
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header or "")
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None
    a, b = m.group(1), m.group(2)
    if a == "":  # suffix: the last b bytes
        n = int(b)
        return "416" if n == 0 or size == 0 else (max(0, size - n), size)
    a = int(a)
    if b != "" and int(b) < a:
        return None
    if a >= size:
        return "416"
    return (a, size if b == "" else min(int(b) + 1, size))


class HttpError(Exception):
    def __init__(self, status, message, code=None, headers=None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
        self.headers = headers or {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer has a Content-Length
    state = None   # HubState, set on the subclass per listener
    role = None    # "hub" or "cdn"

    def version_string(self):
        return "fake-hub"

    def log_message(self, *args):
        pass  # the JSON request log replaces the stderr access log

    # ---- plumbing ---------------------------------------------------------
    def handle_one_request(self):
        self._status, self._sent, self._logged = None, 0, False
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError):
            self.close_connection = True  # a client gone between requests is no error

    def do_GET(self):
        self.dispatch()

    def do_HEAD(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def dispatch(self):
        self._t = time.time()
        n = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(n) if n > 0 else b""  # always drained: keep-alive
        pp = self.state.path_prefix
        self.prefix = pp if self.role == "hub" and pp and self.path.startswith(pp + "/") else ""
        self.path = self.path[len(self.prefix):]
        url = urlsplit(self.path)
        self.query = parse_qs(url.query, keep_blank_values=True)
        self.segs = url.path.split("/")[1:]
        if self.role == "hub" and url.path.startswith("/_control/"):
            return self.control(url.path)
        st = self.state
        try:
            for f in st.take_faults(self.role, self.command, self.path, ("drop", "status")):
                if f["kind"] == "drop":
                    return self.abort()
                hdr = {"Retry-After": str(f["retry_after"])} if "retry_after" in f else {}
                hdr.update(f.get("headers", {}))
                raise HttpError(int(f.get("code", 500)), f.get("error", "Injected fault"),
                                hdr.pop("X-Error-Code", None), headers=hdr)
            if self.command == "GET":
                for f in st.take_faults(self.role, self.command, self.path, ("endless",)):
                    return self.endless(f)
            if self.role == "cdn":
                self.route_cdn()
            else:
                self.route_hub()
        except HttpError as e:
            self.error(e)
        except ConnectionError:  # client went away mid-answer (killed, timed out)
            self.close_connection = True
        finally:
            self.write_log()

    def write_log(self):
        if self._logged:
            return
        self._logged = True
        self.state.record({"t": round(self._t, 6), "server": self.role, "method": self.command,
                           "path": self.path, "range": self.headers.get("Range"),
                           "auth": "Authorization" in self.headers,
                           "status": self._status, "bytes": self._sent})

    def abort(self):
        """Drop the connection (FIN): the client sees EOF where it awaited bytes."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def reply(self, status, headers, body=b"", ctype="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self._status = status
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Request-Id", "Root=1-" + uuid.uuid4().hex[:24])
        if getattr(self, "prefix", "") and headers.get("Location", "").startswith("/"):
            headers = dict(headers, Location=self.prefix + headers["Location"])
        headers = self.overridden(headers)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            self._sent = len(body)

    def overridden(self, headers):
        """headers, with those of the matching "headers" faults set over them."""
        headers = dict(headers)
        for f in self.state.take_faults(self.role, self.command, self.path, ("headers",)):
            for k, v in f.get("headers", {}).items():
                for old in [x for x in headers if x.lower() == k.lower()]:
                    del headers[old]
                headers[k] = v
        return headers

    def endless(self, f):
        """200, no Content-Length, the real start and then filler without end."""
        self.close_connection = True
        self.send_response(200)
        self._status = 200
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        start = b"["
        if self.role == "cdn":
            m = re.fullmatch(r"lfs/([0-9a-f]{64})", "/".join(self.segs))
            blob = self.state.blobs.get(m.group(1)) if m else None
            start = blob.data if blob else b""
        filler = (f.get("filler", "\0").encode() * 65536)[:65536]
        try:
            self.wfile.write(start)
            self._sent = len(start)
            while self._sent < 4 << 30:
                self.wfile.write(filler)
                self._sent += len(filler)
        except OSError:
            pass

    def error(self, e):
        if self.role == "cdn":
            xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                   "<Message>%s</Message></Error>" % (e.code or "Error", e.message))
            return self.reply(e.status, e.headers, xml, "application/xml")
        h = dict(e.headers)
        if e.code:
            h["X-Error-Code"] = e.code
        h["X-Error-Message"] = e.message
        self.reply(e.status, h, {"error": e.message})

    def control(self, path):
        st = self.state
        self._logged = True  # control traffic stays out of the request log
        try:
            if path == "/_control/faults" and self.command == "POST":
                st.set_faults(json.loads(self.body or b"[]"))
                return self.reply(200, {}, {"ok": True, "faults": len(st.faults)})
            if path == "/_control/reset" and self.command == "POST":
                st.set_faults([])
                with st.lock:
                    st.log.clear()
                return self.reply(200, {}, {"ok": True})
            if path == "/_control/sizes" and self.command == "POST":
                sizes = json.loads(self.body or b"{}")
                if not isinstance(sizes, dict):
                    raise ValueError("sizes must be a JSON object")
                with st.lock:
                    st.sizes = sizes
                return self.reply(200, {}, {"ok": True})
            if path == "/_control/log" and self.command == "GET":
                with st.lock:
                    log = list(st.log)
                return self.reply(200, {}, log)
            self.reply(404, {}, {"error": "unknown control endpoint"})
        except (ValueError, re.error, TypeError, AttributeError) as e:
            self.reply(400, {}, {"error": str(e)})

    # ---- file content (shared by resolve, resolve-cache and the CDN) ------
    def send_file(self, blob, etag, ctype, extra):
        st, size = self.state, blob.size
        is_get = self.command == "GET"
        take = lambda kinds, ok: st.take_faults(self.role, self.command, self.path, kinds,
                                                lambda f: is_get and ok(f))
        rng = parse_range(self.headers.get("Range"), size) if is_get else None
        if rng and take(("ignore_range",), lambda f: True):
            rng = None
        h = dict(extra)
        h.update({"ETag": etag, "Accept-Ranges": "bytes"})
        if rng == "416":
            h["Content-Range"] = "bytes */%d" % size
            return self.reply(416, h, b"", ctype)
        start, end = rng or (0, size)
        if rng:
            h["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, size)
        status = 206 if rng else 200
        # consumed only where they bite: a cut shorter than the body, an offset sent
        kinds = {f["kind"]: f for f in take(("cut", "trickle"), lambda f: f["kind"] == "trickle"
                                            or int(f.get("after", 0)) < end - start)}
        corrupt = take(("corrupt",), lambda f: start <= int(f.get("offset", 0)) < end)
        self.send_response(status)
        self._status = status
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(end - start))
        for k, v in self.overridden(h).items():
            self.send_header(k, v)
        self.end_headers()
        if not is_get:
            return
        body = blob.data[start:end]
        if corrupt:
            body = bytearray(body)
            for f in corrupt:
                body[int(f["offset"]) - start] ^= 0xFF
        limit = min(len(body), int(kinds["cut"].get("after", 0))) if "cut" in kinds else len(body)
        rate = int(kinds["trickle"].get("rate", 1024)) if "trickle" in kinds else 0
        chunk = max(1, rate // 10) if rate else 1 << 20
        pos = 0
        while pos < limit:
            n = min(chunk, limit - pos)
            self.wfile.write(body[pos:pos + n])
            pos += n
            self._sent = pos
            if rate:
                time.sleep(n / rate)
        if "cut" in kinds:
            self.abort()

    # ---- CDN --------------------------------------------------------------
    def route_cdn(self):
        if self.command not in ("GET", "HEAD"):
            raise HttpError(405, "The specified method is not allowed", "MethodNotAllowed")
        if "Authorization" in self.headers:
            # what a presigned S3 URL says when a client forwards its Hub token
            raise HttpError(400, "Only one auth mechanism allowed; only the X-Amz-Algorithm "
                            "query parameter, Signature query string parameter or the "
                            "Authorization header should be specified", "InvalidArgument")
        m = re.fullmatch(r"lfs/([0-9a-f]{64})", "/".join(self.segs))
        blob = self.state.blobs.get(m.group(1)) if m else None
        if blob is None:
            raise HttpError(404, "The specified key does not exist.", "NoSuchKey")
        name = os.path.basename(self.query.get("file", [m.group(1)])[0])
        self.send_file(blob, '"%s"' % blob.md5, "application/octet-stream", {
            "Content-Disposition": "inline; filename*=UTF-8''%s; filename=\"%s\";"
                                   % (quote(name), name.replace('"', ""))})

    # ---- Hub --------------------------------------------------------------
    def token(self):
        """The caller's token (None if anonymous); an unknown one is refused."""
        auth = self.headers.get("Authorization")
        if auth is None:
            return None
        tok = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if tok not in self.state.tokens:
            raise HttpError(401, "Invalid credentials in Authorization header")
        return tok

    def repo(self, repo_id, content):
        """The repo, if this caller may see it (content=True: its file bytes)."""
        st = self.state
        tok = self.token()
        allowed = tok is not None and repo_id in st.tokens[tok]
        repo = st.repos.get(repo_id)
        if repo is None or (repo.private and not allowed):
            raise HttpError(404 if tok else 401, "Repository not found", "RepoNotFound")
        if repo.gated and content and not allowed:
            if tok is None:
                raise HttpError(401, "Access to model %s is restricted. You must have access to it "
                                "and be authenticated to access it. Please log in." % repo_id, "GatedRepo")
            raise HttpError(403, "Access to model %s is restricted and you are not in the "
                            "authorized list. Visit %s/%s to ask for access."
                            % (repo_id, self.base(), repo_id), "GatedRepo")
        return repo

    def base(self):
        return "http://" + self.headers.get("Host", self.state.hub_base[7:]) + getattr(self, "prefix", "")

    def redirect_if_renamed(self, repo_id, prefix_segs):
        new = self.state.renamed.get(repo_id)
        if new is None or new == repo_id:
            return False
        # same path (and query) with the new id, relative (no scheme/host), as the Hub does
        old = "/" + "/".join(self.segs[:prefix_segs + 2])
        head = "/".join(self.segs[:prefix_segs])
        loc = "/" + (head + "/" if head else "") + new + self.path[len(old):]
        self.reply(307, {"Location": loc}, "Temporary Redirect. Redirecting to " + loc,
                   "text/plain; charset=utf-8")
        return True

    @staticmethod
    def take_rev(segs, i):
        """(revision, next index): refs/pr/N may arrive with raw slashes."""
        if i >= len(segs):
            raise HttpError(404, "Not Found")
        if unquote(segs[i]) == "refs" and i + 2 < len(segs) and segs[i + 1] in ("pr", "convert"):
            return "refs/%s/%s" % (segs[i + 1], unquote(segs[i + 2])), i + 3
        return unquote(segs[i]), i + 1

    def revision(self, repo, rev):
        r = repo.resolve(rev)
        if r is None:
            raise HttpError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
        return r

    def route_hub(self):
        s, m = self.segs, self.command
        if len(s) >= 4 and s[0] == "api" and s[1] == "models":
            repo_id = unquote(s[2]) + "/" + unquote(s[3])
            if self.redirect_if_renamed(repo_id, 2):
                return
            op = s[4] if len(s) > 4 else ""
            if op in ("", "revision") and m in ("GET", "HEAD"):
                repo = self.repo(repo_id, False)
                rev, _ = self.take_rev(s, 5) if op else ("main", 0)
                return self.reply(200, {}, self.model_info(repo, self.revision(repo, rev)))
            if op == "tree" and m in ("GET", "HEAD"):
                repo = self.repo(repo_id, False)
                if repo.old_api:
                    raise HttpError(404, "Not Found")
                return self.tree(repo, s)
            if op == "paths-info" and m == "POST":
                return self.paths_info(self.repo(repo_id, False), s)
        elif len(s) >= 5 and s[:3] == ["api", "resolve-cache", "models"] and m in ("GET", "HEAD"):
            repo = self.repo(unquote(s[3]) + "/" + unquote(s[4]), True)
            return self.resolve(repo, s, 5, cached=True)
        elif len(s) >= 5 and s[2] == "resolve" and m in ("GET", "HEAD"):
            repo_id = unquote(s[0]) + "/" + unquote(s[1])
            if self.redirect_if_renamed(repo_id, 0):
                return
            return self.resolve(self.repo(repo_id, True), s, 3, cached=False)
        raise HttpError(404, "Not Found")

    def claimed_size(self, repo, path, blob):
        return self.state.sizes.get(repo.id, {}).get(path, blob.size)

    def entry(self, repo, rev, path, expand):
        if path in rev.files:
            blob, lfs = rev.files[path]
            size = self.claimed_size(repo, path, blob)
            e = {"type": "file", "oid": rev.oids[path], "size": size}
            if lfs:
                e["lfs"] = {"oid": blob.sha256, "size": size, "pointerSize": len(blob.pointer)}
        else:
            e = {"type": "directory", "oid": rev.oids[path], "size": 0}
        e["path"] = path
        if expand:
            e["lastCommit"] = repo.last_commit(rev, path)
            if e["type"] == "file":
                e["securityFileStatus"] = {"status": "safe"}
        return e

    def model_info(self, repo, rev):
        blobs = self.query.get("blobs", ["false"])[-1].lower() in ("1", "true") and repo.old_api != "bare"
        siblings = []
        for p in rev.listing("", True):
            if p in rev.files:
                sib = {"rfilename": p}
                if blobs:
                    blob, lfs = rev.files[p]
                    size = self.claimed_size(repo, p, blob)
                    sib.update({"blobId": rev.oids[p], "size": size})
                    if lfs:
                        sib["lfs"] = {"sha256": blob.sha256, "size": size,
                                      "pointerSize": len(blob.pointer)}
                siblings.append(sib)
        for e in repo.extra_entries:
            sib = {"rfilename": e.get("path")}
            if blobs:
                sib.update({"blobId": e.get("oid"), "size": e.get("size")})
                if "lfs" in e:
                    sib["lfs"] = {"sha256": e["lfs"].get("oid"), "size": e["lfs"].get("size")}
            siblings.append(sib)
        info = {"_id": hashlib.md5(repo.id.encode()).hexdigest()[:24], "id": repo.id,
                "modelId": repo.id, "author": repo.id.split("/")[0], "sha": rev.commit,
                "lastModified": rev.date, "private": repo.private, "gated": repo.gated,
                "disabled": False, "downloads": 0, "likes": 0,
                "tags": repo.extra.get("tags", []),
                "library_name": repo.extra.get("library_name", "transformers"),
                "siblings": siblings, "spaces": [],
                "createdAt": repo.revisions[0].date,
                "usedStorage": sum(b.size for b, _ in rev.files.values())}
        if repo.extra.get("pipeline_tag"):
            info["pipeline_tag"] = repo.extra["pipeline_tag"]
        expand = self.query.get("expand", []) + self.query.get("expand[]", [])
        if expand:  # the Hub then answers only the keys asked for
            info = {k: v for k, v in info.items() if k in ("_id", "id") or k in expand}
        return info

    def tree(self, repo, s):
        rev_name, i = self.take_rev(s, 5)
        rev = self.revision(repo, rev_name)
        d = unquote("/".join(s[i:])).strip("/")
        if d and d not in rev.children:
            raise HttpError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": rev.commit})
        q = self.query
        recursive = q.get("recursive", ["false"])[-1].lower() in ("1", "true")
        expand = q.get("expand", ["false"])[-1].lower() in ("1", "true")
        limit = self.state.page_size
        if q.get("limit", [""])[-1].isdigit():
            limit = max(1, min(limit, int(q["limit"][-1])))
        paths = rev.listing(d, recursive)
        start = 0
        if "cursor" in q:
            try:
                start = int(json.loads(base64.urlsafe_b64decode(q["cursor"][-1]))["offset"])
            except (ValueError, KeyError, TypeError):
                raise HttpError(400, "Invalid cursor")
        page = paths[start:start + limit]
        headers = {}
        if start + limit < len(paths):
            cursor = base64.urlsafe_b64encode(json.dumps({"offset": start + limit}).encode()).decode()
            url = "%s/api/models/%s/tree/%s%s?recursive=%s&expand=%s&limit=%d&cursor=%s" % (
                self.base(), repo.id, quote(rev_name, safe=""), "/" + quote(d) if d else "",
                str(recursive).lower(), str(expand).lower(), limit, quote(cursor))
            headers["Link"] = '<%s>; rel="next"' % url
        entries = [self.entry(repo, rev, p, expand) for p in page]
        if start + limit >= len(paths):  # the last page: the hostile entries
            entries += repo.extra_entries
        self.reply(200, headers, entries)

    def paths_info(self, repo, s):
        rev = self.revision(repo, self.take_rev(s, 5)[0])
        if (self.headers.get("Content-Type") or "").startswith("application/json"):
            try:
                body = json.loads(self.body or b"{}")
            except ValueError:
                raise HttpError(400, "Invalid JSON body")
            paths, expand = body.get("paths", []), body.get("expand", False)
        else:  # huggingface_hub sends a form: paths=a&paths=b&expand=false
            form = parse_qs(self.body.decode("utf-8", "replace"), keep_blank_values=True)
            paths, expand = form.get("paths", []), form.get("expand", ["false"])[-1]
        if isinstance(paths, str):
            paths = [paths]
        expand = expand is True or str(expand).lower() in ("1", "true")
        out, seen = [], set()
        for p in paths:
            p = str(p).strip("/")
            if p and p not in seen and p in rev.oids:
                seen.add(p)
                out.append(self.entry(repo, rev, p, expand))
        self.reply(200, {}, out)

    def resolve(self, repo, s, i, cached):
        rev_name, i = (unquote(s[i]), i + 1) if cached else self.take_rev(s, i)
        rev = self.revision(repo, rev_name)
        path = unquote("/".join(s[i:]))
        commit = {"X-Repo-Commit": rev.commit}
        if path not in rev.files:
            raise HttpError(404, "Entry not found", "EntryNotFound", commit)
        blob, lfs = rev.files[path]
        if lfs and not cached:
            loc = "%s/lfs/%s?repo=%s&file=%s" % (self.state.cdn_base, blob.sha256,
                                                  quote(repo.id, safe=""), quote(path, safe=""))
            h = dict(commit, Location=loc)
            h.update({"X-Linked-Etag": '"%s"' % blob.sha256,
                      "X-Linked-Size": str(self.claimed_size(repo, path, blob)),
                      "ETag": '"%s"' % blob.sha256, "Accept-Ranges": "bytes"})
            return self.reply(302, h, "Found. Redirecting to " + loc, "text/plain; charset=utf-8")
        if self.state.resolve_cache and not cached:
            loc = "/api/resolve-cache/models/%s/%s/%s?etag=%s" % (
                repo.id, rev.commit, quote(path), quote('"%s"' % blob.git))
            h = dict(commit, Location=loc)
            h.update({"X-Linked-Etag": '"%s"' % blob.git, "X-Linked-Size": str(blob.size)})
            return self.reply(307, h, "Temporary Redirect. Redirecting to " + loc,
                              "text/plain; charset=utf-8")
        ctype = "application/json" if path.endswith(".json") else "text/plain; charset=utf-8"
        self.send_file(blob, '"%s"' % blob.git, ctype, commit)


def main():
    ap = argparse.ArgumentParser(
        prog="fake_hub.py", description="Local stand-in for the Hugging Face Hub (and its CDN) "
        "serving the repositories of a JSON config, with fault injection.",
        epilog="See the header of this file for the config format, endpoints and faults.")
    ap.add_argument("--config", required=True, help="JSON config: repos, tokens, page_size, faults")
    ap.add_argument("--port-file", required=True, help='written once listening: {"hub": URL, "cdn": URL}')
    ap.add_argument("--log", help="append every request as a JSON line to this file")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="Hub port (default 0: any free one)")
    ap.add_argument("--cdn-port", type=int, default=0, help="CDN port (default 0: any free one)")
    args = ap.parse_args()

    with open(args.config, encoding="utf-8") as f:
        state = HubState(json.load(f), args.log)
    servers = {}
    for role, port in (("hub", args.port), ("cdn", args.cdn_port)):
        cls = type(role.capitalize() + "Handler", (Handler,), {"state": state, "role": role})
        srv = ThreadingHTTPServer((args.host, port), cls)
        srv.daemon_threads = True
        servers[role] = srv
    shown = "127.0.0.1" if args.host in ("", "0.0.0.0") else args.host
    urls = {r: "http://%s:%d" % (shown, s.server_address[1]) for r, s in servers.items()}
    state.hub_base, state.cdn_base = urls["hub"], urls["cdn"]
    for srv in servers.values():
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the port file: a test may stop us at once
        signal.signal(sig, lambda *_: stop.set())
    tmp = args.port_file + ".tmp%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(urls, f)
    os.replace(tmp, args.port_file)
    while not stop.wait(3600):
        pass
    for srv in servers.values():
        srv.shutdown()
        srv.server_close()


if __name__ == "__main__":
    main()
