#!/usr/bin/env bash
# On the GPU machine, with build/gpubin carried (tools/gpu/build-carried.sh): what limits each of
# issue 11's unmet targets, as ncu sees it (docs/benchmarks.md "Issue 11: what limits the
# targets"). One ncu profile per kernel: speed of light, memory tables (L2 atomics), warp state
# with every stall reason per issued instruction, scheduler statistics. Kernels:
#   fastpath-bench (launch 0 = fresh heap, launch 2 = warm): toga_alloc 16 B warm (the UAlloc fast
#   path, for reference), 4 KiB fresh and warm, 16 KiB warm (2^19 threads), 64 KiB fresh (2^17
#   threads), toga_free 4 KiB warm, bumpw_alloc 4 KiB (the floor);
#   toga-bench (toga's alloc_kernel, launch 1 = the timed one after the warm-up): T2 4 KiB, T3 hi = 4 KiB.
# Output: $OUT/r/ncu-*.txt and $OUT/limits.tgz. CASES selects a subset (names below).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
out="${OUT:-/tmp/toga-limits}"; mkdir -p "$out/r"
bin=build/gpubin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/r/gpu.txt"
cat "$bin/commit.txt" | tee "$out/r/commit.txt"
export TOGA_COMMIT="$(head -1 "$bin/commit.txt")"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats
  --section LaunchStats --section Occupancy --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio')
prof() {  # name, kernel regex, launch-skip, then the command
  local name="$1" k="$2" skip="$3"; shift 3
  echo "[$SECONDS s] ncu $name"
  timeout 150 ncu --kernel-name-base demangled --kernel-name "regex:$k" --launch-skip "$skip" --launch-count "${COUNT:-1}" "${sections[@]}" \
    "$@" > "$out/r/ncu-$name.txt" 2>&1
  local rc=$?
  if [ $rc != 0 ] && grep -qiE "metric|failed to" "$out/r/ncu-$name.txt"; then  # a metric name this ncu lacks: sections alone
    echo "  exit $rc; again without --metrics"
    timeout 150 ncu --kernel-name-base demangled --kernel-name "regex:$k" --launch-skip "$skip" --launch-count "${COUNT:-1}" "${sections[@]:0:12}" \
      --print-details all "$@" > "$out/r/ncu-$name.txt" 2>&1
    rc=$?
  fi
  echo "  exit $rc; $(grep -E '^ +Duration ' "$out/r/ncu-$name.txt" | head -1)"
}
fb="$bin/fastpath-bench"
for c in ${CASES:-a16w a4kf a4kw f4kw a16kw a64kf bump4k t2 t3}; do
  case "$c" in
    a16w) prof alloc16-warm 'toga_alloc' 2 "$fb" --sizes 16 --reps 2 --churn-sizes 16 --heap-gib 8 ;;
    a4kf) prof alloc4k-fresh 'toga_alloc' 0 "$fb" --sizes 4096 --reps 2 --churn-sizes 16 --heap-gib 8 ;;
    a4kw) prof alloc4k-warm 'toga_alloc' 2 "$fb" --sizes 4096 --reps 2 --churn-sizes 16 --heap-gib 8 ;;
    f4kw) prof free4k-warm 'toga_free' 2 "$fb" --sizes 4096 --reps 2 --churn-sizes 16 --heap-gib 8 ;;
    a16kw) prof alloc16k-warm 'toga_alloc' 2 "$fb" --sizes 16384 --threads 524288 --reps 2 --churn-sizes 16 --heap-gib 16 ;;
    a64kf) prof alloc64k-fresh 'toga_alloc' 0 "$fb" --sizes 65536 --threads 131072 --reps 2 --churn-sizes 16 --heap-gib 16 ;;
    bump4k) prof bumpw-alloc4k 'bumpw_alloc' 1 "$fb" --sizes 4096 --reps 2 --churn-sizes 16 --heap-gib 8 ;;
    # (toga-bench calibrates with two launches of 16,384 threads, then warms up: launch 3 is the
    # timed one of 1,048,576 threads; no slow budget, or ncu's slowness cuts toga)
    t2) prof t2-4k 'alloc_kernel<.*toga_policy' 3 "$bin/toga-bench" run --allocators toga --cases T2 --sizes 4K --threads 1048576 --reps 1 --no-progress --slow-budget-ms 1000000 ;;
    t3) prof t3-hi4k 'alloc_kernel<.*toga_policy' 3 "$bin/toga-bench" run --allocators toga --cases T3 --sizes 4K --threads 1048576 --reps 1 --no-progress --slow-budget-ms 1000000 ;;
  esac
done
tar czf "$out/limits.tgz" -C "$out" r
echo "[$SECONDS s] done"
