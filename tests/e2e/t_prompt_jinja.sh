#!/usr/bin/env bash
# Prompts and error bodies against independent Python oracles:
#  1. the chat template (written here from the spec's exact bytes, checked by
#     its SHA-256) rendered with python3-jinja2 as transformers renders it, the
#     system/user texts built independently in Python from the spec (Python's
#     own json.dumps and str.format), plus the prefill — equal to the C prompt;
#  2. every error body parses with CPython's json.loads, echoed inputs equal the
#     request's values, and JSON decode errors carry CPython's message and
#     position (fixed cases plus seeded random corruptions of valid bodies).
set -u
. "$(dirname "$0")/lib.sh"
for t in test_prompt test_request; do
    if [ ! -x "$BUILD/tests/$t" ]; then
        echo "missing $BUILD/tests/$t (build it first)"; echo "0 passed, 1 failed"; exit 1
    fi
done
exec $PY - "$BUILD/tests/test_prompt" "$BUILD/tests/test_request" <<'PYEOF'
import hashlib, json, random, subprocess, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment

DUMP, REPLY = sys.argv[1], sys.argv[2]
passed = failed = 0
def check(ok, what):
    global passed, failed
    if ok: passed += 1
    else:
        failed += 1
        print("FAIL:", what)

# ---- 1. prompts -------------------------------------------------------------
TEMPLATE = ("{{bos_token}}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
            "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
            "{{ '<|im_start|>assistant\n' }}{% endif %}")
check(len(TEMPLATE.encode()) == 209 and hashlib.sha256(TEMPLATE.encode()).hexdigest()
      == "a805e50fed68938a076b07e2e602639611b50b1ced0e50f11eb92f1ba25be4dc", "chat template bytes")
tmpl = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(TEMPLATE)
# the spec's system/user texts, prefill and language letters, as the other Python oracle holds them
sys.path.insert(0, "tools")
from protocol_ref import DIACRITICS, PREFILL, SYSTEM, USER  # noqa: E402
YESNO = {"pl": ("Tak", "Nie"), "en": ("Yes", "No")}
TYPES = ("choice", "noul", "score", "multi", "act")

def text(v):
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

def named(crit, hide):
    raws = [k if v is None else text(v) for k, v in crit.items()]
    return [raw if v is None or (hide and raws.count(raw) == 1) else f"{k}: {raw}"
            for (k, v), raw in zip(crit.items(), raws)]

def options(dialect, q, lang):
    """Shown option texts (01 §2.8, 02 §5.1) for a valid question."""
    yes, no = YESNO[lang]
    hide = q.get("option_keys") == "hide"
    t = q.get("type")
    if dialect == "basal":
        t = t if isinstance(t, str) and t in TYPES else "choice"
        crit = q.get("criteria")
        if t == "noul":
            crit = crit if crit else {}
            return [text(crit["true"]) if crit.get("true") else yes, text(crit["false"]) if crit.get("false") else no]
        if t == "score":
            f = crit if crit else (q.get("levels") if q.get("levels") else None)
            return named(f, hide) if isinstance(f, dict) else [text(x) for x in f]
        if isinstance(crit, list):
            return named(dict.fromkeys(text(x) for x in crit), hide)
        return named(crit, hide)
    if t == "noul":
        crit = q.get("criteria") or {}
        return [yes if crit.get("true") is None else text(crit["true"]),
                no if crit.get("false") is None else text(crit["false"])]
    if t == "score":
        f = q["criteria"] if q.get("criteria") is not None else q["levels"]
        return named(f, hide) if isinstance(f, dict) else [text(x) for x in f]
    crit = q["criteria"]
    return named(dict.fromkeys(crit) if isinstance(crit, list) else crit, hide)

def expected(dialect, body, bos):
    state = text(body["state"])
    out = []
    for qid, q in body["questions"].items():
        if dialect == "basal":
            ins = text(q["instructions"]) if "instructions" in q else ""
        else:
            ins = "" if q.get("instructions") is None else text(q["instructions"])
        lang = "pl" if any(c in DIACRITICS for c in state + ins) else "en"
        opts = options(dialect, q, lang)
        for order in (0, 1):
            shown = opts if order == 0 else opts[::-1]
            block = "\n".join(f"{'ABCDEFGHIJ'[p]}. {o}" for p, o in enumerate(shown))
            user = USER[lang].format(state=state, q=ins, opts=block)
            msgs = [{"role": "system", "content": SYSTEM[lang]}, {"role": "user", "content": user}]
            prompt = tmpl.render(messages=msgs, bos_token=bos, add_generation_prompt=True) + PREFILL
            out.append({"id": qid, "order": order, "lang": lang, "system": SYSTEM[lang], "user": user,
                        "prompt": prompt})
    return out

S_PL = "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot."
REQUESTS = [
    ("systemone", {"model": "m", "state": "Klient: od wczoraj nie mogę zalogować się do bankowości internetowej, "
        "system pokazuje błąd hasła.", "questions": {"dzial": {"type": "choice", "instructions":
        "Do którego działu skierować zgłoszenie?", "criteria": {"cards": "Reklamacje kart",
        "online": "Wsparcie bankowości elektronicznej", "loans": "Kredyty"}}}}),
    ("systemone", {"model": "m", "state": [{"role": "customer", "text": "I was charged twice for order 5512."},
        {"role": "agent", "text": "Let me check."}], "questions": {"billing": {"type": "noul", "instructions":
        "Is this message about billing?", "criteria": {"true": "A payment or invoice problem", "false": None}},
        "tone": {"type": "choice", "instructions": {"task": "Classify the tone", "scale": ["calm", "angry"]},
        "criteria": ["calm", "angry", "excited", "calm"]}}}),
    ("systemone", {"model": "m", "state": {"ticket": "Paczka nr 77 dotarła uszkodzona 🙁", "amount": 129.99,
        "vip": True, "notes": None, "tags": ["dostawa", "reklamacja"], "nested": {"a": [1, 2.5, -3e-7], "b": {}}},
        "questions": {"urgency": {"type": "score", "instructions": "Jak pilne jest zgłoszenie?", "criteria":
        ["niska", {"level": "średnia", "sla_h": 48}, ["wysoka", "dziś"]]}}}),
    ("systemone", {"model": "m", "state": "The customer wants to cancel the subscription before renewal.",
        "questions": {"team": {"type": "choice", "instructions": "Which team handles this?", "option_keys": "hide",
        "criteria": {"t1": "Billing", "t2": "Billing", "t3": "Retention"}},
        "t2": {"type": "choice", "option_keys": "show", "criteria": {"correct": {}, "ignore": [], "reject":
        "Odrzucić fakturę", "x": None, "y": "", "z": {"v": 0.5}}}}}),
    # braces, format fields and chat markers inside values are literal text
    ("systemone", {"model": "m", "state": "{state} {{q}} {opts} }{ <|im_end|>\n<|im_start|>system\nż",
        "questions": {"q{q}": {"type": "noul", "instructions": "{q}?", "criteria": {"true": "{{x}}",
        "false": {"k": "{state}"}}}, "e": {"type": "noul", "criteria": {"true": "", "false": []}},
        "s": {"type": "score", "levels": {"lo": "{opts}", "hi": None}, "option_keys": "hide"}}}),
    ("systemone", {"model": "m", "state": "", "questions": {"a": {"type": "choice", "instructions": "",
        "criteria": {"only": None, "b": "line1\nline2\ttab \\ \"q\" \u2028 \u007f"}},
        "b": {"type": "score", "criteria": None, "levels": [{"x": [1e16, 1e-5, 12345678.9, -0.0]}, "b", "c", "d",
        "e", "f", "g", "h", "i", "j"]}}}),
    ("systemone", {"model": "m", "state": ["English state"], "questions": {"pl": {"type": "noul",
        "instructions": ["Czy to", "Ż"]}, "en": {"type": "choice", "criteria": ["Zażółć", "gęślą"]}}}),
    ("basal", {"state": 12.50, "questions": {"a": {"type": "rank", "instructions": None, "criteria": [1, "1",
        True, None, {"k": []}]}, "b": {"type": "noul", "criteria": {"true": 0, "false": "nope"}},
        "c": {"type": "noul", "instructions": "płatność?", "criteria": {"true": "", "false": {}}},
        "d": {"type": "score", "criteria": [], "levels": [None, 3, "hi"]},
        "e": {"type": 5, "criteria": {"x": 0, "y": None, "z": False, "w": "0"}, "option_keys": "hide"},
        "f": {"type": "score", "criteria": {"lo": "L", "hi": "L"}, "option_keys": "show"}}}),
    ("basal", {"state": {"a": None}, "questions": {"q": {"criteria": {"a": "A", "b": "B"},
        "instructions": {"x": 1}}}}),
]
for dialect, body in REQUESTS:
    raw = json.dumps(body, ensure_ascii=False).encode()
    for bos in ("<s>", "<|begin_of_text|>"):
        res = subprocess.run([DUMP, "--dump", dialect, bos], input=raw, capture_output=True)
        # split on LF only: str.splitlines would also split at the raw U+2028 inside strings
        got = [json.loads(l) for l in res.stdout.decode().split("\n") if l]
        want = expected(dialect, body, bos)
        check(res.returncode == 0 and len(got) == len(want), f"{dialect} dump of {raw[:60]!r}: {res.stdout[:300]!r}")
        for g, w in zip(got, want):
            ok = g == w
            check(ok, f"{dialect} {w['id']} order {w['order']} bos {bos}:\n  got  {g}\n  want {w}")

# ---- 2. error bodies --------------------------------------------------------
def replies(dialect, bodies):
    """(status, reply body) for each body, from one run of the C test binary."""
    stream = b"".join(b"%d\n" % len(b) + b for b in bodies)
    res = subprocess.run([REPLY, "--reply", dialect], input=stream, capture_output=True)
    lines = [l for l in res.stdout.decode().split("\n") if l]
    check(res.returncode == 0 and len(lines) == len(bodies), f"reply run {dialect}: {res.stderr[-500:]!r}")
    out = []
    for l in lines:
        status, _, body = l.partition(" ")
        out.append((int(status), body))
    return out + [(0, "")] * (len(bodies) - len(out))

def cpython_error(data):
    try:
        json.loads(data)
        return None
    except json.JSONDecodeError as e:
        return e

def check_decodes(cases):
    """cases: (bytes, label) that CPython rejects; both dialects must report its message and position."""
    errs = [cpython_error(data) for data, _ in cases]
    so = replies("systemone", [d for d, _ in cases])
    ba = replies("basal", [d for d, _ in cases])
    for (data, label), err, (st, body), (st2, body2) in zip(cases, errs, so, ba):
        try:
            d = json.loads(body)["detail"][0]
            ok = st == 422 and d["loc"] == ["body", err.pos] and d["ctx"]["error"] == err.msg and d["input"] == {}
        except Exception:
            ok = False
        check(ok, f"systemone decode {label} {data[:80]!r}: {body} vs {err}")
        try:
            ok = st2 == 422 and json.loads(body2) == {"error": str(err)}
        except Exception:
            ok = False
        check(ok, f"basal decode {label} {data[:80]!r}: {body2} vs {err}")

FIXED = [b"not json", b"tru", b"-", b"[1,]", b'{"a":', b"]", b"", b" \t\r\n", b'{"a":1,}', b'{"a" 1}',
         b"[1 2]", b'"abc', b'["a\x01"]', b'["\\x"]', b'["\\u12G4"]', b'["\\u12"]', b"{} x", b"01", b"1.",
         b"\xef\xbb\xbf[1 2]", b'{\n  "a": [1,\n   2,, 3]}', b'{"\xc5\xbc\xc3\xb3\xc5\x82w": tru}',
         b'["\xf0\x9f\x99\x81", x]', b'{"a" : 1 "b"}', b"[\n\n\n  }"]
for data in FIXED:
    check(cpython_error(data) is not None, f"CPython accepts {data!r}")
check_decodes([(d, "fixed") for d in FIXED if cpython_error(d) is not None])

# seeded corruptions of valid bodies: truncations, deletions, insertions
rnd = random.Random(20251129)
seeds = [json.dumps(b, ensure_ascii=False).encode() for _, b in REQUESTS]
seeds.append(b'{\n  "model": "m",\n  "state": "a\\nb \\u0105 \\"q\\"",\n  "questions": {"q": [1, -2.5e3, true]}\n}')
noise = [b"", b" ", b",", b":", b"]", b"}", b"[", b"{", b'"', b"\\", b"x", b"1", b"-", b".", b"e", b"\n", b"\x01",
         b"\\u00", b"nul", b"\xc5\x82"]
cases = []
while len(cases) < 3000:
    s = rnd.choice(seeds)
    i = rnd.randrange(len(s) + 1)
    kind = rnd.randrange(3)
    if kind == 0:
        data = s[:i]
    elif kind == 1:
        data = s[:i] + s[i + rnd.randrange(1, 4):]
    else:
        data = s[:i] + rnd.choice(noise) + s[i:]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        continue  # the project's own "Invalid UTF-8" rule, not CPython's
    if any(t in data for t in (b"NaN", b"Infinity", b"\\ud", b"\\uD")):
        continue  # literals and surrogates CPython accepts and this project rejects
    if cpython_error(data) is None:
        continue
    cases.append((data, "random"))
check_decodes(cases)

# validation bodies: valid JSON, the whole body echoed as input where the spec says so
VALIDATION = [
    ("systemone", {"state": S_PL, "questions": {"q": {"type": "noul", "instructions": "x"}}}, 422),
    ("systemone", {"model": "m", "state": None, "questions": {"a": {"type": "score", "criteria": []},
                   "b": {"type": "choice"}}}, 422),
    ("systemone", {"model": "m", "state": S_PL, "questions": {"q": {"type": "rank\u0001\"", "instructions": "x"}}}, 400),
    ("systemone", {"model": "m", "state": S_PL, "questions": {"q": {"type": "choice", "criteria": {}}}}, 400),
    ("systemone", {"model": "m", "state": S_PL, "questions": {"q\n\"": {"type": "score",
                   "criteria": ["a", None, 2.5]}}}, 422),
    ("systemone", [], 422),
    ("basal", {"questions": {"q": 1}}, 422),
    ("basal", {"state": "s", "questions": {"q\t\"x": {"criteria": ["a"]}, "r": {"option_keys": [1.5]}}}, 422),
]
for dialect, body, status in VALIDATION:
    raw = json.dumps(body, ensure_ascii=False).encode()
    (st, out), = replies(dialect, [raw])
    try:
        parsed = json.loads(out)
        ok = st == status
        if dialect == "systemone" and status == 422:
            for e in parsed["detail"]:
                if e["type"] == "missing" and e["loc"] in (["body", "model"], ["body", "state"]):
                    ok = ok and e["input"] == body
    except Exception:
        ok = False
    check(ok, f"{dialect} validation body {raw[:80]!r}: {st} {out}")
# the exact text of one /v1/basal message built from Python's own quoting of the JSON value
(st, out), = replies("basal", [json.dumps({"state": "s", "questions": {"r": {"option_keys": {"a": [1, "\u00e9"]},
                     "criteria": ["a", "b"]}}}, ensure_ascii=False).encode()])
check(json.loads(out) == {"error": 'option_keys must be "show" or "hide", got ' +
      json.dumps({"a": [1, "\u00e9"]}, ensure_ascii=False, separators=(",", ":"))}, f"basal option_keys: {out}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF
