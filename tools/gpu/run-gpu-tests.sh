#!/usr/bin/env bash
# On the GPU machine: configure the CUDA preset, build, run the GPU tests and print the register
# use of the allocator's device functions. Writes logs under $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/toga-gpu}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DTOGA_BUILD_SIM=OFF > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build --preset cuda -j 16 > "$out/build.log" 2>&1 || { grep -E "error" -A3 "$out/build.log" | head -40; exit 1; }
ctest --preset cuda -L gpu -E CudaStress --output-on-failure 2>&1 | tee "$out/ctest-gpu.log" | tail -6
./build/cuda/tests/toga_gpu_tests 2>&1 > "$out/gtest-gpu.log"; grep -E "^\[  (PASSED|FAILED) |tests from .* ran|figure|FAILED" "$out/gtest-gpu.log" | head -40
ctest --preset cuda -LE gpu --output-on-failure 2>&1 | tail -4
# compute-sanitizer on a reduced stress run and the heap tests
for tool in memcheck racecheck; do
  TOGA_STRESS_THREADS=8192 TOGA_STRESS_SECONDS=0.3 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 \
    ./build/cuda/tests/toga_gpu_tests --gtest_filter='CudaStress.*:CudaHeap.Cooperative*:CudaHeap.Attributes*:CudaAllocator.CrossKernel*:DefaultHeap.*' \
    > "$out/sanitizer-$tool.log" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY' "$out/sanitizer-$tool.log" | tail -1))"
done
# the example program
./build/cuda/tools/toga-example-lists 2>&1 | tail -3
