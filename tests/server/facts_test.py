"""facts: "auto" (spec 03 §3, 02 T9/T10) end to end on tiny-bias:

- `basal prepare`: the prompt's state is the state text, two LFs, the header and
  the lines tools/facts_ref.py computes (Python re/decimal/datetime), and the
  facts can switch an English state to the Polish template (03 §3.1.3);
- `basal decide`: the §3.8 errors print the exact 422 body and exit 2;
- the server, both endpoints: a facts request answers exactly as the same
  request with facts "off" and the injected text as its state; the §3.8 errors
  with their exact bodies; facts "auto" on an invalid state reports only the
  state error; 24 concurrent clients (facts states shared between requests and
  with other states) byte-identical to the same requests alone.
"""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from srvlib import Checks, Server, fixture, run_basal, run_parallel, strip_latency  # noqa: E402
import facts_ref  # noqa: E402

C = Checks()
MODEL = "basal-tiny"
SO, BA = "/v1/systemone", "/v1/basal"
DOC_PL = ("Zamówienie: 3 × 465,50 zł netto oraz 2 szt. × 1 200,00 zł netto. Stawka VAT 23%. Budżet działu na zakupy "
          "wynosi 5 000,00 zł, wykorzystano 1 800,00 zł. Faktura opiewa na 4 670,00 zł brutto.")
ERRORS = [("Kwota 100000000000000000000000000,00 zł, VAT 23%.", "[<class 'decimal.InvalidOperation'>]"),
          ("Umowa z 31 grudnia 9999 r. na 2 lata.", "year 10001 is out of range"),
          ("Umowa z 31 grudnia 9999 r. na 2 dni.", "date value out of range")]


def inject(state_text):
    r = facts_ref.run(state_text)
    assert "lines" in r, r
    if not r["lines"]:
        return state_text
    return state_text + "\n\n" + facts_ref.HEADER + "".join("\n- " + x for x in r["lines"])


def cli(cmd, payload):
    r = run_basal(cmd, fixture("tiny-bias"), payload, "--request", "-")
    return r.returncode, r.stdout.decode()


def qs_en():
    return {"late": {"type": "noul", "instructions": "Is the invoice overdue?"}}


def test_cli():
    # the prompt holds the injected state exactly; the weekday line decides the language
    for state, lang in (("The invoice is due 2026-03-18.", "pl"), ("The invoice is due 2026-03-17.", "en"),
                        (DOC_PL, "pl")):
        text = inject(state)
        C.ok(text != state, f"facts_ref gives lines for {state!r}")
        rc, out = cli("prepare", {"model": MODEL, "state": state, "facts": "auto", "questions": qs_en()})
        if not C.eq(rc, 0, f"prepare {state!r}: exit ({out[:300]})"):
            continue
        items = json.loads(out)
        C.eq(items[0]["item"]["lang"], lang, f"prepare {state!r}: language")
        for o in items[0]["orders"]:
            C.ok(text in o["prompt"], f"prepare {state!r}: the prompt holds the injected state")
        rc2, out2 = cli("prepare", {"model": MODEL, "state": text, "questions": qs_en()})
        C.eq(out, out2, f"prepare {state!r}: facts auto == facts off with the injected state")
    # object states: the facts read the Python-JSON text of the state
    obj = {"opis": "Termin 14 dni od 3 marca 2026 r.", "kwota": "1 000,00 zł"}
    rc, out = cli("prepare", {"model": MODEL, "state": obj, "facts": "auto", "questions": qs_en()})
    rc2, out2 = cli("prepare", {"model": MODEL, "state": inject(json.dumps(obj, ensure_ascii=False)),
                                "questions": qs_en()})
    C.ok(rc == 0 and out == out2, "prepare: object state gets facts from its JSON text")
    # decide: the exact 422 bodies of §3.8, exit 2
    for state, msg in ERRORS:
        rc, out = cli("decide", {"model": MODEL, "state": state, "facts": "auto", "questions": qs_en()})
        want = json.dumps({"detail": [{"type": "value_error", "loc": ["body", "state"], "msg": msg}]},
                          ensure_ascii=False, separators=(",", ":"))
        C.eq((rc, out.strip()), (2, want), f"decide error {msg!r}")


def test_server():
    srv = Server(["--model", fixture("tiny-bias")])
    try:
        states = ["The invoice is due 2026-03-18.", DOC_PL, "Doręczono 20 marca 2027 r., termin 7 dni.",
                  "Kurs 4,31 zł. Wartość 100 000 euro i 50 000 euro."]
        questions = [
            {"a": {"type": "noul", "instructions": "Czy termin minął?"}},
            {"b": {"type": "choice", "instructions": "Co dalej?", "criteria": {"x": "Zapłacić", "y": "Czekać"}},
             "c": {"type": "score", "instructions": "Pilność?", "criteria": ["niska", "średnia", "wysoka"]}},
        ]
        reqs = []
        for st in states:
            for q in questions:
                so = {"model": MODEL, "state": st, "facts": "auto", "questions": q}
                ba = {"state": st, "facts": "auto", "questions": q}
                reqs += [(SO, so), (BA, ba)]
                # the same request with facts off and the injected state answers identically
                for path, body in ((SO, so), (BA, ba)):
                    off = dict(body, state=inject(st), facts="off")
                    s1, _, r1 = srv.post(path, body)
                    s2, _, r2 = srv.post(path, off)
                    C.ok(s1 == 200 and s2 == 200 and strip_latency(r1) == strip_latency(r2),
                         f"{path} {st[:30]!r}: facts auto == facts off with the injected state "
                         f"({s1} {r1[:200]!r} / {s2} {r2[:200]!r})")
        # plain requests mixed in, so facts states share batches with other states
        for i in range(4):
            reqs.append((SO, {"model": MODEL, "state": f"Zwykłe zgłoszenie {i}.", "questions": questions[0]}))
        alone = [srv.post(p, b) for p, b in reqs]
        together = run_parallel(lambda pb: srv.post(*pb), reqs)
        same = all(isinstance(t, tuple) and t[0] == a[0] == 200 and strip_latency(t[2]) == strip_latency(a[2])
                   for t, a in zip(together, alone))
        C.ok(same, f"{len(reqs)} concurrent clients with facts: bodies identical to alone")
        # §3.8 errors: 422 on both endpoints, exact bodies
        for state, msg in ERRORS:
            st, _, raw = srv.post(SO, {"model": MODEL, "state": state, "facts": "auto", "questions": qs_en()})
            want = json.dumps({"detail": [{"type": "value_error", "loc": ["body", "state"], "msg": msg}]},
                              ensure_ascii=False, separators=(",", ":")).encode()
            C.eq((st, raw), (422, want), f"{SO} error {msg!r}")
            st, _, raw = srv.post(BA, {"state": state, "facts": "auto", "questions": qs_en()})
            C.eq((st, raw), (422, json.dumps({"error": msg}, ensure_ascii=False, separators=(",", ":")).encode()),
                 f"{BA} error {msg!r}")
        # with facts off the same states are fine
        st, _, raw = srv.post(SO, {"model": MODEL, "state": ERRORS[1][0], "questions": qs_en()})
        C.eq(st, 200, "facts off: the overflowing state answers")
        # an invalid state: only its own error, no facts error (T10 needs a valid state)
        st, _, raw = srv.post(SO, {"model": MODEL, "state": 5, "facts": "auto", "questions": qs_en()})
        C.ok(st == 422 and b"value_error" not in raw and b'"state"' in raw, f"facts on an invalid state: {raw[:300]!r}")
        # T9 still refuses other values
        st, _, raw = srv.post(BA, {"state": "x", "facts": "on", "questions": qs_en()})
        C.eq((st, raw), (422, b'{"error":"facts must be \\"off\\" or \\"auto\\""}'), "T9 on /v1/basal")
    finally:
        C.eq(srv.stop(), 0, "server exits 0 on SIGTERM")


def main():
    test_cli()
    test_server()
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
