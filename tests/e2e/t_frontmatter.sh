#!/usr/bin/env bash
# The project's front matter (issue 35 item 4): LICENSE is the Apache License
# 2.0 word for word (Debian's /usr/share/common-licenses copy is the oracle)
# and debian/copyright says so; CHANGELOG.md keeps the Keep a Changelog form
# (Unreleased first, then versions with ISO dates, newest first, only its
# change types) and its newest version is include/basal.h's BASAL_VERSION, as
# is debian/changelog's (dpkg-parsechangelog reads it); SECURITY.md names the
# current minor version as supported and says how to report; CONTRIBUTING.md
# covers build, test, fuzz, benchmark and style, and every make target and
# repository path its commands use exists (make -n, the file system).
set -u
. "$(dirname "$0")/lib.sh"
need LICENSE CHANGELOG.md SECURITY.md CONTRIBUTING.md debian/changelog /usr/share/common-licenses/Apache-2.0
version=$(sed -n 's/^#define BASAL_VERSION "\(.*\)"/\1/p' include/basal.h)
[ -n "$version" ] && ok || bad "no BASAL_VERSION in include/basal.h"
strip() { sed -e 's/[[:space:]]*$//' "$1" | sed -e '/./,$!d' | tac | sed -e '/./,$!d' | tac; }
[ "$(strip LICENSE)" = "$(strip /usr/share/common-licenses/Apache-2.0)" ] && ok || bad "LICENSE is not the Apache License 2.0 text"
grep -qx 'License: Apache-2.0' debian/copyright && ok || bad "debian/copyright does not name Apache-2.0"
[ "$(dpkg-parsechangelog -l debian/changelog -S Version)" = "$version" ] && ok ||
    bad "debian/changelog is at $(dpkg-parsechangelog -l debian/changelog -S Version), basal.h at $version"
"$PY" - "$version" <<'PY' && ok || bad "CHANGELOG.md (above)"
import datetime, re, sys
version = sys.argv[1]
text = open("CHANGELOG.md").read()
lines = text.splitlines()
assert lines[0] == "# Changelog", lines[0]
assert "keepachangelog.com/en/1.1.0" in text and "semver.org" in text, "no reference to Keep a Changelog / SemVer"
heads = [l for l in lines if l.startswith("## ")]
assert heads and heads[0] == "## [Unreleased]", heads[:1]
rel = []
for h in heads[1:]:
    m = re.fullmatch(r"## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})", h)
    assert m, f"not '## [X.Y.Z] - YYYY-MM-DD': {h}"
    rel.append((tuple(map(int, m.groups()[:3])), datetime.date.fromisoformat(m.group(4))))
assert rel, "no released version"
assert ".".join(map(str, rel[0][0])) == version, f"newest version {rel[0][0]}, basal.h {version}"
assert rel == sorted(rel, reverse=True) and len({v for v, _ in rel}) == len(rel), f"versions not newest first: {rel}"
assert [d for _, d in rel] == sorted((d for _, d in rel), reverse=True), "dates not newest first"
types = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
subs = [l[4:] for l in lines if l.startswith("### ")]
assert subs and set(subs) <= types, f"change types outside Keep a Changelog's: {set(subs) - types}"
# every release has at least one entry
blocks = re.split(r"^## ", text, flags=re.M)[2:]
for b in blocks:
    assert re.search(r"^- ", b, re.M), f"a release without entries: {b.splitlines()[0]}"
PY
minor=${version%.*}
grep -qE "^\| ${minor//./\\.}\.x .*\| yes \|" SECURITY.md && ok || bad "SECURITY.md: no supported-versions row for $minor.x"
for h in '## Supported versions' '## Reporting a vulnerability'; do grep -qxF "$h" SECURITY.md && ok || bad "SECURITY.md lacks '$h'"; done
grep -qi 'privately' SECURITY.md && ok || bad "SECURITY.md does not ask for private reports"
for h in Build Test Fuzz Benchmark Style; do grep -qx "## $h" CONTRIBUTING.md && ok || bad "CONTRIBUTING.md lacks '## $h'"; done
# the commands of CONTRIBUTING.md: make targets that exist, paths that exist
blocks=$(awk '/^```sh/{f=1; next} /^```/{f=0} f' CONTRIBUTING.md)
for t in $(grep -oE '(^|[;&|] *)make( [A-Za-z_-]+=[^ ]*| -j[0-9]+)* [a-z][a-z-]*' <<<"$blocks" | awk '{print $NF}' | sort -u); do
    make -n --no-print-directory CUDA=0 "$t" >/dev/null 2>&1 && ok || bad "CONTRIBUTING.md: make $t is no target"
done
for f in $(grep -oE '(^| )(tools|bench|tests|src|deploy|docs|examples|include)/[A-Za-z0-9_./*<>-]+' <<<"$blocks" | tr -d '<>' | sort -u); do
    compgen -G "$f" >/dev/null && ok || bad "CONTRIBUTING.md names $f, which does not exist"
done
finish
