#!/usr/bin/python3
"""The /v1/systemone requests of tests/e2e/t_large_choice_e2e.sh: choice with
11-255 options (spec 03 §5), generated deterministically (no randomness: every
text is a function of its index), "@MODEL@" where the served name goes.

  large_choice_requests.py          prints them, one body a line (JSONL)

Coverage: n = 11, 12, 13, 14, 15, 17, 20, 21, 23, 30, 40, 50, 64, 99, 100, 101, 199,
200, 255; both languages; criteria as an object (descriptions: strings, null,
objects, arrays, "") and as a list (with duplicates that collapse, to 11 and to
10 = the normal path, and 256 entries collapsing to 255); option_keys show and
hide (duplicate descriptions over all n); several large choices in one request;
large choices next to choice, noul, score, multi, act and single-option
questions; string, object and array states, facts "auto", a ~300-token state,
instructions absent / object; option texts with LF, braces, "{state}", emoji.
"""
import argparse
import json
import sys

PL_TOPICS = ["reklamacja karty", "zwrot pieniędzy", "logowanie", "przelew zagraniczny", "kredyt hipoteczny",
             "lokata", "zmiana adresu", "zastrzeżenie karty", "limit kredytowy", "opłata za konto",
             "aplikacja mobilna", "faktura", "dostawa kuriera", "uszkodzony towar", "skarga na obsługę",
             "wypłata z bankomatu", "ubezpieczenie"]
PL_QUALIFIERS = ["pilna", "zwykła", "ponowna", "firmowa", "prywatna", "zagraniczna", "krajowa", "telefoniczna",
                 "pisemna", "elektroniczna", "w oddziale", "dla seniora", "dla studenta", "premium", "wstępna",
                 "końcowa"]
EN_TOPICS = ["card dispute", "refund", "login problem", "foreign transfer", "mortgage", "savings deposit",
             "address change", "card block", "credit limit", "account fee", "mobile app", "invoice",
             "courier delivery", "damaged item", "service complaint", "ATM withdrawal", "insurance"]
EN_QUALIFIERS = ["urgent", "routine", "repeated", "business", "personal", "international", "domestic", "by phone",
                 "in writing", "online", "in branch", "senior", "student", "premium", "initial", "final"]

STATE_PL = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot."
STATE_PL2 = ("Klientka zgłasza, że od wczoraj nie może zalogować się do aplikacji mobilnej, a karta została "
             "zablokowana po trzech próbach płatności.")
STATE_EN = "Customer: I was charged twice for order 5512 and the parcel arrived damaged."
STATE_EN2 = "User reports that the mobile app crashes after the update and asks for a refund of the fee."


def desc(lang, i):
    """A distinct option description for every i < 272."""
    t, q = (PL_TOPICS, PL_QUALIFIERS) if lang == "pl" else (EN_TOPICS, EN_QUALIFIERS)
    return f"{t[i % len(t)]} ({q[(i // len(t)) % len(q)]})"


def obj(lang, n, key="k", offset=0):
    return {f"{key}{i:03d}": desc(lang, i + offset) for i in range(n)}


def keys_list(n, prefix="opt"):
    return [f"{prefix}_{i}" for i in range(n)]


def choice(crit, instr=None, **kw):
    q = {"type": "choice", "criteria": crit}
    if instr is not None:
        q["instructions"] = instr
    q.update(kw)
    return q


def req(state, questions, **kw):
    r = {"model": "@MODEL@", "state": state}
    r.update(kw)
    r["questions"] = questions
    return r


def long_state():
    """About 300 tokens of Polish support text."""
    parts = []
    for i in range(12):
        parts.append(f"Zgłoszenie {i + 1}: klient pisze, że {PL_TOPICS[(3 * i) % 17]} wymaga uwagi, "
                     f"sprawa {PL_QUALIFIERS[i % 16]}.")
    return " ".join(parts)


def requests():
    out = []
    add = out.append
    # one large choice per request, the sizes of the brief and both languages
    add(req(STATE_PL, {"temat": choice(obj("pl", 11), "Temat?")}))
    add(req(STATE_EN, {"topic": choice(keys_list(12), "Which topic?")}))
    add(req(STATE_PL2, {"dzial": choice(obj("pl", 20), "Który dział?", option_keys="hide")}))
    add(req(STATE_EN, {"topic": choice({f"t{i}": (None if i % 3 == 0 else desc("en", i)) for i in range(23)},
                                        "Which team?")}))
    add(req(STATE_PL, {"kategoria": choice(keys_list(40, "kat"), "Kategoria zgłoszenia?")}))
    add(req(STATE_EN2, {"topic": choice(obj("en", 99), "Which topic fits best?")}))
    add(req(STATE_PL2, {"dzial": choice(obj("pl", 100), "Do którego działu?", option_keys="hide")}))
    add(req(STATE_EN, {"topic": choice(keys_list(101, "c"), "Category?")}))
    add(req(STATE_PL, {"temat": choice(obj("pl", 199), "Temat wiadomości?")}))
    add(req(STATE_EN2, {"topic": choice(keys_list(200, "label"), "Label?")}))
    add(req(STATE_PL2, {"temat": choice(obj("pl", 255), "Jaki to temat?")}))
    add(req(STATE_EN, {"topic": choice(keys_list(255, "x"), "Pick one.")}))
    # several large choices in one request (round 2 of all of them together)
    add(req(STATE_PL, {"a": choice(obj("pl", 11), "Temat?"), "b": choice(keys_list(40, "b"), "Kategoria?"),
                       "c": {"type": "noul", "instructions": "Czy chodzi o płatność?"}}))
    add(req(STATE_EN, {"x": choice(keys_list(12, "x"), "First?"), "y": choice(obj("en", 23, "y"), "Second?"),
                       "z": choice(obj("en", 100, "z", 5), "Third?")}))
    # mixed with normal questions of every type
    add(req(STATE_PL2, {
        "duzy": choice(obj("pl", 30), "Który temat?"),
        "maly": choice({"billing": "płatności", "tech": "technika", "other": None}, "Dział?"),
        "pilne": {"type": "noul", "instructions": "Czy sprawa jest pilna?"},
        "ocena": {"type": "score", "instructions": "Jak bardzo klient jest zdenerwowany?",
                  "criteria": ["wcale", "trochę", "bardzo"]},
        "tematy": {"type": "multi", "instructions": "Których tematów dotyczy?",
                   "criteria": {"login": "logowanie", "card": "karta", "address": "adres"}}}))
    add(req(STATE_EN, {
        "act": {"type": "act", "instructions": "Route it?", "criteria": {"billing": None, "shipping": None},
                "costs": {"wrong": 5, "defer": 1}},
        "big": choice(obj("en", 15), "Topic?"),
        "sc": {"type": "score", "instructions": "Severity?", "criteria": {"low": "minor", "mid": None, "high": "major"}},
        "one": choice({"only": "the single option"}, "Single?")}))
    add(req(STATE_PL, {"m": {"type": "multi", "instructions": "Tematy?",
                             "criteria": ["płatność", "zwrot", "dostawa", "reklamacja", "inne"]},
                       "big": choice(keys_list(40, "k"), "Kategoria?"),
                       "n": {"type": "noul", "instructions": "Czy klient jest zdenerwowany?",
                             "criteria": {"true": "tak, bardzo", "false": None}}}))
    add(req(STATE_EN2, {"s10": {"type": "score", "instructions": "Level?", "criteria": [f"level {i}" for i in range(10)]},
                        "big": choice(obj("en", 11, "e"), "Topic?"),
                        "c10": choice(keys_list(10, "ten"), "Ten options?")}))
    # states: object, array, long, facts "auto"
    add(req({"ticket": "Paczka nr 77 dotarła uszkodzona", "amount": 129.99, "vip": True, "tags": ["dostawa"]},
            {"temat": choice(obj("pl", 50), "Temat?")}))
    add(req([{"role": "customer", "text": "I was charged twice."}, {"role": "agent", "text": "Let me check."}],
            {"topic": choice(keys_list(13, "t"), "Topic?")}))
    add(req(long_state(), {"temat": choice(obj("pl", 64), "Który temat dominuje?")}))
    add(req("Faktura z 12.03.2024 na 1 250,00 zł, termin płatności 14 dni.",
            {"temat": choice(obj("pl", 21), "Temat?")}, facts="auto"))
    # instructions absent / an object
    add(req(STATE_EN, {"topic": choice(keys_list(11, "n"))}))
    add(req(STATE_PL, {"temat": choice(obj("pl", 17), {"zadanie": "wybierz temat", "język": "pl"})}))
    # list criteria with duplicates: 13 entries -> 11 options; 12 -> 10 (the normal path); 256 -> 255
    add(req(STATE_EN, {"d": choice(keys_list(11, "d") + ["d_3", "d_7"], "Dup?")}))
    add(req(STATE_EN, {"d": choice(keys_list(10, "d") + ["d_0", "d_9"], "Dup ten?")}))
    add(req(STATE_PL, {"d": choice(keys_list(255, "w") + ["w_100"], "Które?")}))
    # hide with duplicate descriptions over all n (and a duplicate spanning groups)
    add(req(STATE_PL2, {"h": choice({f"h{i}": ("Billing" if i in (0, 7, 12) else desc("pl", i)) for i in range(14)},
                                    "Dział?", option_keys="hide")}))
    # descriptions of every kind 02 §4.2 accepts (string, object, array, null); LF, braces, {state}, emoji
    add(req(STATE_EN, {"k": choice({"a": {"requires_manager": False}, "b": [1, 2.5, "x", True, None], "c": "", "d": None,
                                    "e": {}, "f": [], "g": "line one\nline two", "h": "{state} and {{q}}",
                                    "i": "😀 emoji 🙁", "j": "Zażółć gęślą jaźń", "k": "plain", "l": None}, "Which?")}))
    add(req(STATE_PL, {"emoji": choice({f"e{i}": f"opcja {i} {'🙂' * (i % 3)}" for i in range(30)}, "Wybierz.")}))
    # evidence false is not a request for evidence
    add(req(STATE_EN2, {"topic": choice(obj("en", 11), "Topic?", evidence=False)}))
    # the same options on another state and language
    add(req(STATE_PL2, {"topic": choice(obj("en", 99), "Which topic fits best?")}))
    add(req(STATE_PL, {"temat": choice(obj("pl", 23), "Temat?"), "temat2": choice(obj("pl", 23), "Inny temat?")}))
    # a 5-label multi, a 40- and a 255-option choice and a 4-option choice on one state
    add(req(long_state(), {"m": {"type": "multi", "instructions": "Tematy?",
                                 "criteria": {f"l{i}": desc("pl", i) for i in range(5)}},
                           "c40": choice(obj("pl", 40), "Temat?"), "c255": choice(keys_list(255, "z"), "Etykieta?"),
                           "c4": choice(obj("pl", 4), "Dział?")}))
    return out


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()  # no arguments: only --help
    for r in requests():
        sys.stdout.write(json.dumps(r, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
