#!/usr/bin/env bash
# toga-sim's answers to bad input (issue 13): every usage error exits 2, every bad input file
# exits 1, each with a message that says what was wrong. Usage: cli_usage_test.sh TOGA_SIM
set -uo pipefail
sim="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect RC PATTERN ARGS...: run toga-sim ARGS, check the exit code and that the output matches PATTERN.
expect() {
  local want_rc="$1" pattern="$2"
  shift 2
  "$sim" "$@" > "$tmp/out" 2>&1
  local rc=$?
  if [ "$rc" != "$want_rc" ] || ! grep -Eq -- "$pattern" "$tmp/out"; then
    echo "FAIL: toga-sim $* exited $rc (want $want_rc) or lacks /$pattern/:"
    sed 's/^/    /' "$tmp/out" | head -20
    fails=$((fails + 1))
  else
    echo "ok: toga-sim $* -> $rc: $(grep -Eo -- "$pattern" "$tmp/out" | head -1)"
  fi
}

# A real decision file (lost-update) to misuse below.
"$sim" explore --scenario lost-update --schedules 100 --save-failure "$tmp/lu.json" > /dev/null 2>&1
[ -s "$tmp/lu.json" ] || { echo "FAIL: no decision file written"; exit 1; }

# usage errors: exit 2
expect 2 "explores nothing" explore --scenario lost-update --schedules 0
expect 2 "explores nothing" demo --schedules 0
expect 2 "--seconds -1.*give 0 \(no limit\) or a positive number of seconds" explore --scenario lost-update --seconds -1
expect 1 "ended the run before its first schedule ended: give more seconds" explore --scenario alloc-storm --schedules 100 --seconds 1e-9
expect 2 "--schedules: '-5' is not a whole number" explore --scenario lost-update --schedules -5
expect 2 "--seed: '1x' is not a whole number" replay --scenario lost-update --seed 1x
expect 2 "--threads: '-1' is not a whole number" mutants --threads -1
expect 2 "has no parameter 'foo'; valid keys: lanes=4 \[1\.\.1024\], points=50" explore --scenario lost-update --set foo=1
expect 2 "has no parameter 'x'; it takes none" explore --scenario aba-stack --set x=1
expect 2 "lanes=-1 is out of range \[1\.\.1024\]" explore --scenario counter --set lanes=-1
expect 2 "lanes=-1 is out of range" replay --scenario counter --set lanes=-1 --seed 1
expect 2 "heap_kib=-1 is out of range \[4\.\.1048576\]" explore --scenario alloc-storm --set heap_kib=-1
expect 2 "heap_kib=274877906944 is out of range" explore --scenario exhaust-recover --set heap_kib=274877906944
expect 2 "threads=33 is out of range \[1\.\.32\]" explore --scenario warp-ticket --set threads=33
expect 2 "readers=5 must be below lanes=5" explore --scenario rcu --set readers=5
expect 2 "not of the form name=value" explore --scenario counter --set lanes
expect 2 "exceeds the bound of 100000000" explore --scenario lock-order --max-steps 1e18
expect 2 "exceeds the bound of 100000000" replay --scenario lock-order --seed 1 --max-steps 1000000000000000000
expect 2 "want a whole number" explore --scenario lock-order --max-steps 1.5
expect 2 "fair_after \(30000\) must be below max_steps \(20000\)" explore --scenario lock-order --fair-after 30000
expect 2 "unknown memory model 'tso'; use sc or weak" explore --scenario counter --memory tso
expect 2 "unknown fault site 'stall'; use none, all, or a comma-separated list of: stall-read-to-rmw" explore --scenario counter --faults stall
expect 2 "unknown scenario 'no-such'" explore --scenario no-such
expect 2 "unknown strategy 'dfs'" explore --scenario counter --strategy dfs
expect 2 "--scenario counter does not match the decision file .*which replays scenario lost-update" replay --scenario counter --decisions "$tmp/lu.json"
expect 2 "--set does not go with --decisions" replay --decisions "$tmp/lu.json" --set lanes=3
expect 2 "--seed does not go with --decisions" replay --decisions "$tmp/lu.json" --seed 4
expect 2 "--memory does not go with --decisions" replay --decisions "$tmp/lu.json" --memory weak
expect 2 "replay needs --scenario" replay
expect 2 "The following argument was not expected|unrecognized|not expected" explore --scenario counter --no-such-flag
# the matching scenario is accepted with a decision file
expect 1 "verdict invariant" replay --scenario lost-update --decisions "$tmp/lu.json"

# bad input files: exit 1
sed -e 's/"fair_after": [0-9]*/"fair_after": 0/' -e 's/"max_steps": [0-9]*/"max_steps": 0/' "$tmp/lu.json" > "$tmp/zero.json"
expect 1 "decision file .*zero.json': the limits must be positive" replay --decisions "$tmp/zero.json"
sed -e 's/"max_steps": [0-9]*/"max_steps": 1000000000000/' "$tmp/lu.json" > "$tmp/huge.json"
expect 1 "exceeds the bound of 100000000" replay --decisions "$tmp/huge.json"
sed -e 's/"params": {}/"params": {"lanes": -3}/' "$tmp/lu.json" > "$tmp/params.json"
grep -q '"lanes": -3' "$tmp/params.json" || sed -i -e 's/"params": {[^}]*}/"params": {"lanes": -3}/' "$tmp/params.json"
expect 1 "does not fit its scenario: scenario lost-update: lanes=-3 is out of range" replay --decisions "$tmp/params.json"
sed -e 's/"scenario": "lost-update"/"scenario": "no-such"/' "$tmp/lu.json" > "$tmp/other.json"
expect 1 "names scenario 'no-such', which does not exist" replay --decisions "$tmp/other.json"
sed -e 's/"memory": "sc"/"memory": "tso"/' "$tmp/lu.json" > "$tmp/mem.json"
expect 1 "\"memory\" is 'tso'" replay --decisions "$tmp/mem.json"
echo '{"format": "toga-sim decisions 1"' > "$tmp/broken.json"
expect 1 "is not valid JSON" replay --decisions "$tmp/broken.json"
echo '[1, 2]' > "$tmp/array.json"
expect 1 "lacks \"format\"" replay --decisions "$tmp/array.json"
expect 1 "cannot open decision file" replay --decisions "$tmp/missing.json"

# the mutant suite: usage errors, a passing run, and a regression against a baseline
expect 2 "explores nothing" mutants --schedules 0
expect 2 "is not a regular expression" mutants --filter '('
expect 2 "no mutant matches --filter 'no-such-mutant'" mutants --filter no-such-mutant
expect 1 "cannot open mutant baseline" mutants --filter '^lost-update$' --baseline "$tmp/missing-baseline.json"
expect 0 "1 of 1 mutants killed" mutants --filter '^lost-update$' --schedules 100 --baseline none
cat > "$tmp/baseline.json" <<'JSON'
{"format": "toga-sim mutants 1", "schedules": 100, "killed_at": {"ualloc.no-unlink-on-exhaustion": 5}}
JSON
# (the real baseline kills it at schedule 3,421: 100 schedules do not, so this fake baseline makes a regression)
expect 1 "ualloc.no-unlink-on-exhaustion: REGRESSION: killed at schedule 5 in the baseline, survived 100 schedules now" \
  mutants --filter '^ualloc.no-unlink-on-exhaustion$' --schedules 100 --baseline "$tmp/baseline.json"
expect 0 "1 of 1 mutants killed" mutants --filter '^lost-update$' --schedules 100 --baseline "$tmp/baseline.json" \
  --json "$tmp/mutants.json"
grep -q '"id": "lost-update"' "$tmp/mutants.json" || { echo "FAIL: mutants --json lacks the mutant"; fails=$((fails + 1)); }
echo '{"format": "toga-sim mutants 1"}' > "$tmp/bad-baseline.json"
expect 1 "mutant baseline .*bad-baseline.json'" mutants --filter '^lost-update$' --baseline "$tmp/bad-baseline.json"
# a planted wild access (ualloc.dead-near-wrap crashed the process at its schedule 5947 on the core
# of e513438): each mutant runs in a child process, so the suite reports it and goes on to the next
expect 0 "of 2 mutants killed" mutants --filter '^(ualloc.dead-near-wrap|lost-update)$' --baseline none
# the same wild access under random shapes (schedule 2262 on the core of d3a1f5d, 3 s on 2 threads;
# schedule 39411 on c68c34a's, 14 s, where the same bug's wrapped count first livelocks a schedule,
# 10776: --keep-going runs past failures that are not crashes; schedule 108061 on c8f00bb's, 11 s:
# the run starts at seed 108000 so that CI does not wait for it, and keeps 100,000 schedules for
# when the core's next change moves the crash): the crash report's replay command carries the
# drawn shape's --set values, and it crashes again (and says that the crash is the replayed
# schedule's)
expect 3 "\(a random shape\); replay it alone" explore --scenario alloc-storm --shapes random --strategy random \
  --set bug=13 --set size=1024 --set sb_shift=0 --set threads=3 --set warps=3 --set sms=1 --set pins=1 --seed 108000 \
  --schedules 100000 --threads 2 --keep-going
crash_cmd=$(grep -A1 "(a random shape); replay it alone" "$tmp/out" | tail -1 | sed 's/^ *[^ ]*toga-sim //')
case "$crash_cmd" in
  *"--set heap_kib="*"--set warps=3"*)
    read -r -a crash_args <<< "$crash_cmd"
    expect 3 "crashed the simulator \(signal 11, .*\) in the schedule this replay runs, of scenario alloc-storm" "${crash_args[@]}" ;;
  *) echo "FAIL: the random shape's crash report lacks its --set values: '$crash_cmd'"; fails=$((fails + 1)) ;;
esac
# a crash in the default-policy schedule that calibrates PCT on a drawn shape names that shape
# too: under random shapes PCT calibrates before every schedule, so a SIGSEGV sent from outside
# lands in a calibration or in a schedule about half the time each; either report must give a
# command with the shape's --set values that runs (it does not crash again: the signal came from
# outside). Up to 6 tries, until one lands in a calibration.
calib=0
for try in 1 2 3 4 5 6; do
  "$sim" explore --scenario alloc-storm --shapes random --strategy pct --schedules 1000000 --threads 1 > "$tmp/sig" 2>&1 &
  pid=$!
  sleep 1
  kill -SEGV "$pid" 2> /dev/null
  wait "$pid"
  rc=$?
  if grep -q "calibrates PCT (before schedule 0) of scenario alloc-storm (a random shape, schedule" "$tmp/sig"; then
    cmd=$(grep -A1 "calibrates PCT" "$tmp/sig" | tail -1 | sed 's/^ *[^ ]*toga-sim //')
    case "$cmd" in
      "explore --scenario alloc-storm --strategy pct --schedules 1 --threads 1 --set "*)
        read -r -a cal_args <<< "$cmd"
        expect 0 "verdicts: pass=1" "${cal_args[@]}" ;;
      *) echo "FAIL: the calibration crash report under random shapes lacks its command: '$cmd'"; fails=$((fails + 1)) ;;
    esac
    calib=1
    break
  fi
  grep -q "(a random shape); replay it alone" "$tmp/sig" || grep -q "crashed the simulator (signal 11)$" "$tmp/sig" ||
    { echo "FAIL: explore killed by SIGSEGV (exit $rc) reported neither a schedule nor a calibration:"; sed 's/^/    /' "$tmp/sig" | head -5; fails=$((fails + 1)); }
done
[ "$calib" = 1 ] && echo "ok: a calibration crash under random shapes names its shape" ||
  echo "note: 6 signals all landed outside a calibration (not a failure; the report form is checked above)"

# random shapes and shards (docs/simulator.md §18): usage errors, then a sharded run with a
# planted bug whose merged report lists the failures of one unsharded run, with replay lines
expect 2 "--shapes square: use fixed .* or random" explore --scenario counter --shapes square
expect 2 "scenario aba-stack has no parameter that random shapes draw" explore --scenario aba-stack --shapes random
expect 2 "--shapes random does not go with --strategy exhaustive" explore --scenario counter --shapes random --strategy exhaustive
expect 2 "--shard '3': want I/N" explore --scenario counter --shard 3
expect 2 "--shard 'a/b': want I/N" explore --scenario counter --shard a/b
expect 2 "--shard 4/4: shard I of N needs 0 <= I < N" explore --scenario counter --shard 4/4
expect 2 "--shard 0/0: shard I of N needs 0 <= I < N" explore --scenario counter --shard 0/0
expect 2 "more shards than schedules" explore --scenario counter --shard 0/8 --schedules 4
expect 2 "--shard does not go with --strategy exhaustive" explore --scenario counter --shard 0/2 --strategy exhaustive
expect 2 "no random shape fits the parameters given with --set" explore --scenario exhaust-recover --shapes random --set size=16 --set heap_kib=65536
expect 2 "merge needs the shards' reports|required" merge
expect 1 "cannot open '.*missing.json'" merge "$tmp/missing.json"
expect 1 "is not JSON" merge "$tmp/broken.json"
expect 1 "is not a toga-sim explore report" merge "$tmp/lu.json"
expect 0 "verdicts: pass=30" explore --scenario alloc-storm --shapes random --schedules 30 --threads 1 --json "$tmp/one.json"
# a shard cut short by --seconds: explore passes what it counted, merge calls the run incomplete
expect 0 "time limit \(--seconds\) reached: schedules 0 \.\. [0-9]+ counted" explore --scenario alloc-storm --schedules 1000000 --seconds 0.3 --threads 1 --shard 0/2 --json "$tmp/cut0.json"
expect 1 "CUT SHORT by their time limit \(--seconds\): 1 of 2 shards: 0" merge "$tmp/cut0.json"
expect 1 "shard 0 is given twice" merge "$tmp/one.json" "$tmp/one.json"
for i in 0 1 2; do
  expect 1 "shard $i/3: schedules" explore --scenario lost-update --schedules 60 --keep-going --threads 1 --shard $i/3 --json "$tmp/s$i.json"
done
"$sim" explore --scenario lost-update --schedules 60 --keep-going --threads 1 --json "$tmp/whole.json" > "$tmp/whole.txt" 2>&1
expect 1 "MISSING 1 of 3 shards: 1" merge "$tmp/s0.json" "$tmp/s2.json"
expect 1 "is from another run than .*s0.json': scenario" merge "$tmp/s0.json" "$tmp/one.json"
expect 1 "merged 3 of 3 shards: scenario lost-update" merge "$tmp/s2.json" "$tmp/s0.json" "$tmp/s1.json" --json "$tmp/merged.json"
# the merged verdict counts and failing schedules equal the unsharded run's (every shard lists
# its first 10 failures, the whole run its first 10: those must be among the merged ones)
block() { sed -n "/\"$2\": [{[]/,/[]}]/p" "$1" | grep -v "\"$2\""; }
if [ "$(block "$tmp/merged.json" verdicts)" != "$(block "$tmp/whole.json" verdicts)" ] ||
   [ "$(grep '"failures_found"' "$tmp/merged.json")" != "$(grep '"failures_found"' "$tmp/whole.json")" ]; then
  echo "FAIL: the merged shards differ from the unsharded run"; fails=$((fails + 1))
elif grep '"index"\|"replay"' "$tmp/whole.json" | grep -vxFf <(grep '"index"\|"replay"' "$tmp/merged.json") | grep -q .; then
  echo "FAIL: a failure of the unsharded run is missing from the merged report"; fails=$((fails + 1))
else
  echo "ok: merged shards match the unsharded run ($(block "$tmp/merged.json" verdicts | tr -d ' \n'))"
fi
# a replay line of a random shape runs the same schedule (it names every drawn parameter)
"$sim" explore --scenario lost-update --shapes random --schedules 50 --threads 1 > "$tmp/rs.txt" 2>&1
line=$(grep -o 'replay: .*' "$tmp/rs.txt" | head -1 | sed 's/^replay: //')
hash=$(grep -o 'trace hash [0-9a-f]*' "$tmp/rs.txt" | head -1)
eval "$line" > "$tmp/rp.txt" 2>&1
if [ -z "$line" ] || [ -z "$hash" ] || ! grep -q "$hash" "$tmp/rp.txt"; then
  echo "FAIL: the random shape's replay line ($line) did not give $hash"; fails=$((fails + 1))
else
  echo "ok: random-shape replay line gives the same trace ($hash)"
fi

# coverage (docs/simulator.md §19)
expect 2 "explores nothing" coverage --scenario alloc-storm --schedules 0
expect 2 "--shapes oval: use fixed or random" coverage --scenario alloc-storm --shapes oval
expect 2 "unknown scenario 'no-such'" coverage --scenario no-such
expect 0 "core sites ran; [0-9]+ site pairs met" coverage --scenario alloc-storm --schedules 20 --threads 1 --json "$tmp/cov.json"
grep -q '"format": "toga-sim coverage 1"' "$tmp/cov.json" || { echo "FAIL: coverage --json"; fails=$((fails + 1)); }
expect 1 "verdicts: invariant" coverage --scenario lost-update --schedules 5 --threads 1

[ "$fails" = 0 ] || { echo "$fails checks failed"; exit 1; }
echo "all usage and input errors are reported with the right exit code"
