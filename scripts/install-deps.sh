#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what megamoe needs to build and test on Debian 12, with apt-get, as root (libnuma-dev is
# optional for the build: without it packed weights are not interleaved over NUMA nodes).
# Skips apt entirely when everything is already present, so it is cheap to call before every build.
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --ci      also the tools CI uses (clang-format; the aarch64 cross compiler,
#                                     its C library and qemu-user for the aarch64 step) and PyTorch
#                                     (python3-torch, about 1 GB: the Python tests compare with a torch
#                                     MoE block)
#   scripts/install-deps.sh --torch   PyTorch alone (the Python examples; tests fall back to numpy)
#   scripts/install-deps.sh --bench   also oneDNN (libdnnl-dev), the optional baseline of `megamoe bench ffn`
#   scripts/install-deps.sh --fuzz    also clang + its runtime libraries (libFuzzer), for tests/fuzz/run.sh
# (ThreadSanitizer needs nothing extra: gcc's libtsan comes with gcc.)
set -euo pipefail

packages=(gcc make cmake libc6-dev pkg-config openmpi-bin libopenmpi-dev libnuma-dev python3
  python3-dev python3-numpy python3-pytest python3-mpi4py)
for flag in "$@"; do
  case "$flag" in
    --ci) packages+=(clang-format python3-torch gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) ;;
    --torch) packages+=(python3-torch) ;;
    --bench) packages+=(libdnnl-dev) ;;
    # clang only recommends (via libclang-common-14-dev) libclang-rt-14-dev: libFuzzer and the sanitizers.
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *) echo "install-deps: unknown option $flag (use --ci, --torch, --bench and/or --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root or install them with apt-get" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
