// A kernel without __launch_bounds__ in a target that opts out of toga::cuda's register cap
// (TOGA_NO_MAXRREGCOUNT, tests/CMakeLists.txt): what every user got before the cap.
#include "toga/cuda/heap.cuh"

namespace {
__global__ void alloc_uncapped_k(toga::cuda::heap_ref h, void** out, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) out[t] = h.allocate(16);
}
__global__ void free_uncapped_k(toga::cuda::heap_ref h, void** out, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) h.deallocate(out[t]);
}
}  // namespace

//! Registers of alloc_uncapped_k (cudaFuncGetAttributes), or -1 when the query fails.
int toga_test_uncapped_alloc_registers() {
  cudaFuncAttributes a{};
  return cudaFuncGetAttributes(&a, alloc_uncapped_k) == cudaSuccess ? a.numRegs : -1;
}

//! One launch of alloc_uncapped_k over n threads (then a free launch), timed with CUDA events (ms).
float toga_test_uncapped_alloc_ms(toga::cuda::heap_ref h, void** out, unsigned n) {
  cudaEvent_t a, b;
  (void)cudaEventCreate(&a);
  (void)cudaEventCreate(&b);
  (void)cudaEventRecord(a);
  alloc_uncapped_k<<<(n + 255) / 256, 256>>>(h, out, n);
  (void)cudaEventRecord(b);
  (void)cudaEventSynchronize(b);
  float ms = 0;
  (void)cudaEventElapsedTime(&ms, a, b);
  free_uncapped_k<<<(n + 255) / 256, 256>>>(h, out, n);
  (void)cudaDeviceSynchronize();
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  return ms;
}
