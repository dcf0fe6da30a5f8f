#!/usr/bin/env python3
"""Reference of `facts: "auto"` (spec 03 §3), written from the spec with Python's own `re`, `decimal`
and `datetime`, which define the semantics the C implementation (src/facts/facts.c) must reproduce.

  facts_ref.py lines TEXT        print the facts lines of TEXT (or the error as "ERROR: msg")
  facts_ref.py gen SEED N        N generated test states, one JSON string a line
  facts_ref.py check FILE        FILE: the JSON strings of `gen`; stdin: the C output for them, one JSON
                                 value a line ({"lines": [...]} or {"error": "..."}); prints the counts
  facts_ref.py vectors FILE...   this reference against fixed vectors (JSON lines {"state", "lines"} or
                                 {"state", "error"}): the spec's §3.9 table and the vectors worked out
                                 from basal-rs facts.rs, so that a misreading shared with the C code shows
"""
import argparse
import bisect
import collections
import datetime
import decimal
import json
import random
import re
import sys

MONTHS = ["stycznia", "lutego", "marca", "kwietnia", "maja", "czerwca", "lipca", "sierpnia", "września",
          "października", "listopada", "grudnia"]
WEEKDAYS = ["poniedziałek", "wtorek", "środa", "czwartek", "piątek", "sobota", "niedziela"]
HEADER = "Fakty pomocnicze (wyliczone automatycznie, bez oceny prawnej):"
MAX_DATES, MAX_DURATIONS, MAX_AMOUNTS, MAX_TOTAL, MAX_COMPARE, MAX_PLAIN, MAX_EURO = 6, 3, 3, 12, 6, 3, 3
QTY_PRE = ("poniżej ", "od ", "do ", "powyżej ", "najmniej ", "min. ", "–", "-")

R = {k: re.compile(v) for k, v in {
    "DATE_TXT": r"\b(\d{1,2}) (" + "|".join(MONTHS) + r") (\d{4})(?: r\.)?",
    "DATE_NUM": r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b",
    "DATE_ISO": r"\b(\d{4})-(\d{2})-(\d{2})\b",
    "DURATION": r"\b(\d{1,3}) (dni|dnia|dzień|tygodni|tygodnie|tydzień|miesięcy|miesiące|miesiąc|lat|lata|rok)\b",
    "DUR_WORD": r"\b(tydzień|tygodnia|miesiąc|miesiąca|rok|roku)\b",
    "AGO": r"\b(\d{1,3}) (dni|dzień) temu\b",
    "TODAY": r"\b(?:[Dd]ziś|[Dd]zisiaj)(?: jest| mamy|:)? ",
    "AMOUNT": r"(?<![\d,])\b(\d{1,3}(?: \d{3})+(?:,\d{2})?|\d+(?:,\d{2})?) zł\b",
    "VAT": r"(?<![\d,.])\b(23|8|5) ?%",
    "VAT_CTX": r"\bVAT\b|\bpodat\w* od towarów",
    "STATED": r"(?<![\d,])\b(\d{1,3}(?:[ \u00a0]\d{3})+(?:,\d{2})?|\d+(?:,\d{2})?)[ \u00a0]?(?:zł|PLN)\b",
    "EURO": r"(?<![\d,])\b(\d{1,3}(?:[ \u00a0]\d{3})*(?:,\d{1,2})?)[ \u00a0]?(?:euro\b|EUR\b|€)",
    "RATE_ANY": r"(?<![\d,])\b(\d{1,2},\d{2,4})[ \u00a0]?(?:zł|PLN)\b",
    "RATE_PER": r"(?<![\d,])\b(\d{1,2},\d{2,4})[ \u00a0]?(?:zł|PLN)\b[ \u00a0]?(?:za|/)[ \u00a0]?(?:1[ \u00a0])?"
                r"(?:euro\b|EUR\b|€)",
    "RATE_EQ": r"\b1[ \u00a0]?(?:euro\b|EUR\b|€)[ \u00a0]?=[ \u00a0]?(\d{1,2},\d{2,4})[ \u00a0]?(?:zł|PLN)\b",
    "EURO_X_RATE": r"(?<![\d,])\b(\d{1,3}(?:[ \u00a0]\d{3})*(?:,\d{1,2})?)[ \u00a0]?(?:euro\b|EUR\b|€)[ \u00a0]?"
                   r"[×*][ \u00a0]?(\d{1,2},\d{2,4})[ \u00a0]?(?:zł|PLN)\b",
    "KURS": r"\b[Kk]urs\w*",
    "BOUND": r"[.;!?](?=\s+[A-ZĄĆĘŁŃÓŚŹŻ„\"(])|\n",
    "LABEL": r"[ \u00a0]?\(?(netto|brutto)\b",
    "BUDGET": r"\b[Bb]udżet\w*",
    "USED": r"\b(wykorzystano|wydano|wydatkowano|zużyto|zaangażowano|rozdysponowano)\b",
    "PRODUCT": r"(?<![\d,])(?<!\d[ \u00a0])\b(\d{1,4})[ \u00a0]?(?:(?:szt\.|sztuk[ia]?|usł\.|godz\.|kg|op\.|opak\.|"
               r"kpl\.|os\.)[ \u00a0]?)?×[ \u00a0]?(?=\d)",
    "TIER": r"(?<![\d,])\b(\d{1,3}(?:[ \u00a0]\d{3})*(?:,\d{2})?) zł(?: netto| brutto)?(?: za (?:sztukę|szt\.))?"
            r"(?: przy (?:zamówieniu|zakupie))? (poniżej|do|od|powyżej|co najmniej|min\.) (\d{1,5})"
            r"(?: do (\d{1,5})|[ \u00a0]?[–-][ \u00a0]?(\d{1,5}))? (?:szt\.|sztuk)",
    "QTY": r"(?<![\d,])(?<!\d[ \u00a0])\b(\d{1,5})[ \u00a0](?:szt\.|sztuk[ia]?\b)",
    "FEE": r"\b(?:[Dd]ostawa|[Ww]ysyłka|[Tt]ransport|[Pp]rzesyłka|[Kk]oszty? (?:dostawy|wysyłki|transportu|przesyłki))\b",
}.items()}
D = decimal.Decimal
CENT = D("0.01")


def q(x):
    return x.quantize(CENT, rounding=decimal.ROUND_HALF_UP)


def dec(s):
    return D(s.replace(" ", "").replace("\u00a0", "").replace(",", "."))


def group(int_str):
    out = ""
    for i, c in enumerate(int_str):
        if i and (len(int_str) - i) % 3 == 0:
            out += " "
        out += c
    return out


def fixed2(x):
    s = format(q(x), "f")
    neg = s.startswith("-")
    s = s.lstrip("-")
    ip, fp = s.split(".")
    return ("-" if neg else "") + group(ip) + "," + fp


def amt(x):
    return fixed2(x) + " zł"


def num(x):
    if x == x.to_integral_value():
        s = format(x.to_integral_value(), "f")
        neg = s.startswith("-")
        return ("-" if neg else "") + group(s.lstrip("-"))
    return fixed2(x)


def fmt(d):
    return f"{d.day} {MONTHS[d.month - 1]} {d.year} r."


def easter(y):
    a, b, c = y % 19, y // 100, y % 100
    d, e = b // 4, b % 4
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    l = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l) // 451
    t = h + l - 7 * m + 114
    return datetime.date(y, t // 31, t % 31 + 1)


def holiday(d):
    y = d.year
    e = easter(y)
    table = {}

    def put(day, name):
        table[day] = name

    def after(n):  # a holiday pushed past 9999-12-31 does not exist (no date to meet)
        try:
            return e + datetime.timedelta(days=n)
        except OverflowError:
            return None
    put(datetime.date(y, 1, 1), "Nowy Rok")
    put(datetime.date(y, 1, 6), "Trzech Króli")
    put(e, "Wielkanoc")
    put(after(1), "Poniedziałek Wielkanocny")
    put(datetime.date(y, 5, 1), "Święto Pracy")
    put(datetime.date(y, 5, 3), "Święto Konstytucji 3 Maja")
    put(after(49), "Zielone Świątki")
    put(after(60), "Boże Ciało")
    put(datetime.date(y, 8, 15), "Wniebowzięcie NMP")
    put(datetime.date(y, 11, 1), "Wszystkich Świętych")
    put(datetime.date(y, 11, 11), "Święto Niepodległości")
    put(datetime.date(y, 12, 25), "Boże Narodzenie")
    put(datetime.date(y, 12, 26), "drugi dzień Bożego Narodzenia")
    if y >= 2025:
        put(datetime.date(y, 12, 24), "Wigilia Bożego Narodzenia")
    return table.get(d)


def find_dates(text):
    rec = []
    for name in ("DATE_TXT", "DATE_NUM", "DATE_ISO"):
        for m in R[name].finditer(text):
            if name == "DATE_TXT":
                ymd = (int(m.group(3)), MONTHS.index(m.group(2)) + 1, int(m.group(1)))
            elif name == "DATE_NUM":
                ymd = (int(m.group(3)), int(m.group(2)), int(m.group(1)))
            else:
                ymd = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            try:
                rec.append((m.start(), datetime.date(*ymd)))
            except ValueError:
                pass
    rec.sort()
    out = []
    for _, d in rec:
        if d not in out:
            out.append(d)
    return out


def add_months(d, n):
    t = d.year * 12 + d.month - 1 + n
    y, m = divmod(t, 12)
    m += 1
    nxt = datetime.date(y + (m == 12), m % 12 + 1, 1)
    last = (nxt - datetime.timedelta(days=1)).day
    return datetime.date(y, m, min(d.day, last))


def plus(d, n, unit):
    if unit == "d":
        return d + datetime.timedelta(days=n)
    if unit == "w":
        return d + datetime.timedelta(days=7 * n)
    if unit == "m":
        return add_months(d, n)
    try:
        return datetime.date(d.year + n, d.month, d.day)
    except ValueError as ex:
        if d.year + n > 9999:
            raise ex
        return datetime.date(d.year + n, d.month, 28)


def bounds(text):
    return [m.start() for m in R["BOUND"].finditer(text)]


def sent_of(bs, pos):
    return bisect.bisect_left(bs, pos)


def cut(text, a, n):
    w = text[a:a + n]
    m = R["BOUND"].search(w)
    return w[:m.start()] if m else w


def vat_rates(text):
    bs = bounds(text)
    out = set()
    for m in R["VAT"].finditer(text):
        i = sent_of(bs, m.start())
        lo = bs[i - 1] + 1 if i > 0 else 0
        hi = bs[i] if i < len(bs) else len(text)
        if R["VAT_CTX"].search(text, lo, hi):
            out.add(int(m.group(1)))
    return out


def find_rates(text):
    rates = []
    for k in R["KURS"].finditer(text):
        a = k.end()
        for r in R["RATE_ANY"].finditer(cut(text, a, 160)):
            rates.append((a + r.start(1), r.group(1)))
    for name in ("RATE_PER", "RATE_EQ"):
        for m in R[name].finditer(text):
            rates.append((m.start(1), m.group(1)))
    explicit = {}
    for m in R["EURO_X_RATE"].finditer(text):
        rates.append((m.start(2), m.group(2)))
        explicit[m.start(1)] = (m.start(2), m.group(2))
    rates = [(p, r) for p, r in rates if 1 < dec(r) < 10]
    explicit = {k: v for k, v in explicit.items() if v in rates}
    return rates, explicit


def money(text, covered, vrates):
    bs = bounds(text)

    def sent(p):
        return sent_of(bs, p)
    st = []
    for m in R["STATED"].finditer(text):
        lm = R["LABEL"].match(text, m.end())
        st.append({"s": m.start(), "v": dec(m.group(1)), "use": "free", "lab": lm.group(1) if lm else None})

    def stated_at(pos):
        for a in st:
            if a["s"] == pos:
                return a
        return None

    def first_free(a, n):
        lim = a + len(cut(text, a, n))
        for x in st:
            if a <= x["s"] < lim and x["use"] == "free":
                return x
        return None
    calc, refs, subjects = [], [], []
    rates, explicit = find_rates(text)
    for p, _ in rates:
        a = stated_at(p)
        if a:
            a["use"] = "rate"
    distinct = {}
    for _, r in rates:
        distinct.setdefault(dec(r), r)
    eur = []
    for m in R["EURO"].finditer(text):
        if text[max(0, m.start() - 3):m.start()] == "za " or text[m.end():].lstrip().startswith("="):
            continue
        v = dec(m.group(1))
        if v not in [x for _, x in eur]:
            eur.append((m.start(), v))
    for p, v in eur[:MAX_EURO]:
        if p in explicit:
            r = explicit[p][1]
        elif len(distinct) == 1:
            r = next(iter(distinct.values()))
        else:
            near = {}
            for pos, rr in rates:
                if sent(pos) == sent(p):
                    if dec(rr) in near:
                        near[dec(rr)] = rr
                    else:
                        near[dec(rr)] = rr
            if len(near) != 1:
                continue
            r = next(iter(near.values()))
        c = q(v * dec(r))
        calc.append(f"{num(v)} euro × {r} zł = {amt(c)}")
        for a in st:
            if a["use"] == "free" and a["v"] == c and sent(a["s"]) == sent(p):
                a["use"] = "alias"
        refs.append(c)
    bm = R["BUDGET"].search(text)
    if bm:
        b = first_free(bm.end(), 80)
        if b is not None:
            used = []
            sb = sent(b["s"])
            for u in R["USED"].finditer(text):
                if sent(u.start()) in (sb, sb + 1):
                    x = first_free(u.end(), 40)
                    if x is not None and x is not b and all(x is not y for _, y in used):
                        used.append((u.group(1), x))
            if used:
                r = b["v"] - sum(x["v"] for _, x in used)
                parts = " − ".join(f"{w} {amt(x['v'])}" for w, x in used)
                calc.append(f"budżet {amt(b['v'])} − {parts} = {amt(r)}")
                b["use"] = "op"
                for _, x in used:
                    x["use"] = "op"
                refs.append(q(r))
    lists = {}
    for m in R["PRODUCT"].finditer(text):
        n = int(m.group(1))
        a = stated_at(m.end())
        if a is not None and a["use"] == "free" and n > 0:
            lists.setdefault(sent(m.start()), []).append((n, a))
    for items in list(lists.values())[:2]:
        items = items[:5]
        labs = {a["lab"] for _, a in items}
        lab = next(iter(labs)) if len(labs) == 1 else None
        if len(items) == 1 and items[0][0] == 1:
            a = items[0][1]
            a["use"] = "subj"
            subjects.append((a["v"], lab, a))
            continue
        tots = []
        for n, a in items:
            t = n * a["v"]
            if n > 1:
                calc.append(f"{n} × {amt(a['v'])} = {amt(t)}")
            tots.append(t)
            a["use"] = "op"
        total = sum(tots)
        if len(tots) > 1:
            calc.append(" + ".join(amt(t) for t in tots) + f" = {amt(total)}")
        subjects.append((total, lab, None))
    tiers = list(R["TIER"].finditer(text))
    if len(tiers) >= 2:
        qs = []
        for m in R["QTY"].finditer(text):
            s = m.start()
            inside = any(t.start() <= s < t.end() for t in tiers)
            times = re.match(r"[ \u00a0]?×", text[m.end():]) is not None
            pre = any(text[:s].endswith(p) for p in QTY_PRE)
            if not inside and not times and not pre:
                v = int(m.group(1))
                if v not in qs:
                    qs.append(v)
        if len(qs) == 1:
            Q = qs[0]
            hits = []
            for m in tiers:
                kind, x = m.group(2), int(m.group(3))
                y = m.group(4) or m.group(5)
                if kind == "poniżej":
                    ok, cond = Q < x, f"{Q} < {x}"
                elif kind == "do":
                    ok, cond = Q <= x, f"{Q} ≤ {x}"
                elif kind == "powyżej":
                    ok, cond = Q > x, f"{Q} > {x}"
                elif y:
                    ok, cond = x <= Q <= int(y), f"{x} ≤ {Q} ≤ {y}"
                else:
                    ok, cond = Q >= x, f"{Q} ≥ {x}"
                if ok:
                    hits.append((cond, dec(m.group(1))))
            if len(hits) == 1:
                cond, P = hits[0]
                t = Q * P
                calc.append(f"{cond}; {Q} × {amt(P)} = {amt(t)}")
                subjects.append((t, None, None))
        for m in tiers:
            a = stated_at(m.start(1))
            if a is not None and a["use"] == "free":
                a["use"] = "op"
    if len(subjects) == 1:
        for m in R["FEE"].finditer(text):
            f = first_free(m.end(), 30)
            if f is not None:
                T = subjects[0][0]
                calc.append(f"{amt(T)} + {amt(f['v'])} = {amt(T + f['v'])}")
                f["use"] = "op"
                break
    for a in st:
        if a["use"] == "free" and a["lab"]:
            a["use"] = "subj"
            subjects.append((a["v"], a["lab"], a))
    k = None
    if len(vrates) == 1:
        r = next(iter(vrates))
        k = 1 + D(r) / 100
    pool = []
    for g, (v, lab, src) in enumerate(subjects):
        pool.append((q(v), 0, g))
        if k is not None and lab:
            d = v * k if lab == "netto" else v / k
            if src is None or src["v"] not in covered:
                kk = str(k).replace(".", ",")
                if lab == "netto":
                    calc.append(f"{amt(v)} netto × {kk} = {amt(d)} brutto")
                else:
                    calc.append(f"{amt(v)} brutto ÷ {kk} = {amt(d)} netto")
            pool.append((q(d), 0, g))
    for i, v in enumerate(refs):
        pool.append((v, 2, -1 - i))
    for i, a in enumerate(st):
        if a["use"] == "free":
            pool.append((a["v"], 1, -100 - i))
    uniq = []
    for x in pool:
        if not any(x[0] == y[0] and x[1] == y[1] for y in uniq):
            uniq.append(x)
    plain = sum(1 for x in uniq if x[1] == 1)
    pairs = []
    for i in range(len(uniq)):
        for j in range(i + 1, len(uniq)):
            n1 = (uniq[i][1] == 1) + (uniq[j][1] == 1)
            if uniq[i][2] != uniq[j][2] and (n1 <= 1 or plain <= MAX_PLAIN):
                pairs.append((n1, i, j))
    pairs.sort()
    comps = []
    for _, i, j in pairs[:MAX_COMPARE]:
        x, y = (uniq[i], uniq[j]) if uniq[i][1] <= uniq[j][1] else (uniq[j], uniq[i])
        op = ">" if x[0] > y[0] else "<" if x[0] < y[0] else "="
        comps.append(f"{amt(x[0])} {op} {amt(y[0])}")
    return calc, comps


def facts(text):
    lines = []
    ds = find_dates(text)[:MAX_DATES]
    for d in ds:
        line = f"{fmt(d)} to {WEEKDAYS[d.weekday()]}"
        h = holiday(d)
        if h:
            line += f"; dzień ustawowo wolny od pracy ({h})"
        lines.append(line)
    for a, b in zip(ds, ds[1:]):
        n = (b - a).days
        lines.append(f"Od {fmt(a)} do {fmt(b)}: {abs(n)} dni ({'później' if n >= 0 else 'wcześniej'})")
    tm = R["TODAY"].search(text)
    if tm:
        td = find_dates(text[tm.end():tm.end() + 40])
        if td:
            T = td[0]
            for m in R["AGO"].finditer(text):
                n = int(m.group(1))
                lines.append(f"{n} dni przed {fmt(T)} to {fmt(T - datetime.timedelta(days=n))}")
    durs = []
    for m in R["DURATION"].finditer(text):
        n, u = int(m.group(1)), m.group(2)
        unit = "d" if u.startswith("d") else "w" if u.startswith("ty") else "m" if u.startswith("mie") else "y"
        if (n, unit) not in durs and not text[m.end():].startswith(" temu"):
            durs.append((n, unit))
    for m in R["DUR_WORD"].finditer(text):
        w = m.group(1)
        unit = "w" if w.startswith("ty") else "m" if w.startswith("mi") else "y"
        if (1, unit) not in durs:
            durs.append((1, unit))
    durs = durs[:MAX_DURATIONS]
    words = {"d": ("dzień", "dni"), "w": ("tydzień", "tygodnie"), "m": ("miesiąc", "miesiące"), "y": ("rok", "lata")}
    for d in ds[:3]:
        for n, unit in durs:
            p = plus(d, n, unit)
            w = words[unit][0 if n == 1 else 1]
            lines.append(f"{fmt(d)} + {n} {w} (kalendarzowo) = {fmt(p)} ({WEEKDAYS[p.weekday()]})")
    vrates = vat_rates(text)
    rate_pos = {p for p, _ in find_rates(text)[0]}
    amounts = [m.group(1) for m in R["AMOUNT"].finditer(text) if m.start() not in rate_pos][:MAX_AMOUNTS]
    covered = []
    for raw in amounts:
        x = dec(raw)
        for r in sorted(vrates, reverse=True):
            k = 1 + D(r) / 100
            kk = str(k).replace(".", ",")
            lines.append(f"{amt(x)} × {kk} = {amt(x * k)}; {amt(x)} ÷ {kk} = {amt(x / k)}")
            covered.append(x)
    calc, comps = money(text, covered, vrates)
    room = max(0, MAX_TOTAL - len(lines))
    calc = calc[:room]
    comps = comps[:min(MAX_COMPARE, room - len(calc))]
    return lines + calc + comps


def run(text):
    """{"lines": [...]} or {"error": str(exception)} as upstream's server reports it."""
    try:
        return {"lines": facts(text)}
    except (decimal.InvalidOperation, ValueError, OverflowError) as ex:
        return {"error": str(ex)}


# ---------------------------------------------------------------------------------------------------------
# generator of test states

WORDS_PL = ["Umowa", "zawarta", "dnia", "Faktura", "na kwotę", "Klient", "zamawia", "termin", "płatności",
            "wynosi", "Kwota", "Cena", "Odsetki", "Zamówienie", "oraz", "i", "a", "w tym", "Stawka", "Wartość",
            "Próg", "Limit", "Kontrakt", "opiewa", "Wniosek", "złożono", "odpowiedź", "wysłano", "Towar",
            "wydano", "Opłata", "Dostawa", "kosztuje", "Przesyłka", "Koszt dostawy", "Koszty wysyłki",
            "Transport", "wysyłka", "Budżet", "budżetu", "działu", "wykorzystano", "wydatkowano", "zużyto",
            "zaangażowano", "rozdysponowano", "Kurs", "kurs", "kursu", "Kursy", "rozliczeniowy", "euro",
            "podatku VAT", "VAT", "podatek od towarów i usług", "podatku od towarów", "netto", "brutto",
            "(netto)", "(brutto)", "Dziś", "dziś jest", "Dzisiaj", "dzisiaj mamy", "Dziś:", "temu", "przy",
            "zamówieniu", "zakupie", "za sztukę", "poniżej", "od", "do", "powyżej", "co najmniej", "min.",
            "tydzień", "tygodnia", "miesiąc", "miesiąca", "rok", "roku", "The", "invoice", "is", "due",
            "customer", "price", "includes", "days", "amount", "of", "EUR", "PLN", "zł", "szt.", "sztuk",
            "sztuki", "sztuka", "usł.", "godz.", "kg", "op.", "opak.", "kpl.", "os.", "Cennik:", "ŁÓDŹ", "Ćma",
            "Źródło", "Żaden", "Ósmy", "Śląsk", "Ąą", "Ęę", "Ńń"]
PUNCT = [".", ",", ";", ":", "!", "?", " — ", " – ", "-", "(", ")", "„", "”", "\"", "'", "/", "*", "×", "=",
         "%", " %", "\n", "\n\n", ". ", "; ", "! ", "? ", ".\t", ".\u00a0", ".\u2003", ".\u3000", "\u2028"]
SPACES = [" ", " ", " ", " ", "\u00a0", "\t", "\u2009", "\u202f", "\u3000", "\u1680", "\u0085", "\u001c"]
DIGITS_ALT = ["\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",  # Arabic-Indic
              "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19",  # fullwidth
              "\u0966\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e\u096f"]  # Devanagari
QTY_UNITS = [" szt.", " sztuk", " sztuki", "\u00a0szt.", " sztuka"]
NOISE = list("abcxyzABCXYZ_0123456789ąćęłńóśźżĄĆĘŁŃÓŚŹŻ²³¹½¾ⅫⅠ①µßø€$£") + ["\u200b", "\u00ad", "🙂", "中", "文",
                                                                          "Ω", "ß", "ﬁ", "\u0301", "é"]


# Hand-written edge states run before the generated ones: glued and invalid dates, the calendar limits,
# 28-digit amounts, Unicode word boundaries and digits, the windows of TODAY / KURS / budget.
EDGE = [
    "Kod 312.03.2026 i b12.03.2026 oraz 12.03.20267 i 12.03.2026y oraz 2026-01-0599 i 2026-01-05.",
    "Daty 2026-13-01, 2026-02-30, 2026-00-10 i 2026-02-28; 31.04.2026, 30.04.2026; 29 lutego 2025 r.",
    "Rok 00.01.0000 oraz 0000-01-01 i 1 stycznia 0000 r. i 1 stycznia 0001 r.",
    "Wpis z 31.12.9999 i 9999-12-30 na 1 dzień.",
    "Termin 15.11.9999, 1 miesiąc.", "Termin 15.12.9998, 12 miesięcy.", "Data 29.02.9996 i 3 lata.",
    "Data 29.02.2024 na 1 rok i 4 lata oraz 0 lat i 0 dni.",
    "Dziś jest 2 stycznia 0001 r. 1 dzień temu i 2 dni temu.",
    "Dziś jest bardzo długi i wyjątkowy dzień tygodnia, 10 marca 2026 r.; 5 dni temu.",
    "Dziś jest 10 marca 2026 r.; 5 dni temu; dziś: 1.01.2020; 3 dzień temu.",
    "Dzisiejszy dzień 3 marca 2026 r., 7 dni temu.",
    "Od 10.10.2026: 14 dni temu i 14 dni; tydzień, tygodnia, miesiąca, roku, 2 dnia.",
    "Wigilia 24.12.2024 i 24.12.2025, 25.12.2025, 26.12.2025, 1.11.2026, 11.11.2026, 15.08.2026.",
    "Wielkanoc 2019-04-21, 2027-03-28, 2285-03-22, 1818-03-22; Zielone Świątki 2027-05-16.",
    "Kwota 100000000000000000000000000 zł, VAT 23%.", "Kwota 99999999999999999999999999,99 zł, VAT 5%.",
    "Kwota 9999999999999999999999999,99 zł netto, VAT 23%. Druga 1 zł.",
    "Budżet 99999999999999999999999999,99 zł, wydano 0,01 zł i zużyto 99999999999999999999999999,99 zł.",
    "Zakup 9999 × 99999999999999999999999,99 zł i 2 × 1 zł.",
    "Kwoty 100000000000000000000000000000 zł, 1 zł, 2 zł, 3 zł, 4 zł.",
    "Kurs 4,50 zł. Kwota 99 999 999 999 999 999 999 999 euro i 0,5 euro oraz 2,5 euro.",
    "Kurs 1,0005 zł. Kwota 0,5 euro, 1,5 euro, 2,5 euro.",
    "Data é12.03.2026 i ²12.03.2026 i \u030112.03.2026 i \u203f12.03.2026 i \u24b612.03.2026 oraz 13.03.2026é.",
    "Kwota 100 złé, 200 zł\u0301, 300 zł², 400 zł\u203f; VAT 23%.",
    "Data \u0661\u0662.\u0660\u0663.\u0662\u0660\u0662\u0666 i \uff12\uff10\uff12\uff16-\uff10\uff13-\uff11\uff15;"
    " kwota \u0661\u0660\u0660 zł, VAT 23%; \u0663 × \u0665\u0660 zł.",
    "Kwota 1\u2009000,00 zł i 2\u202f000,00 zł oraz 3\u00a0000 zł; VAT 23%.",
    "Ceny 100 zł(netto), 200 zł (brutto), 300 zł nettoo, 400 zł bruttoX, 500\u00a0PLN\u00a0netto; VAT 23%.",
    "Kurs 4,25 PLN / EUR, 4,26 zł/ 1 EUR i 4,27 zł za 1€. Kwota 2 000 EUR.",
    "Kwota 100 euro × 4,30 zł oraz 100 euro × 4,40 zł; kurs 4,50 zł.",
    "Kurs: 1 euro = 4,33 zł, 1€=4,35 PLN. Wartość 10 000 euro =  zł i za 300 euro.",
    "Kurs bez kropek " + "bardzo długi opis " * 9 + "4,30 zł. Kwota 1 000 euro.",
    "Kurs walut. Dziś 4,30 zł za kawę. Kwota 1 000 euro.",
    "Budżet " + "x" * 90 + " 5 000 zł; wydano 100 zł.",
    "Budżetowa rezerwa to 10 000 zł. Zużyto 2 500 zł. Następnie. Rozdysponowano 1 000 zł.",
    "Budżet 1 000,00 zł; wydano 1 500,00 zł oraz wydano 1 500,00 zł.",
    "Pozycje: 0 × 100 zł, 2 × 50 zł; Kod 12 345 × 2 zł i 1,5 × 3 zł oraz 12 3 × 4 zł.",
    "Lista A: 2 × 10,00 zł, 3 × 20,00 zł. Lista B: 4 × 5,00 zł brutto, 1 × 7,00 zł brutto. Lista C: 9 × 1,00 zł.",
    "Cennik: 9 zł od 01-099 szt.; 8 zł od 100 szt. Zamówienie 0050 szt.",
    "Cennik: 5 zł do 50 szt.; 4 zł od 51 szt. Zamówienie 15 szt. × 5 zł i 30 szt. Rabat od 70 szt.",
    "Kwota 100 zł. „Druga” 200 zł; \"Trzecia\" 300 zł! (Czwarta) 400 zł? Ósma 500 zł.",
    "Kwota 100 zł. Ąkwota 200 zł.\u001cZ 300 zł, VAT 23%.\u001fKoniec.\u2028Ż 5%.",
    "Paczka 🙁 z 12.05.2026 za 99,99 zł brutto 👍, VAT 23%.",
    "", "   \n\t ", "x",
]


def gen_text(rng):
    def digits(n, lo=0):
        s = str(rng.randint(lo, 10 ** n - 1)) if n > 0 else ""
        return s

    def maybe_alt(s):
        if rng.random() < 0.04:
            tab = rng.choice(DIGITS_ALT)
            return "".join(tab[int(c)] if c.isdigit() and rng.random() < 0.7 else c for c in s)
        return s

    def sp():
        return rng.choice(SPACES) if rng.random() < 0.25 else " "

    def number(style=None):
        style = style or rng.choice(["plain", "grouped", "groupednbsp", "cents", "big", "small", "rate"] * 4 + ["huge"])
        if style == "plain":
            s = str(rng.randint(0, 99999))
        elif style == "small":
            s = str(rng.randint(0, 99))
        elif style == "grouped":
            s = str(rng.randint(1, 999)) + "".join(" " + "%03d" % rng.randint(0, 999)
                                                   for _ in range(rng.randint(1, 3)))
        elif style == "groupednbsp":
            s = str(rng.randint(1, 999)) + "".join(rng.choice([" ", "\u00a0"]) + "%03d" % rng.randint(0, 999)
                                                   for _ in range(rng.randint(1, 3)))
        elif style == "rate":
            s = str(rng.randint(0, 12)) + "," + "%0*d" % (rng.randint(2, 4), 0)
            s = s[:s.index(",") + 1] + "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(1, 5)))
        elif style == "huge":
            s = str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(20, 34)))
        else:
            s = str(rng.randint(0, 9999999))
        if style not in ("rate",) and rng.random() < 0.55:
            s += "," + "".join(str(rng.randint(0, 9)) for _ in range(rng.choice([2, 2, 2, 1, 3])))
        return maybe_alt(s)

    def date():
        y = rng.choice([2024, 2025, 2026, 2027] * 6 + [rng.randint(1, 9999), 9999, 1, 2000, 1900, 2100, 2028, 2030])
        m = rng.choice([rng.randint(1, 12), rng.randint(0, 14)])
        d = rng.choice([rng.randint(1, 28), rng.randint(1, 31), 29, 30, 31, 0, 32])
        f = rng.randint(0, 3)
        if f == 0:
            mm = MONTHS[(m - 1) % 12]
            s = f"{d} {mm} {y:04d}" if rng.random() < 0.8 else f"{d} {mm} {y}"
            if rng.random() < 0.6:
                s += " r."
        elif f == 1:
            s = f"{d}.{m}.{y:04d}" if rng.random() < 0.5 else f"{d:02d}.{m:02d}.{y:04d}"
        elif f == 2:
            s = f"{y:04d}-{m:02d}-{d:02d}"
        else:
            s = f"{d} {rng.choice(MONTHS)} {y}"
        return maybe_alt(s)

    def duration():
        n = rng.choice([1, 2, 3, 5, 7, 14, 21, 30, 90, 100, 365, 999, rng.randint(0, 1000)])
        u = rng.choice(["dni", "dnia", "dzień", "tygodni", "tygodnie", "tydzień", "miesięcy", "miesiące", "miesiąc",
                        "lat", "lata", "rok"])
        s = f"{n} {u}"
        if rng.random() < 0.15:
            s += " temu"
        return s

    def currency():
        return rng.choice([" zł", "zł", "\u00a0zł", " PLN", "PLN", " euro", "euro", " EUR", " €", "€", " zł netto",
                           " zł brutto", " zł (netto)", " zł\u00a0netto", " PLN brutto", " złotych", " zł/EUR",
                           " zł za 1 EUR", " zł za euro", " PLN/EUR", " zł za 1\u00a0euro"])

    def piece():
        k = rng.random()
        if k < 0.16:
            return date()
        if k < 0.24:
            return duration()
        if k < 0.50:
            return number() + currency()
        if k < 0.55:
            return f"1 {rng.choice(['EUR', 'euro', '€'])}{sp()}={sp()}{number('rate')}{rng.choice([' zł', ' PLN'])}"
        if k < 0.59:
            return f"{number('grouped')}{sp()}{rng.choice(['euro', 'EUR', '€'])}{sp()}{rng.choice(['×', '*'])}" \
                   f"{sp()}{number('rate')}{rng.choice([' zł', 'PLN'])}"
        if k < 0.65:
            unit = rng.choice(["", " szt.", " sztuk", " usł.", " godz.", " kg", " op.", "szt.", " kpl.", " os."])
            return f"{rng.randint(0, 120)}{unit}{sp()}×{sp()}{number()} zł{rng.choice(['', ' netto', ' brutto'])}"
        if k < 0.71:
            kind = rng.choice(["poniżej", "do", "od", "powyżej", "co najmniej", "min."])
            x = rng.randint(1, 200)
            tail = rng.choice(["", f" do {x + rng.randint(1, 99)}", f"–{x + 9}", f" - {x + 50}", f"-{x + 1}"])
            mid = rng.choice(["", " netto", " brutto"]) + rng.choice(["", " za sztukę", " za szt."]) + \
                rng.choice(["", " przy zamówieniu", " przy zakupie"])
            return f"{number(rng.choice(['plain', 'grouped', 'cents']))} zł{mid} {kind} {x}{tail} " \
                   f"{rng.choice(['szt.', 'sztuk'])}"
        if k < 0.75:
            return str(rng.randint(0, 500)) + rng.choice(QTY_UNITS)
        if k < 0.80:
            return f"{rng.choice(['VAT', 'podatku VAT', 'stawka VAT', 'podatek od towarów'])} " \
                   f"{rng.choice(['23', '8', '5', '7', '0', '23,5', '5.5'])}{rng.choice(['%', ' %', ''])}"
        if k < 0.83:
            return rng.choice(["Dziś jest ", "Dzisiaj: ", "dziś mamy ", "Dziś ", "Dzisiaj jest "]) + date()
        if k < 0.88:
            return rng.choice(NOISE) * rng.randint(1, 3)
        return rng.choice(WORDS_PL)

    def money_txt(unit=True):
        v = rng.choice([rng.randint(1, 999), rng.randint(1000, 99999), rng.randint(100000, 9999999)])
        ip = str(v)
        if rng.random() < 0.8:
            sep = " " if rng.random() < 0.85 else "\u00a0"
            ip = group(ip).replace(" ", sep)
        txt = ip + ("," + "%02d" % rng.randint(0, 99) if rng.random() < 0.7 else "")
        if not unit:
            return maybe_alt(txt)
        return maybe_alt(txt) + rng.choice([" zł"] * 6 + ["\u00a0zł", " PLN", "zł"])

    def euro_txt():
        v = rng.choice([rng.randint(1, 999), rng.randint(1000, 999999)])
        ip = group(str(v)) if rng.random() < 0.8 else str(v)
        if rng.random() < 0.2:
            ip += "," + str(rng.randint(0, 99))
        return ip + rng.choice([" euro", " EUR", " €", "€", "\u00a0euro"])

    def rate_txt():
        return f"{rng.randint(1, 9)},{rng.randint(0, 9999):04d}"[:rng.choice([4, 5, 6])]

    def lab():
        return rng.choice(["", "", " netto", " brutto", " (netto)", "\u00a0netto"])

    def sentence():
        k = rng.randrange(12)
        if k == 0:
            used = rng.sample(["wydano", "wykorzystano", "wydatkowano", "zużyto", "zaangażowano", "rozdysponowano"],
                              rng.randint(1, 3))
            parts = ", ".join(f"{w} {money_txt()}" for w in used)
            return f"{rng.choice(['Budżet', 'budżet', 'Budżetu'])} działu wynosi {money_txt()}, dotychczas {parts}"
        if k == 1:
            items = [f"{rng.choice([1, 1, 2, 3, 5, 12, 0, 150])}{rng.choice(['', ' szt.', ' usł.', ' kg', ' godz.'])} × "
                     f"{money_txt()}{lab()}" for _ in range(rng.randint(1, 6))]
            return "Zamówienie: " + rng.choice([" oraz ", "; ", ", "]).join(items)
        if k == 2:
            x = rng.randint(5, 50)
            y = x + rng.randint(10, 100)
            fee = f" Dostawa kosztuje {money_txt()}." if rng.random() < 0.7 else ""
            qty = f" Klient zamawia {rng.choice([x - 1, x, y, y + 1, rng.randint(1, 300)])} szt." \
                if rng.random() < 0.85 else ""
            if rng.random() < 0.15:
                qty += f", a potem {rng.randint(1, 300)} sztuk"
            return (f"Cennik: {money_txt(False)} zł za sztukę przy zamówieniu poniżej {x} szt.; "
                    f"{money_txt(False)} zł{rng.choice(['', ' netto'])} od {x} {rng.choice(['do ', '–', '-', ' - '])}"
                    f"{y - 1} szt.; {money_txt(False)} zł od {y} {rng.choice(['szt.', 'sztuk'])}{fee}{qty}")
        if k == 3:
            return f"Kontrakt opiewa na {euro_txt()}. Kurs {rng.choice(['rozliczeniowy', 'EUR', 'średni'])}: " \
                   f"1{rng.choice([' ', ''])}{rng.choice(['EUR', 'euro', '€'])} = {rate_txt()} zł"
        if k == 4:
            return f"Próg {euro_txt()}; {rng.choice(['kurs', 'Kurs', 'kursem'])} EUR wynosi {rate_txt()} zł. " \
                   f"Wartość {money_txt()}{lab()}"
        if k == 5:
            return f"Wartość {euro_txt()} {rng.choice(['×', '*'])} {rate_txt()} {rng.choice(['zł', 'PLN'])}"
        if k == 6:
            return f"{rng.choice(['Faktura na', 'Cena', 'Opłata', 'Kwota'])} {money_txt()}{lab()}" \
                   f"{rng.choice([', VAT ', ', w tym VAT ', '. Stawka podatku od towarów i usług: ', ', stawka '])}" \
                   f"{rng.choice(['23', '8', '5', '23', '7'])}{rng.choice(['%', ' %'])}"
        if k == 7:
            return f"{rng.choice(['Dziś jest', 'Dzisiaj:', 'Dziś mamy', 'dzisiaj jest'])} {date()}. Wniosek złożono " \
                   f"{rng.randint(0, 999)} {rng.choice(['dni', 'dzień'])} temu, a odpowiedź {rng.randint(1, 30)} dni temu"
        if k == 8:
            return f"Umowa zawarta {date()} na {duration()}, z okresem {rng.choice(['próbnym', ''])} " \
                   f"{rng.choice(['1 miesiąc', 'tydzień', 'rok', '3 miesiące', '2 tygodnie', '14 dni'])}"
        if k == 9:
            return f"Kurs {rate_txt()} zł. Wartość {euro_txt()} i {euro_txt()}"
        if k == 10:
            return f"Cena {rate_txt()} {rng.choice(['PLN/EUR', 'zł za 1 EUR', 'zł za euro', 'zł / €'])}, kwota " \
                   f"{euro_txt()}"
        return f"{rng.choice(['Faktura opiewa na', 'Limit wynosi', 'Zwrot'])} {money_txt()}{lab()}"

    if rng.random() < 0.5:
        out = []
        for _ in range(rng.randint(1, 6)):
            out.append(sentence() if rng.random() < 0.8 else piece())
            out.append(rng.choice([". ", ". ", "; ", "\n", " ", ".\u00a0", "! "]))
        return "".join(out).strip(" ") or "x"
    n = rng.randint(1, 28)
    out = []
    for _ in range(n):
        out.append(piece())
        r = rng.random()
        out.append(rng.choice(PUNCT) + sp() if r < 0.35 else sp())
    text = "".join(out)
    if rng.random() < 0.05:
        text = text.upper() if rng.random() < 0.5 else text.replace(" ", "\u00a0")
    return text.strip(" ") or "x"


KIND_COUNT = collections.Counter()
FORBIDDEN = ("przekracz", "mieści", "w terminie", "po terminie", "zasadn", "limit", "próg", "przysługuje")
KINDS = [("weekday", r" to \w+$|ustawowo"), ("gap", r"^Od "), ("ago", r"dni przed"), ("duration", r"kalendarzowo"),
         ("vat", r" ÷ 1,\d\d = .*zł$"), ("euro", r" euro × "), ("budget", r"^budżet "), ("product", r"^\d+ × "),
         ("sum", r"zł \+ .* = "), ("tier", r"[<>≤≥] \d+; "), ("netgross", r"(netto|brutto)$"),
         ("compare", r"^-?[\d ]+,\d\d zł [<>=] ")]


def count_kinds(res):
    if "error" in res:
        KIND_COUNT["error " + res["error"].split(" is out")[0]] += 1
        return
    for line in res["lines"]:
        for k, rx in KINDS:
            if re.search(rx, line):
                KIND_COUNT[k] += 1
                break


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{lines,gen,check}")
    sub.add_parser("lines", help="print the facts lines of TEXT").add_argument("text", metavar="TEXT")
    g = sub.add_parser("gen", help="N generated test states, one JSON string a line")
    g.add_argument("seed", metavar="SEED", type=int)
    g.add_argument("n", metavar="N", type=int)
    sub.add_parser("check", help="compare the C output on stdin with FILE's states").add_argument("file", metavar="FILE")
    sub.add_parser("vectors", help="check this reference against fixed vectors").add_argument(
        "files", metavar="FILE", nargs="+")
    a = ap.parse_args()
    if a.cmd == "lines":
        r = run(a.text)
        print("\n".join(r["lines"]) if "lines" in r else "ERROR: " + r["error"])
    elif a.cmd == "gen":
        rng = random.Random(a.seed)
        for t in EDGE:
            print(json.dumps(t))
        for _ in range(a.n - len(EDGE)):
            print(json.dumps(gen_text(rng)))
    elif a.cmd == "vectors":
        total = bad = 0
        for path in a.files:
            with open(path, encoding="utf-8") as f:
                for line in filter(str.strip, f):
                    v = json.loads(line)
                    want = {"error": v["error"]} if "error" in v else {"lines": v["lines"]}
                    got = run(v["state"])
                    total += 1
                    if got != want:
                        bad += 1
                        print("MISMATCH", path, json.dumps(v["state"], ensure_ascii=False))
                        print("  want:", json.dumps(want, ensure_ascii=False))
                        print("  got: ", json.dumps(got, ensure_ascii=False))
        print(f"facts_ref vectors: {total - bad}/{total} identical")
        sys.exit(1 if bad or not total else 0)
    elif a.cmd == "check":
        with open(a.file, encoding="utf-8") as f:
            texts = [json.loads(x) for x in f]
        got = [json.loads(x) for x in sys.stdin.read().splitlines()]
        if len(got) != len(texts):
            print(f"facts_ref: {len(got)} results for {len(texts)} texts")
            sys.exit(1)
        same = lines = nonempty = errors = 0
        bad = []
        for t, g in zip(texts, got):
            want = run(t)
            count_kinds(want)
            # 03 §3.9: only arithmetic and calendar facts, never a rule or an answer
            for line in g.get("lines", []):
                if any(w in line for w in FORBIDDEN):
                    bad.append((t, {"forbidden word in": line}, g))
            if want == g:
                same += 1
                lines += len(want.get("lines", []))
                nonempty += bool(want.get("lines"))
                errors += "error" in want
            else:
                bad.append((t, want, g))
        print(f"facts differential: {same}/{len(texts)} texts identical ({lines} lines, {nonempty} texts with "
              f"facts, {errors} errors)")
        kinds = collections.Counter()
        for t in texts[:0]:
            pass
        print("line kinds:", ", ".join(f"{k} {v}" for k, v in sorted(KIND_COUNT.items())))
        for t, w, g in bad[:5]:
            print("MISMATCH", json.dumps(t, ensure_ascii=False))
            print("  python:", json.dumps(w, ensure_ascii=False))
            print("  c:     ", json.dumps(g, ensure_ascii=False))
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
