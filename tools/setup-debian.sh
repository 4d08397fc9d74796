#!/usr/bin/env bash
# Installs what toga needs to build and test on Debian bookworm, and nothing that is already
# there. Uses sudo when not run as root. The CUDA toolkit (nvcc) is not a Debian package: it is
# used when found on PATH or in /usr/local/cuda/bin, and the CUDA parts are skipped otherwise.
# On another system (no apt-get, or not Debian bookworm) it installs nothing, names what is
# missing and exits 0: CMake then builds what the installed packages allow (e.g. the CUDA targets
# without the simulator), and a folder .deps/usr made by tools/gpu/stage-deps.sh is used.
#
#   bash tools/setup-debian.sh          what the build and every test use (the README's commands)
#   bash tools/setup-debian.sh --plot   also python3-matplotlib, for tools/plot/toga-plot.py only
#
# Each package and who uses it (nothing else is installed; the test command needs no Python):
#   cmake, ninja-build, g++           configure and build (CMakePresets.json: Ninja)
#   libgtest-dev                      every test executable (GTest::gtest_main)
#   libboost-fiber1.81-dev,
#   libboost-context1.81-dev          the simulator toga::sim (Boost::fiber, Boost::context)
#   libtbb-dev                        the simulator's parallel exploration (TBB::tbb)
#   nlohmann-json3-dev                the simulator's decision files, toga-bench's JSON
#   libcli11-dev                      the command lines of toga-sim and toga-bench
#   libfmt-dev                        toga-sim's output
#   zlib1g-dev                        toga-bench's graph loader (.gz graphs)
set -euo pipefail
packages=(cmake ninja-build g++ libgtest-dev
          libboost-fiber1.81-dev libboost-context1.81-dev libtbb-dev
          libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev)
for arg in "$@"; do
  case "$arg" in
    --plot) packages+=(python3 python3-matplotlib) ;;
    *) echo "toga setup: unknown argument '$arg' (known: --plot)" >&2; exit 2 ;;
  esac
done
if ! command -v dpkg-query >/dev/null || ! grep -qs 'VERSION_CODENAME=bookworm' /etc/os-release; then
  echo "toga setup: not Debian bookworm; installing nothing (the build uses what is installed)"
  exit 0
fi
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
