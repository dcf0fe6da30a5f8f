#!/usr/bin/env python3
"""Writes the packing workloads of issue 4 as bench-requests JSONL (stdout).

--seed-example: one ~120-token Polish state with three questions (choice,
noul, score), the example the tree-packing ratio is quoted for.
--multi: 12 requests of 2-5 questions on ~150-400-token states (PL and EN).
"""
import argparse
import json
import random

PL = ("Dzień dobry, piszę w sprawie zamówienia numer {n}, które dotarło wczoraj uszkodzone. "
      "Pudełko było zgniecione, a ekran telefonu pęknięty. Kurier nie chciał spisać protokołu szkody. "
      "Proszę o pilny kontakt, wymianę towaru albo zwrot pieniędzy na konto, z którego zapłaciłem. ")
EN = ("Hello, I am writing about order {n}, which arrived yesterday damaged. The box was crushed and "
      "the phone screen was cracked. The courier refused to write a damage report. Please contact me "
      "soon and replace the item or refund the money to the account I paid from. ")


def questions(lang, k, rnd):
    pl = lang == "pl"
    qs = {
        "dept": {"type": "choice", "instructions": "Do którego działu?" if pl else "Which department?",
                 "criteria": {"returns": "Zwroty" if pl else "Returns", "shipping": "Wysyłka" if pl else "Shipping",
                              "payments": "Płatności" if pl else "Payments", "other": None}},
        "complaint": {"type": "noul", "instructions": "Czy to reklamacja?" if pl else "Is this a complaint?"},
        "urgency": {"type": "score", "instructions": "Jak pilne?" if pl else "How urgent?",
                    "criteria": ["niska", "średnia", "wysoka"] if pl else ["low", "medium", "high"]},
        "tone": {"type": "choice", "instructions": "Ton wiadomości?" if pl else "Tone of the message?",
                 "criteria": ["spokojny", "zły", "podekscytowany"] if pl else ["calm", "angry", "excited"]},
        "refund": {"type": "noul", "instructions": "Czy klient chce zwrotu pieniędzy?" if pl else "Does the customer want a refund?"},
    }
    keys = list(qs)[:k]
    return {key: qs[key] for key in keys}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Both flags may be given (the seed example first); neither prints nothing.")
    ap.add_argument("--seed-example", action="store_true", help="the ~120-token seed example (default off)")
    ap.add_argument("--multi", action="store_true", help="the 12 multi-question requests (default off)")
    a = ap.parse_args()
    rnd = random.Random(4)
    out = []
    if a.seed_example:
        # ~120 tokens with the fixture tokenizer (Mistral vocabulary, Polish text)
        state = PL.format(n=5512).rsplit(". ", 2)[0] + "."
        out.append({"id": "seed-120", "request": {"model": None, "state": state,
                                                  "questions": questions("pl", 3, rnd)}})
    if a.multi:
        for i in range(12):
            lang = "pl" if i % 3 else "en"
            base = PL if lang == "pl" else EN
            state = "".join(base.format(n=1000 + i * 7 + r) for r in range(1 + i % 3))
            out.append({"id": f"multi-{i}", "request": {"model": None, "state": state,
                                                        "questions": questions(lang, 2 + i % 4, rnd)}})
    for line in out:
        print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()
