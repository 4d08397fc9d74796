// A second translation unit for default_heap_gpu_test.cu: kernels that use toga's default heap
// (toga::cuda::allocate / deallocate without a handle). Built without -rdc: this file has its
// own copy of the default-heap slot, which set_default_heap must reach too.
#include "default_heap_gpu_kernels.cuh"

#include "toga/cuda/heap.cuh"

namespace toga::test {

namespace {
//! Frees the blocks in `ptrs` (any thread's), after checking the tag the allocating kernel wrote.
__global__ void free_default_k(void* const* ptrs, unsigned n, unsigned* bad) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const unsigned i = (t * 7919u) % n;  // another thread's block
  void* p = ptrs[i];
  if (p != nullptr && static_cast<const unsigned*>(p)[0] != i) atomicAdd(bad, 1u);
  toga::cuda::deallocate(p);
}
__global__ void has_default_k(int* out) { *out = toga::cuda::has_default_heap() ? 1 : 0; }
}  // namespace

cudaError_t launch_free_default(void* const* ptrs, unsigned n, unsigned* bad) {
  free_default_k<<<(n + 255) / 256, 256>>>(ptrs, n, bad);
  const cudaError_t e = cudaGetLastError();
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

cudaError_t launch_has_default(int* out) {
  has_default_k<<<1, 1>>>(out);
  const cudaError_t e = cudaGetLastError();
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

}  // namespace toga::test
