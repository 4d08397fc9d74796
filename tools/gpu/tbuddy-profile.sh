#!/usr/bin/env bash
# On the GPU machine: builds tools/gpu/tbuddy-profile.cu and runs it for the TBuddy-bound sizes
# (superbin GROWs at 4 KiB and 64 KiB, direct TBuddy blocks at 128 KiB, 2 MiB, 4 MiB).
# Output under $OUT (or ./out): tbuddy-profile$TAG.txt. NVCC_EXTRA: more nvcc flags (e.g.
# -DTOGA_SB_STEAL_ROUNDS=0 for an A/B of a config.hpp switch); TAG names that build's output.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}; mkdir -p "$out"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvcc -std=c++20 -O3 -gencode=arch=compute_${arch},code=sm_${arch} --expt-relaxed-constexpr \
  ${NVCC_EXTRA:-} -Icore/include -Ibackends/cuda/include tools/gpu/tbuddy-profile.cu -o "$out/tbuddy-profile.bin" 2>&1 | tail -5
git rev-parse --short HEAD 2>/dev/null > "$out/tbuddy-commit.txt" || true
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$out/tbuddy-commit.txt"
"$out/tbuddy-profile.bin" ${SIZES:-4096 65536 131072 2097152 4194304} | tee "$out/tbuddy-profile${TAG:-}.txt"
rm -f "$out/tbuddy-profile.bin"
