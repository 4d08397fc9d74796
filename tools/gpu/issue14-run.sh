#!/usr/bin/env bash
# On the GPU machine, with binaries carried in build/gpubin (tools/gpu/build-carried.sh): the GPU
# checks of issue 14 (growable heaps), as docs/benchmarks.md "Issue 14: the growable heap on the
# GPU" reports them. Results in $OUT/r and $OUT/run.tgz.
# Environment: FULL=1 also runs the whole GPU test suite; REPS (default 9) for growable-bench.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/toga-issue14}"; mkdir -p "$out/r"
bin="${BIN:-build/gpubin}"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/r/gpu.txt"
cat "$bin/commit.txt" 2>/dev/null | tee "$out/r/commit.txt"
step() { echo "[$SECONDS s] $*"; }
step "GrowableHeap tests"
timeout 300 "$bin/toga_gpu_tests" --gtest_filter='GrowableHeap.*' > "$out/r/gtest-growable.log" 2>&1; echo "exit $?"
grep -E "figure|Failure|Expected|Actual|Which is|^\[  (PASSED|FAILED|  OK|RUN) " "$out/r/gtest-growable.log" | head -80
step "memcheck (growable: injected failures, options, trim to 0)"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/toga_gpu_tests" \
  --gtest_filter='GrowableHeap.InjectedDriverFailuresRollBackExactly:GrowableHeap.OptionErrors:GrowableHeap.ReleaseThreshold*' \
  > "$out/r/memcheck-growable.log" 2>&1
echo "memcheck exit $? ($(grep -E 'ERROR SUMMARY' "$out/r/memcheck-growable.log" | tail -1))"
step "growable-bench"
timeout 300 stdbuf -oL "$bin/growable-bench" --reps "${REPS:-9}" > "$out/r/growable-bench.txt" 2>&1; echo "exit $?"
cat "$out/r/growable-bench.txt"
step "toga-bench T1/T13 (registers of the core's kernels: growable heaps use the same)"
timeout 200 "$bin/toga-bench" run --allocators toga,bump-warp --cases T1,T13 --sizes 16,4096 --reps 5 --no-progress \
  --json "$out/r/toga-bench-t1-t13.json" > "$out/r/toga-bench-t1-t13.txt" 2>&1; echo "exit $?"
grep -E "^ *T1(3)? " "$out/r/toga-bench-t1-t13.txt" | head -20
if [ "${FULL:-0}" = 1 ]; then
  step "toga_gpu_tests (all)"
  timeout 300 "$bin/toga_gpu_tests" > "$out/r/gtest-gpu.log" 2>&1; echo "toga_gpu_tests exit $?"
  grep -E "^\[  (PASSED|FAILED) |tests from .* ran|\[  FAILED" "$out/r/gtest-gpu.log" | head -20
fi
tar czf "$out/run.tgz" -C "$out" r
step "done"
