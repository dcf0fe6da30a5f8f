#!/usr/bin/python3
"""Independent PyTorch f32 reference forward for basal-c (spec 07 §2.1).

Reads a Hugging Face Llama model directory with its own minimal safetensors
reader (no code shared with the C engine) and computes the plain causal
forward of spec 05 §7 in float32:

  torch_ref.py --model DIR --input FILE|-
      FILE: {"prompts": [[id, ...], ...], "ids": [vocab ids]}  ("ids" optional:
      absent = all ids 0..V-1). Prints {"logits": [[...], ...]}: for each
      prompt, the logits of "ids" at its last token (each prompt run alone),
      written with repr() of the float32 values.
  torch_ref.py --model DIR --input FILE|- --layers
      the logit lens: FILE {"prompts": [[id, ...], ...], "ids": [[vocab ids] per
      prompt]}. Prints {"layers": [[[...] per layer] per prompt]}: after every
      decoder layer, the residual stream at the prompt's last token through
      the final RMSNorm and the rows "ids" of lm_head (the last layer's are
      the plain forward's logits).
  torch_ref.py --model DIR --act-max FILE|-
      FILE: {"ids": [id, ...]}, one prompt. Prints {"qkv": [[...] per layer],
      "gate_up": ..., "o": ..., "down": ...}: the largest |x| of every channel
      of each projection's input over the prompt's tokens (the int8 mode's
      calibration maxima, src/model/smooth.h).

Self-tests of the reference itself (golden text of stories260K, spec 07 §4):

  torch_ref.py --selftest-stories DIR [--expected FILE]
      greedy decoding, 200 steps from BOS, on the HF export of stories260K
      (basal convert-llama2c); the decoded bytes must equal the golden file.
  torch_ref.py --selftest-llama2c SRCDIR
      the same directly from stories260K.bin + tok512.bin in SRCDIR with
      llama2.c's own conventions (interleaved-pair RoPE, f32 angles), so the
      golden text validates this script independently of the converter.
  torch_ref.py --compare-llama2c SRCDIR --model DIR
      logits of the llama2.c-layout forward on the .bin and of the HF forward
      on the export must agree (checks the q/k row permutation).

Run with /usr/bin/python3 (Debian python3-torch 1.13, python3-numpy).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

torch.set_num_threads(1)


# ---------------------------------------------------------------- safetensors

def read_safetensors(path):
    """name -> float32 numpy array (BF16 widened by a 16-bit shift, F16 exact)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} beyond the file")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        raw = data[base + b:base + e]
        count = int(np.prod(shape)) if shape else 1
        if dt == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        else:
            raise ValueError(f"{path}: {name}: dtype {dt} not supported")
        if arr.size != count:
            raise ValueError(f"{path}: {name}: {arr.size} values for shape {shape}")
        out[name] = arr.reshape(shape)
        spans.append((b, e))
    spans.sort()
    pos = 0
    for b, e in spans:
        if b != pos:
            raise ValueError(f"{path}: data offsets not contiguous at {b}")
        pos = e
    if pos != len(data) - base:
        raise ValueError(f"{path}: data buffer is {len(data) - base} bytes, tensors cover {pos}")
    return out


def read_weights(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single) and os.path.exists(index):
        raise ValueError(f"{model_dir}: both model.safetensors and an index")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(index) as f:
        wmap = json.load(f)["weight_map"]
    out = {}
    for shard in sorted(set(wmap.values())):
        part = read_safetensors(os.path.join(model_dir, shard))
        for name, arr in part.items():
            if wmap.get(name) != shard or name in out:
                raise ValueError(f"{shard}: {name} not mapped to this shard")
            out[name] = arr
    if set(out) != set(wmap):
        raise ValueError(f"{index}: tensors missing from the shards")
    return out


# ---------------------------------------------------------------- HF Llama forward

class Llama:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        self.H = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.nh = c["num_attention_heads"]
        self.nkv = c["num_key_value_heads"]
        self.hd = c["head_dim"]
        self.V = c["vocab_size"]
        self.eps = float(c["rms_norm_eps"])
        # only rope_parameters.rope_theta; a top-level rope_theta is a decoy
        self.theta = float(c["rope_parameters"]["rope_theta"])
        self.bias = bool(c["attention_bias"])
        w = read_weights(model_dir)
        self.w = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in w.items()}

    def t(self, name):
        return self.w.get(name)

    def rms(self, x, weight):
        var = (x * x).mean(-1, keepdim=True)
        return (x * torch.rsqrt(var + self.eps)) * weight

    def linear(self, x, name):
        y = torch.matmul(x, self.w[name + ".weight"].t())
        b = self.w.get(name + ".bias")
        return y + b if b is not None else y

    def rope_tables(self, n):
        hd = self.hd
        inv_freq = 1.0 / (self.theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]
        ang = np.concatenate([ang, ang], axis=1)
        return (torch.from_numpy(np.cos(ang).astype(np.float32)),
                torch.from_numpy(np.sin(ang).astype(np.float32)))

    @staticmethod
    def rotate_half(x):
        d = x.shape[-1] // 2
        return torch.cat([-x[..., d:], x[..., :d]], dim=-1)

    def hidden(self, ids, act_max=None):
        """Final-normed hidden states [n, H] of one prompt (plain causal forward).
        act_max: a dict that receives, per layer, the largest |x| of every
        channel of the four projection inputs ("qkv", "gate_up", "o", "down")."""
        for x in self.residuals(ids, act_max):
            pass
        return self.rms(x, self.w["model.norm.weight"])

    def lens_last(self, ids, vocab_ids):
        """The logits of vocab_ids read from every layer's residual stream at the
        last token (final norm, then lm_head rows): a list of L tensors."""
        head = self.w["lm_head.weight"][torch.tensor(vocab_ids, dtype=torch.long)]
        norm = self.w["model.norm.weight"]
        return [torch.matmul(head, self.rms(x[-1], norm)) for x in self.residuals(ids)]

    def residuals(self, ids, act_max=None):
        """The residual stream [n, H] after each decoder layer, in layer order
        (act_max: as for hidden)."""
        n = len(ids)
        hd, nh, nkv = self.hd, self.nh, self.nkv
        x = self.w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
        cos, sin = self.rope_tables(n)
        scale = float(np.float32(1.0 / np.sqrt(np.float64(hd))))
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        for l in range(self.L):
            p = f"model.layers.{l}."
            a = self.rms(x, self.w[p + "input_layernorm.weight"])
            q = self.linear(a, p + "self_attn.q_proj").view(n, nh, hd).transpose(0, 1)
            k = self.linear(a, p + "self_attn.k_proj").view(n, nkv, hd).transpose(0, 1)
            v = self.linear(a, p + "self_attn.v_proj").view(n, nkv, hd).transpose(0, 1)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            rep = nh // nkv  # GQA: query head j uses kv head j // rep (HF repeat_kv)
            k = k.repeat_interleave(rep, dim=0)
            v = v.repeat_interleave(rep, dim=0)
            s = torch.matmul(q, k.transpose(1, 2)) * scale + mask
            att = torch.softmax(s, dim=-1)
            o = torch.matmul(att, v).transpose(0, 1).reshape(n, nh * hd)
            x = x + self.linear(o, p + "self_attn.o_proj")
            a2 = self.rms(x, self.w[p + "post_attention_layernorm.weight"])
            g = self.linear(a2, p + "mlp.gate_proj")
            u = self.linear(a2, p + "mlp.up_proj")
            d = torch.nn.functional.silu(g) * u
            if act_max is not None:
                for key, t in (("qkv", a), ("gate_up", a2), ("o", o), ("down", d)):
                    act_max.setdefault(key, []).append([float(v) for v in t.abs().amax(dim=0).numpy()])
            x = x + self.linear(d, p + "mlp.down_proj")
            yield x

    def logits_last(self, ids, vocab_ids=None):
        h = self.hidden(ids)[-1]
        head = self.w["lm_head.weight"]
        if vocab_ids is not None:
            head = head[torch.tensor(vocab_ids, dtype=torch.long)]
        return torch.matmul(head, h)


# ---------------------------------------------------------------- llama2.c layout forward

class Llama2c:
    """stories260K.bin read as llama2.c does, with its interleaved-pair RoPE and
    float32 angles; shares nothing with the HF export path."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        dim, hidden, L, nh, nkv, V, seq = struct.unpack_from("<7i", data, 0)
        shared = V > 0
        V = abs(V)
        f = np.frombuffer(data, dtype="<f4", offset=28)
        hd = dim // nh
        kvd = nkv * hd
        o = 0

        def take(*shape):
            nonlocal o
            cnt = int(np.prod(shape))
            a = f[o:o + cnt].reshape(shape)
            o += cnt
            return torch.from_numpy(a.astype(np.float32))
        self.emb = take(V, dim)
        self.rms_att = take(L, dim)
        self.wq = take(L, dim, dim)
        self.wk = take(L, kvd, dim)
        self.wv = take(L, kvd, dim)
        self.wo = take(L, dim, dim)
        self.rms_ffn = take(L, dim)
        self.w1 = take(L, hidden, dim)
        self.w2 = take(L, dim, hidden)
        self.w3 = take(L, hidden, dim)
        self.rms_final = take(dim)
        o += seq * hd  # the two legacy RoPE tables
        self.wcls = self.emb if shared else take(V, dim)
        if o != f.size:
            raise ValueError(f"{path}: {f.size - o} unexpected floats at the end")
        self.dim, self.L, self.nh, self.nkv, self.hd, self.V = dim, L, nh, nkv, hd, V

    def rms(self, x, w):
        return w * (x * (1.0 / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)))

    def rope(self, x, n):
        # llama2.c: freq = 1 / 10000^(i/hd) for even i, angle pos*freq, all float32
        i = np.arange(0, self.hd, 2, dtype=np.float32)
        freq = (np.float32(1.0) / np.power(np.float32(10000.0), i / np.float32(self.hd))).astype(np.float32)
        ang = (np.arange(n, dtype=np.float32)[:, None] * freq[None, :]).astype(np.float32)
        c = torch.from_numpy(np.cos(ang))
        s = torch.from_numpy(np.sin(ang))
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def logits_last(self, ids):
        n = len(ids)
        nh, nkv, hd = self.nh, self.nkv, self.hd
        x = self.emb[torch.tensor(ids, dtype=torch.long)]
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        for l in range(self.L):
            a = self.rms(x, self.rms_att[l])
            q = (a @ self.wq[l].t()).view(n, nh, hd).transpose(0, 1)
            k = (a @ self.wk[l].t()).view(n, nkv, hd).transpose(0, 1)
            v = (a @ self.wv[l].t()).view(n, nkv, hd).transpose(0, 1)
            q, k = self.rope(q, n), self.rope(k, n)
            rep = nh // nkv
            k = k.repeat_interleave(rep, dim=0)
            v = v.repeat_interleave(rep, dim=0)
            att = torch.softmax((q @ k.transpose(1, 2)) / float(np.sqrt(hd)) + mask, dim=-1)
            o = (att @ v).transpose(0, 1).reshape(n, nh * hd)
            x = x + o @ self.wo[l].t()
            a = self.rms(x, self.rms_ffn[l])
            h = torch.nn.functional.silu(a @ self.w1[l].t()) * (a @ self.w3[l].t())
            x = x + h @ self.w2[l].t()
        return self.wcls @ self.rms(x, self.rms_final)[-1]


# ---------------------------------------------------------------- greedy decoding

def greedy(logits_fn, steps):
    ids = [1]
    for _ in range(steps):
        lg = logits_fn(ids).numpy()
        nxt = int(np.argmax(lg))  # first maximum: lowest id on ties
        if nxt == 1:
            break
        ids.append(nxt)
    return ids


def decode(pieces, ids):
    """llama2.c decoding: piece bytes, <0xHH> -> byte, the leading space of the
    piece right after BOS dropped."""
    out = bytearray()
    for i, t in enumerate(ids[1:]):
        p = pieces[t]
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            p = bytes([int(p[3:5], 16)])
        elif i == 0 and p.startswith(b" "):
            p = p[1:]
        out += p
    return bytes(out)


def hf_pieces(model_dir):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    pieces = {}
    for s, i in tok["model"]["vocab"].items():
        pieces[i] = s.replace("\u2581", " ").encode("utf-8")
    return pieces


def l2c_pieces(path):
    with open(path, "rb") as f:
        data = f.read()
    o = 4
    pieces = []
    while o < len(data):
        _score, n = struct.unpack_from("<fi", data, o)
        o += 8
        pieces.append(data[o:o + n])
        o += n
    return dict(enumerate(pieces))


def check_text(got, expected_path):
    with open(expected_path, "rb") as f:
        want = f.read()
    if got == want:
        print(f"ok: {len(got)} bytes equal {expected_path}")
        return 0
    k = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
    print(f"FAIL: output differs from {expected_path} at byte {k} "
          f"(got {len(got)} bytes, expected {len(want)})\n"
          f"  got:      {got[max(0, k - 40):k + 40]!r}\n  expected: {want[max(0, k - 40):k + 40]!r}")
    return 1


def default_expected():
    shared = os.environ.get("SHARED") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..", "shared")
    return os.path.join(shared, "models", "stories260K", "expected-greedy-200.txt")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="environment: SHARED, the shared/ folder whose models/stories260K/"
                                        "expected-greedy-200.txt is --selftest-stories' default --expected "
                                        "(default: ../shared next to the repository)")
    ap.add_argument("--model", help="model directory (no default)")
    ap.add_argument("--input", help="FILE|-: the prompts (no default)")
    ap.add_argument("--layers", action="store_true", help="the logit lens of every layer (see above; default off)")
    ap.add_argument("--selftest-stories", metavar="DIR", help="greedy golden text of the stories260K export")
    ap.add_argument("--selftest-llama2c", metavar="SRCDIR", help="the same from stories260K.bin + tok512.bin")
    ap.add_argument("--compare-llama2c", metavar="SRCDIR", help="llama2.c-layout vs HF forward (needs --model)")
    ap.add_argument("--expected", help="golden text (default: see SHARED below, or SRCDIR's for --selftest-llama2c)")
    ap.add_argument("--steps", type=int, default=200, help="greedy steps of the self-tests (default %(default)s)")
    ap.add_argument("--act-max", metavar="FILE", help="FILE|-: {\"ids\": [...]}; per-channel input maxima (needs --model)")
    a = ap.parse_args()

    with torch.no_grad():
        if a.act_max:
            if not a.model:
                ap.error("--act-max needs --model")
            req = json.load(sys.stdin if a.act_max == "-" else open(a.act_max))
            out = {}
            Llama(a.model).hidden(req["ids"], act_max=out)
            json.dump(out, sys.stdout)
            sys.stdout.write("\n")
            return 0
        if a.selftest_stories:
            m = Llama(a.selftest_stories)
            ids = greedy(lambda s: m.logits_last(s), a.steps)
            return check_text(decode(hf_pieces(a.selftest_stories), ids), a.expected or default_expected())
        if a.selftest_llama2c:
            m = Llama2c(os.path.join(a.selftest_llama2c, "stories260K.bin"))
            ids = greedy(m.logits_last, a.steps)
            text = decode(l2c_pieces(os.path.join(a.selftest_llama2c, "tok512.bin")), ids)
            return check_text(text, a.expected or os.path.join(a.selftest_llama2c, "expected-greedy-200.txt"))
        if a.compare_llama2c:
            if not a.model:
                ap.error("--compare-llama2c needs --model")
            ref = Llama2c(os.path.join(a.compare_llama2c, "stories260K.bin"))
            m = Llama(a.model)
            rng = np.random.default_rng(7)
            worst = 0.0
            for n in (1, 2, 7, 40, 130):
                ids = [1] + [int(t) for t in rng.integers(3, ref.V, n - 1)]
                d = (ref.logits_last(ids) - m.logits_last(ids)).abs().max().item()
                worst = max(worst, d)
            # the two differ only in f32 versus f64 RoPE angles
            ok = worst < 1e-4
            print(f"{'ok' if ok else 'FAIL'}: max |logit difference| llama2.c layout vs HF export = {worst:.3g}")
            return 0 if ok else 1
        if not a.model or not a.input:
            ap.error("give --model DIR --input FILE, or a --selftest option")
        src = sys.stdin if a.input == "-" else open(a.input)
        req = json.load(src)
        m = Llama(a.model)
        ids = req.get("ids")
        if a.layers:
            if not isinstance(ids, list) or len(ids) != len(req["prompts"]):
                raise SystemExit("torch_ref: --layers needs one list of ids per prompt")
            out = [[[float(v) for v in lg.numpy().astype(np.float32)] for lg in m.lens_last(p, i)]
                   for p, i in zip(req["prompts"], ids)]
            json.dump({"layers": out}, sys.stdout)
            sys.stdout.write("\n")
            return 0
        res = []
        for p in req["prompts"]:
            if not p:
                raise SystemExit("torch_ref: empty prompt")
            lg = m.logits_last(p, ids)
            res.append([float(v) for v in lg.numpy().astype(np.float32)])
        json.dump({"logits": res}, sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
