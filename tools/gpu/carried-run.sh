#!/usr/bin/env bash
# On the GPU machine, with binaries built on the workstation and carried in build/gpubin (see
# tools/gpu/build-carried.sh): GPU tests, compute-sanitizer, toga-bench (quick profile, T1/T5/T8/T13
# with cuda-malloc and bump-warp in the same run), fastpath-bench, barriers per kernel in the SASS,
# an ncu profile of the 16 B allocate kernel and the statistics probe. No build on the device:
# the whole budget goes to measurements. Everything lands in $OUT/run.tgz.
# Environment: TESTS=0 skips the GPU test suite; BENCH_CASES (default T1,T5,T8,T13) and
# BENCH_PROFILE (quick) select toga-bench's cases; RACECHECK=1 adds compute-sanitizer racecheck;
# SOAK_S=60 adds a mixed-size (16 B - 8 KiB) stress soak of that many seconds at 2^20 threads.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/toga-carried}"; mkdir -p "$out/r"
bin=build/gpubin
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/r/gpu.txt"
cat "$bin/commit.txt" 2>/dev/null | tee "$out/r/commit.txt"
step() { echo "[$SECONDS s] $*"; }
if [ "${TESTS:-1}" = 1 ]; then
  step "toga_gpu_tests"
  timeout 220 "$bin/toga_gpu_tests" > "$out/r/gtest-gpu.log" 2>&1; echo "toga_gpu_tests exit $?"
  grep -E "^\[  (PASSED|FAILED) |tests from .* ran|\[  FAILED|\[ figure" "$out/r/gtest-gpu.log" | head -40
fi
if [ -n "${SOAK_S:-}" ]; then
  step "soak ${SOAK_S} s"
  TOGA_STRESS_SECONDS="$SOAK_S" timeout $((SOAK_S + 60)) "$bin/toga_gpu_tests" --gtest_filter='CudaStress.*' > "$out/r/soak.log" 2>&1
  echo "soak exit $?"; grep -E "figure|PASSED|FAILED" "$out/r/soak.log" | head -5
fi
if [ "${RACECHECK:-0}" = 1 ]; then
  step "racecheck"
  TOGA_STRESS_THREADS=4096 TOGA_STRESS_SECONDS=0.2 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$bin/toga_gpu_tests" --gtest_filter='CudaStress.*:CudaAllocator.CrossKernel*' > "$out/r/sanitizer-racecheck.log" 2>&1
  echo "racecheck exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/r/sanitizer-racecheck.log" | tail -2 | tr '\n' ' '))"
  grep -E "FAILED|Error|error" "$out/r/sanitizer-racecheck.log" | head -5
fi
step "memcheck"
TOGA_STRESS_THREADS=8192 TOGA_STRESS_SECONDS=0.3 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$bin/toga_gpu_tests" --gtest_filter='CudaStress.*:CudaHeap.Cooperative*:CudaAllocator.CrossKernel*:DefaultHeap.*' \
  > "$out/r/sanitizer-memcheck.log" 2>&1
echo "memcheck exit $? ($(grep -E 'ERROR SUMMARY' "$out/r/sanitizer-memcheck.log" | tail -1))"
step "toga-bench"
timeout "${BENCH_TIMEOUT:-170}" "$bin/toga-bench" run --profile "${BENCH_PROFILE:-quick}" --cases "${BENCH_CASES:-T1,T5,T8,T13}" --reps 5 --no-progress ${BENCH_ARGS:-} --json "$out/r/bench-quick.json" \
  > "$out/r/bench-quick.txt" 2> "$out/r/bench-quick.err"
echo "toga-bench exit $?"; tail -3 "$out/r/bench-quick.err"
step "fastpath-bench"
timeout 80 "$bin/fastpath-bench" --reps 5 --watchdog-s 20 --churn-sizes 16,64,256 > "$out/r/fastpath.txt" 2>&1; echo "fastpath-bench exit $?"
cuobjdump -sass "$bin/fastpath-bench" > /tmp/fb.sass 2>/dev/null
python3 tools/gpu/sass-counts.py /tmp/fb.sass 'toga|ualloc|allocator|bump' > "$out/r/sass-counts.txt"
step "ncu"
timeout 70 ncu --kernel-name regex:toga_alloc --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats "$bin/fastpath-bench" --sizes 16 --reps 1 --churn-sizes 16 > "$out/r/ncu-alloc16.txt" 2>&1
echo "ncu exit $?"
step "stats-probe"
timeout 30 "$bin/stats-probe" > "$out/r/stats-probe.txt" 2>&1; echo "stats-probe exit $?"; tail -5 "$out/r/stats-probe.txt"
tar czf "$out/run.tgz" -C "$out" r
grep -E "^ *T1 |^ *T5 |^ *T8 |^ *T13" "$out/r/bench-quick.txt" | head -50
tail -16 "$out/r/fastpath.txt"
cat "$out/r/sass-counts.txt" | head -20
step "done"
