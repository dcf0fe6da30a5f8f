#!/usr/bin/env bash
# examples/client/ (issue 35 item 5) run as a user would, against `basal
# serve` on the fixture model: curl.sh, python_client.py (standard library),
# node/sdk_client.mjs (the official TypeSafe SDK pinned in tests/oracle) and
# basal_client_pipeline.sh (`basal client` over tickets.jsonl). Python's json
# reads every output; each answer must be real: a choice among the options with
# probabilities summing to 1 and the choice their argmax, noul in [0, 1], a
# score equal to sum(i * p_i) of its levels, and every answer equal to what
# `basal decide` computes in-process for the same request (no HTTP).
set -u
. "$(dirname "$0")/lib.sh"
sdk=tests/oracle/node_modules/@typesafe-ai/sdk
need "$BASAL" "$FIXTURES/tiny-bias" "$sdk/package.json" examples/client/request.json
model=$FIXTURES/tiny-bias
name=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["name"])' "$model/basal.json")
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BASAL" serve --model "$model" --addr "127.0.0.1:$port" --access-log off >"$tmp/serve.log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
limit=60; case $BASAL in *asan*) limit=300 ;; esac
for _ in $(seq 1 $((limit * 5))); do curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && break; sleep 0.2; done
export BASAL_URL=http://127.0.0.1:$port BASAL_MODEL=$name BASAL=$BASAL
run() {  # NAME CMD...: stdout to $tmp/NAME.out; a failure is reported with its stderr
    local n=$1; shift
    if timeout -k 5 "$limit" "$@" >"$tmp/$n.out" 2>"$tmp/$n.err"; then ok; else bad "$n: exit $?: $(tail -n 5 "$tmp/$n.err")"; fi
}
run curl bash examples/client/curl.sh
run python "$PY" examples/client/python_client.py --json
run python-text "$PY" examples/client/python_client.py
grep -q '^department: ' "$tmp/python-text.out" && ok || bad "python summary: $(cat "$tmp/python-text.out")"
# the SDK example as a user runs it: the file next to a node_modules holding the pinned SDK
mkdir -p "$tmp/node" && cp examples/client/node/sdk_client.mjs "$tmp/node/" && ln -s "$root/tests/oracle/node_modules" "$tmp/node/node_modules"
run node node "$tmp/node/sdk_client.mjs" --json
run pipeline bash examples/client/basal_client_pipeline.sh
# the oracle: basal decide on the same requests, in-process
"$BASAL" decide --model "$model" --request examples/client/request.json >"$tmp/decide.json" 2>"$tmp/decide.err" || bad "decide: $(cat "$tmp/decide.err")"
kill -TERM "$pid"; wait "$pid" || bad "serve exit status after SIGTERM: $?"
# the shell's counts go on in Python, which prints the closing line
"$PY" - "$tmp" examples/client "$BASAL" "$model" "$name" "$pass" "$fail" <<'PY'
import json, subprocess, sys
tmp, ex, basal, model, name = sys.argv[1:6]
passed, failed = int(sys.argv[6]), int(sys.argv[7])
def check(cond, what):
    global passed, failed
    if cond: passed += 1
    else:
        failed += 1; print("FAIL:", what)
def real(a, keys, where):
    """An answer that is a real decision over its options."""
    if a["type"] == "choice":
        p = a["probabilities"]
        check(list(p) == keys, f"{where}: keys {list(p)}")
        check(abs(sum(p.values()) - 1) < 1e-9, f"{where}: probabilities sum {sum(p.values())}")
        check(a["choice"] in keys and p[a["choice"]] == max(p.values()), f"{where}: choice {a['choice']} of {p}")
    elif a["type"] == "noul":
        check(0 <= a["noul"] <= 1, f"{where}: noul {a['noul']}")
    elif a["type"] == "score":
        p = a["probabilities"]
        check(abs(sum(p.values()) - 1) < 1e-9, f"{where}: score probabilities sum {sum(p.values())}")
        check(abs(a["score"] - sum(int(i) * v for i, v in p.items())) < 1e-12, f"{where}: score {a['score']} vs {p}")
    else:
        check(False, f"{where}: type {a['type']}")
def decide(req):
    r = subprocess.run([basal, "decide", "--model", model], input=json.dumps(req).encode(), capture_output=True)
    check(r.returncode == 0, f"decide: {r.stderr[-300:]}")
    return json.loads(r.stdout)["answers"]
req = json.load(open(f"{ex}/request.json"))
keys = {"dzial": ["cards", "online", "loans"], "pilne": None, "frustracja": None}
want = json.load(open(f"{tmp}/decide.json"))["answers"]
for q, a in want.items():
    real(a, keys[q], f"decide {q}")
lines = open(f"{tmp}/curl.out").read().splitlines()
check(len(lines) == 3, f"curl.sh printed {len(lines)} lines")
so, ba, models = (json.loads(l) for l in lines[:3])
check(so["answers"] == want, f"curl /v1/systemone differs from decide: {so['answers']}")
for q in want:  # the upstream dialect: the same decision (and noul's two probabilities)
    t = want[q]["type"]
    check(ba["answers"][q][t] == want[q][t], f"curl /v1/basal {q}: {ba['answers'][q]}")
    if t != "noul":
        check(ba["answers"][q]["probabilities"] == want[q]["probabilities"], f"curl /v1/basal {q}: {ba['answers'][q]}")
check([m["name"] for m in models["models" if "models" in models else "data"]] == [name], f"curl /v1/models: {models}")
py = json.loads(open(f"{tmp}/python.out").read())
check(py["answers"] == want, f"python_client differs from decide: {py['answers']}")
node = json.loads(open(f"{tmp}/node.out").read())
check(node["models"] == [name] and node["model"] == name, f"sdk models {node['models']} model {node['model']}")
check(node["answers"] == want, f"sdk_client differs from decide: {node['answers']}")
# the pipelines
out = open(f"{tmp}/pipeline.out").read().split("# ")[1:]
check(len(out) == 3, f"pipeline sections: {len(out)}")
tickets = [json.loads(l) for l in open(f"{ex}/tickets.jsonl")]
env1 = [json.loads(l) for l in out[0].splitlines()[1:]]
route = {"type": "choice", "instructions": "Do którego działu skierować zgłoszenie?",
         "criteria": {"cards": "Reklamacje kart", "online": "Wsparcie bankowości elektronicznej", "loans": "Kredyty"}}
check([e["index"] for e in env1] == list(range(len(tickets))), f"pipeline 1 indexes {[e['index'] for e in env1]}")
for e, t in zip(env1, tickets):
    check(e["ok"] and e["input"] == t, f"pipeline 1 record {e['index']}: {str(e)[:200]}")
    a = e["response"]["answers"]["result"]
    real(a, ["cards", "online", "loans"], f"pipeline 1 record {e['index']}")
    check(a == decide({"model": name, "state": t["text"], "questions": {"result": route}})["result"],
          f"pipeline 1 record {e['index']} differs from decide")
ids = [l.split(" ") for l in out[1].splitlines()[1:]]
check(ids == [[t["id"], e["response"]["answers"]["result"]["choice"]] for t, e in zip(tickets, env1)], f"pipeline 2: {ids}")
env3 = [json.loads(l) for l in out[2].splitlines()[1:]]
check(len(env3) == len(tickets) and all(e["ok"] for e in env3), f"pipeline 3: {str(env3)[:300]}")
for e, t in zip(env3, tickets):
    a = e["response"]["answers"]["pilne"]
    real(a, None, f"pipeline 3 record {e['index']}")
    check(e["input"]["state"] == t["text"], f"pipeline 3 record {e['index']} state")
    check(a == decide({"model": name, "state": t["text"], "questions": {"pilne": e["input"]["questions"]["pilne"]}})["pilne"],
          f"pipeline 3 record {e['index']} differs from decide")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
