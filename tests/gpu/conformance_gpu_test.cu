// The shared conformance body (tests/conformance/conformance.hpp) in CUDA kernels: the same lane
// function the simulator runs, over a real heap, per-thread and warp-cooperative, full and
// partial warps (250-thread blocks: the last warp of each block has 26 lanes). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "conformance.hpp"
#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace tc = toga::conformance;

namespace {
__global__ void conformance_k(toga::cuda::heap_ref h, tc::state s) {
  const unsigned me = blockIdx.x * blockDim.x + threadIdx.x;
  if (me >= s.lanes) return;
  tc::lane_body<toga::cuda::platform>(h.view(), s, me);
}
}  // namespace

TEST(CudaConformance, SharedBodyOnTheGpu) {
  TOGA_TEST_REQUIRE_GPU();
  struct run {
    unsigned block, blocks, rounds;
    bool coalesced;
  };
  for (const run& r : {run{256, 256, 8, false}, run{256, 256, 8, true}, run{250, 262, 8, false}, run{250, 262, 8, true}}) {
    toga::cuda::heap h(2ull << 30);
    const unsigned lanes = r.block * r.blocks;
    tc::state s{};
    ASSERT_EQ(cudaMalloc(&s.block, lanes * sizeof(std::uint64_t)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&s.round, lanes * sizeof(std::uint32_t)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&s.acked, lanes * sizeof(std::uint32_t)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&s.out, tc::counters * sizeof(std::uint64_t)), cudaSuccess);
    cudaMemset(s.block, 0, lanes * sizeof(std::uint64_t));
    cudaMemset(s.round, 0, lanes * sizeof(std::uint32_t));
    cudaMemset(s.acked, 0, lanes * sizeof(std::uint32_t));
    cudaMemset(s.out, 0, tc::counters * sizeof(std::uint64_t));
    s.lanes = lanes;
    s.rounds = r.rounds;
    s.coalesced = r.coalesced;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    conformance_k<<<r.blocks, r.block>>>(h.ref(), s);
    cudaEventRecord(b);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    std::uint64_t out[tc::counters];
    ASSERT_EQ(cudaMemcpy(out, s.out, sizeof out, cudaMemcpyDeviceToHost), cudaSuccess);
    const auto st = h.stats();
    std::printf("[ figure ] conformance %u x %u threads%s, %u rounds: %.2f ms, %llu allocations, %llu corrupted, %llu nullptr, %llu misaligned\n",
                r.blocks, r.block, r.coalesced ? " (coalesced)" : "", r.rounds, ms, static_cast<unsigned long long>(out[tc::allocations]),
                static_cast<unsigned long long>(out[tc::corrupted]), static_cast<unsigned long long>(out[tc::null_results]),
                static_cast<unsigned long long>(out[tc::misaligned]));
    EXPECT_EQ(out[tc::corrupted], 0u);
    EXPECT_EQ(out[tc::null_results], 0u);
    EXPECT_EQ(out[tc::misaligned], 0u);
    EXPECT_EQ(out[tc::allocations], std::uint64_t{lanes} * r.rounds);
    EXPECT_EQ(st.used_bytes, 0u);
    EXPECT_EQ(st.allocations, st.deallocations);
    cudaFree(s.block);
    cudaFree(s.round);
    cudaFree(s.acked);
    cudaFree(s.out);
  }
}
