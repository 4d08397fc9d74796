#!/usr/bin/env bash
# On the workstation (nvcc, no GPU needed): builds the GPU binaries that tools/gpu/carried-run.sh
# runs on the device machine, into build/gpubin (carry it: `carry ["build/gpubin"]`, ~30 MiB).
# Registers per kernel of fastpath-bench (ptxas -v) land in build/gpubin/fastpath-ptxas.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOGA_ENABLE_CUDA=ON -DTOGA_GPU_TARGETS=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DTOGA_BUILD_SIM=OFF > /dev/null
ninja -C build/gpu tests/toga_gpu_tests tools/toga-bench
mkdir -p build/gpubin
cp build/gpu/tests/toga_gpu_tests build/gpu/tools/toga-bench build/gpubin/
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Icore/include -Ibackends/cuda/include \
  tools/gpu/fastpath-bench.cu backends/cuda/src/heap.cu -o build/gpubin/fastpath-bench > build/gpubin/fastpath-ptxas.txt 2>&1
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Icore/include -Ibackends/cuda/include \
  tools/gpu/stats-probe.cu backends/cuda/src/heap.cu -o build/gpubin/stats-probe
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Icore/include -Ibackends/cuda/include \
  tools/gpu/growable-bench.cu backends/cuda/src/heap.cu -o build/gpubin/growable-bench
strip build/gpubin/toga_gpu_tests build/gpubin/toga-bench 2>/dev/null || true
( git rev-parse HEAD; git status --short -- core backends tools tests | head -20 ) > build/gpubin/commit.txt
du -sh build/gpubin
