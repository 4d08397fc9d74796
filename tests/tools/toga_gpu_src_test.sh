#!/usr/bin/env bash
# shellcheck disable=SC2016  # (check evaluates its single-quoted conditions later, on purpose)
# toga-gpu src copies a commit's sources into .carry/src-NAME (for an A/B built on the device),
# and build --src builds from such a folder, recording its commit; bad input is refused with exit
# 1 (not a commit, no sources) or 2 (usage). No GPU, no compiler: a throwaway repository with a
# copy of toga-gpu, and build --dry-run. Usage: toga_gpu_src_test.sh ROOT
set -uo pipefail
root="$1"
# shellcheck source=tests/tools/toga_gpu_stand_in.sh
. "$(dirname "$0")/toga_gpu_stand_in.sh"
repo="$tmp/repo"
mkdir -p "$repo/tools/gpu" "$repo/core/include/toga" "$repo/backends"
cp "$root/tools/gpu/toga-gpu" "$repo/tools/gpu/"
cp "$root/tools/env.sh" "$repo/tools/" 2> /dev/null || true
echo "// first" > "$repo/core/include/toga/allocator.hpp"
echo "x" > "$repo/backends/readme"
git -C "$repo" init -q && git -C "$repo" -c user.email=t@t -c user.name=t add -A &&
  git -C "$repo" -c user.email=t@t -c user.name=t commit -qm first
first=$(git -C "$repo" rev-parse HEAD)
echo "// second" > "$repo/core/include/toga/allocator.hpp"
git -C "$repo" -c user.email=t@t -c user.name=t commit -qam second
tg() { bash "$repo/tools/gpu/toga-gpu" "$@" >> "$tmp/log" 2>&1; }
tg src --rev "$first" --name base; rc=$?
check "src exits 0, got $rc" '[ "$rc" = 0 ]'
check "the first commit's sources, not the working tree's" 'grep -q first "$repo/.carry/src-base/core/include/toga/allocator.hpp"'
check "commit.txt names the commit" '[ "$(head -1 "$repo/.carry/src-base/commit.txt")" = "$first" ]'
tg build --src "$repo/.carry/src-base" --name base --what probes --probes fastpath-bench --dry-run; rc=$?
check "build --src --dry-run exits 0, got $rc" '[ "$rc" = 0 ]'
check "build --src says what it builds and its commit" 'grep -q "from $repo/.carry/src-base ($first)" "$tmp/log"'
tg src --rev no-such-commit; rc=$?
check "src of no commit: exit 1, got $rc" '[ "$rc" = 1 ] && grep -q "not a commit of this repository" "$tmp/log"'
tg src; rc=$?
check "src without --rev: exit 2, got $rc" '[ "$rc" = 2 ]'
tg build --src "$tmp/nowhere" --what probes; rc=$?
check "build --src of a folder without sources: exit 1, got $rc" '[ "$rc" = 1 ] && grep -q "no core/include/toga/allocator.hpp there" "$tmp/log"'
tg build --src "$repo/.carry/src-base" --rev HEAD; rc=$?
check "--src with --rev: exit 2, got $rc" '[ "$rc" = 2 ] && grep -q "give one" "$tmp/log"'
finish "toga-gpu src and build --src"
