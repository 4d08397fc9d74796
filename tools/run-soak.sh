#!/usr/bin/env bash
# The long simulator campaigns, outside CI (docs/simulator.md "What CI runs and what the soak
# runs"): installs what is missing, builds the default preset, then
#   1. ctest's soak label: 100,000 schedules per allocator scenario, the planted-bug table with
#      every strategy, the deep mutants' complete delay-bounded searches;
#   2. the whole mutant catalogue against sim/mutants-baseline.json (toga-sim mutants);
#   3. SOAK_WEAK_SCHEDULES (default 100000) schedules of every allocator scenario under
#      --memory weak with every fault site;
#   4. SOAK_SHAPES_SCHEDULES (default 50000) random-shape schedules of every allocator scenario
#      that draws shapes, under --memory weak (docs/simulator.md §18: where the GROW __syncwarp
#      was found).
# Hours of CPU on 2 cores (step 1 alone about 50 minutes). Exit status 0 when nothing failed; every
# failure prints its replay command. Usage: bash tools/run-soak.sh [--skip-build]
set -euo pipefail
cd "$(dirname "$0")/.."
weak_schedules="${SOAK_WEAK_SCHEDULES:-100000}"
case "$weak_schedules" in
  '' | *[!0-9]*) echo "run-soak.sh: SOAK_WEAK_SCHEDULES='$weak_schedules' is not a whole number" >&2; exit 2 ;;
esac
shapes_schedules="${SOAK_SHAPES_SCHEDULES:-50000}"
case "$shapes_schedules" in
  '' | *[!0-9]*) echo "run-soak.sh: SOAK_SHAPES_SCHEDULES='$shapes_schedules' is not a whole number" >&2; exit 2 ;;
esac
skip_build=0
for a in "$@"; do
  case "$a" in
    --skip-build) skip_build=1 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run-soak.sh: unknown option '$a' (use --skip-build or --help)" >&2; exit 2 ;;
  esac
done
if [ "$skip_build" = 0 ]; then
  bash tools/setup-debian.sh
  source tools/env.sh
  cmake --preset default
  cmake --build --preset default
fi
sim=build/default/tools/toga-sim
[ -x "$sim" ] || { echo "run-soak.sh: $sim is missing; run without --skip-build" >&2; exit 1; }
failed=0
echo "== 1. ctest --preset soak"
ctest --preset soak || failed=1
echo "== 2. the mutant catalogue against its baseline"
"$sim" mutants --threads 0 || failed=1
echo "== 3. $weak_schedules weak-memory schedules of every allocator scenario, every fault site"
for sc in alloc-storm exhaust-recover mixed-sizes retire-race inbox-race adopt-race superbins rounds \
          failfast-race clean-race promise-race grow-while-alloc exhaust-grow-recover trim-after-churn; do
  faults=all
  # (rounds reports a failed chunk as a nullptr, and the growable scenarios count their own
  # injected failures: their soak runs without fault sites)
  case "$sc" in rounds | grow-while-alloc | exhaust-grow-recover | trim-after-churn) faults=none ;; esac
  echo "-- $sc (faults: $faults)"
  "$sim" explore --scenario "$sc" --memory weak --faults "$faults" --strategy portfolio \
    --schedules "$weak_schedules" --threads 0 || failed=1
done
echo "== 4. $shapes_schedules random-shape weak-memory schedules of every allocator scenario that draws shapes"
for sc in alloc-storm exhaust-recover mixed-sizes superbins rounds retire-race inbox-race adopt-race \
          grow-while-alloc exhaust-grow-recover trim-after-churn; do
  n="$shapes_schedules"
  [ "$sc" = exhaust-grow-recover ] && n=$(( (shapes_schedules + 9) / 10 ))  # (its schedules walk up to 32 granules)
  echo "-- $sc"
  "$sim" explore --scenario "$sc" --memory weak --shapes random --strategy portfolio --schedules "$n" --threads 0 || failed=1
done
if [ "$failed" = 0 ]; then echo "run-soak.sh: every campaign passed"; else echo "run-soak.sh: FAILED (replay commands above)"; fi
exit "$failed"
