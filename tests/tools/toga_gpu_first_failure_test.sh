#!/usr/bin/env bash
# shellcheck disable=SC2016  # (check evaluates its single-quoted conditions later, on purpose)
# toga-gpu's failure note for a toga-bench run names the run's first failed case, not the last
# lines of its stderr: after a sticky CUDA error every later case fails too, and the cause is the
# first. No GPU: a stand-in nvidia-smi and a stand-in toga-bench whose T5 fails with an illegal
# address and whose T14 then fails in cudaMalloc. Usage: toga_gpu_first_failure_test.sh ROOT
set -uo pipefail
root="$1"
# shellcheck source=tests/tools/toga_gpu_stand_in.sh
. "$(dirname "$0")/toga_gpu_stand_in.sh"
stand_in toga-bench '#!/bin/sh
echo "  T1   alloc / free                  55 rows     10.9 s  (gpu)"
echo "toga-bench: T5 on the gpu backend failed: toga-bench gpu: cudaDeviceSynchronize after the toga churn kernel: cudaErrorIllegalAddress (an illegal memory access was encountered)" >&2
echo "  replay: toga-bench run --cases T5" >&2
echo "toga-bench: T14 on the gpu backend failed: toga-bench gpu: cudaMalloc of 8388608 B for T14s block pointers: cudaErrorIllegalAddress (an illegal memory access was encountered)" >&2
echo "  replay: toga-bench run --cases T14" >&2
exit 1'
PATH="$tmp/bin:$PATH" OUT="$tmp/out" TOGA_GPU_WORK="$tmp/work" \
  bash "$root/tools/gpu/toga-gpu" ab --base "$tmp/a" --test "$tmp/b" --rounds 1 --timeout 20 -- --cases T1,T5,T14 \
  > "$tmp/log" 2>&1
rc=$?
check "exit 1 (a step failed), got $rc" '[ "$rc" = 1 ]'
check "the note names the first failed case (T5's churn kernel)" 'grep -q "FAIL: toga-bench ab-base-r1: exit 1; the first of 2 failed cases (all in ab-base-r1.err): toga-bench: T5 on the gpu backend failed: .*the toga churn kernel" "$tmp/log"'
check "and the same for the test build" 'grep -q "FAIL: toga-bench ab-test-r1: exit 1; the first of 2 failed cases" "$tmp/log"'
finish "toga-gpu notes a run's first failed case"
