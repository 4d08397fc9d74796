// What heap_gpu_test.cu, heap_gpu_test_2.cu and heap_gpu_test_3.cu share (split from heap_gpu_test.cu for build time).
#pragma once

#include <cuda_runtime.h>

namespace toga::test::heap_gpu {

struct blocks {
  void** d = nullptr;
  unsigned* bad = nullptr;
  explicit blocks(unsigned n) {
    cudaMalloc(&d, n * sizeof(void*));
    cudaMalloc(&bad, sizeof(unsigned));
    cudaMemset(bad, 0, sizeof(unsigned));
  }
  ~blocks() {
    cudaFree(d);
    cudaFree(bad);
  }
};

}  // namespace toga::test::heap_gpu
