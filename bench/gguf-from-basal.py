#!/usr/bin/python3
"""Writes a Basal (Hugging Face Llama) model directory as a GGUF file for
llama.cpp, so that its Q8_0 mode can be measured on the same weights as
basal-c's modes (bench/README.md, issue 34).

usage: PYTHONPATH=LLAMA_CPP/gguf-py bench/gguf-from-basal.py MODEL_DIR OUT.gguf [--type f16|bf16|f32]

  MODEL_DIR   a directory with config.json, tokenizer.json and model.safetensors
              (e.g. bench/models/mini-shape from `basal make-model --preset mini-shape`)
  OUT.gguf    the file to write (F16 by default: `llama-quantize OUT.gguf Q8.gguf Q8_0` then)
  --type T    tensor type of the 2-D weights: f16 (default), bf16 or f32; norms stay f32
  -h, --help  this text

Needs numpy and llama.cpp's own gguf-py package (on PYTHONPATH); nothing of
llama.cpp is part of this repository. Tensors keep Hugging Face's values;
q_proj and k_proj rows are permuted into llama.cpp's rotary layout, as its own
converter does. The vocabulary is tokenizer.json's, written as a
SentencePiece-style list (scores by id): enough for llama-bench, which feeds
token ids, not text."""
import json
import os
import struct
import sys

import numpy as np


def usage(code):
    (sys.stdout if code == 0 else sys.stderr).write(__doc__.split("\n\n", 1)[1].split("\n\nNeeds")[0] + "\n")
    sys.exit(code)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    base = 8 + n
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = mm[base + b:base + e]
        if t["dtype"] == "BF16":
            a = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "F16":
            a = raw.view("<f2").astype(np.float32)
        elif t["dtype"] == "F32":
            a = raw.view("<f4")
        else:
            raise SystemExit(f"{path}: {name}: dtype {t['dtype']} not supported")
        out[name] = a.reshape(t["shape"])
    return out


def permute(w, n_head, n_head_kv):
    """HF's q/k rows (rotate-half RoPE) into llama.cpp's interleaved order."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def main():
    args = sys.argv[1:]
    if not args or "-h" in args or "--help" in args:
        usage(0 if args else 2)
    kind = "f16"
    if "--type" in args:
        i = args.index("--type")
        if i + 1 >= len(args) or args[i + 1] not in ("f16", "bf16", "f32"):
            usage(2)
        kind = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        usage(2)
    src, dst = args
    try:
        import importlib.util
        import types
        if importlib.util.find_spec("sentencepiece") is None:
            # gguf's vocabulary helpers import it at load; the writer never uses it
            stub = types.ModuleType("sentencepiece")
            stub.SentencePieceProcessor = None
            sys.modules["sentencepiece"] = stub
        import gguf
    except ImportError:
        raise SystemExit("gguf-from-basal: the gguf package is missing: PYTHONPATH=<llama.cpp>/gguf-py")
    cfg = json.load(open(os.path.join(src, "config.json")))
    tok = json.load(open(os.path.join(src, "tokenizer.json")))
    H, L, nh, nkv = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    V = cfg["vocab_size"]
    w = gguf.GGUFWriter(dst, "llama")
    w.add_name(os.path.basename(os.path.normpath(src)))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_rope_dimension_count(cfg["head_dim"])
    w.add_rope_freq_base(float(cfg["rope_parameters"]["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_vocab_size(V)
    ftype = {"f16": gguf.LlamaFileType.MOSTLY_F16, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
             "f32": gguf.LlamaFileType.ALL_F32}[kind]
    w.add_file_type(ftype)
    tokens, scores, types = [f"<unused{i}>" for i in range(V)], [0.0] * V, [gguf.TokenType.UNUSED] * V
    for t, i in tok["model"]["vocab"].items():
        tokens[i], scores[i] = t, -float(i)
        types[i] = gguf.TokenType.BYTE if t.startswith("<0x") and t.endswith(">") else gguf.TokenType.NORMAL
    for a in tok.get("added_tokens", []):
        if a["id"] < V:
            tokens[a["id"]], types[a["id"]] = a["content"], gguf.TokenType.CONTROL
    types[0] = gguf.TokenType.UNKNOWN
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(cfg.get("bos_token_id", 1))
    w.add_eos_token_id(cfg.get("eos_token_id", 2))
    st = read_safetensors(os.path.join(src, "model.safetensors"))
    npt = {"f16": np.float16, "f32": np.float32}
    def put(name, a, matrix=True):
        a = np.ascontiguousarray(a, dtype=np.float32)
        if matrix and kind == "bf16":
            w.add_tensor(name, gguf.quants.quantize(a, gguf.GGMLQuantizationType.BF16), raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(name, a.astype(npt[kind]) if matrix else a)
    put("token_embd.weight", st["model.embed_tokens.weight"])
    put("output_norm.weight", st["model.norm.weight"], matrix=False)
    put("output.weight", st["lm_head.weight"] if "lm_head.weight" in st else st["model.embed_tokens.weight"])
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for l in range(L):
        p = f"model.layers.{l}."
        put(f"blk.{l}.attn_norm.weight", st[p + "input_layernorm.weight"], matrix=False)
        put(f"blk.{l}.ffn_norm.weight", st[p + "post_attention_layernorm.weight"], matrix=False)
        for hf, gg in names.items():
            a = st[p + hf + ".weight"]
            if hf.endswith("q_proj"):
                a = permute(a, nh, nh)
            elif hf.endswith("k_proj"):
                a = permute(a, nh, nkv)
            put(f"blk.{l}.{gg}.weight", a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
