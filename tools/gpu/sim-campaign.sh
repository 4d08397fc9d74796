#!/usr/bin/env bash
# Long simulator campaigns on the device machine's 16 cores (it has no Boost or TBB): run
# tools/gpu/sim-campaign.sh pack here (copies toga-sim and the shared libraries it needs into
# build/simbin; carry it), then on the device: RUNS="scenario:schedules:memory[:first-seed[:set]] ..."
# tools/gpu/sim-campaign.sh (THREADS default: all cores; TIMEOUT per run, default 540 s).
# Each run's output lands in $OUT/sim-<scenario>-<memory>-<schedules>.txt; a summary line per run.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = pack ]; then
  rm -rf build/simbin && mkdir -p build/simbin/lib
  cp build/sim/tools/toga-sim build/simbin/ && strip build/simbin/toga-sim
  for l in $(ldd build/sim/tools/toga-sim | awk '/=>/ {print $3}' | grep -E 'boost|tbb|fmt'); do cp "$l" build/simbin/lib/; done
  git rev-parse HEAD > build/simbin/commit.txt
  du -sh build/simbin; exit 0
fi
export LD_LIBRARY_PATH="$PWD/build/simbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out="${OUT:-/tmp/sim}"; mkdir -p "$out"
threads="${THREADS:-$(nproc)}"
echo "toga-sim of $(cat build/simbin/commit.txt), $threads threads, $(nproc) cores"
for spec in ${RUNS:?set RUNS}; do
  IFS=: read -r sc n mem seed set <<< "$spec"
  f="$out/sim-$sc-$mem-$n${seed:+-s$seed}.txt"
  start=$SECONDS
  timeout "${TIMEOUT:-540}" build/simbin/toga-sim explore --scenario "$sc" --strategy portfolio --schedules "$n" --memory "$mem" \
    --threads "$threads" ${seed:+--seed "$seed"} ${set:+--set "$set"} > "$f" 2>&1
  rc=$?
  echo "$sc $mem $n seed ${seed:-1}${set:+ $set}: exit $rc in $((SECONDS - start)) s: $(grep -E 'schedules/s|FAIL|failure|verdict' "$f" | tail -2 | tr '\n' ' ')"
done
