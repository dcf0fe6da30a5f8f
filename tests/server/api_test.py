"""End-to-end tests of `basal serve` over 127.0.0.1 (spec 02, 04 §11–§12,
06 §4). Oracles: the spec's exact bodies, CPython's json module (decode
error messages and positions), the TypeSafe OpenAPI document (jsonschema,
Draft 2020-12), `basal decide` for the answers, and the server's own answers
to the same requests sent alone (batch invariance). The multi and act section
checks the error rows of spec 03 §1.2 and §2 on both endpoints, the TypeSafe
answers of a mixed request against the schema, and batch invariance of multi
and act requests under 32 clients."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
from srvlib import (SLOW, Checks, Server, fixture, load_openapi, metric, metric_sum, parse_raw_response,
                    raw_exchange, request, run_basal, run_parallel, send_post, strip_latency, validator, wait_until)

C = Checks()
MODEL = "basal-tiny"
S = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot."
SO, BA = "/v1/systemone", "/v1/basal"
DOC = load_openapi()
V_RESPONSE = validator(DOC, "SystemOneResponse")
V_MODELS = validator(DOC, "ModelMetadataList")
V_HTTPERR = validator(DOC, "HTTPValidationError")


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def body(questions, **over):
    b = {"model": MODEL, "state": S, "questions": questions}
    b.update(over)
    return b


def valid(v, obj, what):
    errs = list(v.iter_errors(obj))
    C.ok(not errs, f"{what}: schema: {errs[0].message if errs else ''}")


def union(loc, value):
    return [{"type": "string_type", "loc": loc + ["str"], "msg": "Input should be a valid string", "input": value},
            {"type": "dict_type", "loc": loc + ["dict[any,any]"], "msg": "Input should be a valid dictionary",
             "input": value},
            {"type": "list_type", "loc": loc + ["list[any]"], "msg": "Input should be a valid list", "input": value}]


def missing(loc, inp):
    return {"type": "missing", "loc": loc, "msg": "Field required", "input": inp}


def too_short(loc, what, inp):
    return {"type": "too_short", "loc": loc, "msg": f"{what} should have at least 1 item after validation, not 0",
            "input": inp, "ctx": {"field_type": what, "min_length": 1, "actual_length": 0}}


RID = re.compile(r"^[0-9a-f]{32}$")
MS3 = re.compile(r"^[0-9]+\.[0-9]{3}$")


def check_v1_headers(h, what, seen_ids):
    rid = h.get("x-typesafe-request-id", "")
    C.ok(RID.match(rid) is not None, f"{what}: x-typesafe-request-id {rid!r}")
    C.ok(rid not in seen_ids, f"{what}: request id {rid} repeated")
    seen_ids.add(rid)
    C.eq(h.get("content-type"), "application/json", f"{what}: content-type")


def expect(srv, path, payload, status, want_body, what, headers=None, seen=None):
    st, h, got = srv.post(path, payload, headers=headers)
    C.eq(st, status, f"{what}: status")
    C.eq(got.decode("utf-8", "replace"), want_body, f"{what}: body")
    if seen is not None:
        check_v1_headers(h, what, seen)
    return st, h, got


# ---------------------------------------------------------------------------
def test_plain_endpoints(srv, seen):
    st, h, b = srv.request("GET", "/health")
    C.eq((st, b), (200, b'{"status":"ok","models":["basal-tiny"],"default_model":"basal-tiny"}'), "GET /health")
    C.eq(h.get("content-type"), "application/json", "/health content-type")
    models = ('{"models":[{"name":"basal-tiny","release_date":"2026-10-05","description":"basal typed-decision model '
              '(choice / noul / score / act / multi), Polish and English","mode":"basal-c","early_exit":[]}]}')
    st, h, b = srv.request("GET", "/v1/models")
    C.eq((st, b.decode()), (200, models), "GET /v1/models")
    check_v1_headers(h, "GET /v1/models", seen)
    valid(V_MODELS, json.loads(b), "/v1/models")
    # the schema check must be able to fail
    C.ok(list(V_MODELS.iter_errors({"models": [{"name": 5}]})), "ModelMetadataList rejects a bad list")
    st, hh, b = srv.request("HEAD", "/v1/models")
    C.eq((st, b), (200, b""), "HEAD /v1/models: status, no body")
    C.eq(hh.get("content-length"), str(len(models)), "HEAD /v1/models: content-length of the GET body")
    check_v1_headers(hh, "HEAD /v1/models", seen)
    nf = '{"detail":"Not Found"}'
    for m, p in (("GET", "/nope"), ("GET", "/v1/nope"), ("POST", "/v1/models/"), ("GET", "/v1/systemone/"),
                 ("GET", "/metrics")):
        st, h, b = srv.request(m, p, body=b"{}" if m == "POST" else None)
        C.eq((st, b.decode()), (404, nf), f"{m} {p}")
        C.eq(h.get("content-type"), "application/json", f"{m} {p}: content-type")
    for m, p, allow in (("GET", SO, "POST"), ("PUT", BA, "POST"), ("POST", "/v1/models", "GET, HEAD"),
                        ("DELETE", "/health", "GET, HEAD")):
        st, h, b = srv.request(m, p, body=b"{}" if m in ("POST", "PUT") else None)
        C.eq((st, b.decode(), h.get("allow")), (405, '{"detail":"Method Not Allowed"}', allow), f"{m} {p}")
    # a keep-alive connection survives GETs (answered after the headers, no body pending)
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10 * SLOW)
    for i in range(3):
        c.request("GET", "/v1/models")
        r = c.getresponse()
        r.read()
        C.eq(r.status, 200, f"keep-alive GET #{i}")
    c.close()


def test_too_large(srv, seen, limit=16777216):
    for path, want in ((SO, '{"detail":{"error_type":"request_too_large","message":"Request body is larger than '
                            f'{limit} bytes."}}}}'),
                       (BA, f'{{"error":"request body is larger than {limit} bytes"}}')):
        # Content-Length over the limit: answered without reading the body
        raw = raw_exchange(srv.port, f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {limit + 1}\r\n\r\n".encode()
                           + b"{" * 100)
        st, h, b = parse_raw_response(raw)
        C.eq((st, b.decode()), (413, want), f"413 by Content-Length on {path}")
        check_v1_headers(h, f"413 {path}", seen)


def test_chunked_limit(srv, seen, limit):
    """A chunked body is counted while it is read (02 §3 step 3)."""
    big = b'{"model":"basal-tiny","state":"' + b"x" * (limit + 10) + b'"}'
    for path, want in ((SO, '{"detail":{"error_type":"request_too_large","message":"Request body is larger than '
                            f'{limit} bytes."}}}}'),
                       (BA, f'{{"error":"request body is larger than {limit} bytes"}}')):
        req = f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode()
        for i in range(0, len(big), 1000):
            part = big[i:i + 1000]
            req += b"%x\r\n" % len(part) + part + b"\r\n"
        req += b"0\r\n\r\n"
        st, h, b = parse_raw_response(raw_exchange(srv.port, req))
        C.eq((st, b.decode()), (413, want), f"413 chunked on {path}")
    # exactly at the limit is accepted (and then judged as JSON)
    exact = b" " * (limit - 2) + b"[]"
    st, _, b = srv.request("POST", BA, body=exact)
    C.eq((st, b), (422, b'{"error":"request body must be a JSON object"}'), "body of exactly max_body_bytes")


def cpython_error(raw):
    """CPython's json.loads error for the body (the oracle of 02 §3)."""
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return e.msg, e.pos, str(e)
    return None


def test_decode_errors(srv, seen):
    cases = [b"", b"not json", b"   ", b"tru", b"-", b"[1,]", b'{"a":', b"]", b'{"a":1,}', b'{"a" 1}', b"[1 2]",
             b'"abc', b'"a\x01b"', b'"\\x"', b'"\\u12"', b"{} x", b"01", b"1.", b"\n\n  x",
             '{"zażółć": tru}'.encode(), "\ufeff[1,".encode(), b'{"a":[1,2}']
    for raw in cases:
        msg, pos, full = cpython_error(raw)
        want_so = dumps({"detail": [{"type": "json_invalid", "loc": ["body", pos], "msg": "JSON decode error",
                                     "input": {}, "ctx": {"error": msg}}]})
        expect(srv, SO, raw, 422, want_so, f"decode {raw!r} on {SO}", seen=seen)
        expect(srv, BA, raw, 422, dumps({"error": full}), f"decode {raw!r} on {BA}", seen=seen)
    # this project's own rejections (CPython accepts these)
    own = [(b"NaN", "Expecting value", 0), (b"[Infinity]", "Expecting value", 1), (b'"\xff"', "Invalid UTF-8", 1),
           (b"[" * 129, "Maximum nesting depth exceeded", 128), (b'"\\ud800"', "Invalid \\uXXXX escape", 2)]
    for raw, msg, pos in own:
        want = dumps({"detail": [{"type": "json_invalid", "loc": ["body", pos], "msg": "JSON decode error",
                                  "input": {}, "ctx": {"error": msg}}]})
        expect(srv, SO, raw, 422, want, f"decode {raw[:20]!r}")
        expect(srv, BA, raw, 422, dumps({"error": f"{msg}: line 1 column {pos + 1} (char {pos})"}), f"basal {raw[:20]!r}")
    st, _, b = srv.post(SO, b"not json")
    valid(V_HTTPERR, json.loads(b), "decode error body")
    for raw in (b"[]", b"5", b'"x"', b"null"):
        expect(srv, BA, raw, 422, '{"error":"request body must be a JSON object"}', f"basal non-object {raw!r}")


def test_validation(srv, seen):
    q = lambda qo: body({"q": qo})
    base = ["body", "questions", "q"]
    vectors = [
        (q({"type": "choice", "instructions": "Temat?", "criteria": {}}), 400,
         {"detail": "Choice question must have at least one choice: q"}),
        (q({"type": "choice", "instructions": "Temat?", "criteria": {f"k{i}": None for i in range(256)}}), 400,
         {"detail": "Too many choices. Must have at most 255 choices."}),
        (q({"type": "choice", "instructions": "Temat?"}), 422,
         {"detail": [missing(base + ["choice", "criteria"], {"type": "choice", "instructions": "Temat?"})]}),
        (q({"type": "score", "instructions": "Pilność?", "criteria": []}), 422,
         {"detail": [too_short(base + ["score", "criteria"], "List", [])]}),
        (q({"type": "score", "instructions": "Pilność?", "criteria": [str(i) for i in range(11)]}), 400,
         {"detail": "Too many score levels. Must have at most 10 levels."}),
        (q({"type": "score", "instructions": "Pilność?", "criteria": ["niska", None, "wysoka"]}), 422,
         {"detail": union(base + ["score", "criteria", 1], None)}),
        (q({"type": "noul"}), 400, {"detail": "Noul question must have criteria or instructions: q"}),
        (q({"type": "noul", "instructions": None}), 400, {"detail": "Noul question must have criteria or instructions: q"}),
        (q({"type": "noul", "instructions": 5}), 422, {"detail": union(base + ["noul", "instructions"], 5)}),
        (q({"instructions": "Czy chodzi o płatność?"}), 422,
         {"detail": [{"type": "union_tag_not_found", "loc": base, "msg": "Unable to extract tag using discriminator 'type'",
                      "input": {"instructions": "Czy chodzi o płatność?"}, "ctx": {"discriminator": "'type'"}}]}),
        (q({"type": "rank", "instructions": "x"}), 400,
         {"detail": {"error_type": "api_usage_error",
                     "message": 'Invalid request. Unknown question type "rank" (choice, noul, score): q'}}),
        (body({}), 422, {"detail": [too_short(["body", "questions"], "Dictionary", {})]}),
        (body([{"type": "noul", "instructions": "x"}]), 422,
         {"detail": [{"type": "dict_type", "loc": ["body", "questions"], "msg": "Input should be a valid dictionary",
                      "input": [{"type": "noul", "instructions": "x"}]}]}),
        (body({"q": {"type": "noul", "instructions": "x"}}, state=5), 422, {"detail": union(["body", "state"], 5)}),
        (body({"q": {"type": "noul", "instructions": "x"}}, model="nope-1"), 400,
         {"detail": {"error_type": "api_usage_error", "message": "Unknown model: nope-1"}}),
    ]
    b = body({"q": {"type": "noul", "instructions": "x"}}, state=None)
    vectors.append((b, 422, {"detail": [missing(["body", "state"], b)]}))
    b = {"state": S, "questions": {"q": {"type": "noul", "instructions": "x"}}}
    vectors.append((b, 422, {"detail": [missing(["body", "model"], b)]}))
    vectors.append(([], 422, {"detail": [{"type": "model_attributes_type", "loc": ["body"],
                                          "msg": "Input should be a valid dictionary or object to extract fields from",
                                          "input": []}]}))
    b = body({"a": {"type": "score", "criteria": []}, "b": {"type": "choice"}}, state=None)
    vectors.append((b, 422, {"detail": [missing(["body", "state"], b),
                                        too_short(["body", "questions", "a", "score", "criteria"], "List", []),
                                        missing(["body", "questions", "b", "choice", "criteria"], {"type": "choice"})]}))
    for i, (payload, status, want) in enumerate(vectors):
        st, h, got = expect(srv, SO, payload, status, dumps(want), f"validation vector {i}", seen=seen)
        if status == 422:
            valid(V_HTTPERR, json.loads(got), f"validation vector {i}")
    # a non-string model routes to the default model, whose validation reports it
    b = body({"q": {"type": "noul", "instructions": "x"}}, model=7)
    expect(srv, SO, b, 422, dumps({"detail": [{"type": "string_type", "loc": ["body", "model"],
                                               "msg": "Input should be a valid string", "input": 7}]}), "model 7")
    # /v1/basal: every error is a 422 {"error"}
    expect(srv, BA, body({"q": {"type": "noul"}}, model="nope-1"), 422, '{"error":"Unknown model: nope-1"}',
           "basal unknown model", seen=seen)
    expect(srv, BA, {"model": MODEL}, 422, '{"error":"Field required; Field required"}', "basal state+questions")
    expect(srv, BA, body({"q": {"type": "choice", "criteria": {"a": None}}}), 422,
           '{"error":"question \\"q\\": 1 options (supported: 2..10)"}', "basal one option")


def decide(payload, extra=()):
    r = run_basal("decide", fixture("tiny-bias"), payload, *extra, ensure_ascii=True)
    return json.loads(r.stdout, object_pairs_hook=list) if r.returncode == 0 else None


def without_latency(pairs):
    """A response parsed with object_pairs_hook=list, usage.latency_ms removed."""
    out = []
    for k, v in pairs:
        if k == "usage":
            v = [(a, b) for a, b in v if a != "latency_ms"]
        out.append((k, v))
    return out


def check_success(srv, path, payload, what, seen):
    st, h, raw = srv.post(path, payload)
    if not C.eq(st, 200, f"{what}: status ({raw[:300]!r})"):
        return None
    check_v1_headers(h, what, seen)
    for k in ("x-basal-queue-ms", "x-basal-compute-ms"):
        C.ok(MS3.match(h.get(k, "")) is not None, f"{what}: {k} {h.get(k)!r}")
    C.ok(re.match(r"^[1-9][0-9]*$", h.get("x-basal-batch-requests", "")) is not None, f"{what}: batch header")
    obj = json.loads(raw)
    if path == SO:
        valid(V_RESPONSE, obj, what)
    u = obj["usage"]
    C.eq(list(u), ["input_tokens", "output_tokens", "questions", "branches", "latency_ms"], f"{what}: usage keys")
    C.ok(isinstance(u["latency_ms"], float) and u["latency_ms"] >= 0, f"{what}: latency_ms {u['latency_ms']!r}")
    C.ok(u["latency_ms"] == round(u["latency_ms"], 2), f"{what}: latency_ms rounded to 0.01")
    for qid, ans in obj["answers"].items():
        if "probabilities" in ans:
            C.ok(abs(sum(ans["probabilities"].values()) - 1) <= 1e-9, f"{what}: {qid} probabilities sum")
    if path == SO:
        ref = decide(payload)
        C.ok(ref is not None and without_latency(json.loads(raw, object_pairs_hook=list)) == without_latency(ref),
             f"{what}: answer equals `basal decide`")
    return obj


def test_success(srv, seen):
    qs = {"c": {"type": "choice", "instructions": "Temat?", "criteria": {"billing": None, "shipping": None}},
          "n": {"type": "noul", "instructions": "Czy chodzi o płatność?"},
          "s": {"type": "score", "instructions": "Pilność?", "criteria": [{"level": "niska"}, ["średnia"], "wysoka"]}}
    obj = check_success(srv, SO, body(qs), "three questions", seen)
    if obj:
        C.eq(list(obj), ["model", "answers", "usage"], "envelope keys")
        C.eq(list(obj["answers"]), ["c", "n", "s"], "answers in request order")
        C.eq(list(obj["answers"]["n"]), ["type", "noul"], "noul answer keys")
        C.eq(list(obj["answers"]["c"]), ["type", "choice", "probabilities", "confidence"], "choice answer keys")
        C.eq(list(obj["answers"]["s"]), ["type", "score", "legend", "probabilities", "confidence"], "score keys")
        C.eq(obj["answers"]["s"]["legend"], {"0": {"level": "niska"}, "1": ["średnia"], "2": "wysoka"}, "legend echo")
        C.eq((obj["usage"]["questions"], obj["usage"]["branches"], obj["usage"]["output_tokens"]), (3, 3, 0), "usage")
    # single-option questions are answered without the model (02 §4.6)
    st, h, raw = srv.post(SO, body({"q": {"type": "choice", "instructions": "x", "criteria": {"billing": None}},
                                    "r": {"type": "score", "instructions": "x", "criteria": ["pilne"]}}))
    C.eq(st, 200, "single option status")
    C.eq(strip_latency(raw).decode(), '{"model":"basal-tiny","answers":{"q":{"type":"choice","choice":"billing",'
         '"probabilities":{"billing":1.0},"confidence":1.0},"r":{"type":"score","score":0.0,"legend":{"0":"pilne"},'
         '"probabilities":{"0":1.0},"confidence":1.0}},"usage":{"input_tokens":0,"output_tokens":0,"questions":2,'
         '"branches":0,"latency_ms":_}}', "single option body")
    C.ok("x-basal-batch-requests" in h, "single option passes through the queue (timing headers)")
    # Content-Type is not looked at; a BOM is skipped; a chunked body works; no model → default
    payload = body({"q": {"type": "noul", "instructions": "Czy chodzi o płatność?"}})
    ref = strip_latency(srv.post(SO, payload)[2])
    raw_json = json.dumps(payload, ensure_ascii=False).encode()
    for hdrs, data, what in (({"Content-Type": "text/plain"}, raw_json, "text/plain"),
                             ({}, "\ufeff".encode() + raw_json, "BOM")):
        st, _, b = srv.request("POST", SO, body=data, headers=hdrs)
        C.eq((st, strip_latency(b)), (200, ref), f"{what} body")
    req = f"POST {SO} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode()
    for i in range(0, len(raw_json), 7):
        part = raw_json[i:i + 7]
        req += b"%x\r\n" % len(part) + part + b"\r\n"
    st, _, b = parse_raw_response(raw_exchange(srv.port, req + b"0\r\n\r\n"))
    C.eq((st, strip_latency(b)), (200, ref), "chunked request body")
    nomodel = {"state": S, "questions": {"q": {"type": "choice", "criteria": ["a", "b"]}}}
    obj = check_success(srv, BA, nomodel, "/v1/basal without model", seen)
    if obj:
        C.eq(obj["model"], MODEL, "/v1/basal without model goes to the default model")
        C.eq(list(obj["answers"]["q"]), ["type", "choice", "probabilities", "confidence"], "basal choice keys")
        C.eq(obj["answers"]["q"]["confidence"], max(obj["answers"]["q"]["probabilities"].values()),
             "basal confidence = max(p)")


def varied_requests(n, reps=(1, 2, 3)):
    """n distinct requests of the three TypeSafe types and both dialects."""
    out = []
    for i in range(n):
        state = f"Zgłoszenie {i}: " + "Klient pisze, że zapłacił dwa razy za to samo zamówienie. " * reps[i % len(reps)]
        kind = i % 3
        if kind == 0:
            q = {"type": "choice", "instructions": f"Temat {i}?", "criteria": {"billing": None, "shipping": "wysyłka",
                                                                               "other": None}}
        elif kind == 1:
            q = {"type": "noul", "instructions": f"Czy chodzi o płatność {i}?"}
        else:
            q = {"type": "score", "instructions": "Pilność?", "criteria": ["niska", "średnia", "wysoka", "krytyczna"]}
        out.append((SO if i % 4 else BA, body({f"q{i}": q}, state=state)))
    return out


def test_concurrency(srv):
    """Returns how many concurrent rounds were sent (plus one sequential)."""
    reqs = varied_requests(32)
    rounds = 0
    alone = [srv.post(p, b) for p, b in reqs]
    C.ok(all(st == 200 for st, _, _ in alone), "32 requests alone: all 200")
    batched = False
    for attempt in range(3):
        together = run_parallel(lambda pb: srv.post(*pb), reqs)
        rounds += 1
        errs = [r for r in together if not isinstance(r, tuple)]
        if not C.ok(not errs, f"32 concurrent clients: client errors {errs[:2]}"):
            return rounds
        same = all(strip_latency(t[2]) == strip_latency(a[2]) and t[0] == a[0] for t, a in zip(together, alone))
        C.ok(same, "32 concurrent clients: bodies identical to the same requests alone (except latency_ms)")
        if not same:
            for t, a in zip(together, alone):
                if strip_latency(t[2]) != strip_latency(a[2]):
                    print("  alone:   ", a[2][:300], "\n  together:", t[2][:300])
                    break
        if max(int(t[1].get("x-basal-batch-requests", "0")) for t in together) > 1:
            batched = True
            break
    C.ok(batched, "32 concurrent clients were batched together at least once")
    return rounds


def test_metrics(srv, statuses):
    st, h, text = srv.request("GET", "/metrics")
    C.eq(st, 200, "/metrics status")
    C.eq(h.get("content-type"), "text/plain; version=0.0.4", "/metrics content-type")
    try:
        ms = srv.metrics()
    except ValueError as e:
        C.ok(False, f"/metrics exposition format: {e}")
        return
    for (ep, model, status), n in statuses.items():
        C.eq(metric(ms, "basal_http_requests_total", endpoint=ep, model=model, status=status), float(n),
             f"requests_total {ep} {model!r} {status}")
        C.eq(metric(ms, "basal_http_request_duration_seconds_count", endpoint=ep, model=model, status=status), float(n),
             f"duration count {ep} {model!r} {status}")
        C.eq(metric(ms, "basal_http_request_duration_seconds_bucket", endpoint=ep, model=model, status=status,
                    le="+Inf"), float(n), f"duration +Inf bucket {ep} {status}")
    total_200 = sum(n for (ep, model, status), n in statuses.items() if status == "200")
    for ep in (SO, BA):
        C.eq(metric(ms, "basal_http_inflight_requests", endpoint=ep), 0.0, f"http inflight {ep} at rest")
    C.eq(metric(ms, "basal_model_inflight_requests", model=MODEL), 0.0, "model inflight at rest")
    C.eq(metric(ms, "basal_max_inflight_requests"), 1024.0, "max inflight gauge")
    C.eq(metric_sum(ms, "basal_queue_duration_seconds_count", model=MODEL), float(total_200),
         "queue histogram: one observation per answered request")
    C.eq(metric_sum(ms, "basal_batch_requests_sum", model=MODEL), float(total_200),
         "batch sizes add up to the answered requests")
    C.ok(metric_sum(ms, "basal_batch_requests_count", model=MODEL) <= total_200, "batches counted once each")
    C.eq(metric_sum(ms, "basal_batch_duration_seconds_count", model=MODEL),
         metric_sum(ms, "basal_batch_requests_count", model=MODEL), "one batch duration per batch")
    inp = metric(ms, "basal_input_tokens_total", model=MODEL)
    fw = metric(ms, "basal_forward_tokens_total", model=MODEL)
    C.ok(inp is not None and fw is not None and 0 < fw <= inp, f"forward tokens {fw} <= input tokens {inp}")
    C.eq(metric(ms, "basal_output_tokens_total", model=MODEL), 0.0, "output tokens")
    return ms


# ---------------------------------------------------------------------------
def main_server():
    seen = set()
    srv = Server(["--model", fixture("tiny-bias")])
    try:
        test_plain_endpoints(srv, seen)
        test_too_large(srv, seen)
        test_decode_errors(srv, seen)
        test_validation(srv, seen)
        test_success(srv, seen)
    finally:
        code = srv.stop()
    C.eq(code, 0, "main server exits 0 on SIGTERM")


# ---------------------------------------------------------------------------
# multi and act (spec 03 §1-§2) on both endpoints

REFUND_COSTS = {"approve": {"true": 0, "false": 1240}, "reject": {"true": 300, "false": 0},
                "human": {"true": 15, "false": 15}}
TOPICS = {"login": "Problem z logowaniem do bankowości", "card": "Zablokowana karta płatnicza",
          "address": "Zmiana adresu", "loan": "Wniosek kredytowy"}
DEFER_MSG = 'max_error needs a defer action ("defer"/"human" or defer_action)'


def ext_error(qid, typ, rest, kind, msg):
    return {"type": kind, "loc": ["body", "questions", qid, typ] + rest, "msg": msg}


def test_multi_act_errors(srv, seen):
    """Every validation error row of 03 §1.2 and §2 (status, type, loc, msg, no input), both endpoints."""
    cases = [
        ({"type": "multi", "criteria": 5}, "multi", ["criteria"], "dict_type", "multi criteria must be an object or a list"),
        ({"type": "multi", "criteria": ["a", None]}, "multi", ["criteria", "1"], "string_type", "labels must be strings"),
        ({"type": "multi", "criteria": {}}, "multi", ["criteria"], "missing", "multi needs criteria"),
        ({"type": "multi", "criteria": ["a"], "threshold": "high"}, "multi", ["threshold"], "float_type",
         "threshold must be a number"),
        ({"type": "multi", "criteria": ["a"], "max": [2], "min": "x"}, "multi", ["max"], "float_type", "max must be a number"),
        ({"type": "multi", "criteria": ["a"], "min": True}, "multi", ["min"], "float_type", "min must be a number"),
        ({"type": "act", "criteria": ["a", "b"], "base": "rank", "costs": {"wrong": 1}}, "act", ["base"], "literal_error",
         'unsupported act base "rank"'),
        ({"type": "act", "instructions": "x"}, "act", ["costs"], "missing", "act needs costs"),
        ({"type": "act", "costs": {"defer": 2}}, "act", ["costs", "wrong"], "float_type", "cost must be a number"),
        ({"type": "act", "costs": {"wrong": 2, "defer": "x"}}, "act", ["costs", "defer"], "float_type",
         "cost must be a number"),
        ({"type": "act", "costs": {"go": {"true": 1, "false": False}}}, "act", ["costs", "go", "false"], "float_type",
         "cost must be a number"),
        ({"type": "act", "costs": {"go": {"true": 1}}}, "act", ["costs", "go"], "value_error",
         'costs["go"] must give a cost for every outcome ["true", "false"]'),
        ({"type": "act", "costs": {"wrong": 1}, "max_error": "0.01"}, "act", ["max_error"], "float_type",
         "max_error must be a number"),
    ]
    for q, typ, rest, kind, msg in cases:
        what = f"{typ} error {msg}"
        expect(srv, SO, body({"q": q}), 422, dumps({"detail": [ext_error("q", typ, rest, kind, msg)]}), f"{SO} {what}",
               seen=seen)
        expect(srv, BA, body({"q": q}), 422, dumps({"error": msg}), f"{BA} {what}", seen=seen)
    # capability (02 §4.4) on /v1/systemone, the 2..10 rule on /v1/basal
    one = {"type": "act", "criteria": {"billing": None}, "costs": {"wrong": 1}}
    eleven = {"type": "act", "criteria": [str(i) for i in range(11)], "costs": {"wrong": 1}}
    expect(srv, SO, body({"q": one, "r": eleven}), 422, dumps({"error": "unsupported", "detail": [
        {"type": "unsupported_single_option", "loc": ["body", "questions", "q", "criteria"],
         "msg": "act with a single option/level is not supported yet: its expected behaviour is unresolved"},
        {"type": "unsupported_option_count", "loc": ["body", "questions", "r", "criteria"],
         "msg": "11 options: the letter readout of the model reads 2..10; only choice questions take more "
                "(the grouped 11..255 strategy)"}]}), "act capability errors", seen=seen)
    expect(srv, BA, body({"q": one}), 422, dumps({"error": 'question "q": 1 options (supported: 2..10)'}),
           "/v1/basal act with one option", seen=seen)
    # T11 and the usage error of a choice base
    expect(srv, SO, body({"q": {"type": "multi", "criteria": ["a"], "evidence": True}}), 422,
           dumps({"detail": [{"type": "value_error", "loc": ["body", "questions", "q", "evidence"],
                              "msg": "evidence is not supported for multi"}]}), "multi with evidence", seen=seen)
    expect(srv, SO, body({"q": {"type": "act", "criteria": [], "costs": {"wrong": 1}}}), 400,
           dumps({"detail": "Choice question must have at least one choice: q"}), "act with an empty choice base", seen=seen)
    # the act refusal fails the whole request (tiny-bias certifies 0.05 at confidence 0.93; p is near 0.5)
    refusal = body({"ok": {"type": "noul", "instructions": "Czy zwrot?"},
                    "a": {"type": "act", "instructions": "Czy zwrot?",
                          "costs": {"approve": {"true": 0, "false": 1}, "reject": {"true": 1, "false": 0}},
                          "max_error": 0.05}})
    expect(srv, SO, refusal, 422, dumps({"detail": [{"type": "value_error", "loc": ["body", "questions", "a"],
                                                     "msg": DEFER_MSG}]}), "act refusal without defer", seen=seen)
    expect(srv, BA, refusal, 422, dumps({"error": DEFER_MSG}), "/v1/basal act refusal without defer", seen=seen)


def typesafe_only(obj):
    """The response with only the answers of TypeSafe types (multi/act are extensions, 03 §6)."""
    out = dict(obj)
    out["answers"] = {k: v for k, v in obj["answers"].items() if v.get("type") in ("choice", "noul", "score")}
    return out


def test_multi_act_answers(srv, seen):
    qs = {"c": {"type": "choice", "instructions": "Temat?", "criteria": {"billing": None, "shipping": None}},
          "m": {"type": "multi", "instructions": "Których tematów dotyczy zgłoszenie?", "criteria": TOPICS, "max": 2},
          "a": {"type": "act", "instructions": "Czy wniosek spełnia warunki zwrotu?",
                "criteria": {"true": "Spełnia", "false": "Nie spełnia"}, "costs": REFUND_COSTS, "max_error": 0.05},
          "n": {"type": "noul", "instructions": "Czy chodzi o płatność?"},
          "b": {"type": "act", "instructions": "Dział?", "criteria": ["karty", "online", "kredyty"],
                "costs": {"wrong": 4, "defer": 1}, "max_error": 0.01},
          "s": {"type": "score", "instructions": "Pilność?", "criteria": ["niska", "wysoka"]}}
    st, h, raw = srv.post(SO, body(qs))
    if not C.eq(st, 200, f"multi/act request: status ({raw[:300]!r})"):
        return
    check_v1_headers(h, "multi/act request", seen)
    obj = json.loads(raw)
    valid(V_RESPONSE, typesafe_only(obj), "multi/act request: TypeSafe answers")
    ref = decide(body(qs))
    C.ok(ref is not None and without_latency(json.loads(raw, object_pairs_hook=list)) == without_latency(ref),
         "multi/act request: answer equals `basal decide`")
    ans = obj["answers"]
    C.eq(list(ans), ["c", "m", "a", "n", "b", "s"], "answers in request order")
    C.eq(list(ans["m"]), ["type", "selected", "probabilities", "threshold", "set_confidence"], "multi answer keys")
    C.eq(list(ans["m"]["probabilities"]), list(TOPICS), "multi probabilities in label order")
    C.ok(len(ans["m"]["selected"]) <= 2, "multi max 2")
    C.eq(list(ans["a"]), ["type", "action", "expected_costs", "answer", "probabilities", "confidence", "calibration"],
         "act answer keys (action already the defer action: no refusal)")
    C.eq(ans["a"]["action"], "human", "act: human has the minimal expected cost at p near 0.5")
    C.eq(ans["a"]["calibration"], "validated", "noul base on a calibrated model is validated")
    C.eq(list(ans["b"]), ["type", "action", "expected_costs", "answer", "probabilities", "confidence", "max_error",
                          "calibration"], "act without a certified threshold: max_error note")
    C.eq((ans["b"]["max_error"], ans["b"]["calibration"]), ("no certified threshold for this target", "unvalidated"),
         "act choice base: note and unvalidated")
    C.eq((obj["usage"]["questions"], obj["usage"]["branches"]), (6, 4 + 5), "usage: 4 labels + 5 other readouts")
    # /v1/basal: the same multi and act objects; the TypeSafe types in the upstream forms
    st, h, rawb = srv.post(BA, body(qs))
    if C.eq(st, 200, "/v1/basal multi/act status"):
        ob = json.loads(rawb)
        for q in ("m", "a", "b"):
            C.eq(ob["answers"][q], obj["answers"][q], f"/v1/basal {q} answer equals /v1/systemone's")
        C.eq(list(ob["answers"]["n"]), ["type", "noul", "probabilities", "confidence"], "/v1/basal noul keys")


def multi_act_requests(n):
    out = []
    for i in range(n):
        state = f"Zgłoszenie {i}: " + "Klient pisze, że karta została zablokowana i prosi o zwrot. " * (1 + i % 3)
        k = i % 4
        if k == 0:
            q = {"m": {"type": "multi", "instructions": f"Tematy {i}?", "criteria": TOPICS, "min": 1}}
        elif k == 1:
            q = {"a": {"type": "act", "instructions": "Czy zwrot?", "costs": REFUND_COSTS, "max_error": 0.1}}
        elif k == 2:
            q = {"m": {"type": "multi", "criteria": ["karta", "zwrot", "adres"]},
                 "c": {"type": "choice", "instructions": "Temat?", "criteria": ["karta", "zwrot", "inne"]}}
        else:
            q = {"a": {"type": "act", "instructions": "Dział?", "criteria": {"x": "Karty", "y": "Zwroty"},
                       "costs": {"wrong": 3, "defer": 1}, "option_keys": "hide"},
                 "m": {"type": "multi", "instructions": "Dział?", "criteria": {"x": "Karty", "y": "Zwroty"}}}
        out.append((SO if i % 3 else BA, body(q, state=state)))
    return out


def test_multi_act_concurrency(srv):
    """32 clients with multi/act requests: byte-identical to each request alone (04 batch invariance)."""
    reqs = multi_act_requests(32)
    alone = [srv.post(p, b) for p, b in reqs]
    C.ok(all(st == 200 for st, _, _ in alone), f"multi/act alone: all 200 {[st for st, _, _ in alone]}")
    batched = False
    for attempt in range(3):
        together = run_parallel(lambda pb: srv.post(*pb), reqs)
        errs = [r for r in together if not isinstance(r, tuple)]
        if not C.ok(not errs, f"multi/act 32 clients: client errors {errs[:2]}"):
            return
        same = all(strip_latency(t[2]) == strip_latency(a[2]) and t[0] == a[0] for t, a in zip(together, alone))
        C.ok(same, "multi/act 32 clients: bodies identical to the same requests alone (except latency_ms)")
        if not same:
            for t, a in zip(together, alone):
                if strip_latency(t[2]) != strip_latency(a[2]):
                    print("  alone:   ", a[2][:400], "\n  together:", t[2][:400])
                    break
            return
        if max(int(t[1].get("x-basal-batch-requests", "0")) for t in together) > 1:
            batched = True
            break
    C.ok(batched, "multi/act 32 clients were batched together at least once")


def multi_act_server():
    seen = set()
    srv = Server(["--model", fixture("tiny-bias")])
    try:
        test_multi_act_errors(srv, seen)
        test_multi_act_answers(srv, seen)
        test_multi_act_concurrency(srv)
    finally:
        code = srv.stop()
    C.eq(code, 0, "multi/act server exits 0 on SIGTERM")



def metrics_server():
    """Counts exactly what was sent."""
    srv = Server(["--model", fixture("tiny-bias"), "--metrics"])
    try:
        st, _, b = srv.request("GET", "/metrics")
        C.eq(st, 200, "GET /metrics with --metrics")
        statuses = {}

        def send(path, payload, status, model):
            st, _, _ = srv.post(path, payload)
            C.eq(st, status, f"metrics traffic {path} {status}")
            key = (path, model, str(status))
            statuses[key] = statuses.get(key, 0) + 1
        ok = body({"q": {"type": "noul", "instructions": "Czy?"}})
        for _ in range(3):
            send(SO, ok, 200, MODEL)
        send(BA, ok, 200, MODEL)
        send(SO, b"not json", 422, "")
        send(BA, b"[]", 422, "")
        send(SO, body({"q": {"type": "noul"}}, model="nope"), 400, "")
        send(SO, body({"q": {"type": "noul"}}), 400, MODEL)
        srv.request("GET", "/health")
        srv.request("GET", "/v1/models")
        rounds = test_concurrency(srv)
        for p, _ in varied_requests(32):
            key = (p, MODEL, "200")
            statuses[key] = statuses.get(key, 0) + 1 + rounds
        test_metrics(srv, statuses)
    finally:
        code = srv.stop()
    C.eq(code, 0, "metrics server exits 0")


def small_limit_server():
    seen = set()
    srv = Server(["--model", fixture("tiny-bias"), "--max-body-bytes", "1000"])
    try:
        test_too_large(srv, seen, 1000)
        test_chunked_limit(srv, seen, 1000)
        st, _, b = srv.request("GET", "/metrics")
        C.eq((st, b), (404, b'{"detail":"Not Found"}'), "/metrics is 404 without --metrics")
    finally:
        srv.stop()


def auth_server():
    key = "s3cr3t-Key_123"
    srv = Server(["--model", fixture("tiny-bias"), "--api-key-env", "BASAL_TEST_KEY", "--metrics"],
                 env={"BASAL_TEST_KEY": key})
    so403 = ('{"detail":{"error_type":"authentication_error","message":"Must supply an API key! Check your request '
             'and try again."}}')
    so401 = ('{"detail":{"error_type":"authentication_error","message":"Cannot authenticate with the server. Please '
             'check your API key and try again."}}')
    ba403 = '{"error":"Must supply an API key! Check your request and try again."}'
    ba401 = '{"error":"Cannot authenticate with the server. Please check your API key and try again."}'
    ok = body({"q": {"type": "noul", "instructions": "Czy?"}})
    seen = set()
    try:
        for hdr, status in ((None, 403), ("", 403), ("Bearer", 403), ("Bearer    ", 403), ("Basic " + key, 403),
                            ("Token " + key, 403), ("Bearer" + key, 403), ("Bearer wrong", 401),
                            ("Bearer " + key + "x", 401), ("Bearer " + key[:-1], 401), ("Bearer x" + key, 401)):
            hd = {} if hdr is None else {"Authorization": hdr}
            for path, b403, b401 in ((SO, so403, so401), (BA, ba403, ba401)):
                st, h, b = srv.post(path, ok, headers=hd)
                C.eq((st, b.decode()), (status, b403 if status == 403 else b401), f"auth {hdr!r} on {path}")
                C.eq(h.get("www-authenticate"), "Bearer" if status == 401 else None, f"WWW-Authenticate {hdr!r}")
                check_v1_headers(h, f"auth {hdr!r}", seen)
            st, h, b = srv.request("GET", "/v1/models", headers=hd)
            C.eq((st, b.decode()), (status, so403 if status == 403 else so401), f"auth {hdr!r} on /v1/models")
        for hdr in ("Bearer " + key, "bearer " + key, "BEARER   " + key + "  ", "  Bearer " + key):
            st, _, b = srv.post(SO, ok, headers={"Authorization": hdr})
            C.eq(st, 200, f"auth accepted: {hdr!r}")
            st, _, _ = srv.request("HEAD", "/v1/models", headers={"Authorization": hdr})
            C.eq(st, 200, f"HEAD /v1/models with {hdr!r}")
        C.eq(srv.request("GET", "/health")[0], 200, "/health needs no key")
        C.eq(srv.request("GET", "/metrics")[0], 200, "/metrics needs no key")
        # authentication comes before the body is read or judged (02 §2 item 5)
        st, _, b = srv.post(SO, b"not json")
        C.eq((st, b.decode()), (403, so403), "auth before JSON parsing")
        raw = raw_exchange(srv.port, f"POST {BA} HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n".encode())
        st, _, b = parse_raw_response(raw)
        C.eq((st, b.decode()), (403, ba403), "auth before the body size check")
    finally:
        srv.stop()
    # an empty key variable refuses to start
    bad = Server(["--model", fixture("tiny-bias"), "--api-key-env", "BASAL_TEST_EMPTY"],
                 env={"BASAL_TEST_EMPTY": ""}, expect_start=False)
    C.eq(bad.wait_exit(60), 1, "empty api key variable: exit 1")
    C.ok("api key variable BASAL_TEST_EMPTY is empty" in bad.log(), f"empty api key message: {bad.log()[-200:]!r}")


def long_requests(n, reps, tag):
    out = []
    for i in range(n):
        st = f"{tag} {i}: " + "Klient pisze: zapłaciłem dwa razy za to samo zamówienie. " * reps
        q = {"type": "choice", "instructions": "Temat?", "criteria": {"a": None, "b": None, "c": None}}
        out.append((SO if i % 2 == 0 else BA, body({"q": q}, state=st)))
    return out


def overload_server():
    srv = Server(["--model", fixture("tiny-bias"), "--max-inflight", "2", "--metrics"])
    try:
        reqs = long_requests(16, 60, "overload")
        alone = [srv.post(p, b) for p, b in reqs]
        C.ok(all(a[0] == 200 for a in alone), "overload reference answers")
        so529 = ('{"detail":{"error_type":"overloaded_error","message":"Too many requests in flight. Retry after a '
                 'short delay."}}')
        ba529 = '{"error":"overloaded: too many requests in flight"}'
        # malformed bodies interleaved: answered 422, never counted or refused
        items = [("req", i) for i in range(16)] + [("bad", i) for i in range(6)]

        def go(it):
            kind, i = it
            if kind == "bad":
                time.sleep(0.01 * i)
                return srv.post(SO if i % 2 else BA, b"{oops")
            return srv.post(*reqs[i])
        res = run_parallel(go, items)
        n200 = n529 = 0
        for (kind, i), r in zip(items, res):
            if not C.ok(isinstance(r, tuple), f"overload client {kind} {i}: {r!r}"):
                continue
            st, h, b = r
            if kind == "bad":
                C.eq(st, 422, f"malformed body during overload ({i})")
                continue
            if st == 200:
                n200 += 1
                C.eq(strip_latency(b), strip_latency(alone[i][2]), f"overload: accepted request {i} answered right")
            else:
                n529 += 1
                C.eq((st, b.decode(), h.get("retry-after")), (529, so529 if reqs[i][0] == SO else ba529, "1"),
                     f"overload: refused request {i}")
                C.ok(RID.match(h.get("x-typesafe-request-id", "")) is not None, "529 carries a request id")
        C.ok(n529 >= 1, f"overload produced 529s ({n529})")
        C.ok(n200 >= 2, f"overload admitted requests ({n200})")
        ms = srv.metrics()
        C.eq(metric_sum(ms, "basal_http_requests_total", status="529"), float(n529), "529s counted (model \"\")")
        C.eq(metric_sum(ms, "basal_http_requests_total", model="", status="529"), float(n529), "529 model label")
        C.eq(metric(ms, "basal_max_inflight_requests"), 2.0, "max inflight gauge")
        # all slots are free again
        res = run_parallel(lambda pb: srv.post(*pb), reqs[:2])
        C.ok(all(isinstance(r, tuple) and r[0] == 200 for r in res), "after the storm both slots are free")
    finally:
        code = srv.stop()
    C.eq(code, 0, "overload server exits 0")


def sigterm_server():
    srv = Server(["--model", fixture("tiny-bias"), "--metrics"])
    reqs = long_requests(16, 75, "sigterm")
    try:
        ref = srv.post(*reqs[0])
        base = metric_sum(srv.metrics(), "basal_http_requests_total")
        done_at = [None] * len(reqs)

        def go(i):
            r = srv.post(*reqs[i])
            done_at[i] = time.time()
            return r
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("res", run_parallel(go, list(range(len(reqs))))))
        t.start()
        # SIGTERM once every request has arrived and some still wait for the engine
        deadline = time.time() + 30 * SLOW
        while time.time() < deadline:
            ms = srv.metrics()
            arrived = (metric_sum(ms, "basal_http_inflight_requests") + metric_sum(ms, "basal_http_requests_total")
                       - base)
            if arrived >= len(reqs) and metric(ms, "basal_model_inflight_requests", model=MODEL) >= 1:
                break
            time.sleep(0.002)
        sent = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        if srv.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
                C.ok(False, "a new connection after SIGTERM is refused")
            except OSError:
                C.ok(True, "")
        t.join(300 * SLOW)
        res = box.get("res", [])
        code = srv.wait_exit(120)
        C.eq(code, 0, "SIGTERM with requests in flight: exit 0")
        C.ok("stopped" in srv.log(), "server logged its stop")
        C.eq(len(res), len(reqs), "every client returned")
        for i, r in enumerate(res):
            C.ok(isinstance(r, tuple) and r[0] == 200,
                 f"in-flight request {i} answered 200 ({r if not isinstance(r, tuple) else r[0]})")
        C.eq(strip_latency(res[0][2]) if res and isinstance(res[0], tuple) else None, strip_latency(ref[2]),
             "answer during shutdown is the right one")
        late = sum(1 for d in done_at if d and d > sent)
        C.ok(late >= 1, f"requests were still in flight when SIGTERM came ({late})")
    finally:
        srv.kill()


def disconnect_server():
    # ASan keeps freed memory in quarantine; a small one keeps RSS meaningful
    env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=4"} if SLOW > 1 else None
    srv = Server(["--model", fixture("tiny-bias"), "--max-inflight", "8", "--metrics"], env=env)
    try:
        reqs = long_requests(8, 8, "gone")
        payloads = [(p, json.dumps(b, ensure_ascii=False).encode()) for p, b in reqs]

        def storm(rounds, width=16):
            for r in range(rounds):
                socks = []
                for k in range(width):
                    p, data = payloads[(r * width + k) % len(payloads)]
                    socks.append(send_post(srv.port, p, data, 10))
                time.sleep(0.002)
                for s in socks:
                    s.close()

        def settle():
            # the engine finishes what it had admitted; wait until nothing is left
            deadline = time.time() + 60 * SLOW
            while time.time() < deadline:
                st, _, _ = srv.post(*reqs[0])
                ms = srv.metrics()
                if st == 200 and metric(ms, "basal_model_inflight_requests", model=MODEL) == 0:
                    return
                time.sleep(0.05)
        storm(6)
        settle()
        rss0 = srv.rss_kib()
        storm(25 if SLOW == 1 else 10)
        settle()
        time.sleep(0.3)
        rss1 = srv.rss_kib()
        print(f"   RSS {rss0} -> {rss1} KiB over {(25 if SLOW == 1 else 10) * 16} disconnecting clients", flush=True)
        C.ok(rss1 - rss0 < 8192, f"RSS flat after disconnecting clients: {rss0} -> {rss1} KiB")
        ms = srv.metrics()
        cancelled = metric_sum(ms, "basal_http_requests_total", status="cancelled")
        C.ok(cancelled >= 1, f"disconnects counted as cancelled ({cancelled})")
        C.eq(metric_sum(ms, "basal_http_request_duration_seconds_count", status="cancelled"), 0.0,
             "cancelled requests stay out of the duration histogram")
        for ep in (SO, BA):
            C.eq(metric(ms, "basal_http_inflight_requests", endpoint=ep), 0.0, f"no handler left on {ep}")
        # every slot came back: 8 at once are all admitted
        res = run_parallel(lambda pb: srv.post(*pb), reqs)
        C.ok(all(isinstance(r, tuple) and r[0] == 200 for r in res),
             f"all 8 slots free after the disconnects: {[r[0] if isinstance(r, tuple) else r for r in res]}")
    finally:
        code = srv.stop()
    C.eq(code, 0, "disconnect server exits 0")


def early_release_server():
    """A client that leaves frees its slot at once, not when the engine gets
    to its job (04 §11 X1, §12 M3): with the engine busy on n long requests,
    2 clients send and hang up; 2 new requests must then still be admitted
    under --max-inflight n + 2. The check means something only while the
    engine is still busy: on a fast or idle machine the n requests can all be
    done first, so the scenario is run again with twice as many (up to 16)."""
    for n in (4, 8, 16):
        srv = Server(["--model", fixture("tiny-bias"), "--max-inflight", str(n + 2), "--metrics"])
        try:
            busy = long_requests(n, 75, "busy")
            short = long_requests(2, 2, "short")
            ref = [srv.post(*r) for r in short]
            box = {}
            t = threading.Thread(target=lambda: box.setdefault("res", run_parallel(lambda pb: srv.post(*pb), busy)))
            t.start()
            wait_until(lambda: srv.model_inflight(MODEL) >= n, 20)
            socks = []
            for p, b in short:
                socks.append(send_post(srv.port, p, json.dumps(b, ensure_ascii=False).encode(), 10))
            wait_until(lambda: srv.model_inflight(MODEL) >= n + 2, 5)
            for s in socks:
                s.close()
            time.sleep(0.05)
            ms = srv.metrics()
            still_busy = metric_sum(ms, "basal_http_requests_total", status="200") < len(ref) + len(busy)
            res = run_parallel(lambda pb: srv.post(*pb), short)
            t.join(120 * SLOW)
            if not still_busy and n < 16:
                print(f"       the {n} busy requests were done before the clients left; again with {2 * n}")
                continue
            C.ok(still_busy, "the engine was still busy when the clients left (the check below means something)")
            C.eq([r[0] if isinstance(r, tuple) else r for r in res], [200, 200],
                 "slots of departed clients are free while the engine is still busy")
            C.ok(all(isinstance(r, tuple) and strip_latency(r[2]) == strip_latency(a[2]) for r, a in zip(res, ref)),
                 "and those requests are answered right")
            C.ok(all(isinstance(r, tuple) and r[0] == 200 for r in box.get("res", [])), "the busy requests all answered")
            C.eq(metric_sum(srv.metrics(), "basal_http_requests_total", status="cancelled"), 2.0,
                 "the two departed clients are counted as cancelled")
            break
        finally:
            code = srv.stop()
            C.eq(code, 0, "early-release server exits 0")


def config_tests(tmp):
    both = os.path.join(tmp, "two.yml")
    with open(both, "w") as f:
        f.write(f"""# two models, an alias, a default model
default_model: basal-tiny-nobias
release_date: "2030-01-02"
metrics: true
models:
  - path: {fixture('tiny-bias')}
    aliases: [jev-latest]
  - path: {fixture('tiny-nobias')}
    long_tokens: 0
    schedule: fifo
""")
    srv = Server(["--config", both])
    try:
        st, _, b = srv.request("GET", "/health")
        C.eq(b.decode(), '{"status":"ok","models":["basal-tiny","basal-tiny-nobias"],"default_model":"basal-tiny-nobias"}',
             "two models: /health")
        st, _, b = srv.request("GET", "/v1/models")
        names = [m["name"] for m in json.loads(b)["models"]]
        C.eq(names, ["basal-tiny", "basal-tiny-nobias"], "two models: /v1/models in configuration order")
        C.eq(json.loads(b)["models"][0]["release_date"], "2030-01-02", "release_date from YAML")
        q = {"q": {"type": "choice", "criteria": ["a", "b"]}}
        for model, served in (("basal-tiny", "basal-tiny"), ("basal-tiny-nobias", "basal-tiny-nobias"),
                              ("jev-latest", "basal-tiny"), (None, "basal-tiny-nobias"), (5, "basal-tiny-nobias")):
            payload = {"state": S, "questions": q}
            if model is not None:
                payload["model"] = model
            st, _, b = srv.post(BA, payload)
            C.eq((st, json.loads(b).get("model") if st == 200 else b), (200, served), f"routing model={model!r}")
        a = srv.post(SO, body(q, model="jev-latest"))[2]
        bb = srv.post(SO, body(q, model="basal-tiny"))[2]
        C.eq(strip_latency(a), strip_latency(bb), "alias answers as its model, naming the served name")
        st, _, b = srv.post(SO, body(q, model="basal-tiny-NOBIAS"))
        C.eq(st, 400, "model names are case-sensitive")
        C.ok(srv.metrics() is not None, "metrics: true in YAML")
    finally:
        C.eq(srv.stop(), 0, "two-model server exits 0")

    def start_fail(args, env, status, text, what, auto_addr=True):
        p = Server(args, env=env, expect_start=False, auto_addr=auto_addr)
        code = p.wait_exit(60)
        C.eq(code, status, f"{what}: exit status")
        C.ok(text in p.log(), f"{what}: message {text!r} in {p.log()[-300:]!r}")

    def yml(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path
    tb = fixture("tiny-bias")
    start_fail(["--config", yml("unk.yml", f"models:\n  - path: {tb}\n    colour: blue\n")], None, 1,
               "unknown field colour", "unknown model key")
    start_fail(["--config", yml("unk2.yml", f"adress: 1.2.3.4:5\nmodels:\n  - path: {tb}\n")], None, 1,
               "unknown field adress", "unknown top-level key")
    start_fail(["--config", yml("twice.yml", f"models:\n  - path: {tb}\n  - path: {tb}\n")], None, 1,
               "model basal-tiny configured twice", "same model twice")
    start_fail(["--config", yml("alias.yml", f"models:\n  - path: {tb}\n  - path: {fixture('tiny-nobias')}\n"
                                "    aliases: [basal-tiny]\n")], None, 1, "model basal-tiny configured twice",
               "alias clashing with a name")
    start_fail(["--config", yml("def.yml", f"default_model: other\nmodels:\n  - path: {tb}\n")], None, 1,
               'default model other is not served (["basal-tiny"])', "default model not served")
    start_fail(["--config", yml("f16.yml", f"models:\n  - path: {tb}\n    dtype: f16\n")], None, 1,
               "dtype f16 needs the CUDA backend; use bf16 or f32", "f16 on the CPU")
    start_fail(["--model", tb, "--dtype", "f16"], None, 1, "dtype f16 needs the CUDA backend", "--dtype f16")
    start_fail(["--config", yml("none.yml", "models: []\n")], None, 1, "no models", "empty models")
    start_fail(["--config", yml("both.yml", f"models:\n  - path: {tb}\n    repo: a/b\n")], None, 1,
               "exactly one of path and repo", "path and repo")
    start_fail(["--config", both, "--model", tb], None, 2, "--config cannot be combined with --model",
               "--config with --model")
    start_fail(["--model", tb, "--frobnicate"], None, 2, "unknown option --frobnicate", "unknown flag")
    start_fail(["--model", tb, "--max-inflight", "0"], None, 2, "--max-inflight", "max-inflight 0")
    start_fail(["--model", tb, "--addr", "localhost:80"], None, 2, "host names are not accepted", "host name")  # a bad flag value: usage (06 §2)
    start_fail(["--model", "nobody/nothing@main"], {"HF_HOME": tmp}, 1,
               f"model nobody/nothing@main is not available locally (looked in {tmp}/hub/models--nobody--nothing)",
               "repository reference without a cache")
    # no GPU here: a CUDA build says no GPU is available, a CPU-only build that it has no CUDA backend
    start_fail(["--model", tb, "--backend", "cuda"], None, 1, "CUDA", "--backend cuda")
    start_fail(["--model", tb, "--kernels", "candle"], None, 2, "--kernels candle is not supported", "--kernels")
    start_fail(["--model", tb, "--readout", "f16"], None, 2, "--readout must be f32 or bf16", "--readout f16")
    # --readout bf16 (05 Q4): the server answers as `basal decide --readout bf16` (itself checked against
    # PyTorch-rounded logits in tests/e2e/t_readout_bf16.sh), which differs from the f32 readout
    p = Server(["--model", tb, "--threads", "1", "--readout", "bf16"])
    qs = {"c": {"type": "choice", "instructions": "Temat?", "criteria": {"billing": None, "shipping": None, "x": None}},
          "s": {"type": "score", "instructions": "Pilność?", "criteria": ["niska", "średnia", "wysoka"]}}
    st, _, raw = p.post(SO, body(qs))
    p.stop()
    if C.eq(st, 200, f"--readout bf16: status {raw[:200]!r}"):
        got = without_latency(json.loads(raw, object_pairs_hook=list))
        C.ok(got == without_latency(decide(body(qs), ["--readout", "bf16"]) or []), "--readout bf16 equals decide")
        C.ok(got != without_latency(decide(body(qs)) or []), "--readout bf16 differs from the f32 readout")
    start_fail(["--model", tb, "--schedule", "lifo"], None, 2, "--schedule must be hrrn or fifo", "--schedule")
    start_fail(["--config", os.path.join(tmp, "missing.yml")], None, 1, "missing.yml", "missing config file")
    # access log (issue 18): on by default; --access-log [on|off] > BASAL_ACCESS_LOG (0/off/false: off) > YAML
    quiet_yml = yml("quiet.yml", f"access_log: false\nmodels:\n  - path: {tb}\n")
    for args, env, want in (([], None, True), (["--access-log"], None, True), (["--access-log", "off"], None, False),
                            (["--access-log=off"], None, False), ([], {"BASAL_ACCESS_LOG": "1"}, True),
                            ([], {"BASAL_ACCESS_LOG": "0"}, False), (["--access-log", "on"], {"BASAL_ACCESS_LOG": "0"}, True),
                            (["--config", quiet_yml], None, False),
                            (["--config", quiet_yml], {"BASAL_ACCESS_LOG": "on"}, True)):
        base = [] if "--config" in args else ["--model", tb]
        p = Server(base + ["--threads", "1"] + args, env=env)
        p.post(SO, body({"q": {"type": "noul", "instructions": "x"}}))
        p.post(BA, b"[]")
        p.stop()
        line = re.search(r"Z INFO  access: POST /v1/systemone 200 [0-9.]+ ms request_id=[0-9a-f]{32} "
                         r"client=127\.0\.0\.1:\d+ model=basal-tiny questions=1 queue_ms=[0-9.]+ compute_ms=[0-9.]+ "
                         r"batch=1\n", p.log())
        C.eq(line is not None, want, f"access log line with {args} {env}: {p.log()[-600:]!r}")
        C.eq(re.search(r"access: POST /v1/basal 422 [0-9.]+ ms request_id=[0-9a-f]{32} client=\S+ "
                       r"model=- questions=- queue_ms=- compute_ms=- batch=-\n", p.log()) is not None,
             want, f"access log of an error with {args} {env}")
    # the model reference resolves through a Hugging Face cache layout
    snap = os.path.join(tmp, "hub", "models--Remek--basal-1.5-mini", "snapshots",
                        "1978d0705ce09cd2d7d8d3e87b304468121e7255")  # the pinned commit (06 §3 R1)
    os.makedirs(os.path.dirname(snap))
    os.symlink(os.path.abspath(tb), snap)
    p = Server(["--model", "mini"], env={"HF_HOME": tmp})
    C.eq(json.loads(p.request("GET", "/health")[2])["models"], ["basal-tiny"], "short name mini via the HF cache")
    p.stop()
    # address precedence: --addr > BASAL_ADDR > YAML addr (06 §4.1)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    busy = f"127.0.0.1:{taken.getsockname()[1]}"
    cfg = yml("addr.yml", f"addr: {busy}\nmodels:\n  - path: {tb}\n")
    p = Server(["--config", cfg], env={"BASAL_ADDR": "127.0.0.1:0"})
    C.ok(p.port is not None and p.port != taken.getsockname()[1], "BASAL_ADDR wins over YAML addr")
    p.stop()
    p = Server(["--model", tb, "--addr", "127.0.0.1:0"], env={"BASAL_ADDR": busy})
    C.ok(p.port is not None, "--addr wins over BASAL_ADDR")
    p.stop()
    start_fail(["--config", cfg], None, 1, f"binding {busy}", "YAML addr used when nothing overrides it",
               auto_addr=False)
    taken.close()
    # BASAL_CONFIG and ./basal-serve.yml
    p = Server([], env={"BASAL_CONFIG": both})
    C.eq(json.loads(p.request("GET", "/health")[2])["default_model"], "basal-tiny-nobias", "BASAL_CONFIG")
    p.stop()
    os.makedirs(os.path.join(tmp, "cwd"))
    with open(os.path.join(tmp, "cwd", "basal-serve.yml"), "w") as f:
        f.write(f"models:\n  - path: {os.path.abspath(fixture('tiny-nobias'))}\n")
    p = Server([], env={"_CWD": os.path.join(tmp, "cwd")})
    C.eq(json.loads(p.request("GET", "/health")[2])["models"], ["basal-tiny-nobias"], "./basal-serve.yml")
    p.stop()


def evidence_server(tmp):
    """Evidence spans (03 §4) over both endpoints on tiny-bias with a head
    written by torch.save: the answer equals `basal decide` (which
    t_evidence_torch.sh checks against PyTorch), the evidence key is last, both
    dialects give the same spans, and 32 concurrent clients get bodies
    byte-identical to the same requests sent alone. Without a head, evidence is
    the 422 capability error of 02 §4.4 on both endpoints."""
    plain = Server(["--model", fixture("tiny-bias")])
    try:
        q = {"q": {"type": "noul", "instructions": "Czy?", "evidence": True}}
        expect(plain, SO, body(q), 422,
               '{"error":"unsupported","detail":[{"type":"unsupported_feature","loc":["body","questions","q",'
               '"evidence"],"msg":"evidence is not available for this model (no evidence_head.pt)"}]}',
               "evidence without a head")
        expect(plain, BA, body(q), 422, '{"error":"evidence is not available for this model (no evidence_head.pt)"}',
               "basal evidence without a head")
    finally:
        plain.stop()
    d = os.path.join(tmp, "tiny-evidence")
    os.makedirs(d, exist_ok=True)
    src = fixture("tiny-bias")
    for f in os.listdir(src):
        if not os.path.exists(os.path.join(d, f)):
            os.symlink(os.path.join(os.path.abspath(src), f), os.path.join(d, f))
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
    hidden = json.load(open(os.path.join(src, "config.json")))["hidden_size"]
    subprocess.run(["/usr/bin/python3", os.path.join(tools, "make_evidence_head.py"), "--hidden", str(hidden),
                    "--dtype", "bf16", "--seed", "11", "--out", os.path.join(d, "evidence_head.pt")], check=True)
    srv = Server(["--model", d])
    try:
        qs = {"c": {"type": "choice", "instructions": "Temat?", "criteria": ["billing", "shipping"], "evidence": True},
              "n": {"type": "noul", "instructions": "Czy chodzi o płatność?", "evidence": 1},
              "s": {"type": "score", "instructions": "Pilność?", "criteria": ["niska", "wysoka"], "evidence": "tak"},
              "x": {"type": "noul", "instructions": "Bez dowodów?"},
              # act answers take evidence too (03 §2.6)
              "a": {"type": "act", "instructions": "Czy zwrócić?", "costs": {"wrong": 5, "defer": 1}, "evidence": True}}
        so = {}
        for path in (SO, BA):
            st, _, raw = srv.post(path, body(qs))
            if not C.eq(st, 200, f"evidence {path}: status ({raw[:300]!r})"):
                continue
            obj = json.loads(raw)
            for qid, a in obj["answers"].items():
                keys = list(a)
                if qid == "x":
                    C.ok("evidence" not in a, f"evidence {path}: no evidence key without the flag")
                    continue
                C.eq(keys[-1], "evidence", f"evidence {path} {qid}: evidence is the last key")
                ev = a["evidence"]
                C.ok(1 <= len(ev) <= 3, f"evidence {path} {qid}: 1..3 spans")
                for sp in ev:
                    C.eq(list(sp), ["text", "start", "end", "probability"], f"evidence {path} {qid}: span keys")
                    C.eq(S[sp["start"]:sp["end"]], sp["text"], f"evidence {path} {qid}: verbatim span")
                C.ok(all(ev[i]["probability"] >= ev[i + 1]["probability"] for i in range(len(ev) - 1)),
                     f"evidence {path} {qid}: descending probability")
                if path == SO:
                    so[qid] = ev
                else:
                    C.eq(ev, so.get(qid), f"evidence {qid}: /v1/basal spans equal /v1/systemone's")
            if path == SO:
                r = run_basal("decide", d, body(qs), ensure_ascii=True)
                ref = json.loads(r.stdout, object_pairs_hook=list) if r.returncode == 0 else None
                C.ok(ref is not None and without_latency(json.loads(raw, object_pairs_hook=list)) == without_latency(ref),
                     "evidence: answer equals `basal decide`")
        # a single-option question still gets its evidence forward (03 §4.1)
        st, _, raw = srv.post(SO, body({"o": {"type": "choice", "instructions": "x", "criteria": ["jedyna"],
                                              "evidence": True}}))
        C.ok(st == 200 and "evidence" in json.loads(raw)["answers"]["o"], f"single option evidence: {raw[:200]!r}")
        # evidence with facts "auto" (03 §4.6): spans lie in the state as sent (before the appended facts),
        # on both endpoints, and the answer equals `basal decide`
        fstate = "Budżet działu wynosi 50 000,00 zł, dotychczas wydano 41 250,00 zł. Stawka VAT 23%. Termin 14 dni."
        fq = {"n": {"type": "noul", "instructions": "Czy budżet wystarczy?", "evidence": True},
              "c": {"type": "choice", "instructions": "Temat?", "criteria": ["budżet", "termin"], "evidence": True}}
        fb = body(fq, state=fstate, facts="auto")
        for path in (SO, BA):
            st, _, raw = srv.post(path, fb)
            if not C.eq(st, 200, f"facts + evidence {path}: status ({raw[:300]!r})"):
                continue
            for qid, a in json.loads(raw)["answers"].items():
                ev = a.get("evidence", [])
                C.ok(1 <= len(ev) <= 3, f"facts + evidence {path} {qid}: 1..3 spans")
                for sp in ev:
                    C.ok(sp["end"] <= len(fstate) and fstate[sp["start"]:sp["end"]] == sp["text"],
                         f"facts + evidence {path} {qid}: span {sp} inside the state as sent")
            if path == SO:
                r = run_basal("decide", d, fb, ensure_ascii=True)
                ref = json.loads(r.stdout, object_pairs_hook=list) if r.returncode == 0 else None
                C.ok(ref is not None and without_latency(json.loads(raw, object_pairs_hook=list)) == without_latency(ref),
                     "facts + evidence: answer equals `basal decide`")
        # 32 concurrent clients, byte-identical to alone
        reqs = []
        for i, (p, b) in enumerate(varied_requests(32)):
            for qq in b["questions"].values():
                qq["evidence"] = i % 5 != 4
            if i % 4 == 1 and isinstance(b.get("state"), str):
                b["facts"] = "auto"  # evidence with injected facts in the same batch
            reqs.append((p, b))
        alone = [srv.post(p, b) for p, b in reqs]
        C.ok(all(st == 200 and b"evidence" in raw for st, _, raw in alone[:4]), "evidence requests alone: 200")
        batched = False
        for attempt in range(3):  # until the clients actually shared a batch
            together = run_parallel(lambda pb: srv.post(*pb), reqs)
            errs = [r for r in together if not isinstance(r, tuple)]
            if not C.ok(not errs, f"evidence, 32 concurrent clients: client errors {errs[:2]}"):
                break
            same = all(t[0] == a[0] and strip_latency(t[2]) == strip_latency(a[2]) for t, a in zip(together, alone))
            C.ok(same, "evidence, 32 concurrent clients: bodies byte-identical to alone (except latency_ms)")
            if max(int(t[1].get("x-basal-batch-requests", "0")) for t in together) > 1:
                batched = True
                break
        C.ok(batched, "evidence, 32 concurrent clients were batched together at least once")
    finally:
        code = srv.stop()
    C.eq(code, 0, "evidence server exits 0")


def main():
    import tempfile
    tmp = tempfile.mkdtemp(prefix="basal-serve-test-")
    import atexit, shutil
    atexit.register(shutil.rmtree, tmp, True)
    sections = [("endpoints, errors, answers", main_server), ("multi and act", multi_act_server),
                ("metrics and concurrency", metrics_server),
                ("body limit", small_limit_server), ("authentication", auth_server), ("overload", overload_server),
                ("SIGTERM", sigterm_server), ("disconnects", disconnect_server),
                ("slot release on disconnect", early_release_server),
                ("configuration", lambda: config_tests(tmp)), ("evidence", lambda: evidence_server(tmp))]
    only = os.environ.get("ONLY")
    for name, fn in sections:
        if only and only not in name:
            continue
        t0 = time.time()
        before = C.failed
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - report and go on with the next section
            import traceback
            traceback.print_exc()
            C.ok(False, f"section {name} raised {e!r}")
        print(f"-- {name}: {time.time() - t0:.1f} s, {C.failed - before} failures", flush=True)
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
