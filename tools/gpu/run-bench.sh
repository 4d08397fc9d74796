#!/usr/bin/env bash
# On the GPU machine: run toga-bench's profiles and turn the JSON into charts, all under $OUT.
#   tools/gpu/run-bench.sh TOGA_BENCH_BINARY quick|full [extra toga-bench run arguments]
# The binary is build/cuda/tools/toga-bench (built there with tools/gpu/run-gpu-tests.sh, or built on the
# development machine with -DTOGA_BUILD_SIM=OFF and carried).
set -uo pipefail
cd "$(dirname "$0")/../.."
bench="$1"; profile="$2"; shift 2
out="${OUT:-/tmp/toga-bench}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/gpu.txt"
"$bench" run --profile "$profile" --no-progress --json "$out/bench-$profile.json" "$@" \
  > "$out/bench-$profile.txt" 2> "$out/bench-$profile.err"
rc=$?
echo "toga-bench $profile: exit $rc"
cat "$out/bench-$profile.err" | tail -20
python3 tools/plot/toga-plot.py "$out/bench-$profile.json" --out "$out/plots-$profile" 2>&1 | tail -6
exit $rc
