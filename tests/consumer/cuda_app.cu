// Consumer of toga::cuda from an installed toga: a heap, a kernel that allocates and frees through
// heap_ref, and the statistics. Without a GPU it reports that it skipped the kernel and succeeds
// (it was compiled and linked against the installed library, which is what CI checks).
#include <toga/cuda/heap.cuh>

#include <cstdio>

__global__ void use(toga::cuda::heap_ref h, unsigned* fails) {
  void* p = h.allocate(40);
  if (!p) atomicAdd(fails, 1u);
  h.deallocate(p);
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_app: built and linked against toga::cuda; no GPU, kernel skipped\n");
    return 0;
  }
  try {
    toga::cuda::heap h(16u << 20);
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
  } catch (const std::exception& e) {
    std::printf("cuda_app: %s\n", e.what());
    return 1;
  }
}
