#!/usr/bin/env python3
"""Writes bench/workloads/{sequential,mixed}.jsonl and manifest.json: the
workloads of `basal benchmark`, in basal-rs's v2 line format (spec 06 §7.5)
but generated here (synthetic Polish/English support texts, fixed seeds), so
the files are reproducible byte for byte: `python3 bench/make-workloads.py`
rewrites them and `--check` verifies the checked-in copies.

sequential.jsonl: 90 one-question choice requests, no class field (the
  benchmark classes them by payload size); states from one sentence to ~20 KiB.
mixed.jsonl: 180 requests in the proportions of basal-rs's mixed recipe
  (360:180:90:180:72:18 scaled by 1/5): short-1q 72 (sequential request
  (i*541+7) mod 90), short-multi 36 (3-5 questions on a ticket), features 18
  (score + noul + choice on one state), doc-1k-2k 36 (documents of ~1-2k
  tokens, 1 or 5 questions), doc-4k-8k 14 and doc-16k 4 (longer than a small
  model's context: the benchmark reports them as skipped). Ordered by
  ascending SHA-256("mixed-v1/7/" + id), as basal-rs orders its mixed file.
Payloads carry "model": null; the benchmark inserts the model it measures."""
import argparse
import hashlib
import json
import os
import random
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads")

SUBJECTS_PL = ["Klient", "Użytkowniczka", "Właściciel firmy", "Kurier", "Pracownik oddziału", "Student"]
ISSUES_PL = ["nie może zalogować się do bankowości internetowej", "zgłasza podwójne obciążenie karty",
             "pyta o termin dostawy zamówienia", "prosi o zwrot pieniędzy za uszkodzony towar",
             "chce zmienić limit na karcie kredytowej", "skarży się na długi czas oczekiwania na infolinii",
             "pyta o warunki kredytu hipotecznego", "zgłasza, że aplikacja mobilna zamyka się po aktualizacji",
             "prosi o duplikat faktury", "informuje o podejrzanej transakcji za granicą"]
DETAILS_PL = ["Sprawa trwa od wczoraj.", "Podał numer zamówienia i datę zakupu.", "Jest bardzo zdenerwowany.",
              "Wcześniej dzwonił już dwa razy.", "Załączył zrzut ekranu z komunikatem błędu.",
              "Prosi o kontakt telefoniczny po godzinie 16.", "Nie pamięta hasła do konta.",
              "Twierdzi, że nie otrzymał żadnego powiadomienia.", "Chodzi o kwotę 249,99 zł.",
              "Pisze z adresu e-mail innego niż zwykle."]
ISSUES_EN = ["cannot log in to online banking", "reports a double charge on the card", "asks when the parcel will arrive",
             "wants a refund for a damaged item", "asks to raise the credit card limit",
             "complains about waiting on the hotline", "asks about mortgage terms",
             "says the mobile app crashes after the update", "needs a copy of the invoice",
             "reports a suspicious payment abroad"]
DETAILS_EN = ["It started yesterday.", "The order number and purchase date are included.", "The customer is upset.",
              "They have called twice before.", "A screenshot of the error is attached.",
              "Please call back after 4 pm.", "The password is forgotten.", "No notification was received.",
              "The amount is 249.99 EUR.", "The message comes from an unusual e-mail address."]

CHOICES = [
    ("Do którego działu skierować zgłoszenie?", {"cards": "Reklamacje kart", "online": "Bankowość elektroniczna",
                                                  "loans": "Kredyty", "delivery": "Dostawy", "other": "Inne"}),
    ("Jaki jest wydźwięk wiadomości?", {"option_0": "pozytywny", "option_1": "neutralny", "option_2": "negatywny"}),
    ("Which team should handle this ticket?", {"billing": "Billing", "tech": "Technical support",
                                               "sales": "Sales", "other": "Other"}),
]
NOULS = ["Czy sprawa jest pilna?", "Czy klient prosi o zwrot pieniędzy?", "Is the customer asking for a call back?",
         "Czy wiadomość dotyczy bezpieczeństwa konta?", "Does the text mention an amount of money?"]
SCORE = ("Jak bardzo klient jest niezadowolony?", ["wcale", "trochę", "wyraźnie", "bardzo"])


def ticket(rng, sentences):
    out = []
    for _ in range(sentences):
        if rng.random() < 0.7:
            out.append(f"{rng.choice(SUBJECTS_PL)} {rng.choice(ISSUES_PL)}. {rng.choice(DETAILS_PL)}")
        else:
            out.append(f"The customer {rng.choice(ISSUES_EN)}. {rng.choice(DETAILS_EN)}")
    return " ".join(out)


def document(rng, approx_chars):
    parts, n = [], 0
    while n < approx_chars:
        p = f"§{len(parts) + 1}. " + ticket(rng, rng.randint(3, 6))
        parts.append(p)
        n += len(p) + 2
    return "\n\n".join(parts)


def choice_q(rng):
    instr, crit = rng.choice(CHOICES)
    return {"type": "choice", "instructions": instr, "criteria": dict(crit)}


def noul_q(rng, k=None):
    return {"type": "noul", "instructions": NOULS[k] if k is not None else rng.choice(NOULS)}


def line(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sequential():
    rng = random.Random(0)
    reqs = []
    for i in range(90):
        # mostly short states, a few medium, two long (> 16 KiB)
        if i % 45 == 44:
            state = document(rng, 20000)
        elif i % 9 == 8:
            state = document(rng, rng.randint(2500, 9000))
        else:
            state = ticket(rng, rng.randint(1, 5))
        reqs.append({"id": f"seq-{i}", "request": {"state": state, "questions": {"q": choice_q(rng)}}})
    return reqs


def mixed(seq):
    rng = random.Random(7)
    out = []
    for i in range(72):
        src = seq[(i * 541 + 7) % len(seq)]
        out.append({"id": f"short-1q/{i}", "class": "short-1q", "request": dict({"model": None}, **src["request"])})
    for i in range(36):
        qs = {"dzial": choice_q(rng)}
        for k in range(rng.randint(2, 4)):
            qs[f"flag{k}"] = noul_q(rng, k)
        out.append({"id": f"short-multi/{i}", "class": "short-multi",
                    "request": {"model": None, "state": ticket(rng, rng.randint(2, 6)), "questions": qs}})
    for i in range(18):
        qs = {"ocena": {"type": "score", "instructions": SCORE[0], "criteria": list(SCORE[1])},
              "pilne": noul_q(rng, 0), "dzial": choice_q(rng)}
        out.append({"id": f"features/{i}", "class": "features",
                    "request": {"model": None, "state": ticket(rng, rng.randint(3, 8)), "questions": qs}})

    def docs(cls, count, lo, hi):
        for i in range(count):
            nq = 1 if i % 2 == 0 else 5
            qs = {"q0": choice_q(rng)}
            for k in range(1, nq):
                qs[f"q{k}"] = noul_q(rng, k - 1)
            out.append({"id": f"{cls}/{i}", "class": cls,
                        "request": {"model": None, "state": document(rng, rng.randint(lo, hi)), "questions": qs}})
    # about 3.5 characters per token for these texts
    docs("doc-1k-2k", 36, 3500, 7000)
    docs("doc-4k-8k", 14, 14000, 28000)
    docs("doc-16k", 4, 56000, 60000)
    out.sort(key=lambda r: hashlib.sha256(("mixed-v1/7/" + r["id"]).encode()).hexdigest())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="compare with the files in bench/workloads/, write nothing (default off: rewrite them)")
    a = ap.parse_args()
    seq = sequential()
    mix = mixed(seq)
    files = {"sequential.jsonl": "".join(line(r) + "\n" for r in seq),
             "mixed.jsonl": "".join(line(r) + "\n" for r in mix)}
    # the manifest in basal-rs's v2 form (build_benchmark.py's summary per file); `basal benchmark`
    # checks each file against it before a run (spec 06 §7.5)
    manifest = {"schema_version": 2, "profile": "basal-c-synthetic-v2", "generator": "bench/make-workloads.py",
                "seeds": {"sequential": 0, "mixed": 7},
                "encoding": "UTF-8 JSONL, LF, compact separators; source key order and number literals kept",
                "mixed_order": {"seed": 7, "method": "ascending SHA-256(\"mixed-v1/7/\" + request_id)"},
                "workloads": {}}
    for name, text, reqs in (("sequential.jsonl", files["sequential.jsonl"], seq),
                             ("mixed.jsonl", files["mixed.jsonl"], mix)):
        payloads = [line(r["request"]).encode() for r in reqs]
        classes = {}
        for r in reqs:
            c = r.get("class", "auto-payload-size")
            classes[c] = classes.get(c, 0) + 1
        manifest["workloads"][name] = {
            "sha256": hashlib.sha256(text.encode()).hexdigest(), "requests": len(reqs),
            "questions": sum(len(r["request"]["questions"]) for r in reqs),
            "classes": dict(sorted(classes.items())), "unique_payloads": len(set(payloads)),
            "ordered_model_free_payloads_sha256": hashlib.sha256(
                b"".join(hashlib.sha256(b).digest() for b in payloads)).hexdigest()}
    files["manifest.json"] = json.dumps(manifest, ensure_ascii=False, indent=2) + "\n"
    check = a.check
    bad = 0
    for name, text in files.items():
        path = os.path.join(OUT, name)
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print(f"{path} differs from what bench/make-workloads.py generates")
                    bad = 1
        else:
            os.makedirs(OUT, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main())
