"""GET /openapi.json (issue 18): the document served is web/openapi.json byte
for byte; it is what tools/make-openapi.py makes from TypeSafe's OpenAPI
document (spec 02 TS-openapi), keeps TypeSafe's schemas (only the listed
extensions added), is a valid OpenAPI 3.1 document (@readme/openapi-parser,
an npm oracle, run by tests/e2e/t_openapi.sh before this script) whose every schema
is valid JSON Schema 2020-12 (jsonschema's meta-schema check), and real answers
of a running server, of every endpoint and many statuses, are documented
there: the status, the content type, the response headers and the body
against its schema (jsonschema, Draft 2020-12, $refs resolved in the document).
Run by tests/e2e/t_openapi.sh."""
import copy
import json
import os
import sys

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvlib import Checks, Server, fixture, load_openapi  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
C = Checks()
with open(os.path.join(ROOT, "web", "openapi.json"), "rb") as f:
    RAW = f.read()
DOC = json.loads(RAW)
TS = load_openapi()


def pointer(*parts):
    return "#/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def validator_at(ref):
    root = copy.deepcopy(DOC)
    root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    root["$ref"] = ref
    return jsonschema.Draft202012Validator(root)


def media(ct):
    return (ct or "").split(";")[0].strip().lower()


def documented(path, method, status, headers, body, what):
    """The answer is one the document describes: status, content type, headers, body."""
    op = DOC["paths"].get(path, {}).get(method.lower())
    if not C.ok(op is not None, f"{what}: {method} {path} is not in the document"):
        return
    resp = op["responses"].get(str(status))
    if not C.ok(resp is not None, f"{what}: status {status} of {method} {path} is not documented"):
        return
    for name, h in resp.get("headers", {}).items():
        v = headers.get(name.lower())
        if C.ok(v is not None, f"{what}: documented header {name} missing"):
            inst = int(v) if h["schema"].get("type") == "integer" else v
            errs = list(jsonschema.Draft202012Validator(h["schema"]).iter_errors(inst))
            C.ok(not errs, f"{what}: header {name}: {v!r}: {[e.message for e in errs]}")
    if method == "HEAD":
        C.eq(body, b"", f"{what}: HEAD has no body")
        return
    content = resp.get("content", {})
    keys = [k for k in content if media(k) == media(headers.get("content-type"))]
    if not C.ok(len(keys) == 1, f"{what}: content type {headers.get('content-type')!r} not documented "
                                f"for {status} ({list(content)})"):
        return
    if media(keys[0]) != "application/json":
        return
    inst = json.loads(body)
    v = validator_at(pointer("paths", path, method.lower(), "responses", str(status), "content", keys[0], "schema"))
    errs = list(v.iter_errors(inst))
    C.ok(not errs, f"{what}: body {body[:300]!r} does not match the schema: {[e.message for e in errs][:3]}")


def check_document():
    # every schema the document holds is JSON Schema 2020-12
    for name, sch in DOC["components"]["schemas"].items():
        try:
            jsonschema.Draft202012Validator.check_schema(sch)
            C.ok(True, name)
        except jsonschema.SchemaError as e:
            C.ok(False, f"schema {name}: {e.message}")
    # TypeSafe's schemas kept: unchanged, or only the changes make-openapi.py lists
    ts = TS["components"]["schemas"]
    changed = {"Question", "Answer", "ChoiceQuestion", "NoulQuestion", "ScoreQuestion", "ChoiceAnswer", "NoulAnswer",
               "ScoreAnswer", "SystemOneRequest", "Usage", "ModelMetadata"}
    for name, sch in ts.items():
        ours = DOC["components"]["schemas"].get(name)
        if not C.ok(ours is not None, f"TypeSafe schema {name} missing"):
            continue
        if name not in changed:
            C.eq(ours, sch, f"TypeSafe schema {name} unchanged")
            continue
        for k, v in sch.items():
            if k == "properties":
                for p, ps in v.items():
                    got = ours["properties"].get(p)
                    C.ok(got == ps or (got or {}).get("anyOf", [None])[0] == ps,
                         f"{name}.{p}: TypeSafe's schema kept (or the first branch of anyOf)")
            elif k == "oneOf":
                C.eq(ours[k][:len(v)], v, f"{name}.oneOf starts with TypeSafe's members")
            elif k == "discriminator":
                C.eq({m: ours[k]["mapping"][m] for m in v["mapping"]}, v["mapping"], f"{name} mapping kept")
                C.eq(ours[k]["propertyName"], v["propertyName"], f"{name} discriminator")
            else:
                C.eq(ours[k], v, f"{name}.{k} unchanged")
    for path, ops in TS["paths"].items():
        for m, op in ops.items():
            ours = DOC["paths"][path][m]
            C.eq(ours["operationId"], op["operationId"], f"{m} {path} operationId")
            C.eq(ours["requestBody"] if "requestBody" in op else None, op.get("requestBody"), f"{m} {path} request")
            for st, r in op["responses"].items():
                got = ours["responses"][st]["content"]["application/json"]["schema"]
                want = r["content"]["application/json"]["schema"]
                C.ok(got == want or got.get("anyOf", [None])[0] == want,
                     f"{m} {path} {st}: TypeSafe's schema kept (or the first branch of anyOf)")
    # the validator used below can fail: a TypeSafe answer without its choice
    bad = {"model": "m", "answers": {"q": {"type": "choice", "probabilities": {"a": 1.0}, "confidence": 1.0}},
           "usage": {"input_tokens": 1, "output_tokens": 0}}
    v = validator_at(pointer("components", "schemas", "SystemOneResponse"))
    C.ok(list(v.iter_errors(bad)), "a choice answer without `choice` is refused")
    bad["answers"]["q"] = {"type": "multi", "selected": ["a"], "probabilities": {"a": 0.9}, "threshold": 0.5}
    C.ok(list(v.iter_errors(bad)), "a multi answer without set_confidence is refused")


S = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot."
COSTS = {"approve": {"true": 0, "false": 1240}, "reject": {"true": 300, "false": 0}, "human": {"true": 15, "false": 15}}


def exchanges(srv, model):
    """(what, method, path, body) of requests whose answers the document must describe."""
    qs = {
        "c": {"type": "choice", "instructions": "Temat?", "criteria": {"billing": "płatności", "shipping": None}},
        "ca": {"type": "choice", "instructions": "Temat?", "criteria": ["a", "b", "c"]},
        "c1": {"type": "choice", "criteria": {"billing": None}},
        "n": {"type": "noul", "instructions": "Czy prosi o zwrot?"},
        "s": {"type": "score", "instructions": "Pilność?", "criteria": ["niska", {"level": "średnia"}, ["wysoka"]]},
        "so": {"type": "score", "instructions": "Pilność?", "criteria": {"low": "niska", "high": "wysoka"}},
        "m": {"type": "multi", "instructions": "Tematy?", "criteria": {"refund": None, "delivery": "dostawa"},
              "threshold": 0.4, "max": 1},
        "a": {"type": "act", "instructions": "Zwrot?", "criteria": {"true": "tak", "false": "nie"}, "costs": COSTS,
              "max_error": 0.01},
        "ac": {"type": "act", "instructions": "Temat?", "criteria": {"x": "A", "y": "B"},
               "costs": {"wrong": 99, "defer": 1}},
    }
    full = {"model": model, "state": S, "questions": qs}
    obj_state = {"model": model, "state": {"tekst": S, "kanał": "email"}, "questions": {"n": qs["n"]}, "facts": "auto"}
    yield "all types", "POST", "/v1/systemone", full
    yield "object state, facts", "POST", "/v1/systemone", obj_state
    yield "basal all types", "POST", "/v1/basal", dict(full, questions={k: v for k, v in qs.items() if k not in ("c1",)})
    yield "basal lenient type", "POST", "/v1/basal", {"state": 5, "questions": {"q": {"type": "choise", "criteria": ["a", "b"]}}}
    yield "validation", "POST", "/v1/systemone", {"model": model, "state": None, "questions": {"a": {"type": "score", "criteria": []}}}
    yield "union tag", "POST", "/v1/systemone", {"model": model, "state": S, "questions": {"q": {"instructions": "x"}}}
    yield "json decode", "POST", "/v1/systemone", b"not json"
    yield "basal json decode", "POST", "/v1/basal", b"not json"
    yield "unknown model", "POST", "/v1/systemone", {"model": "nope-1", "state": S, "questions": {"n": qs["n"]}}
    yield "basal unknown model", "POST", "/v1/basal", {"model": "nope-1", "state": S, "questions": {"n": qs["n"]}}
    yield "usage error", "POST", "/v1/systemone", {"model": model, "state": S, "questions": {"q": {"type": "choice", "criteria": {}}}}
    yield "unknown type", "POST", "/v1/systemone", {"model": model, "state": S, "questions": {"q": {"type": "rank"}}}
    yield "capability", "POST", "/v1/systemone", {"model": model, "state": S, "questions": {
        "q": {"type": "act", "criteria": {"only": "x"}, "costs": {"wrong": 1}}}}
    yield "basal validation", "POST", "/v1/basal", {"questions": {"q": {"type": "noul"}}}
    # the playground's logit lens: every type (a large choice's groups and finals too), its errors
    big = {"type": "choice", "instructions": "Który?", "criteria": [f"q{i}" for i in range(12)]}
    yield "lens all types", "POST", "/v1/lens", dict(full, questions=dict(qs, big=big))
    yield "lens validation", "POST", "/v1/lens", {"model": model, "state": None, "questions": {}}
    yield "lens unknown model", "POST", "/v1/lens", {"model": "nope-1", "state": S, "questions": {"n": qs["n"]}}
    yield "lens too large", "POST", "/v1/lens", {"model": model, "state": "x" * 9000, "questions": {"n": qs["n"]}}
    yield "too large", "POST", "/v1/systemone", {"model": model, "state": "x" * 9000, "questions": {"n": qs["n"]}}
    yield "basal too large", "POST", "/v1/basal", {"model": model, "state": "x" * 9000, "questions": {"n": qs["n"]}}
    for p in ("/v1/models", "/health", "/metrics", "/openapi.json", "/"):
        yield f"GET {p}", "GET", p, None
    yield "HEAD /v1/models", "HEAD", "/v1/models", None


def main():
    check_document()
    model_dir = fixture("tiny-bias")
    srv = Server(["--model", model_dir, "--metrics", "--max-body-bytes", "8192"])
    try:
        st, h, body = srv.request("GET", "/openapi.json")
        C.eq(st, 200, "GET /openapi.json status")
        C.eq(h.get("content-type"), "application/json", "GET /openapi.json content type")
        C.ok(body == RAW, "GET /openapi.json serves web/openapi.json byte for byte")
        model = json.loads(srv.request("GET", "/v1/models")[2])["models"][0]["name"]
        seen = set()
        for what, method, path, obj in exchanges(srv, model):
            if isinstance(obj, (dict, list)):
                st, h, body = srv.post(path, obj)
            elif obj is not None:
                st, h, body = srv.request(method, path, obj)
            else:
                st, h, body = srv.request(method, path)
            seen.add((path, method, st))
            documented(path, method, st, h, body, what)
        for want in [("/v1/systemone", "POST", 200), ("/v1/systemone", "POST", 400), ("/v1/systemone", "POST", 413),
                     ("/v1/systemone", "POST", 422), ("/v1/basal", "POST", 200), ("/v1/basal", "POST", 413),
                     ("/v1/basal", "POST", 422), ("/metrics", "GET", 200), ("/", "GET", 200),
                     ("/v1/lens", "POST", 200), ("/v1/lens", "POST", 400), ("/v1/lens", "POST", 413),
                     ("/v1/lens", "POST", 422)]:
            C.ok(want in seen, f"an exchange answered {want} (the checks cover it)")
    finally:
        C.eq(srv.stop(), 0, "server exit status")
    # authentication on, the playground and metrics off: 401, 403, 404
    srv = Server(["--model", model_dir, "--api-key-env", "OPENAPI_TEST_KEY", "--no-ui"],
                 env={"OPENAPI_TEST_KEY": "s3cret"})
    try:
        q = {"model": "x", "state": S, "questions": {"n": {"type": "noul", "instructions": "x"}}}
        st, h, body = srv.post("/v1/lens", q, headers={"Authorization": "Bearer s3cret"})
        C.eq(st, 404, "/v1/lens is off with the playground")
        documented("/v1/lens", "POST", st, h, body, "/v1/lens off")
        for path in ("/v1/systemone", "/v1/basal"):
            for hdr, want in (({}, 403), ({"Authorization": "Bearer wrong"}, 401)):
                st, h, body = srv.post(path, q, headers=hdr)
                C.eq(st, want, f"{path} {hdr}")
                documented(path, "POST", st, h, body, f"{path} auth {want}")
        for path in ("/", "/metrics"):
            st, h, body = srv.request("GET", path)
            C.eq(st, 404, f"GET {path} off")
            documented(path, "GET", st, h, body, f"GET {path} off")
        st, h, body = srv.request("GET", "/v1/models")
        documented("/v1/models", "GET", st, h, body, "GET /v1/models without the key")
        st, h, body = srv.request("GET", "/openapi.json")
        C.ok(st == 200 and body == RAW, "GET /openapi.json is open (no key) with --no-ui")
    finally:
        C.eq(srv.stop(), 0, "server exit status (auth)")
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
