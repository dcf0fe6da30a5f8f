#!/usr/bin/env bash
# The Debian packages (issue 35 item 3), as an administrator meets them: built
# with `tools/make-deb.sh` (dpkg-buildpackage + dh, lintian with no error and no
# warning), installed with `apt-get install ./basal-c_*.deb` (and libbasal0,
# libbasal-dev), then: `basal --version` is include/basal.h's version, the
# system user basal and /var/lib/basal exist, /etc/basal/basal-serve.yml is a
# conffile, the unit is installed but neither enabled nor started and passes
# `systemd-analyze verify`, `basal doctor` passes as the basal user, `basal
# serve` run as basal answers a real request (Python's json reads it: the
# answer is an allowed option, probabilities sum to 1), and a program built
# with `pkg-config basal` against the installed libbasal gives the same
# answer. Finally `apt-get purge` leaves nothing behind: the file list of
# /etc, /usr, /var/lib, /opt and /srv is the one from before the install
# (the basal system user stays, as Debian recommends; this test removes it
# again when it created it).
#
# It changes the machine's package state, so it runs only as root, on a machine
# without basal-c installed and without /etc/basal or /var/lib/basal of
# someone's own (README "Running as a systemd service" uses those paths), one
# run at a time (a lock), and otherwise says why it skipped.
set -u
. "$(dirname "$0")/lib.sh"
skip() { echo "t_deb: skipped: $*"; echo "0 passed, 0 failed (skipped: $*)"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "not root (it installs and purges the package; run make test as root, as CI does)"
case $BASAL in *build-asan*) skip "the package holds the release build; checked in the release pass" ;; esac
command -v apt-get >/dev/null && command -v dpkg-buildpackage >/dev/null ||
    skip "no apt-get or dpkg-buildpackage (tools/install-deps.sh --package)"
need "$FIXTURES/tiny-bias" /usr/bin/systemd-analyze /usr/bin/curl /usr/bin/setpriv
exec 9>/run/lock/basal-c-t_deb.lock
flock -w 300 9 || skip "another t_deb.sh held the lock for 5 minutes"
for p in basal-c libbasal0 libbasal-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' && skip "$p is installed on this machine: not touching it"
done
for d in /etc/basal /var/lib/basal /usr/bin/basal; do
    [ -e "$d" ] && skip "$d exists (someone's own installation): not touching it"
done
version=$(sed -n 's/^#define BASAL_VERSION "\(.*\)"/\1/p' include/basal.h)
user_before=0; getent passwd basal >/dev/null && user_before=1
group_before=0; getent group basal >/dev/null && group_before=1

# --- build and lint ---
t0=$(date +%s)
if tools/make-deb.sh >"$tmp/make-deb.out" 2>"$tmp/make-deb.err"; then ok; else bad "make-deb: $(tail -n 20 "$tmp/make-deb.err")"; finish; exit; fi
echo "make-deb: $(( $(date +%s) - t0 )) s; $(tail -n 1 "$tmp/make-deb.err")"
debs=(build/deb/basal-c_"$version"_amd64.deb build/deb/libbasal0_"$version"_amd64.deb build/deb/libbasal-dev_"$version"_amd64.deb)
for d in "${debs[@]}"; do [ -f "$d" ] && ok || bad "missing $d"; done
# make-deb ran lintian --fail-on error,warning over the three packages: its report
[ -f build/deb/lintian.txt ] && ! grep -qE '^[EW]:' build/deb/lintian.txt && ok || bad "lintian: $(grep -E '^[EW]:' build/deb/lintian.txt)"
# the dependencies come from dpkg-shlibdeps: every library the packaged binary
# links (readelf NEEDED of the .deb's own /usr/bin/basal, a CPU-only build)
deps=$(dpkg-deb -f "${debs[0]}" Depends)
mkdir -p "$tmp/x" && dpkg-deb -x "${debs[0]}" "$tmp/x"
readelf -d "$tmp/x/usr/bin/basal" | grep -q 'libcudart' && bad "the packaged binary links cudart" || ok
for lib in $(readelf -d "$tmp/x/usr/bin/basal" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    pkg=$(dpkg -S "*/x86_64-linux-gnu/$lib" 2>/dev/null | head -n 1 | cut -d: -f1)
    case ", $deps," in *", $pkg "*|*", $pkg,"*) ok ;; *) bad "Depends lacks $pkg (for $lib): $deps" ;; esac
done

# --- the file list before, the packages before ---
snapshot() {
    find /etc /usr /var/lib /opt /srv -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt \) -prune -o -print 2>/dev/null |
        grep -vxE '/etc/(passwd|group|shadow|gshadow|subuid|subgid)-?|/etc/ld\.so\.cache' | LC_ALL=C sort
}
snapshot >"$tmp/files.before"
dpkg-query -W -f='${Package}\n' | sort >"$tmp/pkgs.before"
apt_q() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 -y -q "$@"; }
cleanup_pkgs() {
    apt_q purge basal-c libbasal0 libbasal-dev >/dev/null 2>&1
    if [ "$user_before" = 0 ] && getent passwd basal >/dev/null; then userdel basal 2>/dev/null; fi
    if [ "$group_before" = 0 ] && getent group basal >/dev/null; then groupdel basal 2>/dev/null; fi
}
trap 'kill -9 "${pid:-}" 2>/dev/null; cleanup_pkgs; rm -rf "$tmp"' EXIT

# --- install ---
if apt_q install --no-install-recommends "./${debs[0]}" "./${debs[1]}" "./${debs[2]}" >"$tmp/install.log" 2>&1; then ok
else bad "apt-get install: $(tail -n 20 "$tmp/install.log")"; finish; exit; fi
dpkg-query -W -f='${Package}\n' | sort >"$tmp/pkgs.installed"
pulled=$(comm -13 "$tmp/pkgs.before" "$tmp/pkgs.installed" | grep -vxE 'basal-c|libbasal0|libbasal-dev' | tr '\n' ' ')
[ -z "$pulled" ] || echo "apt also installed: $pulled (purged again at the end)"
dpkg -L basal-c libbasal0 libbasal-dev | sort -u >"$tmp/owned"
[ "$(dpkg-query -W -f='${Version}' basal-c)" = "$version" ] && ok || bad "installed version $(dpkg-query -W -f='${Version}' basal-c), expected $version"
v=$(/usr/bin/basal --version); case $v in "$version ("*) ok ;; *) bad "basal --version: $v" ;; esac
[ "$(command -v basal)" = /usr/bin/basal ] && ok || bad "basal on PATH: $(command -v basal)"
man -w basal 2>/dev/null | grep -q '^/usr/share/man/man1/basal.1.gz$' && ok || bad "man -w basal: $(man -w basal 2>&1)"
[ -f /usr/share/bash-completion/completions/basal ] && ok || bad "no bash completion"
# the user, its home, the state directory
IFS=: read -r _ _ uid gid _ home shell <<<"$(getent passwd basal)"
[ -n "$uid" ] && [ "$uid" -lt 1000 ] && [ "$home" = /var/lib/basal ] && case $shell in */nologin|*/false) true ;; *) false ;; esac &&
    ok || bad "user basal: $(getent passwd basal)"
[ "$(stat -c '%U:%G %a' /var/lib/basal)" = "basal:basal 750" ] && ok || bad "/var/lib/basal: $(stat -c '%U:%G %a' /var/lib/basal 2>&1)"
# the configuration, a conffile
dpkg-query -W -f='${Conffiles}\n' basal-c | grep -q '^ /etc/basal/basal-serve.yml ' && ok || bad "conffiles: $(dpkg-query -W -f='${Conffiles}' basal-c)"
# the unit: installed, neither enabled nor started, valid, as the basal user, HF_HOME in /var/lib/basal
unit=/lib/systemd/system/basal.service
[ -f "$unit" ] && ok || bad "no $unit"
wants=$(find /etc/systemd/system -name 'basal.service' 2>/dev/null)
[ -z "$wants" ] && ok || bad "the unit is enabled: $wants"
if [ -d /run/systemd/system ]; then
    st=$(systemctl is-active basal 2>&1); [ "$st" != active ] && ok || bad "basal.service is running after the install"
fi
out=$(systemd-analyze verify "$unit" 2>&1); rc=$?
[ "$rc" -eq 0 ] && [ -z "$out" ] && ok || bad "systemd-analyze verify $unit: rc $rc: $out"
for want in User=basal Group=basal StateDirectory=basal Environment=HF_HOME=/var/lib/basal \
            'ExecStart=/usr/bin/basal serve --config /etc/basal/basal-serve.yml' 'Documentation=man:basal(1)'; do
    grep -qxF "$want" "$unit" && ok || bad "$unit lacks $want"
done
grep -q '^DynamicUser' "$unit" && bad "$unit still has DynamicUser" || ok

# --- as the basal user: doctor, serve, a request ---
chmod 0755 "$tmp"
cp -r "$FIXTURES/tiny-bias" "$tmp/model" && chmod -R a+rX "$tmp/model"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# as a service would run: the basal user and group, a clean environment (setpriv
# execs, so $pid is the server itself)
as_basal() {
    (cd / && exec setpriv --reuid=basal --regid=basal --init-groups --inh-caps=-all \
        env -i PATH=/usr/bin:/bin HOME=/var/lib/basal HF_HOME=/var/lib/basal "$@")
}
as_basal HF_HUB_OFFLINE=1 /usr/bin/basal doctor --model "$tmp/model" --addr "127.0.0.1:$port" >"$tmp/doctor.txt" 2>&1 && ok ||
    bad "basal doctor as basal: $(grep -v '^[✓·]' "$tmp/doctor.txt" | head -n 5)"
# the packaged configuration is one serve accepts (its model is on the Hub: without
# a network only the models line fails)
as_basal /usr/bin/basal doctor --config /etc/basal/basal-serve.yml >"$tmp/doctor-conf.txt" 2>&1
grep -q '✓ configuration basal serve accepts this configuration' "$tmp/doctor-conf.txt" && ok ||
    bad "doctor --config /etc/basal/basal-serve.yml: $(grep '✗' "$tmp/doctor-conf.txt" | head -n 3)"
(cd / && exec setpriv --reuid=basal --regid=basal --init-groups --inh-caps=-all \
    env -i PATH=/usr/bin:/bin HOME=/var/lib/basal HF_HOME=/var/lib/basal HF_HUB_OFFLINE=1 \
    /usr/bin/basal serve --model "$tmp/model" --addr "127.0.0.1:$port") >"$tmp/serve.log" 2>&1 9>&- &
pid=$!
up=0
for _ in $(seq 1 120); do curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null && { up=1; break; }; sleep 0.5; done
[ "$up" = 1 ] && ok || bad "the server did not become ready: $(tail -n 5 "$tmp/serve.log")"
[ "$(ps -o user= -p "$pid" | tr -d ' ')" = basal ] && ok || bad "the server runs as '$(ps -o user= -p "$pid")'"
cat >"$tmp/req.json" <<'EOF'
{"model": "basal-tiny", "state": "Klient: od wczoraj nie mogę zalogować się do bankowości internetowej.",
 "questions": {"dzial": {"type": "choice", "instructions": "Do którego działu skierować zgłoszenie?",
   "criteria": {"cards": "Reklamacje kart", "online": "Wsparcie bankowości elektronicznej", "loans": "Kredyty"}}}}
EOF
"$PY" - "http://127.0.0.1:$port/v1/systemone" "$tmp/req.json" "$tmp/answer.json" <<'PY' && ok || bad "request: $(tail -n 5 "$tmp/serve.log")"
import json, sys, urllib.request
body = open(sys.argv[2], "rb").read()
r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], body, {"content-type": "application/json"}), timeout=60)
assert r.status == 200, r.status
a = json.load(r)["answers"]["dzial"]
assert a["choice"] in {"cards", "online", "loans"}, a
assert list(a["probabilities"]) == ["cards", "online", "loans"], a
assert abs(sum(a["probabilities"].values()) - 1) < 1e-9, a
assert a["probabilities"][a["choice"]] == max(a["probabilities"].values()), a
json.dump(a, open(sys.argv[3], "w"))
PY
kill -TERM "$pid"; wait "$pid"; rc=$?
[ "$rc" -eq 0 ] && ok || bad "serve exit status after SIGTERM: $rc"
# libbasal-dev: examples/embed.c against the installed header and library (pkg-config, no -I/-L of the tree)
if cc -std=c11 -O2 examples/embed.c $(pkg-config --cflags --libs basal) -o "$tmp/embed" 2>"$tmp/cc.err"; then ok; else bad "cc embed.c: $(cat "$tmp/cc.err")"; fi
ldd "$tmp/embed" | grep -qE 'libbasal\.so\.0 => (/usr)?/lib/x86_64-linux-gnu/libbasal\.so\.0 ' && ok || bad "embed links: $(ldd "$tmp/embed" | grep basal)"
tr -d '\n' <"$tmp/req.json" | "$tmp/embed" "$tmp/model" >"$tmp/embed.out" 2>"$tmp/embed.err"
"$PY" - "$tmp/embed.out" "$tmp/answer.json" <<'PY' && ok || bad "embed vs serve: $(head -c 300 "$tmp/embed.out") $(cat "$tmp/embed.err")"
import json, sys
status, _, body = open(sys.argv[1]).read().partition(" ")
assert status == "200", status
assert json.loads(body)["answers"]["dzial"] == json.load(open(sys.argv[2]))
PY

# --- purge: nothing left ---
if apt_q purge basal-c libbasal0 libbasal-dev $pulled >"$tmp/purge.log" 2>&1; then ok; else bad "apt-get purge: $(tail -n 10 "$tmp/purge.log")"; fi
for p in basal-c libbasal0 libbasal-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed' && bad "$p still installed" || ok
done
# (directories: shared with other packages; the file-list comparison below covers them)
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] || continue; [ -d "$f" ] && continue; grep -qxF "$f" "$tmp/files.before" || echo "$f"; done <"$tmp/owned")
[ -z "$left" ] && ok || bad "files of the packages left after purge: $left"
snapshot >"$tmp/files.after"
new=$(comm -13 "$tmp/files.before" "$tmp/files.after")
gone=$(comm -23 "$tmp/files.before" "$tmp/files.after")
# a path another package installed meanwhile (someone's apt run) is not ours
ours=$(for f in $new; do dpkg -S "$f" >/dev/null 2>&1 || echo "$f"; done)
[ -z "$ours" ] && ok || bad "left behind after purge: $ours"
[ -z "$gone" ] && ok || bad "removed by install + purge although there before: $gone"
# the user stays (Debian: a system account is not removed, its uid would be reused)
getent passwd basal >/dev/null && ok || bad "the basal user was removed by purge"
cleanup_pkgs
if [ "$user_before" = 0 ]; then getent passwd basal >/dev/null && bad "could not remove the test's basal user" || ok; fi
trap 'rm -rf "$tmp"' EXIT
finish
