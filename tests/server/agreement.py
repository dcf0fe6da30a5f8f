"""Generated requests and answer distributions for the reduced-precision
agreement checks (int8_test.py: int8w, int8_w8a8_test.py: int8), one
definition so both measure agreement with f32 on the same kind of request."""
import numpy as np

# Near-ties: an f32 margin below this is a coin flip for any reduced
# precision (the random fixtures answer most yes/no questions within 0.01 of
# 0.5); agreement is compared on the decisions above it, all are printed.
TIE = 0.01

WORDS = ("paczka zwrot faktura reklamacja dostawa konto hasło opłata rabat kurier sklep zamówienie błąd aplikacja "
         "telefon adres płatność karta przelew termin umowa serwis gwarancja produkt klient").split()


def requests(name, qtype, n, seed):
    """n System One requests for model name with one question of qtype, reproducible from seed."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        state = " ".join(rng.choice(WORDS, size=int(rng.integers(4, 24))))
        if qtype == "choice":
            k = int(rng.integers(2, 6))
            q = {"type": "choice", "instructions": "Czego dotyczy wiadomość?",
                 "criteria": {f"o{j}": str(rng.choice(WORDS)) + f" {j}" for j in range(k)}}
        elif qtype == "noul":
            q = {"type": "noul", "instructions": "Czy klient jest " + str(rng.choice(WORDS)) + "?"}
        else:
            q = {"type": "score", "instructions": "Jak pilne?", "criteria": ["niskie", "średnie", "wysokie", "krytyczne"]}
        out.append({"model": name, "state": state, "questions": {"q": q}})
    return out


def distribution(ans):
    """The probabilities of question q of a response, in answer order."""
    a = ans["answers"]["q"]
    if a["type"] == "noul":
        return [a["noul"], 1 - a["noul"]]
    return list(a["probabilities"].values())
