#!/usr/bin/env bash
# toga-gpu ab stops at the first run cut by its time limit (a cut run measures nothing, and the
# runs after it would be cut too), with a message that says what to do. No GPU: a stand-in
# nvidia-smi and a stand-in program that outlasts --timeout 1. Usage: toga_gpu_ab_cut_test.sh ROOT
set -uo pipefail
root="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/a" "$tmp/b"
printf '#!/bin/sh\necho "GPU 0: stand-in (UUID: GPU-0)"\n' > "$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
for d in a b; do
  printf '#!/bin/sh\nsleep 30\n' > "$tmp/$d/fastpath-bench"
  chmod +x "$tmp/$d/fastpath-bench"
  echo "stand-in $d" > "$tmp/$d/commit.txt"
done
PATH="$tmp/bin:$PATH" OUT="$tmp/out" TOGA_GPU_WORK="$tmp/work" \
  bash "$root/tools/gpu/toga-gpu" ab --base "$tmp/a" --test "$tmp/b" --program fastpath-bench --rounds 3 --timeout 1 \
  > "$tmp/log" 2>&1
rc=$?
fails=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi; }
check "exit 1 (a step failed), got $rc" '[ "$rc" = 1 ]'
check "the cut is reported with what to do" 'grep -q "was cut at its limit of 1 s, so the A/B stops here.*raise --timeout or give fewer cases" "$tmp/log"'
runs=$(grep -c ": exit 124 (timed out after 1 s)" "$tmp/log")
check "one run, not six ($runs)" '[ "$runs" = 1 ]'
[ "$fails" = 0 ] || { echo "--- toga-gpu's output:"; sed 's/^/    /' "$tmp/log" | head -40; exit 1; }
echo "toga-gpu ab stops at a cut run"
