#!/usr/bin/env bash
# Installs the library of a build (libbasal.a, libbasal.so.N with its link,
# include/basal.h and a basal.pc naming the installed paths) under PREFIX,
# staged under DESTDIR when given (packaging). `make install` runs it on the
# release build.
set -eu
usage() {
    cat <<'USAGE'
usage: tools/install-lib.sh [--build DIR] [--prefix DIR] [--destdir DIR]
Installs the C library of a build for embedding (include/basal.h):
  PREFIX/lib/libbasal.a, PREFIX/lib/libbasal.so.N and libbasal.so,
  PREFIX/include/basal.h, PREFIX/lib/pkgconfig/basal.pc
  --build DIR     the build directory holding libbasal.so (default: build)
  --prefix DIR    installation prefix, written into basal.pc (default: /usr/local)
  --destdir DIR   stage everything under DIR (default: none, install in place)
  -h, --help      this text
Then: cc app.c $(pkg-config --cflags --libs basal)   (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
if PREFIX is not searched by pkg-config).
USAGE
}
build=build prefix=/usr/local destdir=
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --build) build=${2:?--build needs a directory}; shift 2 ;;
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --destdir) destdir=${2:?--destdir needs a directory}; shift 2 ;;
        *) echo "install-lib: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
case $prefix in /*) ;; *) echo "install-lib: --prefix must be an absolute path, got '$prefix'" >&2; exit 2 ;; esac
so=$(readlink "$build/libbasal.so" 2>/dev/null || true)
for f in "$build/libbasal.a" "$build/libbasal.so" "$build/basal.pc"; do
    [ -e "$f" ] || { echo "install-lib: $f is missing: build first (make)" >&2; exit 1; }
done
[ -n "$so" ] && [ -f "$build/$so" ] || { echo "install-lib: $build/libbasal.so is not a link to the library: rebuild (make)" >&2; exit 1; }
lib=$destdir$prefix/lib inc=$destdir$prefix/include
install -d "$lib/pkgconfig" "$inc"
install -m 644 "$build/libbasal.a" "$lib/"
install -m 755 "$build/$so" "$lib/"
ln -sf "$so" "$lib/libbasal.so"
install -m 644 include/basal.h "$inc/"
# the build tree's basal.pc with the installed paths
sed -e "s|^prefix=.*|prefix=$prefix|" -e 's|^libdir=.*|libdir=${prefix}/lib|' \
    -e 's|^includedir=.*|includedir=${prefix}/include|' "$build/basal.pc" > "$lib/pkgconfig/basal.pc"
chmod 644 "$lib/pkgconfig/basal.pc"
echo "install-lib: libbasal ($so), basal.h and basal.pc installed under $destdir$prefix"
