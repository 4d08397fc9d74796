#!/usr/bin/env bash
# The README's main job: install what is missing, configure, build, then run toga-sim over the
# built-in scenarios (the planted bugs must be found, the correct ones must pass) and print the
# summary of each exploration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup-debian.sh
source tools/env.sh
cmake --preset default
cmake --build --preset default --target toga-sim
./build/default/tools/toga-sim list
echo
./build/default/tools/toga-sim demo --schedules "${TOGA_DEMO_SCHEDULES:-5000}"
