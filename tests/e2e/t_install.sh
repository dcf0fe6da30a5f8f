#!/usr/bin/env bash
# `make install` / `make uninstall` (issue 35 item 2), into DESTDIR staging
# roots: exactly the expected files with their modes; libbasal's soname and
# links as readelf and the file system show them; basal.pc with the install
# prefix (pkg-config reads it); examples/embed.c built with pkg-config against
# the installed header and library, shared and static, answering as `basal
# decide` does; the man page found by man(1) and free of groff warnings (the
# check lintian runs) with every command's options; the bash completion as bash
# itself runs it (complete -p, COMP_WORDS/COMPREPLY), offering every command and
# exactly each command's flags as Python reads them from the help texts; the
# unit with this prefix's paths passing systemd-analyze verify; the example
# configuration accepted by `basal doctor`. `make uninstall` then leaves exactly
# the directories and files that were there before the install (a foreign file
# in a shared directory survives), also after two installs; other PREFIX
# values move every path (/usr: the unit reads /etc/basal).
set -u
. "$(dirname "$0")/lib.sh"
need "$BASAL" "$FIXTURES/tiny-bias" /usr/bin/systemd-analyze
command -v help2man >/dev/null || { echo "missing help2man (tools/install-deps.sh --package)"; echo "0 passed, 1 failed"; exit 1; }
version=$(sed -n 's/^#define BASAL_VERSION "\(.*\)"/\1/p' include/basal.h)
# make install installs the release build as it was built (CUDA or not)
cuda=1; [ -e build/obj/.cuda0 ] && cuda=0
mk() { make --no-print-directory CUDA=$cuda "$@"; }
rel=$root/build/basal   # what make install installs, whatever $BASAL is

# --- install into an empty staging root ---
d=$tmp/root
if mk install DESTDIR="$d" >"$tmp/install.log" 2>&1; then ok; else bad "make install: $(tail -n 15 "$tmp/install.log")"; finish; exit; fi
p=$d/usr/local
expected="bin/basal 755 f
include/basal.h 644 f
lib/libbasal.a 644 f
lib/libbasal.so 777 l
lib/libbasal.so.0 777 l
lib/libbasal.so.$version 644 f
lib/pkgconfig/basal.pc 644 f
lib/systemd/system/basal.service 644 f
share/basal-c/install-manifest 644 f
share/bash-completion/completions/basal 644 f
share/doc/basal-c/CHANGELOG.md 644 f
share/doc/basal-c/README.md 644 f
share/doc/basal-c/examples/basal-serve.yml 644 f
share/man/man1/basal.1 644 f"
got=$(cd "$p" && find . ! -type d -printf '%P %m %y\n' | LC_ALL=C sort)
[ "$got" = "$(LC_ALL=C sort <<<"$expected")" ] && ok || bad "installed files: $(diff <(LC_ALL=C sort <<<"$expected") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
[ -z "$(find "$d" -not -path "$p*" ! -type d)" ] && ok || bad "files outside PREFIX: $(find "$d" -not -path "$p*" ! -type d)"
cmp -s "$p/bin/basal" "$rel" && ok || bad "bin/basal is not build/basal"
"$p/bin/basal" --version | grep -q "^$version (" && ok || bad "installed basal --version: $("$p/bin/basal" --version)"
cmp -s "$p/include/basal.h" include/basal.h && ok || bad "include/basal.h differs"
# the shared library: soname, links
soname=$(readelf -d "$p/lib/libbasal.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libbasal.so.0 ] && ok || bad "SONAME '$soname'"
[ "$(readlink "$p/lib/libbasal.so.0")" = "libbasal.so.$version" ] && ok || bad "libbasal.so.0 -> $(readlink "$p/lib/libbasal.so.0")"
[ "$(readlink "$p/lib/libbasal.so")" = libbasal.so.0 ] && ok || bad "libbasal.so -> $(readlink "$p/lib/libbasal.so")"
# exported: the API only (src/api/libbasal.map)
bad_syms=$(nm -D --defined-only "$p/lib/libbasal.so.$version" | awk '$2 ~ /[TDBR]/ {print $3}' | grep -vE '^(basal_|bs_fail$|bs_strerror$)' | head -n 5)
[ -z "$bad_syms" ] && ok || bad "exported beyond the API: $bad_syms"

# --- pkg-config and a program against the installed files ---
pc() { PKG_CONFIG_SYSROOT_DIR=$d PKG_CONFIG_LIBDIR=$p/lib/pkgconfig pkg-config "$@"; }
# the file names the final location; the sysroot moves only -I/-L into the staging root
[ "$(PKG_CONFIG_LIBDIR=$p/lib/pkgconfig pkg-config --variable=prefix basal)" = /usr/local ] && ok ||
    bad "pc prefix: $(PKG_CONFIG_LIBDIR=$p/lib/pkgconfig pkg-config --variable=prefix basal)"
[ "$(pc --modversion basal)" = "$version" ] && ok || bad "pc version: $(pc --modversion basal)"
[ "$(pc --cflags basal | xargs)" = "-I$p/include" ] && ok || bad "pc cflags: $(pc --cflags basal)"
cc -std=c11 -O2 examples/embed.c $(pc --cflags --libs basal) -Wl,-rpath,"$p/lib" -o "$tmp/embed" 2>"$tmp/cc.err" && ok || bad "cc (shared): $(cat "$tmp/cc.err")"
ldd "$tmp/embed" | grep -q "libbasal.so.0 => $p/lib/libbasal.so.0" && ok || bad "embed does not use the installed libbasal: $(ldd "$tmp/embed" | grep basal)"
# the private libraries without the sysroot: it would move a CUDA build's
# -L/usr/local/cuda/lib64 into the staging root too
cc -std=c11 -O2 examples/embed.c $(pc --cflags basal) "$p/lib/libbasal.a" \
    $(PKG_CONFIG_LIBDIR=$p/lib/pkgconfig pkg-config --static --libs basal | sed 's/-L[^ ]*\/usr\/local\/lib //; s/-lbasal\b//') \
    -o "$tmp/embed-static" 2>"$tmp/cc.err" && ok || bad "cc (static): $(cat "$tmp/cc.err")"
ldd "$tmp/embed-static" | grep -q libbasal && bad "the static program links libbasal.so" || ok
req='{"model":"basal-tiny","state":"Klient: karta zablokowana po trzech błędnych PIN-ach.","questions":{"q":{"type":"choice","instructions":"Który dział?","criteria":{"cards":"Karty","online":"Bankowość","loans":"Kredyty"}},"pilne":{"type":"noul","instructions":"Czy to pilne?"}}}'
printf '%s\n' "$req" | "$rel" decide --model "$FIXTURES/tiny-bias" >"$tmp/decide.json" 2>"$tmp/decide.err" || bad "decide: $(cat "$tmp/decide.err")"
for e in embed embed-static; do
    printf '%s\n' "$req" | "$tmp/$e" "$FIXTURES/tiny-bias" >"$tmp/$e.out" 2>"$tmp/$e.err"
    "$PY" - "$tmp/$e.out" "$tmp/decide.json" <<'PY' && ok || bad "$e vs decide: $(head -c 300 "$tmp/$e.out") $(cat "$tmp/$e.err")"
import json, sys
status, _, body = open(sys.argv[1]).read().partition(" ")
assert status == "200", status
got, want = json.loads(body), json.load(open(sys.argv[2]))
assert got["answers"] == want["answers"], (got["answers"], want["answers"])
PY
done

# --- the man page ---
man -w -l "$p/share/man/man1/basal.1" >/dev/null 2>&1 && ok || bad "man cannot read the page"
[ "$(MANPATH=$p/share/man man -w basal 2>/dev/null)" = "$p/share/man/man1/basal.1" ] && ok || bad "man -w basal with MANPATH: $(MANPATH=$p/share/man man -w basal 2>&1)"
warn=$(cd "$tmp" && LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$p/share/man/man1/basal.1" 2>&1 >/dev/null)
[ -z "$warn" ] && ok || bad "groff warnings: $warn"
MANWIDTH=200 man -l "$p/share/man/man1/basal.1" 2>/dev/null | col -b >"$tmp/man.txt"
grep -q "basal-c $version" "$tmp/man.txt" && ok || bad "man page lacks the version"
cmds=$("$rel" --help | "$PY" -c '
import re, sys
t = sys.stdin.read().split("commands:\n", 1)[1].split("\n\n", 1)[0]
print(" ".join(l.split()[0] for l in t.splitlines() if l.strip()))')
[ "$(wc -w <<<"$cmds")" -ge 15 ] && ok || bad "commands read from basal --help: $cmds"
flags_of() {  # CMD: the options of `basal CMD --help`, as Python reads them
    "$rel" "$1" --help | "$PY" -c '
import re, sys
t = sys.stdin.read()
block = t.split("\noptions:\n", 1)[1] if "\noptions:\n" in t else ""
out = []
for line in block.splitlines():
    if not line.startswith("  -"):
        if line and not line.startswith(" "): break
        continue
    left = re.split(r" {2,}", line.strip())[0]
    for part in left.split(", "):
        out.append(part.split(" ")[0])
print(" ".join(sorted(set(out))))'
}
missing=
for c in $cmds; do
    case $c in help|version) continue ;; esac
    grep -q "^   basal $c\$" "$tmp/man.txt" || missing="$missing $c"
    for f in $(flags_of "$c"); do
        # the page hyphenates nothing inside option names (.B lines)
        grep -qE "^ +$f( |,|$)" "$tmp/man.txt" || grep -qE "^ +-h, $f" "$tmp/man.txt" || missing="$missing $c:$f"
    done
done
[ -z "$missing" ] && ok || bad "man page lacks:$missing"

# --- the bash completion, as bash runs it ---
comp=$p/share/bash-completion/completions/basal
complete_words() {  # WORDS...: the completions bash's function gives for the last word
    bash --norc --noprofile -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        f=$(complete -p basal | sed -n "s/.*-F \([^ ]*\) basal$/\1/p"); "$f" basal "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//'
}
[ "$(bash --norc --noprofile -c ". '$comp'; complete -p basal")" = "complete -F _basal basal" ] && ok || bad "complete -p basal: $(bash --norc -c ". '$comp'; complete -p basal" 2>&1)"
[ "$(complete_words basal '')" = "$(tr ' ' '\n' <<<"$cmds" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')" ] && ok || bad "basal <TAB>: $(complete_words basal '')"
[ "$(complete_words basal se)" = serve ] && ok || bad "basal se<TAB>: $(complete_words basal se)"
wrong=
for c in $cmds; do
    case $c in help|version) continue ;; esac
    want=$(flags_of "$c" | tr ' ' '\n' | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')
    [ "$(complete_words basal "$c" -)" = "$want" ] || wrong="$wrong $c"
    # after --color (a global option) the command is still found
    [ "$(complete_words basal --color never "$c" -)" = "$want" ] || wrong="$wrong --color:$c"
done
[ -z "$wrong" ] && ok || bad "basal CMD -<TAB> differs from CMD --help for:$wrong"
# values: the choices of the option's placeholder, files, subcommands
check_comp() { local want=$1; shift; local got; got=$(complete_words "$@"); [ "$got" = "$want" ] && ok || bad "$* <TAB>: '$got', expected '$want'"; }
check_comp "auto cpu cuda" basal serve --backend ''
check_comp "cpu cuda" basal serve --backend = c
check_comp "auto bf16 f16 f32 int8 int8w" basal decide --dtype ''
check_comp "hrrn" basal serve --schedule h
check_comp "off on" basal serve --access-log o
check_comp "--metrics" basal serve --access-log --me
check_comp "always auto never" basal --color ''
check_comp "list rm" basal models ''
check_comp "client" basal help cl
check_comp "" basal serve --threads ''
mkdir -p "$tmp/cdir/models-x" && : >"$tmp/cdir/conf-a.yml"
check_comp "$tmp/cdir/conf-a.yml" basal serve --config "$tmp/cdir/conf"
check_comp "$tmp/cdir/models-x" basal serve --model "$tmp/cdir/mo"

# --- the unit, the example configuration ---
unit=$p/lib/systemd/system/basal.service
grep -qxF 'ExecStart=/usr/local/bin/basal serve --config /usr/local/etc/basal/basal-serve.yml' "$unit" && ok || bad "unit ExecStart: $(grep ExecStart= "$unit")"
grep -qxF 'ReadOnlyPaths=/usr/local/etc/basal' "$unit" && ok || bad "unit ReadOnlyPaths: $(grep ReadOnlyPaths "$unit")"
grep -qxF 'Documentation=man:basal(1)' "$unit" && ok || bad "unit lacks Documentation=man:basal(1)"
mkdir -p "$tmp/unit"
sed "s#/usr/local/bin/basal#$p/bin/basal#" "$unit" >"$tmp/unit/basal.service"
out=$(cd "$tmp/unit" && MANPATH=$p/share/man systemd-analyze verify basal.service 2>&1); rc=$?
[ "$rc" -eq 0 ] && [ -z "$out" ] && ok || bad "systemd-analyze verify: rc $rc: $out"
ex=$p/share/doc/basal-c/examples/basal-serve.yml
grep -q '^  - repo: "mini"' "$ex" && ok || bad "the example does not serve mini: $(grep -A1 '^models:' "$ex")"
sed "s#^  - repo: \"mini\"#  - path: $FIXTURES/tiny-bias#" "$ex" >"$tmp/serve.yml"
HF_HUB_OFFLINE=1 "$rel" doctor --config "$tmp/serve.yml" --addr 127.0.0.1:0 >"$tmp/doctor.txt" 2>&1 && ok ||
    bad "doctor on the example: $(grep '✗' "$tmp/doctor.txt")"

# --- uninstall: nothing left ---
if mk uninstall DESTDIR="$d" >"$tmp/uninstall.log" 2>&1; then ok; else bad "make uninstall: $(tail -n 5 "$tmp/uninstall.log")"; fi
left=$(find "$d" -mindepth 1)
[ -z "$left" ] && ok || bad "left after uninstall: $left"
# a root with directories and a foreign file already there; two installs, one uninstall
d=$tmp/root2
mkdir -p "$d/usr/local/bin" "$d/usr/local/lib" "$d/usr/local/share/man/man1" "$d/etc"
echo keep >"$d/usr/local/bin/other-tool"
before=$(cd "$d" && find . -printf '%p %y %m\n' | LC_ALL=C sort)
mk install DESTDIR="$d" >/dev/null 2>&1 && mk install DESTDIR="$d" >/dev/null 2>&1 && ok || bad "make install twice"
# the manifest names the directories the first install created, not those that were there
want_dirs=$(for x in include lib/pkgconfig lib/systemd lib/systemd/system share/basal-c share/bash-completion \
                     share/bash-completion/completions share/doc share/doc/basal-c share/doc/basal-c/examples; do
                echo "dir /usr/local/$x"; done)
[ "$(grep '^dir ' "$d/usr/local/share/basal-c/install-manifest")" = "$want_dirs" ] && ok ||
    bad "manifest dirs: $(grep '^dir ' "$d/usr/local/share/basal-c/install-manifest" | tr '\n' ' ')"
mk uninstall DESTDIR="$d" >/dev/null 2>&1 && ok || bad "make uninstall (root2)"
after=$(cd "$d" && find . -printf '%p %y %m\n' | LC_ALL=C sort)
[ "$after" = "$before" ] && ok || bad "uninstall did not restore the tree: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | tr '\n' ' ')"
[ "$(cat "$d/usr/local/bin/other-tool")" = keep ] && ok || bad "a foreign file was touched"

# --- other prefixes ---
d=$tmp/root3
mk install DESTDIR="$d" PREFIX=/usr >/dev/null 2>&1 && ok || bad "make install PREFIX=/usr"
grep -qxF 'ExecStart=/usr/bin/basal serve --config /etc/basal/basal-serve.yml' "$d/usr/lib/systemd/system/basal.service" && ok ||
    bad "PREFIX=/usr unit: $(grep ExecStart= "$d/usr/lib/systemd/system/basal.service")"
[ "$(PKG_CONFIG_LIBDIR=$d/usr/lib/pkgconfig pkg-config --variable=prefix basal)" = /usr ] && ok || bad "PREFIX=/usr pc prefix"
mk uninstall DESTDIR="$d" PREFIX=/usr >/dev/null 2>&1 && [ -z "$(find "$d" -mindepth 1)" ] && ok || bad "PREFIX=/usr uninstall left: $(find "$d" -mindepth 1 | head)"
d=$tmp/root4
mk install DESTDIR="$d" prefix=/opt/basal INSTALL_MANIFEST= >/dev/null 2>&1 && ok || bad "make install prefix=/opt/basal"
[ -x "$d/opt/basal/bin/basal" ] && [ ! -e "$d/opt/basal/share/basal-c/install-manifest" ] && ok || bad "prefix=/opt/basal layout: $(cd "$d" && find . ! -type d)"
grep -qxF 'ExecStart=/opt/basal/bin/basal serve --config /opt/basal/etc/basal/basal-serve.yml' "$d/opt/basal/lib/systemd/system/basal.service" && ok ||
    bad "prefix=/opt/basal unit: $(grep ExecStart= "$d/opt/basal/lib/systemd/system/basal.service")"
mk uninstall DESTDIR="$d" prefix=/opt/basal INSTALL_MANIFEST= >/dev/null 2>&1 && [ -z "$(find "$d" ! -type d)" ] && ok ||
    bad "prefix=/opt/basal uninstall left files: $(find "$d" ! -type d)"
finish
