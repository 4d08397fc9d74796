#!/usr/bin/env bash
# On the GPU machine: build tools/gpu/fastpath-bench.cu, report registers and the barriers in the
# SASS of its allocate/free kernels, and run it. Results under $OUT (or ./fastpath-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-fastpath-out}"; mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Icore/include -Ibackends/cuda/include \
  tools/gpu/fastpath-bench.cu backends/cuda/src/heap.cu -o "$out/fastpath-bench" > "$out/ptxas.txt" 2>&1 || { tail -30 "$out/ptxas.txt"; exit 1; }
grep -A2 "Function properties for .*toga_\(alloc\|free\|churn\)E" "$out/ptxas.txt" | grep -v "^--"
cuobjdump -sass "$out/fastpath-bench" > /tmp/sass.txt 2>/dev/null
python3 - /tmp/sass.txt <<'PY'
import re, sys
txt = open(sys.argv[1]).read()
for f in re.split(r'\n\s+Function : ', txt)[1:]:
    name = f.split('\n', 1)[0]
    if not re.search(r'toga_(alloc|free|churn)E|bumpw_(alloc|free)E', name): continue
    c = lambda pat: len(re.findall(pat, f))
    print(f"{re.sub(r'_ZN[0-9]+_GLOBAL__N__[0-9a-f_]+_cu_main[0-9]+', '', name)[:40]:40s} SASS instr {c(r'/\*[0-9a-f]{4}\*/ '):5d}  MEMBAR {c(r'MEMBAR'):2d}  FENCE {c(r'FENCE'):2d}  CCTL {c(r'CCTL'):2d}  ATOM {c(r'ATOMG?\.'):3d}  RED {c(r'\bREDG?\.'):2d}  CALL {c(r'\bCALL\b'):2d}")
PY
"$out/fastpath-bench" "$@" 2>&1 | tee "$out/fastpath.txt"
if [ -n "${FASTPATH_PROFILE:-}" ]; then
  nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -DFASTPATH_PROFILE -Icore/include -Ibackends/cuda/include \
    tools/gpu/fastpath-bench.cu backends/cuda/src/heap.cu -o "$out/fastpath-profile" && "$out/fastpath-profile" "$@" --reps 1 2>&1 | tee "$out/profile.txt"
fi
