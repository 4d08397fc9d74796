#!/usr/bin/env bash
# shellcheck disable=SC2016  # (check evaluates its single-quoted conditions later, on purpose)
# toga-gpu ab stops at the first run cut by its time limit (a cut run measures nothing, and the
# runs after it would be cut too), with a message that says what to do. No GPU: a stand-in
# nvidia-smi and a stand-in program that outlasts --timeout 1. Usage: toga_gpu_ab_cut_test.sh ROOT
set -uo pipefail
root="$1"
# shellcheck source=tests/tools/toga_gpu_stand_in.sh
. "$(dirname "$0")/toga_gpu_stand_in.sh"
stand_in fastpath-bench '#!/bin/sh
sleep 30'
PATH="$tmp/bin:$PATH" OUT="$tmp/out" TOGA_GPU_WORK="$tmp/work" \
  bash "$root/tools/gpu/toga-gpu" ab --base "$tmp/a" --test "$tmp/b" --program fastpath-bench --rounds 3 --timeout 1 \
  > "$tmp/log" 2>&1
rc=$?
check "exit 1 (a step failed), got $rc" '[ "$rc" = 1 ]'
check "the cut is reported with what to do" 'grep -q "was cut at its limit of 1 s, so the A/B stops here.*raise --timeout or give fewer cases" "$tmp/log"'
runs=$(grep -c ": exit 124 (timed out after 1 s)" "$tmp/log")
check "one run, not six ($runs)" '[ "$runs" = 1 ]'
finish "toga-gpu ab stops at a cut run"
