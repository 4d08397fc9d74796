// Consumer of toga::cuda from an installed toga: a heap, a kernel that allocates and frees through
// heap_ref, and the statistics. Without a GPU it reports that it skipped the kernel and succeeds
// (it was compiled and linked against the installed library, which is what CI checks). Built
// without the kernel (TOGA_CONSUMER_CUDA_KERNEL=0, where no GPU was visible at configure time) it
// uses the host API only.
#include <toga/cuda/heap.cuh>

#include <cstdio>

#ifndef TOGA_CONSUMER_CUDA_KERNEL
#define TOGA_CONSUMER_CUDA_KERNEL 1
#endif

#if TOGA_CONSUMER_CUDA_KERNEL
__global__ void use(toga::cuda::heap_ref h, unsigned* fails) {
  void* p = h.allocate(40);
  if (!p) atomicAdd(fails, 1u);
  h.deallocate(p);
}
#endif

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_app: built and linked against toga::cuda; no GPU, kernel skipped\n");
    return 0;
  }
  try {
    toga::cuda::heap h(16u << 20);
#if TOGA_CONSUMER_CUDA_KERNEL
    unsigned* fails = nullptr;
    unsigned f = 0;
    if (cudaMalloc(&fails, sizeof *fails) != cudaSuccess || cudaMemset(fails, 0, sizeof *fails) != cudaSuccess) return 1;
    use<<<64, 256>>>(h.ref(), fails);
    if (cudaGetLastError() != cudaSuccess || cudaMemcpy(&f, fails, sizeof f, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
    cudaFree(fails);
    const auto s = h.stats();
    std::printf("cuda_app: %llu allocations, %u failed, %llu B in use at the end\n",
                static_cast<unsigned long long>(s.allocations), f, static_cast<unsigned long long>(s.used_bytes));
    return f == 0 && s.allocations == 64u * 256u && s.used_bytes == 0 ? 0 : 1;
#else
    const toga::budget_state b = toga::cuda::device_budget();
    std::printf("cuda_app: host API only (built without its kernel); a %llu B heap, %llu B recorded on its device\n",
                static_cast<unsigned long long>(h.capacity()), static_cast<unsigned long long>(b.used));
    return h.capacity() == (16u << 20) && b.used > h.capacity() ? 0 : 1;
#endif
  } catch (const std::exception& e) {
    std::printf("cuda_app: %s\n", e.what());
    return 1;
  }
}
