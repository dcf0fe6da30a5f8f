#!/usr/bin/python3
"""Independent PyTorch reference of evidence spans (spec 03 §4.3-§4.6, 05 §14).

  evidence_ref.py --model DIR --requests FILE.jsonl
      one /v1/systemone body per line (facts absent/"off"); prints a JSON array
      with, per request, {question id: evidence list} for the questions with a
      truthy "evidence", in the answer's form
      [{"text", "start", "end", "probability"}, ...].

Nothing is shared with the C engine: prompts come from tools/protocol_ref.py
(built from the spec text), token ids from the npm oracle tokenizer, character
offsets from the tokenizer.json vocabulary (each token's piece with U+2581
read as a space, byte-fallback tokens as single bytes; a token's byte range
widened to the characters it touches, as Hugging Face tokenizers 0.23.2
reports char offsets, so every byte token of a character spans all of it;
spec 01 §4.6 has the last one only), hidden states
from tools/torch_ref.py's plain f32 forward (final RMSNorm), the head from
torch.load of evidence_head.pt with torch's own layer_norm / matmul /
log_softmax in float32 (as upstream evaluates it), and best_spans written from
§4.5. Run with /usr/bin/python3 (python3-torch, numpy).
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np
import torch

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import protocol_ref  # noqa: E402
import torch_ref  # noqa: E402

torch.set_num_threads(1)
MAX_SPAN, TOP, KEEP = 80, 5, 3
BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def pieces(tokenizer_path):
    """id -> (bytes of the input the token covers, is byte-fallback)."""
    with open(tokenizer_path, encoding="utf-8") as f:
        tj = json.load(f)
    out = {}
    for piece, i in tj["model"]["vocab"].items():
        m = BYTE_PIECE.match(piece)
        out[i] = (bytes([int(m.group(1), 16)]), True) if m else (piece.replace("\u2581", " ").encode(), False)
    for at in tj.get("added_tokens", []):
        out[at["id"]] = (at["content"].encode(), False)
    return out


def char_offsets(prompt, ids, table):
    """(start, end) in characters for every token of prompt: the first and
    one past the last character its bytes touch (Hugging Face)."""
    raw = prompt.encode()
    char_of = []  # byte index -> index of the character containing it
    for ci, ch in enumerate(prompt):
        char_of += [ci] * len(ch.encode())
    n_chars = len(prompt)
    offs, b = [], 0
    for t in ids:
        piece, _ = table[t]
        if raw[b:b + len(piece)] != piece:
            raise SystemExit(f"token {t} does not cover the prompt at byte {b}")
        b1 = b + len(piece)
        offs.append((char_of[b] if b < len(raw) else n_chars, char_of[b1 - 1] + 1 if b1 > b else char_of[b]))
        b = b1
    if b != len(raw):
        raise SystemExit("tokens do not cover the prompt")
    return offs


def head_input(prompt, state, offs):
    """03 §4.3 steps 2-3: (t0, t1, rel) or None."""
    at = prompt.find("\n" + state)
    if at < 0:
        return None
    s0 = at + 1
    s1 = s0 + len(state)
    idx = [i for i, (a, b) in enumerate(offs) if a >= s0 and b <= s1 and b > a]
    if not idx:
        return None
    t0, t1 = idx[0], idx[-1] + 1
    rel = [(max(a - s0, 0), max(b - s0, 0)) for a, b in offs[t0:t1]]
    return t0, t1, rel


def head_scores(head, hs, q):
    """03 §4.4 in float32 with torch."""
    F = torch.nn.functional
    d = hs.shape[1]
    k = head["ws.weight"].shape[0]
    h = F.layer_norm(hs, (d,), eps=1e-5)
    qn = F.layer_norm(q[None, :], (d,), eps=1e-5)
    s = ((h @ head["ws.weight"].T) * (qn @ head["us.weight"].T)).sum(-1) / math.sqrt(k) + (h @ head["bs.weight"].T)[:, 0]
    e = ((h @ head["we.weight"].T) * (qn @ head["ue.weight"].T)).sum(-1) / math.sqrt(k) + (h @ head["be.weight"].T)[:, 0]
    return torch.log_softmax(s, 0).numpy(), torch.log_softmax(e, 0).numpy()


def best_spans(ls, le, rel, state, top=TOP):
    """03 §4.5 (float32 scores, float64 probabilities)."""
    m = len(ls)
    want = min(4 * top, m * m)
    cand = [(np.float32(ls[i]) + np.float32(le[j]), i * m + j)
            for i in range(m) for j in range(i, min(i + MAX_SPAN, m))]
    cand.sort(key=lambda c: (-float(c[0]), c[1]))
    if len(cand) < want:
        valid = {f for _, f in cand}
        cand += [(np.float32(-1e9), f) for f in range(m * m) if f not in valid]
    out = []
    for score, f in cand[:want]:
        i, j = divmod(f, m)
        a, b = rel[i][0], rel[j][1]
        if any(not (b <= s or a >= e) for s, e, _ in out):
            continue
        out.append((a, b, math.exp(float(score))))
        if len(out) == top:
            break
    return [{"text": state[a:b], "start": a, "end": b, "probability": p} for a, b, p in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (required)")
    ap.add_argument("--requests", required=True, help="JSONL of requests (required)")
    a = ap.parse_args()
    md = protocol_ref.ModelDir(a.model)
    with open(a.requests, encoding="utf-8") as f:
        bodies = [ln for ln in f.read().split("\n") if ln.strip()]
    jobs = []  # (request index, qid, state text, prompt)
    for ri, body in enumerate(bodies):
        req = json.loads(body)
        state_text = protocol_ref.text(req["state"])
        for it in protocol_ref.plan_request(md, body):
            q = req["questions"][it["question"]]
            if not q.get("evidence"):  # Python truthiness (02 §4.2)
                continue
            prompt = protocol_ref.render_prompt(md.bos, it["lang"], state_text, it["qtext"], it["options"],
                                                list(range(len(it["keys"]))))
            jobs.append((ri, it["question"], state_text, prompt))
    ids = protocol_ref.oracle_tokenize([(md.tokenizer, "first", [j[3] for j in jobs])])[0]
    table = pieces(md.tokenizer)
    head = {n: t.float() for n, t in torch.load(os.path.join(a.model, "evidence_head.pt"))["state_dict"].items()}
    model = torch_ref.Llama(a.model)
    res = [{} for _ in bodies]
    with torch.no_grad():
        for (ri, qid, state, prompt), tid in zip(jobs, ids):
            inp = head_input(prompt, state, char_offsets(prompt, tid, table))
            if inp is None:
                res[ri][qid] = []
                continue
            t0, t1, rel = inp
            hid = model.hidden(tid)
            ls, le = head_scores(head, hid[t0:t1].float(), hid[-1].float())
            res[ri][qid] = best_spans(ls, le, rel, state)[:KEEP]
    json.dump(res, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
