#!/usr/bin/env bash
# Debian 12 packages for building and testing basal-c (spec 07 §9). Node 20 and
# npm come with the machine image; Debian's older nodejs is installed only when
# no node is present. Only missing packages are installed (apt is not called
# at all when everything is there), so `make test` and `make run` call it
# every time.
set -euo pipefail
usage() {
    cat <<'EOF'
Installs the missing Debian 12 packages for building and testing basal-c (apt only when one is missing).
usage: tools/install-deps.sh
  -h, --help    this text
It takes no arguments and reads no environment variables; it uses sudo when not run as root.
EOF
}
if [ $# -gt 0 ]; then
    case $1 in -h|--help) usage; exit 0 ;; esac
    echo "install-deps: unknown argument '$1'" >&2; usage >&2; exit 2
fi
pkgs=(build-essential pkg-config libjansson-dev libutf8proc-dev libyaml-dev libuv1-dev libh2o-dev
      libopenblas-dev python3 python3-numpy python3-torch python3-jsonschema python3-jinja2)
pkgs+=(clang libclang-rt-14-dev)  # make fuzz: libFuzzer targets (tests/fuzz)
pkgs+=(libcurl4-openssl-dev)      # basal client (HTTP via libcurl)
pkgs+=(libssl-dev)                # basal benchmark: SHA-256 of workload files (libcrypto)
pkgs+=(nginx yamllint)            # tests/e2e/t_scaleout.sh (replicas behind nginx), deploy/k8s manifest lint
pkgs+=(chromium)                  # tests/e2e/t_benchmark.sh, t_playground.sh: pages in a headless browser (puppeteer-core)
pkgs+=(python3-sklearn)           # tests/e2e/t_eval.sh: the second oracle of basal eval's metrics
pkgs+=(systemd curl)              # tests/e2e/t_systemd.sh: systemd-analyze verify/security; the unit's curl readiness probe
pkgs+=(universal-ctags)           # tests/e2e/t_function_length.sh: function extents (tools/long-functions.py)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs npm)
if ! command -v dpkg-query >/dev/null 2>&1; then
    # not Debian: the build finds out what is missing; say where the list is
    echo "install-deps: no dpkg here; the packages needed are listed in tools/install-deps.sh" >&2
    exit 0
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "install-deps: missing Debian packages: ${missing[*]}" >&2
            echo "install-deps: run as root: apt-get install ${missing[*]}  (or install sudo)" >&2
            exit 1
        fi
        sudo="sudo"
    fi
    echo "install-deps: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
