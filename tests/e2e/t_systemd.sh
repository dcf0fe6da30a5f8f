#!/usr/bin/env bash
# deploy/systemd/basal.service (issue 18): `systemd-analyze verify` finds
# nothing to say (broken copies show it would: an unknown key, a bad value, a
# missing binary), `systemd-analyze security --offline` rates it at most 2.0
# (a copy without the hardening is refused), the required settings are there,
# and the unit's own commands work: ExecStart (with the fixture model in a
# config file) serves on the unit's BASAL_ADDR, the ExecStartPost readiness
# probe waits while nothing answers and returns once /health is 200, and
# KillSignal stops the server with exit status 0.
set -u
. "$(dirname "$0")/lib.sh"
unit=deploy/systemd/basal.service
need "$BASAL" "$FIXTURES/tiny-bias" "$unit" /usr/bin/systemd-analyze /usr/bin/curl
# ExecStart must name an existing binary: the test's copy runs this build's.
sed "s#/usr/local/bin/basal#$BASAL#" "$unit" >"$tmp/basal.service"
if [ "$(grep -c "$BASAL serve" "$tmp/basal.service")" -eq 1 ]; then ok; else bad "ExecStart not rewritten"; fi
verify() { (cd "$tmp" && systemd-analyze verify "$1" 2>&1); }
out=$(verify basal.service); rc=$?
if [ "$rc" -eq 0 ] && [ -z "$out" ]; then ok; else bad "systemd-analyze verify: rc $rc: $out"; fi
broken() {  # name, sed expression
    sed "$2" "$tmp/basal.service" >"$tmp/broken.service"
    if cmp -s "$tmp/basal.service" "$tmp/broken.service"; then bad "$1: the edit changed nothing"; return; fi
    out=$(verify broken.service); rc=$?
    if [ "$rc" -ne 0 ] || [ -n "$out" ]; then ok; else bad "$1: verify said nothing"; fi
}
broken "unknown key" 's/^Restart=on-failure/Restartt=on-failure/'
broken "bad value" 's/^ProtectSystem=strict/ProtectSystem=stricter/'
broken "missing binary" "s#$BASAL serve#/nonexistent/basal serve#"
broken "bad section" 's/^\[Service\]/[Servic]/'
sec() { (cd "$tmp" && systemd-analyze security --offline=true --threshold=20 "$1" >"$tmp/security.txt" 2>&1); }
if sec basal.service; then ok; else bad "security exposure above 2.0: $(tail -n 1 "$tmp/security.txt")"; fi
grep -v -E '^(DynamicUser|NoNewPrivileges|ProtectSystem|PrivateDevices|PrivateUsers|SystemCallFilter|CapabilityBoundingSet|RestrictAddressFamilies)=' \
    "$tmp/basal.service" >"$tmp/weak.service"
if sec weak.service; then bad "the security check passed an unhardened copy"; else ok; fi
# the settings the issue asks for
for want in 'DynamicUser=yes' 'ProtectSystem=strict' 'NoNewPrivileges=yes' 'Restart=on-failure' \
            "ExecStart=$BASAL serve --config /etc/basal/basal-serve.yml" 'ReadOnlyPaths=-/var/lib/basal/models'; do
    if grep -qxF "$want" "$tmp/basal.service"; then ok; else bad "missing: $want"; fi
done
# The unit's commands, run as systemd would run them (Environment=, $$ → $).
"$PY" - "$tmp/basal.service" "$tmp" <<'PY' >"$tmp/cmds.sh" || bad "reading the unit"
import shlex, sys
env, start, post = [], None, None
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition("=")
    if k == "Environment": env.append(v)
    elif k == "ExecStart": start = shlex.split(v)
    elif k == "ExecStartPost": post = shlex.split(v.replace("$$", "$"))
i = start.index("--config")
start[i + 1] = sys.argv[2] + "/basal-serve.yml"
print("export " + " ".join(shlex.quote(e) for e in env))
print("start=(" + " ".join(shlex.quote(a) for a in start) + ")")
print("post=(" + " ".join(shlex.quote(a) for a in post) + ")")
PY
. "$tmp/cmds.sh"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export BASAL_ADDR=127.0.0.1:$port   # the unit's 127.0.0.1:8000 may be taken on a test machine
printf 'models:\n  - path: %s\naddr: 127.0.0.1:1\n' "$FIXTURES/tiny-bias" >"$tmp/basal-serve.yml"
# nothing listens yet: the probe keeps waiting
timeout 3 "${post[@]}" >/dev/null 2>&1; rc=$?
if [ "$rc" -eq 124 ]; then ok; else bad "readiness probe returned $rc with no server"; fi
limit=60; case $BASAL in *asan*) limit=300 ;; esac
"${start[@]}" 2>"$tmp/serve.log" &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
if timeout "$limit" "${post[@]}" 2>/dev/null; then ok; else bad "readiness probe did not succeed: $(tail -n 5 "$tmp/serve.log")"; fi
if curl -fsS "http://$BASAL_ADDR/health" | grep -q '"status":"ok"'; then ok; else bad "health after the probe"; fi
if grep -q "serving on http://$BASAL_ADDR" "$tmp/serve.log"; then ok; else bad "BASAL_ADDR does not win over the file's addr"; fi
kill -TERM "$pid"
if timeout 120 tail --pid="$pid" -f /dev/null; then wait "$pid"; rc=$?; else rc=timeout; fi
if [ "$rc" = 0 ]; then ok; else bad "SIGTERM exit status $rc"; fi
finish
