#!/usr/bin/env python3
"""A contract-like Polish document for timing facts "auto" (spec 03 §3): the doc-16k word pattern of
bench/cpu-bench.sh with a dated / priced clause every 40 words (dates, durations, amounts with VAT,
products, exchange rates, budgets, "dziś … temu"), seeded. 3950 words = a 16.5k-token prompt with the
fixture tokenizer (what `basal prepare` on a 32k-position model reports).

  bench/make-facts-doc.py [WORDS] > doc.txt
  build/tests/test_facts --bench doc.txt 40       # ms per facts run, best and mean
"""
import argparse
import random
import sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("words", metavar="WORDS", nargs="?", type=int, default=3950,
                help="length of the document in words, printed on stdout (default %(default)s)")
A = ap.parse_args()
rng = random.Random(16)
WORDS = "umowa strona wykonawca zamawiający termin kara płatność odbiór gwarancja rękojmia aneks paragraf".split()
CLAUSES = ["Termin płatności wynosi 14 dni od {d} {m} 2026 r.", "Wynagrodzenie: {a} zł netto, VAT 23%.",
           "Zamówienie: {n} szt. × {a} zł netto.", "Kurs EUR wynosi 4,{r} zł; próg {e} euro.",
           "Budżet projektu wynosi {a} zł, dotychczas wydano {b} zł.",
           "Odbiór nastąpił {d}.0{mm}.2026, gwarancja 2 lata.",
           "Dziś jest {d} {m} 2026 r., zgłoszenie wpłynęło {n} dni temu."]
MONTHS = ["stycznia", "lutego", "marca", "kwietnia", "maja", "czerwca"]

out = []
for i in range(A.words):
    if i % 40 == 0:
        out.append(f"§{i // 40 + 1}.")
        out.append(rng.choice(CLAUSES).format(
            d=rng.randint(1, 28), m=rng.choice(MONTHS), mm=rng.randint(1, 9),
            a=f"{rng.randint(1, 999)} {rng.randint(0, 999):03d},{rng.randint(0, 99):02d}",
            b=f"{rng.randint(1, 99)} {rng.randint(0, 999):03d},00", n=rng.randint(1, 40),
            r=f"{rng.randint(0, 9999):04d}", e=f"{rng.randint(1, 999)} 000"))
    else:
        out.append(WORDS[(i * 5) % 12])
sys.stdout.write(" ".join(out))
