"""`--readout bf16` (spec 05 Q4, 06 §4.3) against an independent computation.

For each request: tools/protocol_ref.py builds the prompts and oracle token
ids; `basal logits` gives this engine's f32 letter logits for every order
(bitwise the logits `decide` uses: batch invariance); PyTorch rounds them to
bf16 (round to nearest even) and protocol_ref's float64 decision math makes
the expected response. `basal decide --readout bf16` must match it to 1e-12,
`--readout f32` the same computation without rounding, and the two modes
must differ somewhere (the flag is not ignored)."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import protocol_ref  # noqa: E402
import torch  # noqa: E402
from checks import Checks  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("basal", metavar="BASAL", help="the binary under test")
ap.add_argument("fixtures", metavar="FIXTURES", help="the fixtures directory")
A = ap.parse_args()
BASAL, FIXTURES = A.basal, A.fixtures
check = Checks()


def run(args, inp):
    p = subprocess.run(args, input=inp.encode(), capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def same(a, b, path, tol=1e-12):
    if isinstance(a, dict):
        return (check(isinstance(b, dict) and list(a) == list(b), f"{path}: keys {list(a)} vs {list(b) if isinstance(b, dict) else b}")
                and all(same(a[k], b[k], f"{path}.{k}", tol) for k in a))
    if isinstance(a, float) or isinstance(b, float):
        return check(abs(a - b) <= tol, f"{path}: {a!r} vs {b!r}")
    return check(a == b, f"{path}: {a!r} vs {b!r}")


def expected(md, body, c_logits, bf16):
    plans = [protocol_ref.plan_request(md, body)]
    protocol_ref.tokenize_plans(md, plans)
    for it in plans[0]:
        for o in it.get("orders", []):
            # the printed logits are shortest round-trip decimals: back to the exact f32 value first
            lg = torch.tensor(c_logits[(tuple(o["input_ids"]), tuple(o["letter_ids"]))], dtype=torch.float32)
            if bf16:
                lg = lg.to(torch.bfloat16).to(torch.float32)
            o["logits"] = lg.tolist()
    return protocol_ref.respond(md, plans[0])


def main():
    d = os.path.join(FIXTURES, "tiny-bias")
    md = protocol_ref.ModelDir(d)
    with open(os.path.join(ROOT, "tests/data/protocol-e2e-requests.jsonl"), encoding="utf-8") as f:
        bodies = [ln.replace("@MODEL@", md.name) for ln in f.read().split("\n") if ln.strip()]
    differ = 0
    for i, body in enumerate(bodies):
        plans = [protocol_ref.plan_request(md, body)]
        protocol_ref.tokenize_plans(md, plans)
        orders = [o for it in plans[0] for o in it.get("orders", [])]
        if not orders:
            continue
        c_logits = {}
        for o in orders:  # one `basal logits` call per letter set
            inp = json.dumps({"prompts": [o["input_ids"]], "ids": o["letter_ids"]})
            rc, out, err = run([BASAL, "logits", "--model", d, "--input", "-"], inp)
            if not check(rc == 0, f"request {i}: logits exit {rc}: {err[-300:]}"):
                return
            c_logits[(tuple(o["input_ids"]), tuple(o["letter_ids"]))] = json.loads(out)["logits"][0]
        for mode in ("f32", "bf16"):
            rc, out, err = run([BASAL, "decide", "--model", d, "--request", "-", "--readout", mode], body)
            if not check(rc == 0, f"request {i} {mode}: decide exit {rc}: {err[-300:]}"):
                continue
            got = json.loads(out)
            exp = expected(md, body, c_logits, mode == "bf16")
            exp.pop("usage", None)
            got.pop("usage", None)
            same(exp, got, f"request {i} --readout {mode}")
            if mode == "f32":
                f32 = got
            elif got != f32:
                differ += 1
    check(differ > 0, "--readout bf16 changed no answer: the flag has no effect")
    rc, out, err = run([BASAL, "decide", "--model", d, "--request", "-", "--readout", "f16"], bodies[0])
    check(rc == 2 and "--readout must be f32 or bf16" in err, f"--readout f16: exit {rc}, {err.strip()}")
    print(f"{differ} of {len(bodies)} requests change under bf16 readout")


main()
print(check.summary())
sys.exit(1 if check.failed else 0)
