#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks for building and testing
# cpflow: LLVM/MLIR 22 (for the lowering) and NVIDIA's ptxas (PyPI
# nvidia-cuda-nvcc-cu12, for assembling the generated PTX in tests).
# Idempotent and quiet when everything is already there.
set -euo pipefail

need_apt=()
for pkg in libmlir-22-dev mlir-22-tools llvm-22-dev libclang-22-dev libpolly-22-dev \
           libzstd-dev libz3-dev libxml2-dev zlib1g-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is missing; install a Rust toolchain (rustup) first" >&2
  exit 1
fi

# ptxas from PyPI; scripts/ptxas-path prints where it is.
if ! "$(dirname "$0")/ptxas-path" >/dev/null 2>&1; then
  echo "setup: installing ptxas (pip nvidia-cuda-nvcc-cu12)" >&2
  python3 -m pip install -q --disable-pip-version-check nvidia-cuda-nvcc-cu12 >/dev/null
  "$(dirname "$0")/ptxas-path" >/dev/null
fi
