// Consumer of toga::cuda: a kernel on the CUDA Platform from an installed toga. Without a GPU
// it reports that it skipped the kernel and succeeds (it was compiled and linked, which is what
// the package test checks there).
#include <toga/cuda/platform.cuh>

#include <cstdio>

__global__ void count(unsigned* n) { toga::cuda::platform::fetch_add(n, 1u, toga::relaxed, toga::device_scope); }

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_app: built against toga::cuda; no GPU, kernel skipped\n");
    return 0;
  }
  unsigned* n = nullptr;
  unsigned h = 0;
  if (cudaMalloc(&n, sizeof *n) != cudaSuccess || cudaMemset(n, 0, sizeof *n) != cudaSuccess) return 1;
  count<<<64, 256>>>(n);
  if (cudaGetLastError() != cudaSuccess || cudaMemcpy(&h, n, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  cudaFree(n);
  std::printf("cuda_app: %u of %u increments\n", h, 64u * 256u);
  return h == 64u * 256u ? 0 : 1;
}
