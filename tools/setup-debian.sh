#!/usr/bin/env bash
# Installs what toga needs to build and test on Debian bookworm, and nothing that is already
# there. Uses sudo when not run as root. The CUDA toolkit (nvcc) is not a Debian package: it is
# used when found on PATH or in /usr/local/cuda/bin, and the CUDA parts are skipped otherwise.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev
          libboost-fiber1.81-dev libboost-context1.81-dev libtbb-dev
          libcli11-dev nlohmann-json3-dev libfmt-dev libbenchmark-dev zlib1g-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "toga setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "toga setup: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
