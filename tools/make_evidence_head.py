#!/usr/bin/python3
"""Writes evidence_head.pt files (spec 03 §4.2, 07 §8.2) with the real torch.save.

  make_evidence_head.py --hidden H --out FILE [--k 16] [--dtype f32|f16|bf16] [--seed N]
      a valid head: six bias-free nn.Linear layers ws, us, we, ue (H -> k) and
      bs, be (H -> 1), saved as torch.save({"d": H, "k": k, "state_dict":
      head.state_dict()}) after converting the module to the storage dtype.
  make_evidence_head.py --hidden H --broken DIR
      the refusal corpus: one file per case in DIR and DIR/cases.tsv with lines
      "<file>\t<substring the loader's message must contain>".
  make_evidence_head.py --hidden H --fuzz DIR [--n 300] [--seed N]
      randomly mutated heads (pickle bytes re-zipped with valid CRCs, or the
      archive bytes) for the loader's memory-safety check.
  make_evidence_head.py --dump FILE
      the tensors of FILE as read by torch.load, widened to float32, as JSON
      {"d":…, "k":…, "tensors": {name: {"shape": […], "values": […]}}}.

Run with /usr/bin/python3 (Debian python3-torch 1.13).
"""
import argparse
import io
import json
import os
import pickle
import struct
import sys
import zipfile

import torch

torch.set_num_threads(1)
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


class Head(torch.nn.Module):
    def __init__(self, d, k):
        super().__init__()
        for n in ("ws", "us", "we", "ue"):
            setattr(self, n, torch.nn.Linear(d, k, bias=False))
        self.bs = torch.nn.Linear(d, 1, bias=False)
        self.be = torch.nn.Linear(d, 1, bias=False)


def head_dict(d, k, seed, dtype="f32"):
    torch.manual_seed(seed)
    h = Head(d, k)
    with torch.no_grad():  # spread the scores so spans are not all near-uniform
        for p in h.parameters():
            p.normal_(0.0, 1.0 / d ** 0.5)
    h = h.to(DTYPES[dtype])
    return {"d": d, "k": k, "state_dict": h.state_dict()}


def save_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


# ---- a hand-written torch.save for corrupt pickles (the real one cannot lie) ----

class Storage:
    """A persistent storage reference: ("storage", <class>, key, "cpu", numel)."""
    def __init__(self, cls, key, numel, data):
        self.cls, self.key, self.numel, self.data = cls, key, numel, data


class FakeTensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, _ordered())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


def _ordered():
    from collections import OrderedDict
    return OrderedDict()


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def custom_archive(obj, storages, protocol=2, top="archive", extra=()):
    """A zip written by Python's zipfile (stored entries) with data.pkl from
    our own pickler; storages: Storage objects whose bytes are written."""
    pk = io.BytesIO()
    _Pickler(pk, protocol=protocol).dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{top}/data.pkl", pk.getvalue())
        for s in storages:
            if s.data is not None:
                z.writestr(f"{top}/data/{s.key}", s.data)
        z.writestr(f"{top}/version", "3\n")
        for name, data in extra:
            z.writestr(name, data)
    return out.getvalue()


def fake_head(d, k, mutate=None):
    """The valid head structure with hand-made tensors; mutate(name, spec)
    may change a tensor's storage/offset/size/stride before pickling."""
    from collections import OrderedDict
    sd, storages = OrderedDict(), []
    for i, (name, rows) in enumerate([("ws.weight", k), ("us.weight", k), ("we.weight", k), ("ue.weight", k),
                                      ("bs.weight", 1), ("be.weight", 1)]):
        n = rows * d
        spec = {"cls": torch.FloatStorage, "key": str(i), "numel": n, "data": struct.pack(f"<{n}f", *([0.01] * n)),
                "offset": 0, "size": [rows, d], "stride": [d, 1]}
        if mutate:
            mutate(name, spec)
        st = Storage(spec["cls"], spec["key"], spec["numel"], spec["data"])
        storages.append(st)
        sd[name] = FakeTensor(st, spec["offset"], spec["size"], spec["stride"])
    return {"d": d, "k": k, "state_dict": sd}, storages


class Evil:
    def __reduce__(self):
        return (os.system, ("echo evidence-head-pwned",))


def patch(data, old, new, count=1):
    assert data.count(old) >= count, (old, data.count(old))
    return data.replace(old, new, count)


def broken_cases(d, k):
    """(file name, bytes, expected message substring) for every refusal."""
    good = save_bytes(head_dict(d, k, 7))
    cases = []
    add = lambda name, data, msg: cases.append((name, data, msg))

    # the archive
    add("truncated-half.pt", good[:len(good) // 2], "no zip end-of-central-directory record")
    add("truncated-tail.pt", good[:-7], "no zip end-of-central-directory record")
    add("empty.pt", b"", "not a zip archive")
    add("not-zip.pt", b"hello, this is not a zip archive at all" * 4, "not a zip archive")
    add("legacy.pt", save_bytes(head_dict(d, k, 7), _use_new_zipfile_serialization=False),
        "legacy torch.save format is not supported")
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as zi, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zo:
        for info in zi.infolist():
            zo.writestr(info.filename, zi.read(info.filename))
    add("compressed.pt", buf.getvalue(), "compressed zip entry (method 8)")
    # flip one byte inside the first storage's data: CRC mismatch
    z = zipfile.ZipFile(io.BytesIO(good))
    info = z.getinfo([n for n in z.namelist() if n.endswith("/data/0")][0])
    lh = info.header_offset
    nlen, elen = struct.unpack_from("<HH", good, lh + 26)
    at = lh + 30 + nlen + elen + 5
    add("bad-crc.pt", good[:at] + bytes([good[at] ^ 0x40]) + good[at + 1:], "CRC-32 mismatch")
    # local header name differs from the central directory
    name0 = info.filename.encode()
    bad = bytearray(good)
    bad[lh + 30 + nlen - 1] ^= 0x01
    add("local-name.pt", bytes(bad), "local header disagrees with the central directory")
    # central directory claims a larger entry than the data there
    cdpos = good.find(b"PK\x01\x02")
    while cdpos >= 0 and good[cdpos + 46:cdpos + 46 + len(name0)] != name0:
        cdpos = good.find(b"PK\x01\x02", cdpos + 4)
    bad = bytearray(good)
    struct.pack_into("<II", bad, cdpos + 20, 1 << 30, 1 << 30)
    add("size-past-end.pt", bytes(bad), "runs past the end")
    bad = bytearray(good)
    struct.pack_into("<H", bad, cdpos + 8, struct.unpack_from("<H", good, cdpos + 8)[0] | 1)
    add("encrypted-flag.pt", bytes(bad), "zip flags")
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as zi, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zo:
        for info2 in zi.infolist():
            zo.writestr(info2.filename.replace("/data.pkl", "/other.pkl"), zi.read(info2.filename))
    add("no-data-pkl.pt", buf.getvalue(), "no data.pkl in the archive")
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as zi, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zo:
        for info2 in zi.infolist():
            zo.writestr(info2.filename, zi.read(info2.filename))
        zo.writestr("elsewhere/version", "3\n")
    add("two-tops.pt", buf.getvalue(), "do not share one top folder")
    buf = io.BytesIO()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(io.BytesIO(good)) as zi, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zo:
            for info2 in zi.infolist():
                zo.writestr(info2.filename, zi.read(info2.filename))
            zo.writestr(info2.filename, b"3\n")
    add("duplicate-entry.pt", buf.getvalue(), "duplicate zip entry")

    # the pickle
    obj = head_dict(d, k, 7)
    obj["x"] = Evil()
    add("reduce-os-system.pt", save_bytes(obj), "global posix.system is not allowed")
    add("root-os-system.pt", save_bytes(Evil()), "global posix.system is not allowed")
    import numpy as np
    obj = head_dict(d, k, 7)
    obj["x"] = np.zeros(2)
    add("unknown-global.pt", save_bytes(obj), "is not allowed")
    obj = head_dict(d, k, 7)
    obj["x"] = [1, 2]
    add("list-append.pt", save_bytes(obj), "unsupported pickle opcode")
    obj = head_dict(d, k, 7)
    obj["x"] = {str(i): i for i in range(5000)}
    add("huge-dict.pt", save_bytes(obj), "dict with more than 4096 entries")
    hd, st = fake_head(d, k)
    add("protocol-4.pt", custom_archive(hd, st, protocol=4), "not a protocol-2 pickle")
    add("root-tuple.pt", save_bytes((1, 2)), "the root is a tuple, not a dict")
    add("stack-underflow.pt", _with_pickle(good, b"\x80\x02R."), "stack underflow")
    add("memo-get-unset.pt", _with_pickle(good, b"\x80\x02}h\x09."), "memo index 9 was never stored")
    add("bytes-after-stop.pt", _with_pickle(good, b"\x80\x02}.N"), "bytes after STOP")
    add("long-binput.pt", _with_pickle(good, b"\x80\x02}r\x00\x00\x00\x10."), "memo index 268435456 too large")

    # tensors and storages
    def huge(name, s):
        if name == "us.weight":
            s["size"] = [(1 << 31) - 1, (1 << 31) - 1]
            s["stride"] = [(1 << 31) - 1, 1]
    hd, st = fake_head(d, k, huge)
    add("huge-size.pt", custom_archive(hd, st), "runs past its storage")
    def negative(name, s):
        if name == "us.weight":
            s["size"] = [-1, d]
    hd, st = fake_head(d, k, negative)
    add("negative-size.pt", custom_archive(hd, st), "tensor size -1")
    def huge64(name, s):
        if name == "us.weight":
            s["size"] = [1 << 40, 1 << 40]
            s["stride"] = [1 << 40, 1]
    hd, st = fake_head(d, k, huge64)
    add("huge-size-64bit.pt", custom_archive(hd, st), "unsupported pickle opcode 0x8a")
    def huge_storage(name, s):
        if name == "we.weight":
            s["numel"] = (1 << 31) - 1
    hd, st = fake_head(d, k, huge_storage)
    add("huge-storage.pt", custom_archive(hd, st), "storage data/2 holds")
    def past(name, s):
        if name == "ue.weight":
            s["offset"] = 5
    hd, st = fake_head(d, k, past)
    add("storage-past-end.pt", custom_archive(hd, st), "runs past its storage")
    def short(name, s):
        if name == "ws.weight":
            s["data"] = s["data"][:-4]
    hd, st = fake_head(d, k, short)
    add("storage-short.pt", custom_archive(hd, st), "storage data/0 holds")
    def missing_entry(name, s):
        if name == "bs.weight":
            s["data"] = None
    hd, st = fake_head(d, k, missing_entry)
    add("storage-entry-missing.pt", custom_archive(hd, st), "storage entry archive/data/4 missing")
    def strided(name, s):
        if name == "ws.weight":
            s["stride"] = [1, k]
    hd, st = fake_head(d, k, strided)
    add("non-contiguous.pt", custom_archive(hd, st), "not contiguous")

    # the head's own rules (03 §4.2)
    obj = head_dict(d, k, 7)
    del obj["state_dict"]["ue.weight"]
    add("missing-ue.pt", save_bytes(obj), "evidence_head.pt: ue.weight missing")
    obj = head_dict(d, k, 7)
    obj["state_dict"]["ws.weight"] = obj["state_dict"]["ws.weight"][:, : d // 2].contiguous()
    add("wrong-shape-proj.pt", save_bytes(obj), f"evidence_head.pt: projection shape [{k}, {d // 2}], expected [{k}, {d}]")
    obj = head_dict(d, k, 7)
    obj["state_dict"]["be.weight"] = torch.zeros(2, d)
    add("wrong-shape-bias.pt", save_bytes(obj), f"evidence_head.pt: projection shape [2, {d}], expected [1, {d}]")
    obj = head_dict(d, k, 7)
    obj["state_dict"]["us.weight"] = torch.zeros(k * d)
    add("wrong-rank.pt", save_bytes(obj), f"evidence_head.pt: projection shape [{k * d}], expected [{k}, {d}]")
    obj = head_dict(d, k, 7)
    obj["state_dict"]["extra.weight"] = torch.zeros(1, d)
    add("seventh-tensor.pt", save_bytes(obj), "unexpected tensor extra.weight")
    obj = head_dict(d, k, 7)
    obj["d"] = d // 2
    add("wrong-d.pt", save_bytes(obj), f"d is {d // 2}, the model's hidden size is {d}")
    obj = head_dict(d, k, 7)
    del obj["k"]
    add("no-k.pt", save_bytes(obj), "evidence_head.pt: k missing")
    obj = head_dict(d, k, 7)
    del obj["state_dict"]
    add("no-state-dict.pt", save_bytes(obj), "evidence_head.pt: state_dict missing")
    obj = head_dict(d, k, 7)
    obj["state_dict"]["ws.weight"] = torch.zeros(k, d, dtype=torch.float64)
    add("double-storage.pt", save_bytes(obj), "global torch.DoubleStorage is not allowed")
    obj = head_dict(d, k, 7)
    obj["state_dict"]["ws.weight"].requires_grad_(False)
    obj["state_dict"]["ws.weight"] = torch.nn.Parameter(obj["state_dict"]["ws.weight"])
    add("parameter.pt", save_bytes(obj), "global torch._utils._rebuild_parameter is not allowed")
    return cases


def fuzz_cases(d, k, n, seed):
    """n heads whose data.pkl (re-zipped, so CRCs match) or raw archive bytes
    are randomly mutated: byte flips, truncations, duplicated and deleted runs."""
    import random
    rnd = random.Random(seed)
    good = save_bytes(head_dict(d, k, 7))
    with zipfile.ZipFile(io.BytesIO(good)) as z:
        pk = z.read([x for x in z.namelist() if x.endswith("/data.pkl")][0])
    out = []
    for i in range(n):
        raw = i % 4 == 3  # every fourth case mutates the archive itself
        b = bytearray(good if raw else pk)
        for _ in range(rnd.randint(1, 4)):
            op = rnd.randrange(4)
            at = rnd.randrange(len(b)) if b else 0
            if op == 0 and b:
                b[at] = rnd.randrange(256)
            elif op == 1:
                del b[at:]
            elif op == 2:
                ln = rnd.randint(1, 16)
                b[at:at] = b[at:at + ln]
            else:
                del b[at:at + rnd.randint(1, 16)]
        out.append(bytes(b) if raw else _with_pickle(good, bytes(b)))
    return out


def _with_pickle(archive, pk):
    """archive with its data.pkl replaced (re-zipped with Python's zipfile)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as zi, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            data = pk if info.filename.endswith("/data.pkl") else zi.read(info.filename)
            zo.writestr(info.filename, data)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, help="hidden size d of the head (no default; needed to write one)")
    ap.add_argument("--k", type=int, default=16, help="head width k (default %(default)s)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32", help="tensor dtype (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default %(default)s)")
    ap.add_argument("--out", help="FILE: write one head there (the default action)")
    ap.add_argument("--broken", help="DIR: malformed heads and their expected errors in cases.tsv")
    ap.add_argument("--dump", help="FILE: print a head's tensors as JSON")
    ap.add_argument("--fuzz", help="DIR: --n randomly mutated heads fuzz-<i>.pt")
    ap.add_argument("--n", type=int, default=300, help="heads written by --fuzz (default %(default)s)")
    a = ap.parse_args()
    if a.dump:
        obj = torch.load(a.dump)
        out = {"d": obj["d"], "k": obj["k"], "tensors": {}}
        for n, t in obj["state_dict"].items():
            out["tensors"][n] = {"shape": list(t.shape), "values": [float(v) for v in t.float().flatten().tolist()]}
        json.dump(out, sys.stdout)
    elif a.fuzz:
        os.makedirs(a.fuzz, exist_ok=True)
        for i, data in enumerate(fuzz_cases(a.hidden, a.k, a.n, a.seed)):
            with open(os.path.join(a.fuzz, f"fuzz-{i:04d}.pt"), "wb") as g:
                g.write(data)
    elif a.broken:
        os.makedirs(a.broken, exist_ok=True)
        with open(os.path.join(a.broken, "cases.tsv"), "w") as f:
            for name, data, msg in broken_cases(a.hidden, a.k):
                with open(os.path.join(a.broken, name), "wb") as g:
                    g.write(data)
                f.write(f"{name}\t{msg}\n")
    else:
        with open(a.out, "wb") as f:
            f.write(save_bytes(head_dict(a.hidden, a.k, a.seed, a.dtype)))


if __name__ == "__main__":
    main()
