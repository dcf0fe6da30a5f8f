"""Choice with 11..255 options through `basal serve` over 127.0.0.1 (spec 03 §5,
04 §7 B2, §11): 40- and 255-option choices answer 200 with all n keys, the
probabilities summing to 1 (checked here with math.fsum) and the answer
consistent with them (choice = the most probable key, TypeSafe's choice
confidence with k = n); /v1/basal keeps its 2..10 rule; the same large choices
under 32 concurrent clients mixed with small requests give byte-identical
bodies to the requests alone; a client that leaves between the rounds, and
one that leaves right after sending while the engine is busy, never get a
round 2 (basal_large_choice_rounds_total) and the server keeps serving."""
import json
import math
import sys
import threading
import time

from srvlib import (SLOW, Checks, Server, fixture, metric, metric_sum, run_basal, run_parallel, send_post,
                    strip_latency, wait_until)

C = Checks()
MODEL = "basal-tiny"
SO, BA = "/v1/systemone", "/v1/basal"
WORDS = ["płatności", "zwrot", "logowanie", "karta", "kredyt", "reklamacja", "dostawa", "faktura"]


def state(words, tag=""):
    # about 5 tokens a word on the fixture tokenizer
    return tag + "Klient pisze: " + " ".join(f"{WORDS[i % 8]}{i * 7 % 31}" for i in range(words))


def large(n, words=55, tag="", lang_en=False):
    crit = {f"k{i}": (None if i % 6 == 5 else f"{WORDS[i % 8]} numer {i * 13 % 101}") for i in range(n)}
    q = {"type": "choice", "instructions": "Which topic?" if lang_en else "Który temat?", "criteria": crit}
    return {"model": MODEL, "state": state(words, tag), "questions": {"topic": q}}


def small(i):
    qs = {"d": {"type": "choice", "instructions": "Dział?", "criteria": {"a": "Karty", "b": "Kredyty", "c": None}},
          "n": {"type": "noul", "instructions": "Pilne?"}}
    if i % 2:
        qs = {"m": {"type": "multi", "criteria": ["billing", "retention", "other"], "min": 1}}
    return {"model": MODEL, "state": state(20 + i, f"small {i}: "), "questions": qs}


def prepare(obj):
    r = run_basal("prepare", fixture("tiny-bias"), obj, "--request", "-", timeout=120)
    return json.loads(r.stdout)


def post(srv, obj, path=SO):
    return srv.post(path, obj, timeout=120)


def check_large_answer(st, body, n, what):
    if not C.eq(st, 200, f"{what}: status"):
        print("  ", body[:400])
        return
    d = json.loads(body)
    a = d["answers"]["topic"]
    probs = a["probabilities"]
    C.eq(list(probs), [f"k{i}" for i in range(n)], f"{what}: all {n} keys in criteria order")
    C.ok(abs(math.fsum(probs.values()) - 1.0) < 1e-12, f"{what}: probabilities sum to 1 ({math.fsum(probs.values())})")
    C.ok(all(0.0 <= v <= 1.0 for v in probs.values()), f"{what}: probabilities in [0, 1]")
    best = max(range(n), key=lambda i: (probs[f"k{i}"], -i))
    C.eq(a["choice"], f"k{best}", f"{what}: choice = the most probable key (first on ties)")
    pm = probs[f"k{best}"]
    C.ok(abs(a["confidence"] - (pm - 1.0 / n) / (1.0 - 1.0 / n)) < 1e-15, f"{what}: choice confidence with k = n")
    C.eq(a["type"], "choice", f"{what}: a choice answer")
    C.eq(d["usage"]["branches"], 1, f"{what}: one branch")
    C.eq(d["usage"]["questions"], 1, f"{what}: one question")


def rounds(srv):
    ms = srv.metrics()
    return (metric(ms, "basal_large_choice_rounds_total", model=MODEL, round="1"),
            metric(ms, "basal_large_choice_rounds_total", model=MODEL, round="2"))


def send_raw(srv, obj):
    return send_post(srv.port, SO, json.dumps(obj, ensure_ascii=False).encode(), 30)


def heavy(n, tag):
    # distinct ~1900-token states: each one costs a few tens of ms on the fixture
    return [{"model": MODEL, "state": state(370, f"{tag} {i}: "),
             "questions": {"a": {"type": "noul", "instructions": "Pilne?"}}} for i in range(n)]


def wait_idle(srv):
    return wait_until(lambda: srv.model_inflight(MODEL) == 0, 120, 0.02)


def main():
    srv = Server(["--model", fixture("tiny-bias"), "--metrics", "--long-tokens", "0",
                  "--max-batch-tokens", "65536"])
    try:
        lc40, lc255 = large(40), large(255)
        st, _, b40 = post(srv, lc40)
        check_large_answer(st, b40, 40, "40 options")
        st, _, b255 = post(srv, lc255)
        check_large_answer(st, b255, 255, "255 options")
        r1, r2 = rounds(srv)
        C.eq((r1, r2), (2.0, 2.0), "two large choices: two round 1 and two round 2")
        # input_tokens counts one prompt per round-1 group (their lengths from
        # `basal prepare`) and the two final prompts (03 §5.5), which have ten
        # options like the groups of n = 40 and so about their lengths
        for n, b in ((40, b40), (255, b255)):
            items = prepare(n == 40 and lc40 or lc255)
            lens = [len(it["orders"][0]["input_ids"]) for it in items]
            C.eq([len(it["orders"]) for it in items], [1] * len(items), f"{n} options: round-1 groups in one order")
            C.eq(len(items), 2 * math.ceil(n / 10), f"{n} options: 2 * ceil(n / 10) groups")
            C.ok(all("depends on" in it["item"]["large_choice"]["round2"] for it in items),
                 f"{n} options: prepare says round 2 depends on round 1")
            rest = json.loads(b)["usage"]["input_tokens"] - sum(lens)
            C.ok(2 * (min(lens) - 20) <= rest <= 2 * (max(lens) + 20),
                 f"{n} options: input_tokens = round-1 prompts + two final prompts ({rest} for the finals, "
                 f"groups {min(lens)}..{max(lens)})")
            print(f"   {n} options: {len(lens)} round-1 prompts of {min(lens)}..{max(lens)} tokens, "
                  f"finals {rest} tokens", flush=True)
        # /v1/basal keeps the 2..10 rule; act over 10 options stays refused
        st, _, bb = post(srv, lc40, BA)
        C.eq((st, bb), (422, b'{"error":"question \\"topic\\": 40 options (supported: 2..10)"}'),
             "/v1/basal refuses 40")
        act = large(12)
        act["questions"]["topic"].update({"type": "act", "costs": {"wrong": 2, "defer": 1}})
        st, _, ba = post(srv, act)
        C.eq(st, 422, "act with 12 options stays refused")
        C.ok(b"unsupported_option_count" in ba, "  with unsupported_option_count")
        # 256 options is a 400 (02 C6)
        st, _, bo = post(srv, large(256))
        C.eq((st, bo), (400, b'{"detail":"Too many choices. Must have at most 255 choices."}'), "256 options: 400")

        # 32 concurrent clients: large choices mixed with small requests
        lc40b, lc23en = large(40, 30, "other state "), large(23, 60, "", lang_en=True)
        kinds = [lc40, lc255, lc40b, lc23en] + [small(i) for i in range(4)]
        alone = [post(srv, k) for k in kinds]
        C.ok(all(a[0] == 200 for a in alone), "mix alone: all 200")
        items = [kinds[i % len(kinds)] for i in range(32)]
        batched = False
        for attempt in range(3):
            together = run_parallel(lambda o: post(srv, o), items, 600)
            errs = [r for r in together if not isinstance(r, tuple)]
            if not C.ok(not errs, f"32 clients: no client errors {errs[:2]}"):
                break
            diff = [i for i, t in enumerate(together)
                    if t[0] != 200 or strip_latency(t[2]) != strip_latency(alone[i % len(kinds)][2])]
            C.ok(not diff, f"32 clients: bodies byte-identical to alone (except latency_ms); differ: {diff[:5]}")
            if diff:
                i = diff[0]
                print("  alone:   ", alone[i % len(kinds)][2][:300], "\n  together:", together[i][2][:300])
                break
            if max(int(t[1].get("x-basal-batch-requests", "0")) for t in together) > 1:
                batched = True
                break
        C.ok(batched, "32 clients were batched together at least once")

        # A client leaves between the rounds: the engine is kept busy by heavy
        # requests; the large choice is sent with a second wave of them, so its
        # round 1 runs in a long batch; once round 1 has started (metric) the
        # client closes its socket, and its round 2 must never run.
        C.ok(wait_idle(srv), "idle before the disconnect test")
        r1_0, r2_0 = rounds(srv)
        cancelled0 = metric_sum(srv.metrics(), "basal_http_requests_total", endpoint=SO, status="cancelled")
        wave1, wave2 = heavy(12, "wave1"), heavy(24, "wave2")
        box = {}
        t1 = threading.Thread(target=lambda: box.setdefault("w1", run_parallel(lambda o: post(srv, o), wave1, 600)))
        t1.start()
        wait_until(lambda: srv.model_inflight(MODEL) >= 12, 30)
        gone = send_raw(srv, large(40, 55, "leaves between rounds "))
        t2 = threading.Thread(target=lambda: box.setdefault("w2", run_parallel(lambda o: post(srv, o), wave2, 600)))
        t2.start()
        saw_round1 = False
        deadline = time.time() + 60 * SLOW
        while time.time() < deadline:
            r1, r2 = rounds(srv)
            if r1 > r1_0:
                saw_round1 = True
                break
            time.sleep(0.001)
        gone.close()
        t1.join(300 * SLOW)
        t2.join(300 * SLOW)
        C.ok(all(isinstance(r, tuple) and r[0] == 200 for r in box.get("w1", []) + box.get("w2", [])),
             "the heavy requests all answered")
        C.ok(wait_idle(srv), "idle after the disconnect test")
        r1, r2 = rounds(srv)
        C.ok(saw_round1, "the departing client's round 1 ran (it left between the rounds)")
        C.eq((r1 - r1_0, r2 - r2_0), (1.0, 0.0), "its round 2 never ran")
        cancelled = metric_sum(srv.metrics(), "basal_http_requests_total", endpoint=SO, status="cancelled")
        C.eq(cancelled - cancelled0, 1.0, "counted as cancelled")

        # A client that leaves right after sending while the engine is busy:
        # no round 2 for it (round 1 is not run either when it is dropped at
        # admission); the server keeps serving.
        r1_0, r2_0 = rounds(srv)
        box = {}
        busy = heavy(12, "busy")
        t1 = threading.Thread(target=lambda: box.setdefault("w", run_parallel(lambda o: post(srv, o), busy, 600)))
        t1.start()
        wait_until(lambda: srv.model_inflight(MODEL) >= 12, 30)
        s = send_raw(srv, large(255, 100, "leaves at once "))
        s.close()
        t1.join(300 * SLOW)
        C.ok(wait_idle(srv), "idle after the second disconnect")
        r1, r2 = rounds(srv)
        C.eq(r2 - r2_0, 0.0, "a client gone right after sending: no round 2")
        st, _, again = post(srv, lc40)
        C.eq((st, strip_latency(again)), (200, strip_latency(b40)), "the server keeps serving: the same 40-option answer")
        r1b, r2b = rounds(srv)
        C.eq((r1b - r1, r2b - r2), (1.0, 1.0), "  with its two rounds")
    finally:
        code = srv.stop()
    C.eq(code, 0, "server exits 0")
    return C.report()


if __name__ == "__main__":
    sys.exit(main())
