#!/usr/bin/env bash
# `make deb`: the Debian packages basal-c, libbasal0 and libbasal-dev with
# Debian's own tools (dpkg-buildpackage, debhelper's dh; dependencies by
# dpkg-shlibdeps), then lintian. dpkg-buildpackage writes its results next to
# the source directory, so it runs in a copy of debian/ under build/deb/src
# whose rules build and install from this tree (BASAL_TOP): the packages and
# the .changes/.buildinfo land in build/deb/, and the tree stays clean. The
# build is the release build's, incremental (debian/rules explains why).
set -euo pipefail
usage() {
    cat <<'EOF'
Builds build/deb/basal-c_<version>_amd64.deb (and libbasal0, libbasal-dev) with dpkg-buildpackage, then runs lintian.
usage: tools/make-deb.sh [--no-lintian]
  --no-lintian  skip the lintian run (it takes about 20 s)
  -h, --help    this text
It needs debhelper, help2man and lintian (tools/install-deps.sh --package, which `make deb` runs first).
It reads no environment variables; the packages are CPU-only (CUDA=0).
EOF
}
lint=1
for a in "$@"; do
    case $a in
        -h|--help) usage; exit 0 ;;
        --no-lintian) lint=0 ;;
        *) echo "make-deb: unknown argument '$a'" >&2; usage >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
for t in dpkg-buildpackage dh dpkg-parsechangelog; do
    command -v "$t" >/dev/null 2>&1 ||
        { echo "make-deb: $t is missing: run tools/install-deps.sh --package (debhelper, dpkg-dev)" >&2; exit 1; }
done
version=$(sed -n 's/^#define BASAL_VERSION "\(.*\)"/\1/p' include/basal.h)
deb_version=$(dpkg-parsechangelog -l debian/changelog -S Version)
if [ "$deb_version" != "$version" ]; then
    echo "make-deb: debian/changelog is at $deb_version, include/basal.h at $version:" \
         "add a debian/changelog entry (dch -v $version) first" >&2
    exit 1
fi
out=build/deb
rm -rf "$out"
mkdir -p "$out/src" "$out/tree/build"
cp -a debian "$out/src/"
# The package is built in a copy of the tree with the release build's objects
# (build/obj, times kept), so make recompiles nothing but what CUDA=0 changes
# (a CUDA build's four CUDA-aware objects) and the developer's build/ stays as
# it was, CUDA or not. The copy is not a git checkout: the commit is passed on.
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$root" ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar -C "$root" --null -T - -cf - | tar -C "$out/tree" -xf -
    BASAL_GIT_COMMIT=$(c=$(git -C "$root" rev-parse --short HEAD) &&
        { git -C "$root" diff --quiet HEAD -- || c=$c-dirty; } && echo "$c")
    export BASAL_GIT_COMMIT
else
    tar -C "$root" --exclude=./build --exclude=./build-asan --exclude=./build-fuzz --exclude=node_modules \
        -cf - . | tar -C "$out/tree" -xf -
fi
[ -d build/obj ] && cp -a build/obj "$out/tree/build/"
echo "make-deb: building basal-c $version in $out/src (dpkg-buildpackage -b, CUDA=0, from a copy in $out/tree)" >&2
(cd "$out/src" && BASAL_TOP=$root/$out/tree dpkg-buildpackage -b -us -uc --no-sign >../build.log 2>&1) || {
    tail -n 40 "$out/build.log" >&2
    echo "make-deb: dpkg-buildpackage failed (the whole log: $out/build.log)" >&2
    exit 1
}
rm -rf "$out/src" "$out/tree"
debs=("$out"/basal-c_"$version"_amd64.deb "$out"/libbasal0_"$version"_amd64.deb "$out"/libbasal-dev_"$version"_amd64.deb)
for d in "${debs[@]}"; do
    [ -f "$d" ] || { echo "make-deb: $d was not built (see $out/build.log)" >&2; exit 1; }
done
if [ "$lint" = 1 ]; then
    command -v lintian >/dev/null 2>&1 ||
        { echo "make-deb: lintian is missing: run tools/install-deps.sh --package" >&2; exit 1; }
    # errors fail the build; every warning is either fixed or overridden in
    # debian/*.lintian-overrides with its reason
    lintian --fail-on error,warning --info "${debs[@]}" >"$out/lintian.txt" 2>&1 || {
        cat "$out/lintian.txt" >&2
        echo "make-deb: lintian found errors or warnings (above; also in $out/lintian.txt)" >&2
        exit 1
    }
    echo "make-deb: lintian: no error, no warning ($(grep -cE '^[EWIPX]: ' "$out/lintian.txt" || true) other tags; $out/lintian.txt)" >&2
fi
printf '%s\n' "${debs[@]}"
