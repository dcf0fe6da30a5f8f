#!/usr/bin/env python3
"""Input for `basal logits` used by the forward-pass checks (tests/e2e/t_forward_torch.sh,
tools/gpu-check.sh): prompts sharing prefixes (a template, 2 states, 2 questions each,
both option orders) plus one long prompt and a one-token prompt, random ids below the
vocabulary size, seeded by the model name. Letter-style readout ids on big
vocabularies, the full vocabulary on small ones.
Usage: forward_prompts.py CONFIG_JSON NAME > input.json"""
import argparse
import json
import random
import zlib

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("config", metavar="CONFIG_JSON", help="the model's config.json (vocabulary size, positions)")
ap.add_argument("name", metavar="NAME", help="the model's name, the seed of the random ids")
A = ap.parse_args()
cfg = json.load(open(A.config))
V, P = cfg["vocab_size"], cfg["max_position_embeddings"]
rnd = random.Random(zlib.crc32(A.name.encode()))
ids = lambda n: [rnd.randrange(V) for _ in range(n)]  # noqa: E731
tmpl = ids(12)
prompts = []
for s in range(2):
    state = ids(rnd.randrange(3, 40))
    for q in range(2):
        qt = ids(rnd.randrange(1, 6))
        a, b = ids(2)
        prompts += [tmpl + state + qt + [a, b], tmpl + state + qt + [b, a]]
prompts.append(ids(min(300, P - 1)))
prompts.append(ids(1))
out = {"prompts": prompts}
if V > 4096:
    out["ids"] = sorted(rnd.sample(range(V), 16))
print(json.dumps(out))
