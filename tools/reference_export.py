#!/usr/bin/python3
"""Reference export (spec 06 §6) of a model directory for an inputs directory,
made without the C engine: the format of itsoltech/basal-rs
tools/reference/export_reference.py, computed by tools/protocol_ref.py
(prompts from the spec text, token ids from the npm tokenizer oracle, letter
ids by the rule of 01 §5, the PyTorch f32 forward of tools/torch_ref.py, the
decision math in float64).

  INPUTS/bench.jsonl      {index, source, line, id, type, state, question, options, gold}
  INPUTS/systemone.jsonl  {id, source, request}   (a null or missing model = the model's name)

writes OUT (which must not exist) with:

  bench.jsonl      the input fields + lang, orders [{perm, prompt, input_ids, letter_ids,
                   letter_logits, probs}], pack {prefix_len, packed_len, readout_cols},
                   p_avg, argmax_avg, temperature, p_cal, argmax_cal
  systemone.jsonl  id, source, request, items [{name, type, keys, options, lang, state_text,
                   question_text, orders, pack, p_avg, temperature, p_cal}], and
                   upstream_answer (protocol_ref's 200 body) or upstream_error
                   ({"error": why protocol_ref refuses it}, or an act refusal's body)
  manifest.json    tool, inputs, model (name, dir, SHA-256 of its files), backend,
                   batching, host math, temperatures, timings, versions

Packing (prefix_len, packed_len, readout_cols) is the prefix trie of the item's
order prompts (04 §6): two orders share their longest common prefix; one order
follows an empty root. Each item is its own forward ("single" batching).
Run with /usr/bin/python3 (python3-torch, numpy) and node for the oracle.
"""
import argparse
import hashlib
import json
import os
import platform
import sys
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def pack_of(orders):
    ids = [o["input_ids"] for o in orders]
    if len(ids) == 1:
        return {"prefix_len": 0, "packed_len": len(ids[0]), "readout_cols": [len(ids[0]) - 1]}
    a, b = ids
    c = 0
    while c < len(a) and c < len(b) and a[c] == b[c]:
        c += 1
    if c == len(a) or c == len(b):
        raise SystemExit("reference_export: one order prompt is a prefix of the other (outside this tool)")
    packed = len(a) + len(b) - c
    return {"prefix_len": c, "packed_len": packed, "readout_cols": [len(a) - 1, packed - 1]}


def orders_of(ro):
    return [{"perm": o["perm"], "prompt": o["prompt"], "input_ids": o["input_ids"], "letter_ids": o["letter_ids"],
             "letter_logits": o["logits"], "probs": o["q"]} for o in ro["orders"]]


def model_files(path):
    out = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            h = hashlib.sha256()
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[name] = h.hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (required)")
    ap.add_argument("--inputs", required=True, help="inputs directory with bench.jsonl and systemone.jsonl (required)")
    ap.add_argument("--out", required=True, help="export directory to create; must not exist (required)")
    a = ap.parse_args()
    if os.path.exists(a.out):
        print(f"{a.out} exists; choose a new output path", file=sys.stderr)
        return 1
    sys.path.insert(0, TOOLS)
    import protocol_ref as pr
    t0 = time.time()
    md = pr.ModelDir(a.model)
    bench = read_jsonl(os.path.join(a.inputs, "bench.jsonl"))
    cases = read_jsonl(os.path.join(a.inputs, "systemone.jsonl"))
    try:
        items = [pr.bench_readout(md, r) for r in bench]
        plans = [[it] for it in items]
        # System One requests: the ones protocol_ref refuses keep their reason
        so_plans = []
        for c in cases:
            rq = c.get("request")
            if isinstance(rq, dict) and rq.get("model") is None:
                rq = dict(rq, model=md.name)
            try:
                so_plans.append((pr.plan_request(md, json.dumps(rq, ensure_ascii=False)), None))
            except (pr.RefError, KeyError, TypeError, AttributeError) as e:
                so_plans.append((None, {"error": str(e) or type(e).__name__}))
        valid = [qs for qs, _ in so_plans if qs is not None]
        pr.tokenize_plans(md, plans + valid)
        pr.forward(md, plans + valid)
        if pr.plan_round2(md, valid):
            pr.tokenize_plans(md, valid)
            pr.forward(md, valid)
        t_bench = time.time()
        os.makedirs(a.out)
        with open(os.path.join(a.out, "bench.jsonl"), "w", encoding="utf-8") as f:
            for rec, it in zip(bench, items):
                p_cal = pr.decide_item(it, md.temps)
                line = {k: rec.get(k) for k in ("index", "source", "line", "id", "type", "state", "question",
                                                 "options", "gold")}
                line.update(lang=it["lang"], orders=orders_of(it), pack=pack_of(it["orders"]), p_avg=it["p_avg"],
                            argmax_avg=pr.argmax(it["p_avg"]), temperature=it["T"], p_cal=p_cal,
                            argmax_cal=pr.argmax(p_cal))
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        with open(os.path.join(a.out, "systemone.jsonl"), "w", encoding="utf-8") as f:
            for c, (qs, err) in zip(cases, so_plans):
                line = {"id": c.get("id"), "source": c.get("source"), "request": c.get("request"), "items": []}
                if qs is None:
                    line["upstream_error"] = err
                else:
                    resp = pr.respond(md, qs)  # fills p_avg, p_cal and T of every readout
                    for it in qs:
                        for ro in pr.readouts(it):
                            if len(ro.get("p_cal") or []) != len(ro["keys"]):
                                # a large choice's groups and finalists: the record's p_cal is its own
                                # p_avg calibrated with `temperature` (export_reference.py's
                                # calibrate(p_avg, T)), not the question's final distribution
                                ro = dict(ro)
                                pr.decide_item(ro, md.temps)
                            line["items"].append({
                                "name": ro["question"], "type": ro["type"], "keys": ro["keys"],
                                "options": ro["options"], "lang": ro["lang"], "state_text": it["state_text"],
                                "question_text": ro["qtext"], "orders": orders_of(ro), "pack": pack_of(ro["orders"]),
                                "p_avg": ro.get("p_avg"), "temperature": ro.get("T"), "p_cal": ro.get("p_cal")})
                    if resp.get("status") == 422:
                        line["upstream_error"] = resp["body"]
                    else:
                        line["upstream_answer"] = resp
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
    except pr.RefError as e:
        print(f"reference_export: {e}", file=sys.stderr)
        return 1
    import torch
    manifest = {
        "tool": "tools/reference_export.py", "inputs": a.inputs,
        "model": {"name": md.name, "dir": a.model, "sha256": model_files(a.model)},
        "backend": "PyTorch eager, cpu, float32 (tools/torch_ref.py); one forward per order prompt",
        "bench_batching": "single", "host_math": "softmax, order average and calibration in float64 "
                                                 "(tools/protocol_ref.py)",
        "tokenizer": "npm oracle (tools/oracle-tokenizer.js)",
        "calibration": {"temperatures": md.temps},
        "bench_s": t_bench - t0, "total_s": time.time() - t0,
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }
    with open(os.path.join(a.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"reference_export: {len(bench)} bench items, {len(cases)} System One cases in {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
