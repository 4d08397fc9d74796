#!/usr/bin/env bash
# The pending A/B of refused climbs (dc9440d, a7d4b63; devlog 2026-12-02 and 2026-12-03), kept in the
# repository because .carry does not survive to a new checkout. Two halves:
#   here:    bash tools/gpu/ab-refused-climbs.sh prepare
#            (.carry/src-base = HEAD's sources with 2863ece's tbuddy.hpp and bulk_semaphore.hpp; .deps)
#   device:  run with carry [".carry/src-base", ".deps"]:  bash tools/gpu/ab-refused-climbs.sh device
# The device half builds fastpath-bench of both sides (plain and -DFASTPATH_PROFILE) and toga-bench of
# the tree on the device, runs 3 interleaved rounds with the usual arguments and with T8's shape, the
# profile builds once each, and packs binaries (fp-bins.tar.xz, bench-bin.tar.xz) and logs under $OUT.
set -u
cd "$(dirname "$0")/../.."
tg=tools/gpu/toga-gpu
case "${1:-}" in
  prepare)
    set -e
    bash $tg stage-deps
    rm -rf .carry/src-base
    bash $tg src --rev HEAD --name base >/dev/null
    for f in tbuddy.hpp bulk_semaphore.hpp; do git show 2863ece:core/include/toga/$f > .carry/src-base/core/include/toga/$f; done
    printf '%s\n%s\n' "$(git rev-parse HEAD)-base" "HEAD with 2863ece's tbuddy.hpp and bulk_semaphore.hpp (before refused climbs)" > .carry/src-base/commit.txt
    echo "ready: carry [\".carry/src-base\", \".deps\"] and run: bash tools/gpu/ab-refused-climbs.sh device"
    exit 0 ;;
  device) ;;
  *) echo "usage: bash tools/gpu/ab-refused-climbs.sh prepare|device (prepare here, device on the device machine)" >&2; exit 2 ;;
esac
[ -f .carry/src-base/commit.txt ] || { echo "no .carry/src-base: run 'bash tools/gpu/ab-refused-climbs.sh prepare' here and carry it" >&2; exit 1; }
[ -n "${OUT:-}" ] || { echo "OUT is not set (the device machine sets it): set OUT=DIR to run elsewhere" >&2; exit 2; }
C=$(head -1 .carry/src-base/commit.txt); C=${C%-base}
L=$OUT/logs; mkdir -p $L
cp "$0" $L/
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
bash $tg build --src .carry/src-base --name base --what probes --probes fastpath-bench >$L/b-base.log 2>&1 & p1=$!
bash $tg build --name test --commit $C --what probes --probes fastpath-bench >$L/b-test.log 2>&1 & p2=$!
bash $tg build --src .carry/src-base --name basep --what probes --probes fastpath-bench -- -DFASTPATH_PROFILE >$L/b-basep.log 2>&1 & p3=$!
bash $tg build --name testp --commit $C --what probes --probes fastpath-bench -- -DFASTPATH_PROFILE >$L/b-testp.log 2>&1 & p4=$!
bash $tg build --name bench --commit $C --what bench --no-tenant-kernels --jobs 12 >$L/b-bench.log 2>&1 & p5=$!
wait $p1 $p2; el "plain builds done"; tail -2 $L/b-base.log $L/b-test.log
USUAL="--threads 1048576 --sizes 16,256,4096,8192 --churn-sizes 16,4096 --heap-gib 16 --edges --edge-sizes 16,256,4096,8192 --reps 5"
T8S="--sizes 16 --churn-sizes 16 --reps 5 --full-mib 1024 --full-threads 100000 --edge-sizes 1024,4096,8192,16384"
bash $tg ab --base .carry/base --test .carry/test --program fastpath-bench --rounds 3 --timeout 60 --tag usual -- $USUAL 2>&1 | tail -60
el "ab usual done"
bash $tg ab --base .carry/base --test .carry/test --program fastpath-bench --rounds 3 --timeout 60 --tag t8shape -- $T8S 2>&1 | tail -40
el "ab t8 shape done"
wait $p3 $p4; el "profile builds done"
for s in basep testp; do timeout 60 .carry/$s/fastpath-bench $T8S > $L/prof-t8-$s.txt 2>&1; timeout 60 .carry/$s/fastpath-bench --threads 1048576 --sizes 4096,8192 --churn-sizes 16 --heap-gib 16 --edges --edge-sizes 256,4096,8192 --reps 3 > $L/prof-edges-$s.txt 2>&1; done
grep -h "exhaust\|refused\|T14\|profile" $L/prof-t8-*.txt | head -40
el "profiles done"
tar -cJf $OUT/fp-bins.tar.xz .carry/base .carry/test .carry/basep .carry/testp 2>/dev/null
while kill -0 $p5 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt 545 ]; do sleep 2; done; el "bench build: $(kill -0 $p5 2>/dev/null && echo still running || echo done)"; tail -3 $L/b-bench.log
tar -cJf $OUT/bench-bin.tar.xz .carry/bench 2>/dev/null
tar -czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
ls -la $OUT; el end
