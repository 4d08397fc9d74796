#!/usr/bin/env bash
# The planted bugs against the generic allocator scenarios, with fixed shapes and with random
# shapes (docs/simulator.md §18.5): for every planted bug (toga-sim list --bugs), the fewest
# schedules to its first failure over the scenarios, each explored with the portfolio strategy (or --strategy's),
# once with each scenario's default shape and once with a random shape per schedule. No targeted
# scenario takes part: the question is how many bugs the generic scenarios find by themselves.
#
# usage: tools/sim-yardstick.sh TOGA_SIM [--schedules N] [--threads T] [--bugs "1 2 ..."]
#                               [--scenarios "alloc-storm ..."] [--shapes both|fixed|random]
#                               [--strategy portfolio|guided|stall|pct|random]
# (--strategy: the strategy of every exploration, portfolio by default; guided is the
# coverage-guided stall strategy of §19.1, which the portfolio does not include)
# Prints a Markdown table (bug, area, kill with fixed shapes, kill with random shapes) and a
# summary line. Bugs whose area says "--memory weak" run under --memory weak. Exit 0 when it ran
# (kills are figures, not verdicts); 2 for a usage error.
set -uo pipefail
usage() { echo "usage: $0 TOGA_SIM [--schedules N] [--threads T] [--bugs LIST] [--scenarios LIST] [--shapes both|fixed|random] [--strategy S]" >&2; exit 2; }
[ $# -ge 1 ] || usage
sim="$1"; shift
[ -x "$sim" ] || { echo "sim-yardstick: '$sim' is not an executable toga-sim; build it (cmake --build --preset sim --target toga-sim)" >&2; exit 2; }
schedules=3000 threads=0 bugs="" shapes=both strategy=portfolio scenarios="alloc-storm exhaust-recover mixed-sizes superbins grow-while-alloc"
while [ $# -gt 0 ]; do
  case "$1" in
    --schedules) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "sim-yardstick: --schedules wants a positive whole number" >&2; exit 2; }; schedules="$2"; shift 2 ;;
    --threads) [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || { echo "sim-yardstick: --threads wants a whole number (0: all cores)" >&2; exit 2; }; threads="$2"; shift 2 ;;
    --bugs) [ $# -ge 2 ] || usage; bugs="$2"; shift 2 ;;
    --scenarios) [ $# -ge 2 ] || usage; scenarios="$2"; shift 2 ;;
    --strategy) [ $# -ge 2 ] && [[ "$2" =~ ^(portfolio|guided|stall|pct|random)$ ]] || { echo "sim-yardstick: --strategy wants portfolio, guided, stall, pct or random" >&2; exit 2; }; strategy="$2"; shift 2 ;;
    --shapes) [ $# -ge 2 ] && [[ "$2" =~ ^(both|fixed|random)$ ]] || { echo "sim-yardstick: --shapes wants both, fixed or random" >&2; exit 2; }; shapes="$2"; shift 2 ;;
    *) echo "sim-yardstick: unknown option '$1'" >&2; usage ;;
  esac
done
list=$("$sim" list --bugs) || { echo "sim-yardstick: '$sim list --bugs' failed" >&2; exit 2; }
[ -n "$bugs" ] || bugs=$(echo "$list" | awk '$1 ~ /^[0-9]+$/ {print $1}' | tr '\n' ' ')

# kill BUG MEMORY SHAPES: "schedules scenario" of the quickest kill over the scenarios, or "-".
kill() {
  local best="" where="" sc out n
  for sc in $scenarios; do
    out=$("$sim" explore --scenario "$sc" --strategy "$strategy" --schedules "$schedules" --threads "$threads" \
          --set "bug=$1" --memory "$2" --shapes "$3" 2>/dev/null)
    n=$(echo "$out" | sed -n 's/.*FIRST FAILURE at schedule \([0-9]*\).*/\1/p' | head -1)
    [ -n "$n" ] || continue
    n=$((n + 1))
    if [ -z "$best" ] || [ "$n" -lt "$best" ]; then best=$n where=$sc; fi
  done
  [ -n "$best" ] && echo "$best $where" || echo "-"
}

echo "| bug | area | fixed shapes: schedules (scenario) | random shapes: schedules (scenario) |"
echo "|---|---|---|---|"
total=0 fixed_killed=0 random_killed=0 only_random=0 only_fixed=0
for b in $bugs; do
  line=$(echo "$list" | awk -v b="$b" '$1 == b {print; exit}')
  area=$(echo "$line" | cut -c7-32 | sed -e 's/, --memory.*//' -e 's/ *$//')
  memory=sc
  echo "$line" | grep -q -- "--memory weak" && memory=weak
  f="not run" r="not run"
  [ "$shapes" != random ] && f=$(kill "$b" "$memory" fixed)
  [ "$shapes" != fixed ] && r=$(kill "$b" "$memory" random)
  total=$((total + 1))
  killed() { [ "$1" != "-" ] && [ "$1" != "not run" ]; }
  killed "$f" && fixed_killed=$((fixed_killed + 1))
  killed "$r" && random_killed=$((random_killed + 1))
  [ "$f" = "-" ] && killed "$r" && only_random=$((only_random + 1))
  killed "$f" && [ "$r" = "-" ] && only_fixed=$((only_fixed + 1))
  fmt() { case "$1" in -) echo "survived $schedules" ;; "not run") echo "not run" ;; *) echo "$1" | awk '{print $1 " (" $2 ")"}' ;; esac; }
  echo "| $b | $area$([ "$memory" = weak ] && echo ' (weak)') | $(fmt "$f") | $(fmt "$r") |"
done
echo
echo "$total planted bugs, $schedules $strategy schedules per scenario ($scenarios; shapes: $shapes): fixed shapes kill $fixed_killed," \
     "random shapes $random_killed; only random $only_random, only fixed $only_fixed"
