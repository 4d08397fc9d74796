#!/usr/bin/env bash
# On the GPU machine, with build/gpubin carried: the A/B of the views' resident copies
# (docs/allocator.md §3.9). B = build/gpubin/{fastpath-bench,toga-bench} (HEAD's core), A = the
# same tools of the core before (build/gpubin/*-$BEFORE). Local stores at kernel entry from the
# SASS, fastpath-bench T1/T5 alternating A and B, toga-bench T1/T2/T3/T9 through issue11-run.sh's
# "ab" step, T10/T11 (quick) on the five graphs, and ncu of the 4 KiB free kernel. Output: $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
out=${OUT:-/tmp/resident-ab}; mkdir -p "$out"
bin=build/gpubin; before=${BEFORE:?name the before build, e.g. BEFORE=3978e57}
export TOGA_COMMIT="$(head -1 $bin/commit.txt)"
for v in fastpath-bench fastpath-bench-$before; do
  cuobjdump -sass "$bin/$v" > /tmp/$v.sass && echo "$v" | tee -a "$out/sass-stl.txt" && python3 tools/gpu/sass-counts.py /tmp/$v.sass 'toga_alloc|toga_free' | tee -a "$out/sass-stl.txt"
done
for r in 1 2; do
  for v in fastpath-bench-$before fastpath-bench; do
    echo "== $v rep $r" | tee -a "$out/fastpath-ab.txt"
    timeout 150 "$bin/$v" --sizes 16,256,4096,16384 --reps 7 --churn-sizes 16,4096 --heap-gib 24 2>&1 | grep -E "^T1|^T5|registers" | tee -a "$out/fastpath-ab.txt"
  done
done
STEPS=ab VARIANTS="toga-bench-$before" AB_BUDGET_MS=300 OUT="$out" timeout 200 bash tools/gpu/issue11-run.sh > "$out/ab.log" 2>&1
for v in toga-bench-$before toga-bench; do
  timeout 100 "$bin/$v" run --reps 5 --no-progress --profile quick --cases T10,T11 --graphs "$bin/graphs" --json "$out/graphs-$v.json" > "$out/graphs-$v.txt" 2>&1
done
timeout 120 ncu --kernel-name regex:toga_free --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  "$bin/fastpath-bench" --sizes 4096 --reps 3 --churn-sizes 16 --heap-gib 16 > "$out/ncu-free4k.txt" 2>&1
echo "done $SECONDS s"
