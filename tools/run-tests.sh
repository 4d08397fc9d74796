#!/usr/bin/env bash
# The README's test command (and CI's): install what is missing (tools/setup-debian.sh: only what
# the build and the tests use), configure, build, run every test (labels unit, sim, stress, fuzz,
# gpu). GPU tests: where nvcc is found they are built and run, and each one reports "Skipped"
# (GTEST_SKIP, not a failure) when no CUDA device is usable; where nvcc is not found they are not
# built at all (the configure step says so) and ctest has no gpu test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup-debian.sh
source tools/env.sh
cmake --preset default
cmake --build --preset default
ctest --preset default
