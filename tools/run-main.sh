#!/usr/bin/env bash
# The README's main job: install what is missing, configure, build toga-bench (and toga-sim where
# the simulator is built), then run the benchmark protocol's quick profile (every case T1-T14):
# on the GPU when one is present (toga against the warp-aggregated floor bump-warp and
# cuda-malloc, with the per-thread bump as an extra row, same run), else in the fiber simulator
# (toga-sim against bump-warp-sim and bump-sim; figures are host time, for trends only).
# It prints the per-row table (120 columns), then the summary: one line per case with toga's
# ratio to each reference, pass or FAIL and the figure that matters (100 columns). The JSON with
# every repetition goes to build/default/bench-quick.json; the charts of tools/plot/toga-plot.py
# go to build/default/bench-quick-plots/ when python3 has matplotlib (else one line says how to
# get them). It installs what the build needs (tools/setup-debian.sh), nothing for plotting.
# Extra arguments go to `toga-bench run`; the exit status is toga-bench's.
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
json=build/default/bench-quick.json
plots=build/default/bench-quick-plots
rm -f "$json"  # charts only from this run's file
rc=0
$bench run --profile quick --json "$json" "$@" || rc=$?
# Charts, when this run wrote its JSON (exit 0, or 1/3/4 after the cases ran; not for --help or
# a usage error). python3 on PATH first, then Debian's (where PATH has another python3).
if [ -s "$json" ]; then
  py=""
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import matplotlib' 2>/dev/null; then py=$p; break; fi
  done
  if [ -n "$py" ]; then
    echo "Charts (tools/plot/toga-plot.py) in $plots/:"
    "$py" tools/plot/toga-plot.py "$json" --out "$plots" | sed 's/^/  /' ||
      echo "toga: toga-plot.py failed; the table, the summary and $json stand" >&2
  else
    echo "Charts (need matplotlib): bash tools/setup-debian.sh --plot && python3 tools/plot/toga-plot.py $json --out $plots"
  fi
fi
exit "$rc"
