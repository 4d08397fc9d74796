#!/usr/bin/env bash
# A/B on the GPU machine: fastpath-bench with heap_ref by value against const __grid_constant__
export PATH=/usr/local/cuda/bin:$PATH
F="-std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Icore/include -Ibackends/cuda/include tools/gpu/fastpath-bench.cu backends/cuda/src/heap.cu"
nvcc $F -o /tmp/fb-value > $OUT/ptxas-value.txt 2>&1 &
nvcc $F "-DTOGA_HEAP_PARAM=const __grid_constant__ toga::cuda::heap_ref" -o /tmp/fb-gc > $OUT/ptxas-gc.txt 2>&1 &
wait; echo "built $SECONDS s"
for v in value gc; do
  cuobjdump -sass /tmp/fb-$v | python3 -c "
import re,sys
s=sys.stdin.read()
for p in re.split(r'\n\s*Function : ',s)[1:]:
  n=p.split('\n',1)[0]
  if 'toga_alloc' in n or 'toga_free' in n:
    first=p[:p.find('EXIT')]
    print('$v', 'alloc' if 'alloc' in n else 'free', 'STL before first EXIT:', first.count('STL'), 'total STL', p.count('STL'), 'LDL', p.count('LDL'))
"
  grep -A2 "toga_alloc\|toga_free" $OUT/ptxas-$v.txt | grep -E "Used|stack" | head -4
done
for r in 1 2; do for v in value gc; do echo "== $v rep $r"; timeout 120 /tmp/fb-$v --sizes 16,256,4096,16384 --reps 7 --churn-sizes 16,4096 --heap-gib 24 2>&1 | grep -E "^T1|^T5"; done; done
