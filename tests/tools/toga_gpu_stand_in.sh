# shellcheck shell=bash
# Sourced by the toga-gpu tests that need no GPU (toga_gpu_*_test.sh): a temporary folder $tmp
# (removed on exit) with a stand-in nvidia-smi in $tmp/bin and two build folders $tmp/a and
# $tmp/b, each with a commit.txt; `stand_in PROGRAM SCRIPT` writes the same stand-in program
# into both; `check NAME CONDITION` evaluates CONDITION and counts failures in $fails;
# `finish WHAT` prints toga-gpu's output ($tmp/log) on a failure and exits 1, else says WHAT.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/a" "$tmp/b"
printf '#!/bin/sh\necho "GPU 0: stand-in (UUID: GPU-0)"\n' > "$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
for d in a b; do echo "stand-in $d" > "$tmp/$d/commit.txt"; done
stand_in() {
  local d
  for d in a b; do
    printf '%s\n' "$2" > "$tmp/$d/$1"
    chmod +x "$tmp/$d/$1"
  done
}
fails=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi; }
finish() {
  [ "$fails" = 0 ] || { echo "--- toga-gpu's output:"; sed 's/^/    /' "$tmp/log" | head -60; exit 1; }
  echo "$1"
}
