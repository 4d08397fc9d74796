#!/usr/bin/env bash
# On the GPU machine, call 2 of 2 (after final-tests.sh): toga-bench's quick profile with charts,
# fastpath-bench, per-kernel registers and barriers in the SASS, and an ncu profile of the 16 B
# allocate kernel; everything bundled into $OUT/bench.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/toga-final}"; mkdir -p "$out/r"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/r/gpu.txt"
( git rev-parse HEAD 2>/dev/null || echo "${TOGA_COMMIT:-unknown}" ) > "$out/r/commit.txt"
timeout 280 ./build/cuda/tools/toga-bench run --profile quick --no-progress --json "$out/r/bench-quick.json" "$@" \
  > "$out/r/bench-quick.txt" 2> "$out/r/bench-quick.err"
echo "toga-bench quick: exit $?"; tail -5 "$out/r/bench-quick.err"
python3 tools/plot/toga-plot.py "$out/r/bench-quick.json" --out "$out/r/plots" > "$out/r/plot.log" 2>&1; tail -2 "$out/r/plot.log"
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Icore/include -Ibackends/cuda/include \
  tools/gpu/fastpath-bench.cu backends/cuda/src/heap.cu -o "$out/fb" > "$out/r/fastpath-ptxas.txt" 2>&1
timeout 150 "$out/fb" --reps 5 --watchdog-s 20 --churn-sizes 16,64,256 > "$out/r/fastpath.txt" 2>&1; echo "fastpath-bench exit $?"
# registers (toga-bench kernels, from cudaFuncGetAttributes in T13) and barriers per kernel in the SASS
cuobjdump -sass "$out/fb" > /tmp/fb.sass 2>/dev/null
python3 tools/gpu/sass-counts.py /tmp/fb.sass 'toga|ualloc|allocator' > "$out/r/sass-counts.txt"
timeout 150 ncu --kernel-name regex:toga_alloc --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section SchedulerStats "$out/fb" --sizes 16 --reps 1 --churn-sizes 16 > "$out/r/ncu-alloc16.txt" 2>&1
echo "ncu exit $?"
timeout 120 ncu --kernel-name regex:toga_free --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  "$out/fb" --sizes 16 --reps 1 --churn-sizes 16 > "$out/r/ncu-free16.txt" 2>&1
rm -f "$out/fb"
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Icore/include -Ibackends/cuda/include tools/gpu/stats-probe.cu backends/cuda/src/heap.cu -o /tmp/sp && timeout 60 /tmp/sp > "$out/r/stats-probe.txt" 2>&1; cat "$out/r/stats-probe.txt"
tar czf "$out/bench.tgz" -C "$out" r
grep -E "T1 |T5 |T13|T8 " "$out/r/bench-quick.txt" | head -40
cat "$out/r/fastpath.txt" | tail -14
echo "done in ${SECONDS}s"
