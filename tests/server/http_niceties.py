"""HTTP niceties of `basal serve` (issue 18 item 5), driven with http.client
and checked with CPython json:

- an unknown model: the body of spec 02 §3 step 7 byte for byte (02 §12 keeps
  it identical to hosted TypeSafe), the served names in x-basal-served-models;
- /v1/basal with a misspelt type ("choise"): answered as a choice without
  calibration, as upstream basal 1.5 `to_items`/`canonical` do
  (temperature_per_prim.get(type, 1.0)); the oracle is the calibrated answer
  of the same question re-derived in float64 from the uncalibrated one;
- prompt_too_long: the 422 body of 02 §4.5 ({"error":"unsupported",...}, the
  capability-error shape, not the validation shape);
- unknown paths, a trailing slash, a disabled /metrics, `/`: 404 with the JSON
  body of 02 §10;
- CORS, opt-in (--cors, BASAL_CORS, serve.yml cors_origins): headers for allowed
  origins only, a 204 preflight with Allow-Methods/Allow-Headers/Max-Age, never
  authenticated; without it OPTIONS stays a 405 with Allow;
- a long forward (>= 1024 tokens) logs its layer progress at the progress
  period and a closing line; a short one, or one under the period, nothing."""
import json
import math
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvlib import FIXTURES, Checks, Server, request  # noqa: E402

C = Checks()
SO, BA = "/v1/systemone", "/v1/basal"
NOT_FOUND = {"detail": "Not Found"}


def fixture(name):
    return os.path.join(FIXTURES, name)


def model_copy(tmp, name, served):
    """tiny-bias under another served name (basal.json), weights linked."""
    src, d = fixture("tiny-bias"), os.path.join(tmp, name)
    os.makedirs(d)
    for f in os.listdir(src):
        if f != "basal.json":
            os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(d, f))
    meta = json.load(open(os.path.join(src, "basal.json")))
    meta["name"] = served
    with open(os.path.join(d, "basal.json"), "w") as f:
        json.dump(meta, f, ensure_ascii=False)
    return d


def post(srv, path, obj, headers=None):
    st, h, b = srv.post(path, obj, headers)
    return st, h, b


def parsed(b):
    try:
        return json.loads(b)
    except ValueError:
        return ("not JSON", b[:200])


def test_unknown_model(tmp):
    a = model_copy(tmp, "m-a", "alpha")
    b = model_copy(tmp, "m-b", "beta, ü%")  # a comma, a non-ASCII letter and '%' must not break the header
    srv = Server(["--model", a, "--model", b])
    try:
        q = {"q": {"type": "noul", "instructions": "Czy?"}}
        st, h, raw = post(srv, SO, {"model": "nope-1", "state": "x", "questions": q})
        C.eq((st, raw), (400, b'{"detail":{"error_type":"api_usage_error","message":"Unknown model: nope-1"}}'),
             "unknown model /v1/systemone: spec 02 step 7 body")
        hv = h.get("x-basal-served-models")
        C.eq(hv, "alpha, beta%2C%20%C3%BC%25", "unknown model: x-basal-served-models")
        from urllib.parse import unquote
        C.eq([unquote(x) for x in (hv or "").split(", ")], ["alpha", "beta, ü%"], "served names decode back")
        st, h, raw = post(srv, BA, {"model": "nope-1", "state": "x", "questions": q})
        C.eq((st, parsed(raw)), (422, {"error": "Unknown model: nope-1"}), "unknown model /v1/basal")
        C.eq(h.get("x-basal-served-models"), "alpha, beta%2C%20%C3%BC%25", "unknown model /v1/basal: header")
        # a known name gets no such header
        st, h, raw = post(srv, SO, {"model": "alpha", "state": "x", "questions": q})
        C.eq((st, "x-basal-served-models" in h), (200, False), "known model: 200 without the header")
    finally:
        C.eq(srv.stop(), 0, "unknown-model server exits 0")


def softmax_t(p, T):
    """upstream canonical(): softmax(log(clamp(p, 1e-12)) / T), float64."""
    logs = [math.log(max(x, 1e-12)) / T for x in p]
    m = max(logs)
    e = [math.exp(x - m) for x in logs]
    s = sum(e)
    return [x / s for x in e]


def test_basal_type_and_too_long():
    src = fixture("tiny-bias")
    temps = json.load(open(os.path.join(src, "CALIBRATION.json")))["temperature_per_prim"]
    # --no-ui: `/` is then an unknown path like any other (with the playground on it is the page, t_playground)
    srv = Server(["--model", src, "--no-ui"])
    try:
        state = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot."
        crit = {"billing": "płatności", "shipping": "wysyłka", "other": None}

        def ask(qtype):
            q = {"instructions": "Temat?", "criteria": crit}
            if qtype is not None:
                q["type"] = qtype
            st, _, raw = post(srv, BA, {"state": state, "questions": {"q": q}})
            C.eq(st, 200, f"/v1/basal type {qtype!r}: status ({raw[:200]!r})")
            return json.loads(raw)["answers"]["q"] if st == 200 else None

        cal, typo, absent, num = ask("choice"), ask("choise"), ask(None), ask(5)
        if cal and typo and absent and num:
            C.eq(list(typo), ["type", "choice", "probabilities", "confidence"], "choise: answer keys of a choice")
            C.eq(typo["type"], "choice", "choise is answered as a choice")
            pu = [typo["probabilities"][k] for k in crit]
            pc = [cal["probabilities"][k] for k in crit]
            C.ok(pu != pc, "choise differs from the calibrated choice (the fixture's choice temperature is "
                 f"{temps['choice']})")
            want = softmax_t(pu, temps["choice"])
            C.ok(all(abs(x - y) <= 1e-12 for x, y in zip(want, pc)),
                 f"choise = choice without calibration: softmax(log p / T) of it gives the calibrated one "
                 f"({want} vs {pc})")
            C.eq(typo["confidence"], max(pu), "choise: confidence = max(p)")
            C.eq(typo["choice"], list(crit)[pu.index(max(pu))], "choise: choice = argmax")
            # spec 02 §5.1 / basal-rs: absent or non-string type = choice, calibrated
            C.eq(absent, cal, "type absent = calibrated choice")
            C.eq(num, cal, "type 5 = calibrated choice")
        # prompt longer than max_position_embeddings (2048): 02 §4.5
        long_state = "słowo " * 3000
        qs = {"a": {"type": "noul", "instructions": "Czy?"}, "b": {"type": "choice", "criteria": ["x", "y"]}}
        st, _, raw = post(srv, SO, {"model": "basal-tiny", "state": long_state, "questions": qs})
        body = parsed(raw)
        C.eq(st, 422, "prompt_too_long: 422")
        ok_shape = isinstance(body, dict) and list(body) == ["error", "detail"] and body["error"] == "unsupported"
        C.ok(ok_shape, f"prompt_too_long: the unsupported shape of 02 §4.4/§4.5: {raw[:300]!r}")
        if ok_shape:
            C.eq([(list(d), d["type"], d["loc"]) for d in body["detail"]],
                 [(["type", "loc", "msg"], "prompt_too_long", ["body", "questions", q]) for q in ("a", "b")],
                 "prompt_too_long: one element per question, keys type/loc/msg")
            import re
            ms = [re.fullmatch(r"a prompt of (\d+) tokens exceeds the model limit 2048", d["msg"]) for d in body["detail"]]
            C.ok(all(m and int(m.group(1)) > 2048 for m in ms), f"prompt_too_long msg: {body['detail']}")
            # the same shape as a capability error (02 §4.4)
            st2, _, raw2 = post(srv, SO, {"model": "basal-tiny", "state": "x",
                                          "questions": {"q": {"type": "act", "criteria": ["a"], "costs": {"wrong": 1}}}})
            cap = parsed(raw2)
            C.eq((st2, list(cap), [list(d) for d in cap.get("detail", [])]), (422, ["error", "detail"], [["type", "loc", "msg"]]),
                 "capability error has the same shape")
            st, _, raw = post(srv, BA, {"state": long_state, "questions": qs})
            C.eq((st, parsed(raw)), (422, {"error": "; ".join(d["msg"] for d in body["detail"])}),
                 "prompt_too_long /v1/basal: the msgs joined (02 §5.2)")
        # 404 and 405 bodies (02 §10)
        for m, p in (("GET", "/"), ("GET", "/v1/systemone/"), ("POST", "/v1/systemone/"), ("POST", "/v1/basal/"),
                     ("GET", "/health/"), ("GET", "/metrics"), ("GET", "/nope"), ("GET", "/index.html"),
                     ("OPTIONS", "/nope"), ("HEAD", "/nope")):
            st, h, b = request(srv.port, m, p, body=b"{}" if m == "POST" else None)
            want = b"" if m == "HEAD" else NOT_FOUND
            C.eq((st, h.get("content-type"), b if m == "HEAD" else parsed(b)), (404, "application/json", want),
                 f"{m} {p}: JSON 404")
        for p, allow in ((SO, "POST"), (BA, "POST"), ("/v1/models", "GET, HEAD"), ("/health", "GET, HEAD")):
            st, h, b = request(srv.port, "OPTIONS", p)
            C.eq((st, h.get("allow"), parsed(b), "access-control-allow-origin" in h),
                 (405, allow, {"detail": "Method Not Allowed"}, False), f"OPTIONS {p} without CORS: 405")
            st, h, b = request(srv.port, "POST", SO, b"{}", {"Origin": "https://app.example"})
            C.ok("access-control-allow-origin" not in h, "no CORS headers when CORS is off")
    finally:
        C.eq(srv.stop(), 0, "server exits 0")


def preflight(srv, path, origin, method="POST"):
    hd = {"Access-Control-Request-Method": method, "Access-Control-Request-Headers": "content-type,authorization"}
    if origin:
        hd["Origin"] = origin
    return request(srv.port, "OPTIONS", path, None, hd)


def test_cors_list(tmp):
    env = {"BASAL_API_KEY_T": "sekret"}
    srv = Server(["--model", fixture("tiny-bias"), "--cors", "https://app.example, http://localhost:3000",
                  "--api-key-env", "BASAL_API_KEY_T"], env=env)
    try:
        auth = {"Authorization": "Bearer sekret"}
        for path, methods in ((SO, "POST, OPTIONS"), (BA, "POST, OPTIONS"), ("/v1/models", "GET, HEAD, OPTIONS"),
                              ("/health", "GET, HEAD, OPTIONS")):
            st, h, b = preflight(srv, path, "https://app.example")
            C.eq((st, b, "content-length" in h, "content-type" in h), (204, b"", False, False),
                 f"preflight {path}: 204, no body, no Content-Length (RFC 9110 §8.6)")
            C.eq((h.get("access-control-allow-origin"), h.get("vary"), h.get("access-control-allow-methods"),
                  h.get("access-control-allow-headers"), h.get("access-control-max-age"), h.get("allow")),
                 ("https://app.example", "Origin", methods, "Authorization, Content-Type, X-Request-Id", "600", methods),
                 f"preflight {path}: headers (not authenticated)")
        st, h, b = preflight(srv, SO, "https://evil.example")
        C.eq((st, h.get("allow"), [k for k in h if k.startswith("access-control-")]), (204, "POST, OPTIONS", []),
             "preflight from another origin: 204 without any Access-Control header")
        st, h, b = preflight(srv, SO, None)
        C.eq((st, [k for k in h if k.startswith("access-control-")]), (204, []), "OPTIONS without Origin: 204, no CORS")
        st, h, b = preflight(srv, "/nope", "https://app.example")
        C.eq((st, parsed(b)), (404, NOT_FOUND), "preflight to an unknown path: JSON 404")
        q = {"model": "basal-tiny", "state": "x", "questions": {"q": {"type": "noul", "instructions": "Czy?"}}}
        for origin, want in (("https://app.example", "https://app.example"), ("HTTP://LOCALHOST:3000", "HTTP://LOCALHOST:3000"),
                             ("https://evil.example", None), ("http://localhost:3001", None), (None, None)):
            hd = dict(auth)
            if origin:
                hd["Origin"] = origin
            st, h, b = srv.post(SO, q, hd)
            C.eq((st, h.get("access-control-allow-origin")), (200, want), f"POST from {origin}: allow-origin")
            if want:
                C.eq(h.get("vary"), "Origin", f"POST from {origin}: Vary")
                exp = [x.strip() for x in h.get("access-control-expose-headers", "").split(",")]
                C.ok({"x-typesafe-request-id", "x-basal-queue-ms", "x-basal-compute-ms",
                      "x-basal-batch-requests"} <= set(exp), f"expose headers: {exp}")
        # errors carry the CORS headers too, so a page can read them
        st, h, b = srv.post(SO, q, {"Origin": "https://app.example"})
        C.eq((st, h.get("access-control-allow-origin"), parsed(b)["detail"]["error_type"]),
             (403, "https://app.example", "authentication_error"), "403 from an allowed origin has allow-origin")
        st, h, b = request(srv.port, "GET", "/nope", None, {"Origin": "https://app.example"})
        C.eq((st, h.get("access-control-allow-origin"), parsed(b)), (404, "https://app.example", NOT_FOUND),
             "404 from an allowed origin")
        st, h, b = request(srv.port, "PUT", SO, b"{}", {"Origin": "https://app.example"})
        C.eq((st, h.get("allow"), parsed(b)), (405, "POST, OPTIONS", {"detail": "Method Not Allowed"}),
             "405 with CORS on lists OPTIONS in Allow")
    finally:
        C.eq(srv.stop(), 0, "CORS server exits 0")


def test_cors_config(tmp):
    def yml(name, text):
        p = os.path.join(tmp, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    model = os.path.abspath(fixture("tiny-bias"))
    star = yml("star.yml", f'cors_origins: "*"\nmodels:\n  - path: {model}\n')
    srv = Server(["--config", star])
    try:
        st, h, b = preflight(srv, BA, "https://anything.example")
        C.eq((st, h.get("access-control-allow-origin"), h.get("vary")), (204, "*", None), "cors_origins \"*\": preflight")
        st, h, b = request(srv.port, "GET", "/v1/models", None, {"Origin": "null"})
        C.eq((st, h.get("access-control-allow-origin")), (200, "*"), "cors_origins \"*\": any origin, also null")
    finally:
        C.eq(srv.stop(), 0, "star server exits 0")
    lst = yml("list.yml", f"cors_origins:\n  - https://a.example\n  - http://[::1]:8080\nmodels:\n  - path: {model}\n")
    srv = Server(["--config", lst])
    try:
        for o, want in (("https://a.example", "https://a.example"), ("http://[::1]:8080", "http://[::1]:8080"),
                        ("https://b.example", None)):
            st, h, b = request(srv.port, "GET", "/health", None, {"Origin": o})
            C.eq((st, h.get("access-control-allow-origin")), (200, want), f"YAML list: {o}")
    finally:
        C.eq(srv.stop(), 0, "list server exits 0")
    # the env variable, and the flag winning over the file
    srv = Server(["--config", lst, "--cors", "https://c.example"], env={"BASAL_CORS": "https://d.example"})
    try:
        st, h, _ = request(srv.port, "GET", "/health", None, {"Origin": "https://a.example"})
        C.eq(h.get("access-control-allow-origin"), None, "--cors replaces cors_origins of the file")
        st, h, _ = request(srv.port, "GET", "/health", None, {"Origin": "https://c.example"})
        C.eq(h.get("access-control-allow-origin"), "https://c.example", "--cors wins over BASAL_CORS")
    finally:
        srv.stop()
    srv = Server(["--model", model], env={"BASAL_CORS": "https://d.example"})
    try:
        st, h, _ = request(srv.port, "GET", "/health", None, {"Origin": "https://d.example"})
        C.eq(h.get("access-control-allow-origin"), "https://d.example", "BASAL_CORS")
    finally:
        srv.stop()
    # bad origins are refused at start, naming them
    for args, env, text in ((["--model", model, "--cors", "https://a.example/path"], None, "https://a.example/path"),
                            (["--model", model, "--cors", "ftp://x"], None, "ftp://x"),
                            (["--model", model], {"BASAL_CORS": "a.example"}, "a.example"),
                            (["--config", yml("bad.yml", f"cors_origins: [5]\nmodels:\n  - path: {model}\n")], None,
                             "cors_origins"),
                            (["--config", yml("bad2.yml", f"cors_origins: {{a: 1}}\nmodels:\n  - path: {model}\n")], None,
                             "cors_origins")):
        s = Server(args, env=env, expect_start=False)
        code = s.wait_exit(60)
        C.ok(code not in (0, None) and text in s.log(), f"bad CORS origin refused ({args}, {env}): {code} {s.log()[-300:]!r}")


def test_long_forward_log():
    """A forward of >= 1024 tokens logs where it is (layer k of L, L from
    config.json) every BASAL_PROGRESS_INTERVAL_MS (30 s by default) and when
    it is done; a short one writes nothing."""
    deep = fixture("tiny-deep")
    with open(os.path.join(deep, "config.json")) as f:
        n_layers = json.load(f)["num_hidden_layers"]
    with open(os.path.join(deep, "basal.json")) as f:
        name = json.load(f)["name"]
    body = {"model": name, "state": "Zgłoszenie: " + "słowo " * 630,  # about 2000 tokens of the 2048 positions
            "questions": {"q": {"type": "choice", "instructions": "Dział?", "criteria": ["a", "b", "c"]}}}
    import re
    line = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z INFO +engine: " + re.escape(name) +
                      r": main lane: forward of (\d+) tokens: (?:layer (\d+) of (\d+) done, \d+ s elapsed|done in [\d.]+ s)$")
    for env, expect in (({"BASAL_PROGRESS_INTERVAL_MS": "10"}, True), ({}, False)):
        srv = Server(["--model", deep, "--threads", "1"], env=env)
        try:
            st, _, raw = post(srv, SO, body)
            C.eq(st, 200, f"long state answered ({env})")
            st, _, raw = post(srv, SO, dict(body, state="Zgłoszenie: krótkie"))
            C.eq(st, 200, f"short state answered ({env})")
            logged = [line.match(x) for x in srv.log().splitlines() if "forward of" in x]
            if expect:
                C.ok(len(logged) >= 2 and all(logged), f"long forward: progress lines in the log: {srv.log()[-600:]!r}")
                got = [m for m in logged if m]
                layers = [(int(m.group(2)), int(m.group(3))) for m in got if m.group(2)]
                C.ok(layers and all(1 <= k < L == n_layers for k, L in layers) and layers == sorted(layers),
                     f"long forward: layer k of {n_layers}, in order: {layers}")
                C.ok(got and got[-1].group(2) is None and len({m.group(1) for m in got}) == 1,
                     f"long forward: one forward, a closing 'done in' line: {[m.group(0) for m in got[-2:]]}")
                C.ok(1024 <= int(got[0].group(1)) <= 2048, f"long forward: {got[0].group(1)} tokens (>= 1024)")
            else:
                C.ok(not logged, f"default period (30 s): a forward under it logs nothing: {logged}")
        finally:
            C.eq(srv.stop(), 0, "server exits 0")


def main():
    tmp = tempfile.mkdtemp(prefix="basal-niceties-")
    try:
        for name, fn in (("unknown model", lambda: test_unknown_model(tmp)),
                         ("basal type, prompt_too_long, 404/405", test_basal_type_and_too_long),
                         ("CORS list", lambda: test_cors_list(tmp)), ("CORS configuration", lambda: test_cors_config(tmp)),
                         ("long forward log", test_long_forward_log)):
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                C.ok(False, f"section {name} raised {e!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
