#!/usr/bin/env bash
# The README's main job: install what is missing, configure, build toga-bench (and toga-sim where
# the simulator is built), then run the
# benchmark protocol's quick profile (every case T1-T13) and print the table: on the GPU when
# one is present (toga against cuda-malloc and the warp-aggregated floor bump-warp, with the
# per-thread bump as an extra row, same run), else in the fiber simulator (toga-sim against
# bump-warp-sim and bump-sim; figures are host time, for trends only). It installs what the build
# needs (tools/setup-debian.sh), nothing for plotting. The JSON with every
# repetition goes to build/default/bench-quick.json. Extra arguments go to `toga-bench run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup-debian.sh
source tools/env.sh
cmake --preset default
cmake --build --preset default --target toga-bench
# toga-sim too where the simulator is built (the README names it; `cmake --install` needs it)
if grep -q '^build tools/toga-sim:' build/default/build.ninja 2>/dev/null; then
  cmake --build --preset default --target toga-sim
fi
bench=./build/default/tools/toga-bench
[ -x "$bench" ] || { echo "toga: toga-bench was not built (it needs zlib, CLI11 and nlohmann-json; see the configure output)" >&2; exit 1; }
$bench list | tail -3
exec $bench run --profile quick --json build/default/bench-quick.json "$@"
