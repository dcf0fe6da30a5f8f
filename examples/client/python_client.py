#!/usr/bin/env python3
"""A basal-c client in Python with the standard library only (urllib, json).

Asks one support ticket three typed questions on POST /v1/systemone and prints
the answers: the chosen department with its probability, whether the case is
urgent, and how frustrated the customer is on a 0..2 scale. With --json it
prints the server's whole answer object on one line instead.
"""
import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

TICKET = "Klient: od wczoraj nie mogę zalogować się do bankowości internetowej, a jutro muszę zapłacić czynsz."
QUESTIONS = {
    "dzial": {"type": "choice", "instructions": "Do którego działu skierować zgłoszenie?",
              "criteria": {"cards": "Reklamacje kart", "online": "Wsparcie bankowości elektronicznej", "loans": "Kredyty"}},
    "pilne": {"type": "noul", "instructions": "Czy sprawa jest pilna?"},
    "frustracja": {"type": "score", "instructions": "Jak bardzo klient jest sfrustrowany?",
                   "criteria": ["wcale", "trochę", "bardzo"]},
}


def system_one(url, body, api_key=None, retries=5):
    """POST /v1/systemone; 529 (the server is full) is retried after its Retry-After."""
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode()
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "/v1/systemone", data, headers), timeout=120) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            if e.code == 529 and attempt < retries:
                time.sleep(float(e.headers.get("retry-after") or 1))
                continue
            raise SystemExit(f"python_client: HTTP {e.code}: {detail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="environment: BASAL_URL (default http://127.0.0.1:8000), BASAL_MODEL "
                                        "(default basal-tiny, the demo model), BASAL_API_KEY (optional Bearer key)")
    ap.add_argument("--json", action="store_true", help="print the whole answer object as one JSON line (default: a summary)")
    ap.add_argument("--state", default=TICKET, help="the ticket text (default: a login problem)")
    a = ap.parse_args()
    url = os.environ.get("BASAL_URL", "http://127.0.0.1:8000").rstrip("/")
    body = {"model": os.environ.get("BASAL_MODEL", "basal-tiny"), "state": a.state, "questions": QUESTIONS}
    r = system_one(url, body, os.environ.get("BASAL_API_KEY"))
    if a.json:
        print(json.dumps(r, ensure_ascii=False))
        return
    ans = r["answers"]
    d = ans["dzial"]
    print(f"department: {d['choice']} (p = {d['probabilities'][d['choice']]:.3f}, confidence {d['confidence']:.3f})")
    print(f"urgent: {'yes' if ans['pilne']['noul'] >= 0.5 else 'no'} (p(yes) = {ans['pilne']['noul']:.3f})")
    f = ans["frustracja"]
    print(f"frustration: {f['score']:.2f} of 0..2 ({f['legend'][max(f['probabilities'], key=f['probabilities'].get)]})")
    print(f"tokens: {r['usage']['input_tokens']}, questions: {r['usage']['questions']}")


if __name__ == "__main__":
    sys.exit(main())
