#!/usr/bin/python3
"""Checks the fixture family written by tools/make-fixtures.sh against the spec
text itself (07 §4, §8.2; 01 §1.2, §2.2–2.3; 05 §4), the Mistral tokenizer
file and the llama2.c checkpoint. Used by tests/e2e/t_model_tools.sh.

usage: model_tools_check.py FIXTURES SHARED MISTRAL_TOKENIZER_JSON
Prints PASS/FAIL lines and a last line "PYCOUNT <passed> <failed>".
"""
import argparse
import hashlib
import json
import os
import re
import struct

import numpy as np

from checks import Checks

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("fixtures", metavar="FIXTURES", help="the fixtures directory of tools/make-fixtures.sh")
ap.add_argument("shared", metavar="SHARED", help="the shared/ folder")
ap.add_argument("mistral", metavar="MISTRAL_TOKENIZER_JSON", help="the Mistral tokenizer.json of the npm oracle")
A = ap.parse_args()
fx, shared, mistral_path = A.fixtures, A.shared, A.mistral
spec = os.path.join(shared, "spec")
check = Checks()


def ordered(text):
    """JSON with objects as lists of pairs, so key order takes part in ==."""
    return json.loads(text, object_pairs_hook=lambda kv: [list(p) for p in kv])


def read(path, mode="r"):
    with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
        return f.read()


# ---- expected values, taken from the spec text
s07 = read(os.path.join(spec, "07-test-resources.md"))
s01 = read(os.path.join(spec, "01-protocol.md"))
cfg_tiny = re.search(r"`config\.json` \(`tiny-bias`\):\n  `(\{.*?\})`", s07).group(1)
cfg_stories = re.search(r"- `config\.json`: `(\{.*?\})`", s07).group(1)
calib = re.search(r"- `CALIBRATION\.json`: `(\{.*?\})`", s07).group(1)
tokcfg = re.search(r"- `tokenizer_config\.json`: `(\{.*?\})`", s07).group(1)
basal_tiny = re.search(r"- `basal\.json`: `(\{.*?\})`", s07).group(1)
sec = s01[s01.index("### 2.2"):s01.index("### 2.4")]
sys_pl, sys_en = re.findall(r"```\n(.*?)\n```", sec, re.S)[:2]
users = dict(re.findall(r"- (PL|EN): `(.*?)`\n", sec))
user_pl, user_en = (users[k].replace("\u23ce", "\n") for k in ("PL", "EN"))
check(len(cfg_tiny) > 400 and len(cfg_stories) > 300, "spec extraction")

# ---- safetensors, read raw (independent of tools/torch_ref.py)
ESZ = {"BF16": 2, "F16": 2, "F32": 4}


def st_read(path):
    data = read(path, "rb")
    (n,) = struct.unpack_from("<Q", data, 0)
    raw = data[8:8 + n]
    check((8 + n) % 8 == 0, f"{path}: data buffer 8-byte aligned")
    check(raw.rstrip(b" ") == raw[:len(raw.rstrip(b" "))] and raw.rstrip(b" ").endswith(b"}"),
          f"{path}: header padded with spaces only")
    hdr = json.loads(raw.decode("utf-8"), object_pairs_hook=lambda kv: dict(kv))
    keys = list(json.loads(raw.decode("utf-8"), object_pairs_hook=lambda kv: [k for k, _ in kv]))
    check(hdr.get("__metadata__") == {"format": "pt"}, f"{path}: __metadata__")
    names = [k for k in keys if k != "__metadata__"]
    check(names == sorted(names), f"{path}: tensors in name order")
    base, pos, out = 8 + n, 0, {}
    for name in names:
        t = hdr[name]
        check(set(t) == {"dtype", "shape", "data_offsets"}, f"{path}: {name} keys")
        b, e = t["data_offsets"]
        check(b == pos, f"{path}: {name} offsets contiguous, in name order")
        cnt = int(np.prod(t["shape"])) if t["shape"] else 1
        check(e - b == cnt * ESZ[t["dtype"]], f"{path}: {name} byte length")
        buf = data[base + b:base + e]
        if t["dtype"] == "BF16":
            v = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "F16":
            v = np.frombuffer(buf, "<f2").astype(np.float32)
        else:
            v = np.frombuffer(buf, "<f4").copy()
        out[name] = (t["dtype"], v.reshape(t["shape"]))
        pos = e
    check(base + pos == len(data), f"{path}: data ends at end of file")
    return out


def weights(d):
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return st_read(os.path.join(d, "model.safetensors"))
    idx = json.loads(read(os.path.join(d, "model.safetensors.index.json")))
    out = {}
    for shard in sorted(set(idx["weight_map"].values())):
        part = st_read(os.path.join(d, shard))
        check(all(idx["weight_map"][k] == shard for k in part), f"{d}: {shard} matches weight_map")
        out.update(part)
    check(set(out) == set(idx["weight_map"]), f"{d}: weight_map covers the shards exactly")
    return out


def tensor_set(c):
    """05 §4.3: name -> shape."""
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    s = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        s[p + "input_layernorm.weight"] = [H]
        s[p + "post_attention_layernorm.weight"] = [H]
        for m, shp in (("self_attn.q_proj", [q, H]), ("self_attn.k_proj", [kv, H]),
                       ("self_attn.v_proj", [kv, H]), ("self_attn.o_proj", [H, q]),
                       ("mlp.gate_proj", [I, H]), ("mlp.up_proj", [I, H]), ("mlp.down_proj", [H, I])):
            s[p + m + ".weight"] = shp
            if c["attention_bias"]:
                s[p + m + ".bias"] = [shp[0]]
    return s


# ---- the synthetic family
mistral_bytes = read(mistral_path, "rb")
check(hashlib.sha256(mistral_bytes).hexdigest() ==
      "fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc", "Mistral tokenizer.json sha256 (07 §1)")
mistral = ordered(mistral_bytes.decode("utf-8"))
family = {
    "tiny-bias": dict(name="basal-tiny", bias=True, nkv=2, dtype="BF16"),
    "tiny-nobias": dict(name="basal-tiny-nobias", bias=False, nkv=2, dtype="BF16"),
    "tiny-hd128": dict(name="basal-tiny-hd128", bias=False, nkv=1, dtype="BF16", H=256, hd=128),
    "tiny-sharded": dict(name="basal-tiny-sharded", bias=True, nkv=2, dtype="BF16"),
    "tiny-f32": dict(name="basal-tiny-f32", bias=True, nkv=2, dtype="F32"),
    "tiny-always": dict(name="basal-tiny-always", bias=True, nkv=2, dtype="BF16", scheme="always"),
    "tiny-v10": dict(name="basal-tiny-v10", bias=True, nkv=2, dtype="BF16", v10=True),
    "tiny-gqa1": dict(name="basal-tiny-gqa1", bias=True, nkv=4, dtype="BF16"),
    "tiny-gqa4": dict(name="basal-tiny-gqa4", bias=True, nkv=1, dtype="BF16"),
    "tiny-f16": dict(name="basal-tiny-f16", bias=True, nkv=2, dtype="F16"),
    "tiny-tied": dict(name="basal-tiny-tied", bias=True, nkv=2, dtype="BF16"),
}
W = {}
for name, f in family.items():
    d = os.path.join(fx, name)
    check(hashlib.sha256(read(os.path.join(d, "chat_template.jinja"), "rb")).hexdigest() ==
          "a805e50fed68938a076b07e2e602639611b50b1ced0e50f11eb92f1ba25be4dc", f"{name}: chat_template sha256")
    check(read(os.path.join(d, "tokenizer_config.json")) == tokcfg, f"{name}: tokenizer_config.json")
    check(read(os.path.join(d, "CALIBRATION.json")) == calib, f"{name}: CALIBRATION.json")
    cfg_text = read(os.path.join(d, "config.json"))
    c = json.loads(cfg_text)
    if name == "tiny-bias":
        check(cfg_text == cfg_tiny, "tiny-bias: config.json is byte-equal to 07 §8.2")
    # every fixture: the tiny-bias object with only the documented keys changed
    exp = json.loads(cfg_tiny)
    exp.update(attention_bias=f["bias"], mlp_bias=f["bias"], num_key_value_heads=f["nkv"],
               torch_dtype={"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[f["dtype"]])
    if "H" in f:
        exp.update(hidden_size=256, num_hidden_layers=2, num_attention_heads=2, head_dim=128,
                   intermediate_size=512)
    check(c == exp and list(c) == list(json.loads(cfg_tiny)), f"{name}: config.json")
    b = json.loads(read(os.path.join(d, "basal.json")))
    exp_b = json.loads(basal_tiny)
    exp_b["name"] = f["name"]
    if f.get("v10"):
        exp_b["readout"]["templates"] = {"pl": {"system": sys_pl, "user": user_pl},
                                         "en": {"system": sys_en, "user": user_en}}
    check(b == exp_b, f"{name}: basal.json")
    # tokenizer.json: the Mistral file with exactly the documented changes
    tok = ordered(read(os.path.join(d, "tokenizer.json")))
    check([k for k, _ in tok] == [k for k, _ in mistral], f"{name}: tokenizer.json top-level key order")
    tk, mk = dict((k, v) for k, v in tok), dict((k, v) for k, v in mistral)
    for key in mk:
        if key not in ("normalizer", "pre_tokenizer", "decoder", "added_tokens", "truncation", "padding"):
            check(tk[key] == mk[key], f"{name}: tokenizer.json {key} unchanged")
    meta = [["type", "Metaspace"], ["replacement", "\u2581"], ["prepend_scheme", f.get("scheme", "first")],
            ["split", False]]
    check(tk["normalizer"] is None, f"{name}: normalizer null")
    check(tk["pre_tokenizer"] == meta, f"{name}: pre_tokenizer Metaspace")
    check(tk["decoder"] == meta, f"{name}: decoder Metaspace")

    def added(i, s):
        return [["id", i], ["content", s], ["single_word", False], ["lstrip", False], ["rstrip", False],
                ["normalized", False], ["special", True]]
    check(tk["added_tokens"] == mk["added_tokens"] + [added(32000, "<|im_start|>"), added(32001, "<|im_end|>")],
          f"{name}: added_tokens")
    tr = dict(tk["truncation"] or [])
    check(tr.get("max_length") == 64, f"{name}: truncation max_length 64")
    check(isinstance(tk["padding"], list) and len(tk["padding"]) > 0, f"{name}: padding non-null object")
    # weights: exactly the tensor set, the declared dtype
    w = weights(d)
    W[name] = w
    want = tensor_set(c)
    check({k: list(v[1].shape) for k, v in w.items()} == want, f"{name}: tensor set and shapes (05 §4.3)")
    check(all(v[0] == f["dtype"] for v in w.values()), f"{name}: all tensors {f['dtype']}")
    check(all(np.isfinite(v[1]).all() for v in w.values()), f"{name}: finite values")

# equal values where the family says so
ref = W["tiny-bias"]
for twin in ("tiny-f32", "tiny-sharded", "tiny-always", "tiny-v10"):
    check(all(np.array_equal(ref[k][1], W[twin][k][1]) for k in ref) and set(ref) == set(W[twin]),
          f"{twin}: same tensor values as tiny-bias")
f32 = read(os.path.join(fx, "tiny-f32", "model.safetensors"), "rb")
check(b'"dtype":"F32"' in f32[:20000] and b'"BF16"' not in f32[:20000], "tiny-f32: F32 on disk")
# the F32 twin holds bf16-representable values (low 16 bits zero)
check(all(((W["tiny-f32"][k][1].view(np.uint32) & 0xffff) == 0).all() for k in ref),
      "tiny-f32: every value is a bf16 value")
check(np.array_equal(W["tiny-tied"]["lm_head.weight"][1], W["tiny-tied"]["model.embed_tokens.weight"][1]),
      "tiny-tied: lm_head equals the embedding")
check(np.array_equal(W["tiny-tied"]["model.embed_tokens.weight"][1], ref["model.embed_tokens.weight"][1]),
      "tiny-tied: embedding as tiny-bias")
# F16 storage of the same draws: within half an f16 ulp of the unrounded value,
# hence within one bf16 ulp (2^-8 relative) of tiny-bias
d16 = max(float(np.max(np.abs(W["tiny-f16"][k][1] - ref[k][1]) / (np.abs(ref[k][1]) + 1e-3))) for k in ref)
check(d16 < 2 ** -7, f"tiny-f16: close to tiny-bias (max rel {d16:g})")
check(not all(np.array_equal(W["tiny-f16"][k][1], ref[k][1]) for k in ref), "tiny-f16: not a bf16 copy")
for g in ("tiny-gqa1", "tiny-gqa4"):
    check(np.array_equal(W[g]["model.layers.0.self_attn.q_proj.weight"][1],
                         ref["model.layers.0.self_attn.q_proj.weight"][1]), f"{g}: q_proj as tiny-bias")

# distributions of 07 §8.2 (loose: a wrong σ is off by a large factor)
H = 64


def stat_ok(k, mean, std):
    # 5-sigma bounds of the sample mean and standard deviation for n draws
    v = ref[k][1].astype(np.float64).ravel()
    n = v.size
    return abs(v.mean() - mean) < 5 * std / np.sqrt(n) and abs(v.std() / std - 1) < 5 / np.sqrt(2 * n) + 0.01


check(stat_ok("model.embed_tokens.weight", 0, 1), "embedding N(0,1)")
check(stat_ok("lm_head.weight", 0, 8 / np.sqrt(H)), "lm_head N(0, 8/sqrt(H))")
check(stat_ok("model.layers.1.self_attn.q_proj.weight", 0, 1 / np.sqrt(H)), "q_proj N(0, 1/sqrt(H))")
check(stat_ok("model.layers.2.mlp.down_proj.weight", 0, 1 / np.sqrt(160)), "down_proj N(0, 1/sqrt(I))")
check(stat_ok("model.layers.0.mlp.up_proj.bias", 0, 0.1), "bias N(0, 0.1)")
check(stat_ok("model.layers.0.input_layernorm.weight", 1, 0.1), "norm 1 + N(0, 0.1)")
check(not np.array_equal(ref["model.layers.0.self_attn.q_proj.weight"][1],
                         ref["model.layers.1.self_attn.q_proj.weight"][1]), "layers differ")
e = ref["model.embed_tokens.weight"][1]
check(abs(np.corrcoef(e[:, 0], e[:, 1])[0, 1]) < 0.05, "no correlation between neighbouring columns")

# ---- stories260K export (07 §4)
sd = os.path.join(fx, "stories260K")
check(read(os.path.join(sd, "config.json")) == cfg_stories, "stories260K: config.json is byte-equal to 07 §4")
check(json.loads(read(os.path.join(sd, "tokenizer_config.json"))) == {"bos_token": "<s>"},
      "stories260K: tokenizer_config.json")
sw = weights(sd)
check({k: list(v[1].shape) for k, v in sw.items()} == tensor_set(json.loads(cfg_stories)),
      "stories260K: tensor set")
check(all(v[0] == "F32" for v in sw.values()), "stories260K: F32")
bin_ = read(os.path.join(shared, "models", "stories260K", "stories260K.bin"), "rb")
dim, hid, L, nh, nkv, V, seq = struct.unpack_from("<7i", bin_, 0)
fl = np.frombuffer(bin_, "<f4", offset=28)
hd, kvd, o = dim // nh, dim // nh * nkv, 0


def take(*shape):
    global o
    n = int(np.prod(shape))
    a = fl[o:o + n].reshape(shape)
    o += n
    return a


emb, ra, wq, wk, wv, wo, rf, w1, w2, w3, fin = (take(V, dim), take(L, dim), take(L, dim, dim), take(L, kvd, dim),
                                                 take(L, kvd, dim), take(L, dim, dim), take(L, dim),
                                                 take(L, hid, dim), take(L, dim, hid), take(L, hid, dim), take(dim))


def unperm(w, heads):
    # 07 §4: new row h*hd + j*(hd/2) + i <- old row h*hd + 2i + j
    out = np.empty_like(w)
    for h in range(heads):
        for j in range(2):
            for i in range(hd // 2):
                out[h * hd + j * (hd // 2) + i] = w[h * hd + 2 * i + j]
    return out


G = lambda k: sw[k][1]
ok = np.array_equal(G("model.embed_tokens.weight"), emb) and np.array_equal(G("lm_head.weight"), emb) \
    and np.array_equal(G("model.norm.weight"), fin)
for l in range(L):
    p = f"model.layers.{l}."
    ok &= np.array_equal(G(p + "self_attn.q_proj.weight"), unperm(wq[l], nh))
    ok &= np.array_equal(G(p + "self_attn.k_proj.weight"), unperm(wk[l], nkv))
    ok &= not np.array_equal(G(p + "self_attn.q_proj.weight"), wq[l])
    for k, a in (("self_attn.v_proj", wv), ("self_attn.o_proj", wo), ("mlp.gate_proj", w1),
                 ("mlp.down_proj", w2), ("mlp.up_proj", w3)):
        ok &= np.array_equal(G(p + k + ".weight"), a[l])
    ok &= np.array_equal(G(p + "input_layernorm.weight"), ra[l])
    ok &= np.array_equal(G(p + "post_attention_layernorm.weight"), rf[l])
check(bool(ok), "stories260K: tensors equal the checkpoint (q/k permuted per 07 §4)")
tok = json.loads(read(os.path.join(sd, "tokenizer.json")))
m = tok["model"]
check(m["type"] == "BPE" and m["byte_fallback"] is True and m["fuse_unk"] is True and m["unk_token"] == "<unk>",
      "stories260K: BPE model flags")
check(len(m["vocab"]) == 512 and m["vocab"]["<unk>"] == 0 and m["vocab"]["<s>"] == 1 and m["vocab"]["</s>"] == 2
      and m["vocab"]["<0x00>"] == 3 and m["vocab"]["<0xFF>"] == 258 and m["vocab"]["\u2581t"] == 259,
      "stories260K: vocab")
check([a["content"] for a in tok["added_tokens"]] == ["<unk>", "<s>", "</s>"], "stories260K: added tokens")
check(tok["normalizer"] == {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]} and tok["pre_tokenizer"] is None,
      "stories260K: normalizer, pre_tokenizer")
check(tok["decoder"] == json.loads(mistral_bytes)["decoder"], "stories260K: decoder as Mistral's")
merged = [a + b for a, b in (x.split(" ") for x in m["merges"])]
check(all(s in m["vocab"] for s in merged), "stories260K: every merge yields a vocab piece")
ranks = [m["vocab"][s] for s in merged]  # ids increase as scores decrease in tok512
check(ranks == sorted(ranks), "stories260K: merges ordered by score")

print(f"PYCOUNT {check.passed} {check.failed}")
