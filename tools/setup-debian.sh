#!/usr/bin/env bash
# Installs what toga needs to build and test on Debian bookworm, and nothing that is already
# there. Uses sudo when not run as root. The CUDA toolkit (nvcc) is not a Debian package: it is
# used when found on PATH or in /usr/local/cuda/bin, and the CUDA parts are skipped otherwise.
# On another system (no apt-get, or not Debian bookworm) it installs nothing, names what is
# missing and exits 0: CMake then builds what the installed packages allow (e.g. the CUDA targets
# without the simulator), and a folder .deps/usr made by tools/gpu/stage-deps.sh is used.
#
#   bash tools/setup-debian.sh          what the build and every test use (the README's commands)
#   bash tools/setup-debian.sh --plot   also python3 and python3-matplotlib, for tools/plot/*.py
#                                       (the main job, tools/run-main.sh, then draws its charts)
#
# Each package and who uses it (nothing else is installed; neither the test command nor the main
# job's table and summary need Python):
#   cmake, ninja-build, g++           configure and build (CMakePresets.json: Ninja)
#   libgtest-dev                      every test executable (GTest::gtest_main)
#   libboost-fiber1.81-dev,
#   libboost-context1.81-dev          the simulator toga::sim (Boost::fiber, Boost::context)
#   libtbb-dev                        the simulator's parallel exploration (TBB::tbb)
#   nlohmann-json3-dev                the simulator's decision files, toga-bench's JSON
#   libcli11-dev                      the command lines of toga-sim and toga-bench
#   libfmt-dev                        toga-sim's output
#   zlib1g-dev                        toga-bench's graph loader (.gz graphs)
# and with --plot:
#   python3                           tools/plot/toga-table.py and toga-plot.py
#   python3-munkres                   first: python3-matplotlib -> python3-fonttools depends on
#                                     "python3-scipy | python3-munkres"; apt takes scipy, whose
#                                     python3-pythran pulls libboost-dev (1.74), which conflicts
#                                     with the libboost1.81-dev above, and gives up (exit 100).
#                                     With munkres asked for, the alternative is met without scipy.
#   python3-matplotlib                tools/plot/toga-plot.py
set -euo pipefail
packages=(cmake ninja-build g++ libgtest-dev
          libboost-fiber1.81-dev libboost-context1.81-dev libtbb-dev
          libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev)
for arg in "$@"; do
  case "$arg" in
    --plot) packages+=(python3 python3-munkres python3-matplotlib) ;;
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
