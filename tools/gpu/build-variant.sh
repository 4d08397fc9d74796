#!/usr/bin/env bash
# On the workstation (nvcc, no GPU needed): builds one more toga-bench for an A/B on the GPU, into
# build/gpubin/toga-bench-NAME (carried with build/gpubin; issue11-run.sh's "variants" step runs
# it, VARIANTS="toga-bench-NAME ...").
#
#   bash tools/gpu/build-variant.sh NAME [REV] [-- EXTRA_CUDA_FLAGS...]
#
# REV (a commit; default: the working tree) is checked out in a throw-away worktree under
# build/variant-src; EXTRA_CUDA_FLAGS go to nvcc (e.g. -DTOGA_SB_ARENA_SHARE=4 for a build-time
# experiment). Exit 2 for a usage error, 1 when the build fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { echo "usage: $0 NAME [REV] [-- EXTRA_CUDA_FLAGS...]  (NAME: letters, digits, '-', '_')" >&2; exit 2; }
[ $# -ge 1 ] || usage
name="$1"; shift
[[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || usage
rev=""
if [ $# -ge 1 ] && [ "$1" != "--" ]; then rev="$1"; shift; fi
if [ $# -ge 1 ]; then [ "$1" = "--" ] || usage; shift; fi
flags="$*"
export PATH=/usr/local/cuda/bin:$PATH
src=.
if [ -n "$rev" ]; then
  git rev-parse --verify -q "$rev^{commit}" > /dev/null || { echo "$0: '$rev' is not a commit of this repository" >&2; exit 1; }
  src="build/variant-src/$name"
  rm -rf "$src"; git worktree prune
  git worktree add -f --detach "$src" "$rev" > /dev/null
fi
bdir="$PWD/build/gpu-$name"
cmake -S "$src" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOGA_ENABLE_CUDA=ON -DTOGA_GPU_TARGETS=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DTOGA_BUILD_SIM=OFF "-DCMAKE_CUDA_FLAGS=$flags" > /dev/null
ninja -C "$bdir" tools/toga-bench
mkdir -p build/gpubin
cp "$bdir/tools/toga-bench" "build/gpubin/toga-bench-$name"
strip "build/gpubin/toga-bench-$name" 2>/dev/null || true
echo "toga-bench-$name: ${rev:-working tree at $(git rev-parse --short HEAD)} flags '${flags}'" >> build/gpubin/variants.txt
