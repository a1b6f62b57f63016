#!/usr/bin/env bash
# Installs every build and test dependency of staticify from Debian packages.
# Idempotent: a second run installs nothing and exits 0.
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache g++ git
  libtorch-dev python3-torch python3-torchvision python3-torchaudio
  python3-pytest python3-pytest-xdist
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libgtest-dev graphviz pybind11-dev python3-dev
  clang libclang-rt-14-dev
  libjemalloc-dev zlib1g-dev
)

# `scripts/setup.sh --bench` adds what bench/ needs (the plot).
if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(python3-matplotlib)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
