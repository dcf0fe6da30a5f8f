#!/usr/bin/env bash
# deploy/k8s manifests: YAML lint (Debian yamllint), the Kubernetes schemas
# (npm kubernetes-models via tools/k8s-validate.mjs; broken copies must be
# refused, so the validator is shown to fail), and the wiring the schema
# cannot see: readiness on /health, liveness on /health/live, the container port = --addr port = the
# Service's target, selector = pod labels, every `basal serve` flag known to
# this build's `basal serve --help`.
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" tests/oracle/node_modules/kubernetes-models tests/oracle/node_modules/yaml
if yamllint -s -d '{extends: default, rules: {line-length: {max: 120}, document-start: disable}}' deploy/k8s/; then ok; else bad "yamllint deploy/k8s"; fi
out=$(node tools/k8s-validate.mjs deploy/k8s/*.yaml 2>&1)
if [ $? -eq 0 ] && [ "$(grep -c ': valid$' <<<"$out")" -eq 2 ]; then ok; else bad "schema validation: $out"; fi
# each broken copy must be refused
broken() {  # name, sed expression, file
    sed "$2" "deploy/k8s/$3" >"$tmp/$3"
    if cmp -s "deploy/k8s/$3" "$tmp/$3"; then bad "$1: the edit changed nothing"; return; fi
    if node tools/k8s-validate.mjs "$tmp/$3" >/dev/null 2>&1; then bad "$1: accepted"; else ok; fi
}
broken "replicas as text" 's/replicas: 3/replicas: three/' deployment.yaml
broken "containerPort as text" 's/containerPort: 8000/containerPort: eight/' deployment.yaml
broken "probe without port" '/path: \/health$/{n;d}' deployment.yaml
broken "unknown strategy type" 's/type: RollingUpdate/type: Rolling/' deployment.yaml
broken "service port as text" 's/port: 8000/port: web/' service.yaml
broken "wrong apiVersion" 's#apiVersion: apps/v1#apiVersion: apps/v9#' deployment.yaml
"$BASAL" serve --help >"$tmp/serve-help.txt" 2>&1
if "$PY" - "$tmp/serve-help.txt" <<'PYEOF'
import sys, yaml
help_text = open(sys.argv[1]).read()
dep = yaml.safe_load(open("deploy/k8s/deployment.yaml"))
svc = yaml.safe_load(open("deploy/k8s/service.yaml"))
pod = dep["spec"]["template"]
c = pod["spec"]["containers"][0]
errs = []
args = c["args"]
if args[0] != "serve": errs.append("args must start with serve")
for a in args:
    if a.startswith("--") and a not in help_text: errs.append(f"{a} unknown to basal serve --help")
port = int(args[args.index("--addr") + 1].rsplit(":", 1)[1])
named = {p["name"]: p["containerPort"] for p in c["ports"]}
if named.get("http") != port: errs.append("container port http != --addr port")
# readiness on /health (503 while loading), liveness on /health/live (200 while loading)
for probe, path in (("readinessProbe", "/health"), ("livenessProbe", "/health/live")):
    g = c[probe]["httpGet"]
    if g["path"] != path or named.get(g["port"], g["port"]) != port: errs.append(f"{probe} not on {path}:{port}")
if "startupProbe" in c and c["startupProbe"]["httpGet"]["path"] != "/health/live":
    errs.append("a startupProbe on /health would restart a pod whose load takes longer than its threshold")
if dep["spec"]["selector"]["matchLabels"].items() - pod["metadata"]["labels"].items(): errs.append("selector != pod labels")
if svc["spec"]["selector"] != dep["spec"]["selector"]["matchLabels"]: errs.append("service selector != deployment's")
if named.get(svc["spec"]["ports"][0]["targetPort"]) != port: errs.append("service targetPort != container port")
print("\n".join(errs))
sys.exit(1 if errs else 0)
PYEOF
then ok; else bad "manifest wiring"; fi
finish
