#!/usr/bin/env bash
# Writes basal(1) with help2man from the program's own help texts: `basal
# --help` gives the NAME, SYNOPSIS and the command list, and every `basal CMD
# --help` becomes a subsection of COMMANDS (usage, summary, one tagged
# paragraph per option, the notes), converted here to roff for help2man's
# --include. The page can therefore never disagree with the binary it is
# installed with. SOURCE_DATE_EPOCH, when set, dates the page (reproducible
# builds; dpkg-buildpackage sets it from debian/changelog).
set -euo pipefail
usage() {
    cat <<'EOF'
Writes the basal(1) manual page with help2man from `basal --help` and every `basal CMD --help`.
usage: tools/make-man.sh BASAL OUT
  BASAL         the basal binary whose help texts are read (e.g. build/basal)
  OUT           the roff file to write (`make install` installs it as $(MANDIR)/man1/basal.1)
  -h, --help    this text
environment:
  SOURCE_DATE_EPOCH  the page's date (default: now)
It needs help2man (Debian package help2man; tools/install-deps.sh --package).
EOF
}
case ${1:-} in
    -h|--help) usage; exit 0 ;;
    -*) echo "make-man: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac
[ $# -eq 2 ] || { echo "make-man: expected BASAL and OUT" >&2; usage >&2; exit 2; }
basal=$1 out=$2
[ -x "$basal" ] || { echo "make-man: $basal is not an executable (build it first: make)" >&2; exit 1; }
command -v help2man >/dev/null 2>&1 ||
    { echo "make-man: help2man is missing: run tools/install-deps.sh --package (or apt-get install help2man)" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^#define BASAL_VERSION "\(.*\)"/\1/p' "$root/include/basal.h")
[ -n "$version" ] || { echo "make-man: no BASAL_VERSION in include/basal.h" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One help text as roff: the usage line(s) in bold, the summary, "options:"
# and "arguments:" blocks as tagged paragraphs (.TP), the rest as filled text.
to_roff() {
    awk '
    function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); if (s ~ /^[.\047]/) s = "\\&" s; return s }
    NR == 1 { sub(/^usage: /, ""); printf ".PP\n.B %s\n", esc($0); inusage = 1; next }
    inusage && /^                    / { sub(/^ +/, ""); printf ".br\n.B \"   %s\"\n", esc($0); next }
    inusage { inusage = 0; if ($0 != "") printf ".br\n" }
    /^$/ { printf ".PP\n"; block = 0; next }
    /^[a-z][a-z ]*:$/ { printf ".PP\n.I %s\n", esc($0); block = 1; next }
    block && /^  [^ ]/ {
        line = substr($0, 3); term = line; desc = ""
        if (match(line, /  +/)) { term = substr(line, 1, RSTART - 1); desc = substr(line, RSTART + RLENGTH) }
        printf ".TP\n.B %s\n", esc(term)
        if (desc != "") printf "%s\n", esc(desc)
        next
    }
    block && /^   +[^ ]/ { sub(/^ +/, ""); printf "%s\n", esc($0); next }
    { sub(/^ +/, ""); printf "%s\n", esc($0) }'
}

cmds=$("$basal" --help | awk '/^commands:/ { f = 1; next } f && /^[^ ]/ { f = 0 } f && NF { print $1 }')
{
    echo "[COMMANDS]"
    # left-aligned: the help texts hold long JSON words that justification cannot fit
    echo ".ad l"
    echo "Every command prints its options, each with its default and environment variable, with"
    echo ".BR \"basal \\fICOMMAND\\fP \\-\\-help\" ."
    for c in $cmds; do
        case $c in help|version) continue ;; esac
        echo ".SS \"basal $c\""
        "$basal" "$c" --help | to_roff
    done
    echo "[FILES]"
    echo ".TP"
    echo ".I ./basal\\-serve.yml"
    echo "the configuration \\fBbasal serve\\fP and \\fBbasal doctor\\fP read when started in its directory"
    echo "without \\fB\\-\\-model\\fP and \\fB\\-\\-config\\fP (\\fBbasal init\\fP writes one, every key commented)."
    echo ".TP"
    echo ".I /etc/basal/basal\\-serve.yml"
    echo "the configuration of the systemd unit \\fBbasal.service\\fP (Debian package; \\fBmake install\\fP"
    echo "installs an example under share/doc/basal\\-c/examples)."
    echo ".TP"
    echo ".I ~/.cache/huggingface/hub"
    echo "the model cache shared with the Hugging Face tools (\\fB\$HF_HUB_CACHE\\fP, else \\fB\$HF_HOME\\fP/hub);"
    echo "the Debian package's service uses \\fI/var/lib/basal\\fP as \\fB\$HF_HOME\\fP."
    echo "[SEE ALSO]"
    echo "The README of basal\\-c (share/doc/basal\\-c) and the project's docs/OBSERVABILITY.md for the metrics."
} >"$tmp/include.h2m"

LC_ALL=C.UTF-8 help2man --locale=C.UTF-8 --no-info --no-discard-stderr --section=1 --manual="User Commands" --source="basal-c $version" \
    --version-string="$version" --name="exact inference server for the Basal typed-decision models" \
    --include="$tmp/include.h2m" "$basal" >"$tmp/basal.1"
mv -f "$tmp/basal.1" "$out"
