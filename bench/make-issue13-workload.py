#!/usr/bin/python3
"""Writes bench/workloads/issue13.jsonl: the benchmark list of issue 13
(multi, act and choice with 11-255 options) as `basal bench-requests` input
({"id", "request"} a line, "model": null):

  multi-5-500     a 5-label multi (03 §1) on a ~500-token Polish state
  choice-40-300   a 40-option choice (03 §5: 8 groups + 2 final prompts) on a ~300-token state
  choice-255-300  a 255-option choice (52 groups + 2 final prompts) on the same state
  choice-4-300    a single 4-option choice on the same state (the baseline)

"~N tokens" = the state's share of the prompt with the fixture tokenizer of
`basal make-model` (the mini-shape model of bench/cpu-bench.sh uses it): the
prompt's length minus that of the same prompt with an empty state, measured
with the npm tokenizer oracle (tools/oracle-tokenizer.js) on the prompts of
tools/protocol_ref.py. Whole sentences are added until the state is closest to N.

  /usr/bin/python3 bench/make-issue13-workload.py [--tokenizer FILE]   rewrite the file
  /usr/bin/python3 bench/make-issue13-workload.py --check              compare with the committed copy
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import protocol_ref  # noqa: E402

OUT = os.path.join(ROOT, "bench", "workloads", "issue13.jsonl")
DEFAULT_TOKENIZER = os.path.join(ROOT, "build", "fixtures", "tiny-bias", "tokenizer.json")

SENTENCES = [
    "Klient pisze, że od trzech dni nie może zalogować się do bankowości internetowej.",
    "Aplikacja mobilna pokazuje błąd hasła, chociaż hasło zmieniał w zeszłym tygodniu.",
    "Po trzech nieudanych próbach płatności karta została zablokowana, mimo że saldo było wystarczające.",
    "Prosi o zmianę adresu korespondencyjnego na ulicę Długą 15 w Gdańsku.",
    "W marcu złożył wniosek kredytowy na 45 000 zł i do dziś nie dostał odpowiedzi.",
    "Zaznacza, że jest klientem banku od dwunastu lat i rozważa przeniesienie konta do konkurencji.",
    "Dzwonił na infolinię dwa razy, za każdym razem czekał ponad pół godziny.",
    "Konsultant obiecał oddzwonić, ale nikt się nie odezwał.",
    "Klient prosi też o duplikat faktury za prowadzenie rachunku firmowego.",
    "Dodaje, że przelew zagraniczny wysłany w piątek wciąż nie dotarł do odbiorcy.",
    "Na koniec pyta, czy bank może zwrócić opłatę za kartę, której nie mógł używać.",
]
TOPICS = ["reklamacja karty", "zwrot opłaty", "logowanie", "przelew zagraniczny", "kredyt hipoteczny", "lokata",
          "zmiana adresu", "zastrzeżenie karty", "limit kredytowy", "opłata za konto", "aplikacja mobilna", "faktura",
          "dostawa kuriera", "uszkodzony towar", "skarga na obsługę", "wypłata z bankomatu", "ubezpieczenie"]
QUALIFIERS = ["pilna", "zwykła", "ponowna", "firmowa", "prywatna", "zagraniczna", "krajowa", "telefoniczna",
              "pisemna", "elektroniczna", "w oddziale", "dla seniora", "dla studenta", "premium", "wstępna", "końcowa"]


def option(i):
    """A distinct description for every i < 272."""
    return f"{TOPICS[i % len(TOPICS)]} ({QUALIFIERS[(i // len(TOPICS)) % len(QUALIFIERS)]})"


def state_tokens(tokenizer, states):
    """Tokens each state adds to a choice prompt (BOS <s>, the Polish template)."""
    def prompt(s):
        return protocol_ref.render_prompt("<s>", "pl", s, "Temat?", ["a", "b"], [0, 1])
    ids = protocol_ref.oracle_tokenize([(tokenizer, "first", [prompt("")] + [prompt(s) for s in states])])[0]
    return [len(x) - len(ids[0]) for x in ids[1:]]


def grow_state(tokenizer, target):
    """The prefix of the sentence cycle whose state is closest to target tokens."""
    cands, text = [], ""
    for i in range(40):  # about 1,000 tokens: enough for either target
        text = (text + " " if text else "") + SENTENCES[i % len(SENTENCES)]
        cands.append(text)
    counts = state_tokens(tokenizer, cands)
    best = min(range(len(cands)), key=lambda i: (abs(counts[i] - target), i))
    return cands[best], counts[best]


def workload(tokenizer):
    s500, n500 = grow_state(tokenizer, 500)
    s300, n300 = grow_state(tokenizer, 300)
    labels = {"login": "Problem z logowaniem do bankowości", "card": "Zablokowana karta płatnicza",
              "address": "Zmiana adresu", "loan": "Wniosek kredytowy", "complaint": "Skarga na obsługę"}
    big = lambda n: {f"t{i:03d}": option(i) for i in range(n)}  # noqa: E731
    rows = [
        ("multi-5-500", s500, {"tematy": {"type": "multi", "instructions": "Których tematów dotyczy zgłoszenie?",
                                          "criteria": labels}}),
        ("choice-40-300", s300, {"temat": {"type": "choice", "instructions": "Jaki jest główny temat zgłoszenia?",
                                           "criteria": big(40)}}),
        ("choice-255-300", s300, {"temat": {"type": "choice", "instructions": "Jaki jest główny temat zgłoszenia?",
                                            "criteria": big(255)}}),
        ("choice-4-300", s300, {"temat": {"type": "choice", "instructions": "Jaki jest główny temat zgłoszenia?",
                                          "criteria": big(4)}}),
    ]
    lines = [json.dumps({"id": i, "request": {"model": None, "state": s, "questions": q}}, ensure_ascii=False)
             for i, s, q in rows]
    return "\n".join(lines) + "\n", (n500, n300)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER, help="tokenizer.json (default %(default)s)")
    ap.add_argument("--check", action="store_true", help="compare with the committed copy, write nothing (default off)")
    a = ap.parse_args()
    text, (n500, n300) = workload(a.tokenizer)
    if a.check:
        with open(OUT, encoding="utf-8") as f:
            same = f.read() == text
        print(f"{OUT}: {'up to date' if same else 'DIFFERS from the generator'}")
        return 0 if same else 1
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{OUT}: states of {n500} and {n300} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
