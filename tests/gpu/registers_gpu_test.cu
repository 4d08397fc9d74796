// Registers of kernels as users write them (docs/usage.md "Registers"): without __launch_bounds__
// a kernel that calls allocate or deallocate gets at most 64 registers (toga::cuda's
// -maxrregcount=64); kernels with the bounds usage.md names keep 64 and 48 (the bounds take
// precedence over the cap); a target that opts out (TOGA_NO_MAXRREGCOUNT) gets what ptxas chooses.
// Each kernel also runs once, so that a capped kernel is shown to work. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

int toga_test_uncapped_alloc_registers();
float toga_test_uncapped_alloc_ms(toga::cuda::heap_ref h, void** out, unsigned n);

namespace {

__global__ void alloc_plain_k(toga::cuda::heap_ref h, void** out, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) out[t] = h.allocate(16 + 16 * (t % 8));
}
__global__ void free_plain_k(toga::cuda::heap_ref h, void** out, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) h.deallocate(out[t]);
}
__global__ void __launch_bounds__(256, 4) alloc_bounded_k(toga::cuda::heap_ref h, void** out, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) out[t] = h.allocate(16 + 16 * (t % 8));
}
__global__ void __launch_bounds__(256, 5) free_bounded_k(toga::cuda::heap_ref h, void** out, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) h.deallocate(out[t]);
}
// the same shape as the opt-out TU's alloc_uncapped_k: 16 B per thread
__global__ void alloc16_plain_k(toga::cuda::heap_ref h, void** out, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) out[t] = h.allocate(16);
}
__global__ void count_null_k(void* const* out, unsigned n, unsigned* nulls) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n && out[t] == nullptr) atomicAdd(nulls, 1u);
}

template <class K>
int registers_of(K k) {
  cudaFuncAttributes a{};
  return cudaFuncGetAttributes(&a, k) == cudaSuccess ? a.numRegs : -1;
}

}  // namespace

TEST(Registers, KernelsWithoutLaunchBoundsAreCappedAt64) {
  TOGA_TEST_REQUIRE_GPU();
  const int ap = registers_of(alloc_plain_k), fp = registers_of(free_plain_k);
  const int ab = registers_of(alloc_bounded_k), fb = registers_of(free_bounded_k);
  const int un = toga_test_uncapped_alloc_registers();
  std::printf("[ registers ] allocate %d, deallocate %d without bounds; %d, %d with (256, 4) / (256, 5); "
              "%d without bounds and without the cap\n", ap, fp, ab, fb, un);
  EXPECT_GT(ap, 0);
  EXPECT_LE(ap, 64);
  EXPECT_LE(fp, 64);
  EXPECT_LE(ab, 64);
  EXPECT_LE(fb, 48);
  EXPECT_GT(un, 64) << "without the cap an allocating kernel now fits 64 registers: the cap may no longer be needed "
                       "(docs/usage.md \"Registers\")";
}

TEST(Registers, CappedKernelsAllocateAndFree) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(std::size_t{256} << 20);
  const unsigned n = 1u << 16;
  toga::test::device_buffer<void*> out;
  toga::test::device_buffer<unsigned> nulls;
  TOGA_TEST_CUDA(cudaMalloc(&out.ptr, n * sizeof(void*)));
  out.n = n;
  TOGA_TEST_CUDA(cudaMalloc(&nulls.ptr, sizeof(unsigned)));
  nulls.n = 1;
  for (int round = 0; round < 2; ++round) {
    TOGA_TEST_CUDA(cudaMemset(nulls.ptr, 0, sizeof(unsigned)));
    if (round == 0) alloc_plain_k<<<n / 256, 256>>>(h.ref(), out.ptr, n);
    else alloc_bounded_k<<<n / 256, 256>>>(h.ref(), out.ptr, n);
    count_null_k<<<n / 256, 256>>>(out.ptr, n, nulls.ptr);
    unsigned got = 1;
    TOGA_TEST_CUDA(cudaMemcpy(&got, nulls.ptr, sizeof got, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, 0u) << "round " << round;
    if (round == 0) free_plain_k<<<n / 256, 256>>>(h.ref(), out.ptr, n);
    else free_bounded_k<<<n / 256, 256>>>(h.ref(), out.ptr, n);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
  }
  const auto err = h.check();
  EXPECT_FALSE(err.has_value()) << *err;
}

// The cost of the trap, printed (not asserted: figures are benchmarks' business): 2^20 threads
// allocating 16 B in a kernel without bounds, capped (64 registers) and uncapped, warm, median of 7.
TEST(Registers, CappedAndUncappedAllocationTimesArePrinted) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(std::size_t{1} << 30);
  const unsigned n = 1u << 20;
  toga::test::device_buffer<void*> out;
  TOGA_TEST_CUDA(cudaMalloc(&out.ptr, n * sizeof(void*)));
  out.n = n;
  auto capped_ms = [&] {
    cudaEvent_t a, b;
    (void)cudaEventCreate(&a);
    (void)cudaEventCreate(&b);
    (void)cudaEventRecord(a);
    alloc16_plain_k<<<n / 256, 256>>>(h.ref(), out.ptr, n);
    (void)cudaEventRecord(b);
    (void)cudaEventSynchronize(b);
    float ms = 0;
    (void)cudaEventElapsedTime(&ms, a, b);
    free_plain_k<<<n / 256, 256>>>(h.ref(), out.ptr, n);
    (void)cudaDeviceSynchronize();
    (void)cudaEventDestroy(a);
    (void)cudaEventDestroy(b);
    return ms;
  };
  std::vector<float> c, u;
  for (int i = 0; i < 8; ++i) {  // the first of each is the warm-up
    const float x = capped_ms(), y = toga_test_uncapped_alloc_ms(h.ref(), out.ptr, n);
    if (i > 0) {
      c.push_back(x);
      u.push_back(y);
    }
  }
  std::sort(c.begin(), c.end());
  std::sort(u.begin(), u.end());
  std::printf("[ registers ] 2^20 x 16 B without bounds: capped (%d registers) %.3f ms, uncapped (%d) %.3f ms (medians of 7)\n",
              registers_of(alloc16_plain_k), c[3], toga_test_uncapped_alloc_registers(), u[3]);
  TOGA_TEST_CUDA(cudaGetLastError());
  const auto err = h.check();
  EXPECT_FALSE(err.has_value()) << *err;
}
