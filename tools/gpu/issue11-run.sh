#!/usr/bin/env bash
# On the GPU machine, with binaries carried in build/gpubin (tools/gpu/build-carried.sh): the
# measurements of issue 11 (large sizes: superbins and the TBuddy fast path) with cuda-malloc and
# bump-warp in the same runs, as docs/benchmarks.md "Issue 11" reports them. Results land in
# $OUT/r (text and JSON per command) and $OUT/run.tgz.
# Environment: TESTS=1 runs the GPU test suite and memcheck first; STEPS (default "t1 t1big rest
# small"; also "soak" with SOAK_S seconds, "fastpath", "t1tb", "mid" (T1/T2 at 256 B - 2 KiB, T3), "sbsmall" (T1/T2/T5/T13 at 16 B - 2 KiB, T3), "graphs", "tbuddy", "sbsweep" (superbin
# sizes SB_SIZES, default "512K 1M") and "outlined" (build/gpubin/toga-bench-outlined, when present: the
# same cases with toga's calls kept out of line), "variants" (the builds named in VARIANTS), "sharing" (superbin_sharing values SHARING), "ab" (build/gpubin/toga-bench and each build named in
# VARIANTS, tools/gpu/build-variant.sh: T1 256 B - 64 KiB, T2/T3, T9 quick, with AB_BUDGET_MS for the references)) selects the groups below; REPS (default 5); TB
# overrides the toga-bench binary.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp/toga-issue11}"; mkdir -p "$out/r"
bin=build/gpubin
export PATH=/usr/local/cuda/bin:$PATH
reps="${REPS:-5}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/r/gpu.txt"
cat "$bin/commit.txt" 2>/dev/null | tee "$out/r/commit.txt"
# the JSON's commit is the binaries' (build-carried.sh writes it), not that of the copy's .git,
# which on the GPU machine can be stale
[ -s "$bin/commit.txt" ] && export TOGA_COMMIT="$(head -1 "$bin/commit.txt")"
step() { echo "[$SECONDS s] $*"; }
if [ "${TESTS:-0}" = 1 ]; then
  step "toga_gpu_tests"
  timeout 240 "$bin/toga_gpu_tests" > "$out/r/gtest-gpu.log" 2>&1; echo "toga_gpu_tests exit $?"
  grep -E "^\[  (PASSED|FAILED) |tests from .* ran|\[  FAILED" "$out/r/gtest-gpu.log" | head -20
  step "memcheck"
  TOGA_STRESS_THREADS=8192 TOGA_STRESS_SECONDS=0.3 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bin/toga_gpu_tests" --gtest_filter='CudaStress.*:CudaHeap.Cooperative*:CudaAllocator.CrossKernel*:CudaAllocator.EverySize*:DefaultHeap.*' \
    > "$out/r/sanitizer-memcheck.log" 2>&1
  echo "memcheck exit $? ($(grep -E 'ERROR SUMMARY' "$out/r/sanitizer-memcheck.log" | tail -1))"
fi
bench() {  # name, then toga-bench run arguments
  local name="$1"; shift
  step "toga-bench $name: $*"
  timeout "${BENCH_TIMEOUT:-200}" "${TB:-$bin/toga-bench}" run --reps "$reps" --no-progress --slow-budget-ms "${BUDGET_MS:-3000}" "$@" \
    --json "$out/r/$name.json" > "$out/r/$name.txt" 2> "$out/r/$name.err"
  echo "exit $?"; grep -vE "^\s*$" "$out/r/$name.txt" | grep -E "^ *T[0-9]+ " | head -40; tail -2 "$out/r/$name.err"
}
for s in ${STEPS:-t1 t1big rest small}; do
  case "$s" in
    t1) bench t1 --cases T1 --sizes 2K,4K,8K ;;
    t1big) bench t1-16k --cases T1 --sizes 16K --threads 524288; bench t1-64k --cases T1 --sizes 64K --threads 131072 ;;
    rest) bench rest --profile quick --cases T2,T3,T5,T7,T8,T9 ;;
    small) bench small --cases T1,T13 --sizes 16,64,1K ;;
    mid) bench mid --cases T1,T2 --sizes 256,512,1K,2K; bench mid-t3 --cases T3 --profile quick ;;  # the 1 KiB class's move to superbins
    sbsmall)  # 256 B and 512 B in superbins: T1/T2/T5/T13 at 16 B - 2 KiB (the frees of 16-128 B slots on 256 B boundaries too), T3
      bench sbsmall --cases T1,T2,T5,T13 --sizes 16,64,128,256,512,1K,2K; bench sbsmall-t3 --cases T3 --profile quick ;;
    t1tb)  # T1 above the superbins (TBuddy groups, E7): 128 KiB, 512 KiB, 2 MiB at 2^15 threads
      bench t1-tbuddy --cases T1 --sizes 128K,512K,2M --threads 32768 ;;
    graphs)  # T10/T11 on every graph in build/gpubin/graphs (the full profile: 100 update rounds)
      BENCH_TIMEOUT="${GRAPHS_TIMEOUT:-400}" bench graphs --profile full --cases T10,T11 --graphs "$bin/graphs" ;;
    sbsweep)  # the superbin size (heap_options::superbin_bytes) against T1 2-64 KiB, T2, T3, T9
      for sb in ${SB_SIZES:-512K 1M}; do
        bench "sb$sb-t1" --cases T1 --sizes 2K,4K,8K --superbin-bytes "$sb"
        bench "sb$sb-t1-16k" --cases T1 --sizes 16K --threads 524288 --superbin-bytes "$sb"
        bench "sb$sb-t1-64k" --cases T1 --sizes 64K --threads 131072 --superbin-bytes "$sb"
        bench "sb$sb-rest" --profile quick --cases T2,T3,T9 --superbin-bytes "$sb"
      done ;;
    variants)  # other toga-bench builds (VARIANTS: file names in build/gpubin) on the superbin sizes
      for v in ${VARIANTS:-}; do
        TB="$bin/$v" bench "$v-t1" --cases T1 --sizes 2K,4K,8K
        TB="$bin/$v" bench "$v-t1-16k" --cases T1 --sizes 16K --threads 524288
        TB="$bin/$v" bench "$v-t1-64k" --cases T1 --sizes 64K --threads 131072
        TB="$bin/$v" bench "$v-t23" --cases T2,T3 --sizes 4K,8K
      done ;;
    ab)  # the same cases for the main build and every variant, one after the other
      for v in toga-bench ${VARIANTS:-}; do
        [ -x "$bin/$v" ] || { echo "no $bin/$v"; continue; }
        export BUDGET_MS="${AB_BUDGET_MS:-300}"
        TB="$bin/$v" bench "ab-$v-t1" --cases T1 --sizes 16,64,128,256,512,1K,2K,4K,8K
        TB="$bin/$v" bench "ab-$v-t1-16k" --cases T1 --sizes 16K --threads 524288
        TB="$bin/$v" bench "ab-$v-t1-64k" --cases T1 --sizes 64K --threads 131072
        TB="$bin/$v" bench "ab-$v-t23" --cases T2,T3 --sizes 4K,8K
        TB="$bin/$v" bench "ab-$v-t9" --cases T9 --profile quick
      done; unset BUDGET_MS ;;
    sharing)  # heap_options::superbin_sharing (SHARING, default "0 2 4"): T1 2 KiB - 64 KiB, T2 4 KiB, T9 256 B and 4 KiB
      export BUDGET_MS="${AB_BUDGET_MS:-200}"
      for k in ${SHARING:-0 2 4}; do
        bench "share$k-t1" --cases T1 --sizes 2K,4K,8K --superbin-sharing "$k"
        bench "share$k-t1-16k" --cases T1 --sizes 16K --threads 524288 --superbin-sharing "$k"
        bench "share$k-t1-64k" --cases T1 --sizes 64K --threads 131072 --superbin-sharing "$k"
        bench "share$k-t2t9" --cases T2,T9 --profile quick --sizes 256,4K --superbin-sharing "$k"
      done; unset BUDGET_MS ;;
    outlined)  # toga-bench-outlined: T10/T11 and the fast sizes
      if [ -x "$bin/toga-bench-outlined" ]; then
        TB="$bin/toga-bench-outlined" BENCH_TIMEOUT="${GRAPHS_TIMEOUT:-400}" bench graphs-outlined --profile full --cases T10,T11 --graphs "$bin/graphs"
        bench small-inline --cases T1,T5 --sizes 16,4K
        TB="$bin/toga-bench-outlined" bench small-outlined --cases T1,T5 --sizes 16,4K
      else echo "no $bin/toga-bench-outlined"; fi ;;
    tbuddy)  # the TBuddy event profile (compiled here with nvcc)
      step "tbuddy-profile"
      OUT="$out/r" timeout 300 bash tools/gpu/tbuddy-profile.sh > /dev/null 2>&1; echo "tbuddy-profile exit $?"
      grep -E "threads +(8192|65536)" "$out/r/tbuddy-profile.txt" | cut -c1-120 | head -12 ;;
    soak)  # the 2^20-thread stress with sizes 16 B .. 1 MiB for SOAK_S seconds
      step "soak ${SOAK_S:-30} s"
      TOGA_STRESS_SECONDS="${SOAK_S:-30}" timeout $(( ${SOAK_S:-30} + 90 )) "$bin/toga_gpu_tests" --gtest_filter='CudaStress.*' > "$out/r/soak.log" 2>&1
      echo "soak exit $?"; grep -E "figure|PASSED|FAILED" "$out/r/soak.log" | head -5 ;;
    fastpath)  # fastpath-bench (16 B .. 1 KiB warp paths), barriers in the SASS, registers per kernel
      step "fastpath-bench"
      timeout 80 "$bin/fastpath-bench" --reps 5 --watchdog-s 20 --churn-sizes 16,64,256 > "$out/r/fastpath.txt" 2>&1; echo "fastpath-bench exit $?"
      tail -16 "$out/r/fastpath.txt"
      cuobjdump -sass "$bin/fastpath-bench" > /tmp/fb.sass 2>/dev/null
      python3 tools/gpu/sass-counts.py /tmp/fb.sass 'toga|ualloc|allocator|bump' > "$out/r/sass-counts.txt"; head -20 "$out/r/sass-counts.txt"
      cp "$bin/fastpath-ptxas.txt" "$out/r/" 2>/dev/null ;;
  esac
done
tar czf "$out/run.tgz" -C "$out" r
step "done"
