"""Agreement of the CPU dtype bf16 mode with f32 (issue 16), measured like
basal-rs's decision tables: generated /v1/systemone requests of every type
the server decides (choice, noul, score; N of each, one question a request)
are answered by two `basal serve` processes on the same fixture model, one
with --dtype f32 and one with --dtype bf16. Reported per model: the share of
identical decisions and the largest |difference| of a probability. Checked:
wherever the f32 answer's top-two probability margin exceeds 0.05 the bf16
decision is the same, and the two modes differ somewhere (bf16 is not f32
under another name).

Requests go to the servers AGREE_CONCURRENCY at a time (environment, default 1):
concurrent requests are packed into one forward by the servers, and a prompt's
result does not depend on its batch (t_server_api.sh, test_engine.c), so the
numbers are those of one request at a time, measured faster on big models.

Decision of a question: choice -> "choice"; score -> the level of highest
probability; noul -> yes when "noul" >= 0.5 (its margin is |2*noul - 1|).
usage: bf16_agreement_check.py [N per type] [fixture ...]"""
import argparse
import json
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, "tests/server")
import srvlib  # noqa: E402

WORDS = ("klient zamówienie paczka zwrot reklamacja karta przelew konto hasło logowanie kurier faktura "
         "order refund parcel invoice account password login courier damaged screen payment delivery "
         "pilne wczoraj dzisiaj nie działa proszę szybko problem błąd error urgent broken late").split()
OPTS = ("Zwroty Wysyłka Płatności Reklamacje Kredyty Karty Logowanie Inne Returns Shipping Payments Other "
        "Loans Cards Complaints Sales").split()
LEVELS = [["niska", "średnia", "wysoka"], ["low", "medium", "high", "critical"], ["1", "2", "3", "4", "5"],
          ["spokojny", "zły"]]


def make_requests(n, seed):
    rnd = random.Random(seed)
    out = []
    for i in range(3 * n):
        state = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(5, 60)))
        instr = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 8))) + "?"
        kind = ("choice", "noul", "score")[i % 3]
        if kind == "choice":
            opts = rnd.sample(OPTS, rnd.randint(2, 6))
            q = {"type": "choice", "instructions": instr, "criteria": {f"o{j}": o for j, o in enumerate(opts)}}
        elif kind == "noul":
            q = {"type": "noul", "instructions": instr}
        else:
            q = {"type": "score", "instructions": instr, "criteria": rnd.choice(LEVELS)}
        out.append({"state": state, "questions": {"q": q}})
    return out


def decision(ans):
    """(decision, top-two margin, {name: probability})"""
    if ans["type"] == "noul":
        p = ans["noul"]
        return p >= 0.5, abs(2 * p - 1), {"yes": p}
    probs = ans["probabilities"]
    top = sorted(probs.values(), reverse=True)
    best = max(probs, key=lambda k: probs[k])  # first key on ties, as the answer's own order
    return (ans["choice"] if ans["type"] == "choice" else best), top[0] - top[1], probs


def run_model(c, name, n):
    d = srvlib.fixture(name)
    servers = {dt: srvlib.Server(["--model", d, "--dtype", dt, "--threads", "2"]) for dt in ("f32", "bf16")}
    try:
        listed = {dt: json.loads(srv.request("GET", "/v1/models")[2])["models"][0] for dt, srv in servers.items()}
        model = listed["f32"]["name"]
        # the opt-in mode is shown to clients; f32 keeps the spec's fields (02 §7)
        c.eq(sorted(listed["f32"]), ["description", "early_exit", "mode", "name", "release_date"],
             f"{name}: /v1/models keys of the f32 server")
        c.eq(listed["bf16"], dict(listed["f32"], dtype="bf16"), f"{name}: /v1/models of the bf16 server")
        same = total = checked = 0
        max_dp = 0.0
        per_type = {}
        def ask(body):
            got = {}
            for dt, srv in servers.items():
                st, _, raw = srv.post("/v1/systemone", dict(body, model=model), timeout=600)
                got[dt] = (st, raw)
            return got

        with ThreadPoolExecutor(max(1, int(os.environ.get("AGREE_CONCURRENCY", "1")))) as pool:
            replies = list(pool.map(ask, make_requests(n, seed=16)))
        for reply in replies:
            got = {}
            for dt, (st, raw) in reply.items():
                if not c.ok(st == 200, f"{name} {dt}: status {st}: {raw[:300]!r}"):
                    return
                got[dt] = json.loads(raw)["answers"]["q"]
            d32, margin, p32 = decision(got["f32"])
            d16, _, p16 = decision(got["bf16"])
            t = got["f32"]["type"]
            total += 1
            same += d32 == d16
            per_type.setdefault(t, [0, 0])
            per_type[t][0] += d32 == d16
            per_type[t][1] += 1
            max_dp = max([max_dp] + [abs(p32[k] - p16[k]) for k in p32])
            if margin > 0.05:
                checked += 1
                c.ok(d32 == d16, f"{name}: {t} decision {d32!r} (f32, margin {margin:.3f}) vs {d16!r} (bf16)")
        types = ", ".join(f"{t} {a}/{b}" for t, (a, b) in per_type.items())
        print(f"{name}: {same}/{total} identical decisions ({100.0 * same / total:.1f}%; {types}); "
              f"max |dp| {max_dp:.4g}; {checked} with f32 margin > 0.05 all equal", flush=True)
        c.ok(max_dp > 0, f"{name}: bf16 answers are bitwise the f32 ones (the mode is not applied)")
    finally:
        for srv in servers.values():
            srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="environment: AGREE_CONCURRENCY, requests in flight (default 1); and, read by tests/server/srvlib.py, "
                                        "BASAL, the binary (default build/basal); "
                                        "FIXTURES, where the fixtures are (default build/fixtures); SHARED (default "
                                        "../shared); KEEP_TMP=1 keeps the servers' logs (default unset)")
    ap.add_argument("n", metavar="N", nargs="?", type=int, default=200, help="requests of each type (default %(default)s)")
    ap.add_argument("models", metavar="FIXTURE", nargs="*", default=["tiny-bias", "tiny-hd128", "tiny-gqa4"],
                    help="fixture names under FIXTURES (default: %(default)s)")
    a = ap.parse_args()
    n, models = a.n, a.models
    c = srvlib.Checks()
    for name in models:
        run_model(c, name, n)
    return c.report()


if __name__ == "__main__":
    sys.exit(main())
