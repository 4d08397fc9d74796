#!/usr/bin/env bash
# A/B on the GPU machine: fastpath-bench with heap_ref by value against const __grid_constant__
export PATH=/usr/local/cuda/bin:$PATH
F="-std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Icore/include -Ibackends/cuda/include tools/gpu/fastpath-bench.cu backends/cuda/src/heap.cu"
nvcc $F -o /tmp/fb-value > $OUT/ptxas-value.txt 2>&1 &
nvcc $F "-DTOGA_HEAP_PARAM=const __grid_constant__ toga::cuda::heap_ref" -o /tmp/fb-gc > $OUT/ptxas-gc.txt 2>&1 &
wait; echo "built $SECONDS s"
for v in value gc; do
  cuobjdump -sass /tmp/fb-$v > /tmp/fb-$v.sass && echo "$v" && python3 tools/gpu/sass-counts.py /tmp/fb-$v.sass 'toga_alloc|toga_free'
  grep -A2 "toga_alloc\|toga_free" $OUT/ptxas-$v.txt | grep -E "Used|stack" | head -4
done
for r in 1 2; do for v in value gc; do echo "== $v rep $r"; timeout 120 /tmp/fb-$v --sizes 16,256,4096,16384 --reps 7 --churn-sizes 16,4096 --heap-gib 24 2>&1 | grep -E "^T1|^T5"; done; done
