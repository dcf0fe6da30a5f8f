"""The HTTP layer under attack (issue 15, defects 2-6), over raw sockets on
127.0.0.1. Each case is one of the measured defects of the libmicrohttpd
layer and fails against it; every wait is bounded (a few seconds).

Oracles: the bodies of spec 02 (§1.2 every body is JSON, §10 404/413 texts),
RFC 9112 framing rules (one response per request, conflicting Content-Length
is an error), the kernel's own socket table (/proc/net/tcp: CLOSE-WAIT
sockets of the server's port), and the answer `basal serve` gives to the
same request on a plain connection."""
import json
import os
import re
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(__file__))
from srvlib import SLOW, Checks, Server, fixture, metric_sum, strip_latency

C = Checks()
SO, BA = "/v1/systemone", "/v1/basal"
MODEL = "basal-tiny"
LIMIT = 16777216
STATE = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot. " * 4


def connect(port, src="127.0.0.1", timeout=5.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout * SLOW)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def read_all(s, limit_s):
    """Everything until the server closes or limit_s passes: (bytes, closed)."""
    out = b""
    end = time.time() + limit_s * SLOW
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            return out, True
        if not chunk:
            return out, True
        out += chunk
    return out, False


def split_responses(raw):
    """The responses in raw: [(status, {header: value}, body)], interim 1xx
    included; a response without Content-Length takes the rest."""
    res = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            res.append((None, {}, raw))
            break
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            res.append((None, {}, raw))
            break
        h = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            h[k.strip().lower()] = v.strip()
        if 100 <= status < 200:
            res.append((status, h, b""))
            raw = rest
            continue
        n = int(h["content-length"]) if "content-length" in h else len(rest)
        res.append((status, h, rest[:n]))
        raw = rest[n:]
    return res


def final(responses):
    f = [r for r in responses if r[0] is None or r[0] >= 200]
    return f


def exchange(port, data, limit_s=3.0, half_close=False, src="127.0.0.1"):
    s = connect(port, src)
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        raw, closed = read_all(s, limit_s)
        return raw, closed
    finally:
        s.close()


def json_error(what, raw, status, dialect=SO, exact=None):
    """One final response with this status, a JSON body of the dialect's
    error shape (or exactly `exact`)."""
    fr = final(split_responses(raw))
    C.eq(len(fr), 1, f"{what}: exactly one response (one header block)")
    if not fr:
        return
    st, h, body = fr[0]
    C.eq(st, status, f"{what}: status")
    C.eq(h.get("content-type"), "application/json", f"{what}: content-type")
    try:
        v = json.loads(body)
    except ValueError:
        C.ok(False, f"{what}: body is JSON ({body[:120]!r})")
        return
    if exact is not None:
        C.eq(body.decode(), exact, f"{what}: body")
    elif dialect == SO:
        C.ok(isinstance(v, dict) and list(v) == ["detail"] and isinstance(v["detail"], dict)
             and list(v["detail"]) == ["error_type", "message"]
             and all(isinstance(x, str) and x for x in v["detail"].values()),
             f"{what}: /v1/systemone error shape ({body!r})")
    else:
        C.ok(isinstance(v, dict) and list(v) == ["error"] and isinstance(v["error"], str) and v["error"],
             f"{what}: /v1/basal error shape ({body!r})")


def post_bytes(path, body, extra=""):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: {len(body)}\r\n\r\n").encode() + body


def decision(tag, n=40):
    qs = {f"q{i}": {"type": "noul", "instructions": f"{tag} {i}: czy klient prosi o zwrot pieniędzy? " * 3}
          for i in range(n)}
    return json.dumps({"model": MODEL, "state": STATE, "questions": qs}, ensure_ascii=False).encode()


def close_wait_count(port):
    """CLOSE-WAIT sockets (state 08) whose local port is the server's."""
    n = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    p = line.split()
                    if p[3] == "08" and int(p[1].rsplit(":", 1)[1], 16) == port:
                        n += 1
        except OSError:
            pass
    return n


# ---- defect 2: CLOSE-WAIT ----

def test_close_wait(srv):
    socks = []
    for i in range(200):
        s = connect(srv.port)
        # data and FIN together, the header block unfinished
        s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Le")
        s.shutdown(socket.SHUT_WR)
        socks.append(s)
    deadline = time.time() + 3 * SLOW
    n = close_wait_count(srv.port)
    while n and time.time() < deadline:
        time.sleep(0.05)
        n = close_wait_count(srv.port)
    C.eq(n, 0, "incomplete requests followed by FIN leave no CLOSE-WAIT socket after 3 s")
    closed = 0
    for s in socks:
        _, c = read_all(s, 0.01)
        closed += c
        s.close()
    C.eq(closed, 200, "and every such connection was closed by the server")


def test_close_wait_inflight(port):
    """--max-inflight 1 (so at most 1,025 connections on the old layer):
    1,100 clients send an incomplete request, 50 a complete one, with FIN
    and go; the server must stay reachable and keep no CLOSE-WAIT socket."""
    body = decision("cw", 4)
    sent = 0
    for i in range(1150):
        s = socket.socket()
        try:
            s.settimeout(5 * SLOW)
            s.connect(("127.0.0.1", port))
            s.sendall(post_bytes(SO, body) if i >= 1100 else b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Le")
            s.shutdown(socket.SHUT_WR)
            sent += 1
        except OSError:
            pass  # a full accept queue may refuse or reset some
        s.close()
    C.ok(sent >= 1100, f"the attack reached the server ({sent} of 1150 sent)")
    t0 = time.time()
    ok = None
    while time.time() - t0 < 10 * SLOW:
        try:
            s = connect(port, timeout=2)
            s.sendall(post_bytes(SO, body))
            raw, _ = read_all_until_response(s, 2)
            s.close()
            fr = final(split_responses(raw))
            if fr and fr[0][0] == 200:
                ok = time.time() - t0
                break
        except OSError:
            pass
        time.sleep(0.1)
    C.ok(ok is not None and ok < 5 * SLOW, f"1,100 requests+FIN under --max-inflight 1: a normal request is answered "
                                           f"200 within 5 s (after {ok})")
    deadline = time.time() + 3 * SLOW
    while close_wait_count(port) and time.time() < deadline:
        time.sleep(0.05)
    C.eq(close_wait_count(port), 0, "no CLOSE-WAIT socket left behind")


def read_all_until_response(s, limit_s):
    """Reads until one final response is complete (keep-alive safe)."""
    out = b""
    end = time.time() + limit_s * SLOW
    while time.time() < end:
        fr = final(split_responses(out))
        if fr and fr[0][0] is not None:
            st, h, b = fr[0]
            if "content-length" not in h or len(b) >= int(h["content-length"]):
                return out, False
        s.settimeout(max(0.01, end - time.time()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            return out, True
        out += chunk
    return out, False


# ---- defect 3: slowloris ----

def test_header_deadline(port):
    s = connect(port)
    t0 = time.time()
    s.sendall(b"GET /health HTTP/1.1\r\n")
    raw = b""
    closed = False
    while time.time() - t0 < 4 * SLOW and not closed:
        try:
            s.sendall(b"X-Slow: 1\r\n")
        except OSError:
            break
        got, closed = read_all(s, 0.3)
        raw += got
    el = time.time() - t0
    s.close()
    json_error("header block trickling past --header-timeout 1", raw, 408)
    C.ok(el < 3 * SLOW, f"... answered and closed within 3 s ({el:.1f} s)")


def test_body_deadline(port):
    for path in (SO, BA):
        s = connect(port)
        t0 = time.time()
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{\"model\"".encode())
        raw, closed = read_all(s, 4)
        el = time.time() - t0
        s.close()
        json_error(f"Content-Length larger than the body on {path} (--body-timeout 1)", raw, 408, path)
        C.ok(closed and el < 3 * SLOW, f"... answered and closed within 3 s ({el:.1f} s, closed {closed})")


def test_client_limit(port):
    """--max-client-connections 4: a fifth connection from 127.0.0.2 gets a
    503 JSON; 127.0.0.1 is still served."""
    held = [connect(port, "127.0.0.2") for _ in range(4)]
    for s in held:
        s.sendall(b"GET /health HTTP/1.1\r\n")  # trickling, never finished
    time.sleep(0.1)
    raw, _ = exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 2, src="127.0.0.2")
    fr = final(split_responses(raw))
    C.eq(fr[0][0] if fr else None, 503, "fifth connection from one address: 503")
    if fr:
        json_error("fifth connection from one address", raw, 503)
        C.eq(fr[0][1].get("retry-after"), "1", "... with Retry-After: 1")
    raw, _ = exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 2)
    fr = final(split_responses(raw))
    C.eq(fr[0][0] if fr else None, 200, "another address is still served during the flood")
    for s in held:
        s.close()


def test_global_limit(port):
    """--max-connections 6: six trickling connections from six addresses take
    every slot; a newcomer from 127.0.0.1 is still answered (the connection
    that waited longest for its header block makes room), and the evicted one
    is closed."""
    held = []
    for i in range(6):
        s = connect(port, f"127.0.0.{10 + i}")
        s.sendall(b"GET /health HTTP/1.1\r\n")
        held.append(s)
        time.sleep(0.02)
    raw, _ = exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 2)
    fr = final(split_responses(raw))
    C.eq(fr[0][0] if fr else None, 200, "all connections taken by slow senders: a newcomer is answered 200")
    _, closed = read_all(held[0], 1)
    C.ok(closed, "the connection that waited longest was closed to make room")
    _, closed = read_all(held[-1], 0.2)
    C.ok(not closed, "the newest slow connection is kept")
    for s in held:
        s.close()


# ---- defect 4: half-close ----

def test_half_close(srv):
    n = 6
    bodies = [decision(f"half{i}") for i in range(n)]
    ref = [srv.post(SO, json.loads(b)) for b in bodies[:2]]
    C.ok(all(r[0] == 200 for r in ref), "reference answers on plain connections")
    base = metric_sum(srv.metrics(), "basal_http_requests_total", status="cancelled")
    res = [None] * n

    def go(i):
        res[i] = exchange(srv.port, post_bytes(SO, bodies[i]), 60, half_close=True)
    ths = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    for i, (raw, closed) in enumerate(res):
        fr = final(split_responses(raw))
        C.ok(len(fr) == 1 and fr[0][0] == 200, f"half-closed client {i} answered 200 "
                                               f"({[r[0] for r in split_responses(raw)]})")
        if i < 2 and fr:
            C.eq(strip_latency(fr[0][2]), strip_latency(ref[i][2]), f"... with the right answer {i}")
        C.ok(closed, f"... and the connection closed after it {i}")
    C.eq(metric_sum(srv.metrics(), "basal_http_requests_total", status="cancelled") - base, 0.0,
         "half-closed clients are not counted as cancelled")


# ---- defect 5: HTTP-level errors, JSON bodies, framing ----

def test_error_bodies(port):
    too_large_so = ('{"detail":{"error_type":"request_too_large","message":"Request body is larger than '
                    f'{LIMIT} bytes."}}}}')
    too_large_ba = f'{{"error":"request body is larger than {LIMIT} bytes"}}'
    cases = [
        ("1 MB header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n", 431, SO, None),
        ("bad request line", b"GARBAGE\r\n\r\n", 400, SO, None),
        ("raw NUL in the request line", b"GET /health\x00x HTTP/1.1\r\nHost: x\r\n\r\n", 400, SO, None),
        ("bad chunk size", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
         SO, None),
        ("bad chunk size on /v1/basal", b"POST /v1/basal HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"zz\r\n", 400, BA, None),
        ("Content-Length with chunked", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n5\r\n{}{}{\r\n0\r\n\r\n", 400, SO, None),
        ("huge chunk size", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"ffffffffffffffff\r\nabc", 413, SO, too_large_so),
        ("Content-Length 2^64", b"POST /v1/basal HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n{}",
         413, BA, too_large_ba),
        ("HTTP/2.0", b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, SO, None),
        # header blocks that fail to parse on a /v1 route: the route's error shape and request id
        ("2000 header fields", b"POST /v1/systemone HTTP/1.1\r\n" + b"".join(b"X%d: a\r\n" % i for i in range(2000))
         + b"\r\n", 431, SO, '{"detail":{"error_type":"request_header_fields_too_large","message":'
                             '"Request has more than 100 header fields."}}'),
        ("2000 header fields on /v1/basal", b"POST /v1/basal?x=1 HTTP/1.1\r\n"
         + b"".join(b"X%d: a\r\n" % i for i in range(2000)) + b"\r\n", 431, BA,
         '{"error":"Request has more than 100 header fields."}'),
        ("1 MB header on /v1/basal", b"POST /v1/basal HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n", 431, BA,
         '{"error":"Request header fields are larger than 65536 bytes."}'),
        ("HTTP/2.0 on /v1/systemone", b"POST /v1/systemone HTTP/2.0\r\nHost: x\r\n\r\n", 505, SO, None),
        ("Content-Length -1", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}", 400, SO, None),
        ("Content-Length abc", b"POST /v1/basal HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", 400, BA, None),
        ("two different Content-Length", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
         b"Content-Length: 7\r\n\r\n{}xxxxx", 400, SO, None),
        ("Content-Length list of different values", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\n"
         b"Content-Length: 2, 7\r\n\r\n{}xxxxx", 400, SO, None),
        ("Transfer-Encoding gzip", b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nxx", 501,
         SO, None),
        ("Transfer-Encoding gzip, chunked", b"POST /v1/basal HTTP/1.1\r\nHost: x\r\n"
         b"Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nxx\r\n0\r\n\r\n", 501, BA, None),
    ]
    for what, data, status, dialect, exact in cases:
        t0 = time.time()
        raw, closed = exchange(port, data, 3)
        el = time.time() - t0
        json_error(what, raw, status, dialect, exact)
        C.ok(closed and el < 2.5 * SLOW, f"{what}: answered at once and closed ({el:.2f} s, closed {closed})")
        fr = final(split_responses(raw))
        rid = fr[0][1].get("x-typesafe-request-id", "") if fr else ""
        if b" /v1/" in data.split(b"\n", 1)[0]:
            C.ok(re.fullmatch(r"[0-9a-f]{32}", rid), f"{what}: x-typesafe-request-id {rid!r}")
        else:
            C.eq(rid, "", f"{what}: no request id outside /v1")
    # equal duplicates are one length (RFC 9112 §6.3)
    raw, _ = exchange(port, b"POST /v1/basal HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n"
                            b"Connection: close\r\n\r\n[]", 3)
    json_error("two equal Content-Length", raw, 422, BA, '{"error":"request body must be a JSON object"}')


# ---- defect 6: NUL in the path ----

def test_nul_path(port):
    body = decision("nul", 1)
    nf = '{"detail":"Not Found"}'
    for what, data in (
        ("POST /v1/systemone%00anything", post_bytes("/v1/systemone%00anything", body, "Connection: close\r\n")),
        ("POST /v1/basal%00", post_bytes("/v1/basal%00", body, "Connection: close\r\n")),
        ("GET /health%00x", b"GET /health%00x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("GET /v1/models%00", b"GET /v1/models%00 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    ):
        raw, _ = exchange(port, data, 3)
        json_error(what, raw, 404, exact=nf)
    # an escaped ordinary character still routes (the decoding is not broken)
    raw, _ = exchange(port, b"GET /h%65alth HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 3)
    fr = final(split_responses(raw))
    C.eq(fr[0][0] if fr else None, 200, "GET /h%65alth is /health")


# ---- framing that a proxy in front could read otherwise (request smuggling) ----

def test_chunk_framing(port):
    """RFC 9112 §7.1: chunk-size is hex digits, then only whitespace, a ';'
    extension or CRLF, and every line ends in CRLF. The lenient parser this
    server used read "0x2" as a last chunk (size 0, extension "x2") and took
    the "{}" after it for a trailer, so the body was empty and the connection
    stayed open for whatever followed; a proxy that reads 0x2 as 2 frames the
    same bytes differently. Each case: 400 "Invalid chunked body.", closed,
    and the request behind it is not answered."""
    smuggled = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    for what, chunks in (
        ("0x prefix on the size", b"0x2\r\n{}\r\n0\r\n\r\n"),
        ("letters after the size", b"2zz\r\n{}\r\n0\r\n\r\n"),
        ("bare LF after the size", b"2\n{}\r\n0\r\n\r\n"),
        ("bare LF after the data", b"2\r\n{}\n0\r\n\r\n"),
        ("LF inside an extension", b"2;a\nb\r\n{}\r\n0\r\n\r\n"),
        ("bare LF ending the trailer section", b"2\r\n{}\r\n0\r\n\n"),
    ):
        data = b"POST /v1/basal HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + smuggled
        raw, closed = exchange(port, data, 3)
        json_error(what, raw, 400, BA, '{"error":"Invalid chunked body."}')
        C.ok(closed, f"{what}: the connection is closed")
    # the grammar's own forms still work: extensions, whitespace, trailer fields, upper-case hex
    body = b'{"state":"s"}'
    data = (b"POST /v1/basal HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            b"0000A ;a=1;b=\"x y\"\r\n" + body[:10] + b"\r\n3\t\r\n" + body[10:] + b"\r\n0\r\nX-T: 1\r\n\r\n")
    raw, _ = exchange(port, data, 3)
    json_error("chunked body with extensions and a trailer", raw, 422, BA, '{"error":"Field required"}')


def test_absolute_form(port):
    """RFC 9112 §3.2.2: a server MUST accept a request target in
    absolute-form; it routes by the path (basal-rs's hyper/axum does: the
    router looks at uri.path()). It was answered 404."""
    body = decision("abs", 1)
    ref, _ = exchange(port, post_bytes(SO, body, "Connection: close\r\n"), 10)
    want = final(split_responses(ref))
    for target in ("http://127.0.0.1:%d/v1/systemone" % port, "HTTP://x/v1/systemone?a=1"):
        raw, _ = exchange(port, post_bytes(target, body, "Connection: close\r\n"), 10)
        fr = final(split_responses(raw))
        C.eq(fr[0][0] if fr else None, 200, f"POST {target}: 200")
        if fr and want:
            C.eq(strip_latency(fr[0][2]), strip_latency(want[0][2]), f"POST {target}: the origin-form answer")
            C.ok(re.fullmatch(r"[0-9a-f]{32}", fr[0][1].get("x-typesafe-request-id", "")),
                 f"POST {target}: x-typesafe-request-id")
    # "https://x" has no path: the root, the playground page
    for target, status in (("http://x/health", 200), ("https://x", 200), ("http://x/nope", 404)):
        raw, _ = exchange(port, f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(), 3)
        fr = final(split_responses(raw))
        C.eq(fr[0][0] if fr else None, status, f"GET {target}")


def test_fd_limit():
    """A descriptor limit below the default --max-connections (hard limit
    300): the connection limit follows it with room to spare, so idle and
    trickling connections are pushed out for a newcomer instead of taking
    every descriptor (accept() then fails and the newcomer was dropped
    without an answer)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        C.ok(True, f"fd limit test skipped (this process may open {hard} files)")
        return
    if soft != resource.RLIM_INFINITY and soft < 1024:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))

    srv = Server(["--model", fixture("tiny-bias"), "--access-log", "off"], preexec=low_limit)
    held = []
    try:
        for i in range(350):
            try:
                s = connect(srv.port, f"127.0.0.{20 + i % 10}")
                if i % 2:
                    s.sendall(b"GET /health HTTP/1.1\r\n")
                held.append(s)
            except OSError:
                break
        time.sleep(0.3)
        for k in range(3):
            raw, _ = exchange(srv.port, post_bytes(SO, decision("fd", 1), "Connection: close\r\n"), 10)
            fr = final(split_responses(raw))
            C.eq(fr[0][0] if fr else None, 200, f"350 idle connections, hard limit 300: a newcomer is answered ({k})")
    finally:
        for s in held:
            s.close()
        code = srv.stop()
    C.eq(code, 0, "low fd limit server exits 0")


def main():
    args = ["--model", fixture("tiny-bias"), "--metrics"]
    # HTTP_ATTACKS_LEGACY=1: run against a server without these flags (the
    # libmicrohttpd layer), to see the cases fail there
    legacy = os.environ.get("HTTP_ATTACKS_LEGACY") == "1"
    srv = Server(args + ([] if legacy else ["--header-timeout", "1", "--body-timeout", "1",
                                            "--max-client-connections", "4"]))
    try:
        test_close_wait(srv)
        test_header_deadline(srv.port)
        test_body_deadline(srv.port)
        test_client_limit(srv.port)
        test_error_bodies(srv.port)
        test_nul_path(srv.port)
        test_chunk_framing(srv.port)
        test_absolute_form(srv.port)
        st, _, _ = srv.request("GET", "/health")
        C.eq(st, 200, "the server is still up after the attacks")
    finally:
        code = srv.stop()
    C.eq(code, 0, "attack server exits 0 on SIGTERM")
    if not legacy:
        srv = Server(args + ["--max-connections", "6"])
        try:
            test_global_limit(srv.port)
        finally:
            code = srv.stop()
        C.eq(code, 0, "--max-connections server exits 0")
    srv = Server(args)
    try:
        test_half_close(srv)
    finally:
        code = srv.stop()
    C.eq(code, 0, "half-close server exits 0")
    srv = Server(args + ["--max-inflight", "1"])
    try:
        test_close_wait_inflight(srv.port)
    finally:
        t0 = time.time()
        code = srv.stop()
        el = time.time() - t0
    C.eq(code, 0, "--max-inflight 1 server exits 0")
    C.ok(el < 5 * SLOW, f"... and SIGTERM takes under 5 s ({el:.1f} s)")
    test_fd_limit()
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
