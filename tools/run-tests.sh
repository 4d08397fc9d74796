#!/usr/bin/env bash
# The README's test command (and CI's): install what is missing, configure, build, run every
# test. GPU tests are built where nvcc is and skip cleanly where no GPU is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup-debian.sh
source tools/env.sh
cmake --preset default
cmake --build --preset default
ctest --preset default
