// Prints toga's statistics after allocation rounds of 24 B, 1000 B and 5000 B (65536 threads, a
// 1 GiB heap, frees by another kernel), to check used <= peak <= capacity on the GPU.
//   nvcc -std=c++20 -O3 -arch=sm_90 -Icore/include -Ibackends/cuda/include tools/gpu/stats-probe.cu backends/cuda/src/heap.cu
#include <cstdio>
#include "toga/cuda/heap.cuh"
__global__ void __launch_bounds__(256, 4) a_k(toga::cuda::heap_ref h, void** out, std::size_t bytes) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = h.allocate(bytes);
}
__global__ void __launch_bounds__(256, 4) f_k(toga::cuda::heap_ref h, void** in) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  h.deallocate(in[(i * 7919u) % 65536u]);
}
int main() {
  toga::cuda::heap h(1ull << 30);
  void** d = nullptr;
  cudaMalloc(&d, 65536 * sizeof(void*));
  for (std::size_t bytes : {24ul, 1000ul, 5000ul}) {
    a_k<<<256, 256>>>(h.ref(), d, bytes);
    cudaDeviceSynchronize();
    const auto s = h.stats();
    std::printf("%zu B: used %llu peak %llu buddy %llu buddy_high %llu failed %llu chunks %llu\n", bytes, (unsigned long long)s.used_bytes,
                (unsigned long long)s.peak_used_bytes, (unsigned long long)s.buddy_bytes, (unsigned long long)s.buddy_high_bytes,
                (unsigned long long)s.failed, (unsigned long long)s.chunks);
    f_k<<<256, 256>>>(h.ref(), d);
    cudaDeviceSynchronize();
  }
  std::printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
