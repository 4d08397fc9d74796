#!/usr/bin/env bash
# The replay command that `toga-sim explore` prints must run as printed (it names the binary by
# the path it was started with) and reproduce the failure (same verdict, same trace hash); a saved, shrunk decision file must replay too. Usage: replay_cli_test.sh TOGA_SIM
set -euo pipefail
sim="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for strategy in random pct portfolio; do
  for scenario in lost-update aba-stack lock-order; do
    set +e
    "$sim" explore --scenario "$scenario" --strategy "$strategy" --schedules 5000 --seed 3 \
      --shrink --save-failure "$tmp/d.json" > "$tmp/out" 2>&1
    rc=$?
    set -e
    [ "$rc" = 1 ] || { echo "FAIL: explore $scenario/$strategy exited $rc (want 1: failure found)"; cat "$tmp/out"; exit 1; }
    cmd=$(sed -n 's/^  replay: //p' "$tmp/out")
    want=$(sed -n 's/.*trace hash \([0-9a-f]*\) (re-run: same hash).*/\1/p' "$tmp/out")
    [ -n "$cmd" ] && [ -n "$want" ] || { echo "FAIL: no replay line or hash"; cat "$tmp/out"; exit 1; }
    set +e
    got_out=$(bash -c "$cmd" 2>&1)  # the line runs as printed: it names the binary by its path
    set -e
    echo "$got_out" | grep -q "trace hash $want" || { echo "FAIL: '$cmd' did not reproduce hash $want:"; echo "$got_out"; exit 1; }
    set +e
    "$sim" replay --decisions "$tmp/d.json" > "$tmp/r" 2>&1
    rc=$?
    set -e
    [ "$rc" = 1 ] || { echo "FAIL: the saved decisions of $scenario did not fail again"; cat "$tmp/r"; exit 1; }
    echo "ok: $scenario/$strategy: '$cmd' reproduces $want; $(grep -o 'verdict [a-z-]*' "$tmp/r") from the shrunk file"
  done
done
# Usage errors are reported with a message and exit code 2.
set +e
"$sim" explore --scenario no-such-scenario > "$tmp/u" 2>&1; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "unknown scenario" "$tmp/u" || { echo "FAIL: unknown scenario not reported"; cat "$tmp/u"; exit 1; }
echo "all replay commands reproduce their failures"
