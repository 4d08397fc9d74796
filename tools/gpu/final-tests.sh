#!/usr/bin/env bash
# On the GPU machine, call 1 of 2: build the CUDA preset (GPU tests, toga-bench, example), run the
# GPU tests and compute-sanitizer; logs bundled into $OUT/tests.tgz. Call 2 is final-bench.sh
# (the build stays on the machine between calls).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/toga-final}"; mkdir -p "$out/logs"
export PATH=/usr/local/cuda/bin:$PATH
source tools/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/logs/gpu.txt"
cmake --preset cuda -DTOGA_BUILD_SIM=OFF > "$out/logs/configure.log" 2>&1 || { tail -30 "$out/logs/configure.log"; exit 1; }
cmake --build --preset cuda -j 16 > "$out/logs/build.log" 2>&1 || { grep -E "error" -A3 "$out/logs/build.log" | head -40; tar czf "$out/tests.tgz" -C "$out" logs; exit 1; }
echo "built in ${SECONDS}s"
timeout 300 ./build/cuda/tests/toga_gpu_tests > "$out/logs/gtest-gpu.log" 2>&1; echo "toga_gpu_tests exit $?"
grep -E "^\[  (PASSED|FAILED) |tests from .* ran|FAILED|figure|stress" "$out/logs/gtest-gpu.log" | head -40
for tool in memcheck racecheck; do
  TOGA_STRESS_THREADS=8192 TOGA_STRESS_SECONDS=0.3 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 \
    ./build/cuda/tests/toga_gpu_tests --gtest_filter='CudaStress.*:CudaHeap.Cooperative*:CudaHeap.Attributes*:CudaAllocator.CrossKernel*:CudaConformance.*:DefaultHeap.*' \
    > "$out/logs/sanitizer-$tool.log" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY' "$out/logs/sanitizer-$tool.log" | tail -1))"
done
timeout 60 ./build/cuda/tools/toga-example-lists 2>&1 | tail -3
tar czf "$out/tests.tgz" -C "$out" logs
echo "done in ${SECONDS}s"
