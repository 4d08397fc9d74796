// toga::cuda::heap and heap_ref on a real GPU: construction and initialisation time, device
// allocate/deallocate with statistics, trim, reset, the pre-split reserve, stream-ordered pool
// upstream, the superbin size and sharing options. Skips cleanly without a GPU.
//
// Split in three units for build time (ptxas takes minutes for each kernel that inlines the
// allocator; a parallel build compiles the units side by side): heap_gpu_test_2.cu holds the
// cooperative-groups overloads, the memory-pool attributes (reserved / used, current / high,
// failures by cause; peaks never above the capacity) and the caller's current device kept by
// every host member (two heaps on two GPUs where there are two); heap_gpu_test_3.cu one warp over
// two heaps, the checked mode's device error log, move semantics and the documented host errors;
// heap_gpu_test_common.cuh what they share.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "heap_gpu_test_common.cuh"
#include "toga/cuda/heap.cuh"

namespace {

using ::toga::test::heap_gpu::blocks;

__global__ void alloc_k(toga::cuda::heap_ref h, void** out, std::size_t bytes) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  void* p = h.allocate(bytes);
  if (p) static_cast<unsigned*>(p)[0] = t;
  out[t] = p;
}
__global__ void alloc_lane0_k(toga::cuda::heap_ref h, void** out, std::size_t bytes) {  // one block per warp
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  void* p = t % 32 == 0 ? h.allocate(bytes) : nullptr;
  if (p) static_cast<unsigned*>(p)[0] = t;
  out[t] = p;
}
__global__ void free_k(toga::cuda::heap_ref h, void** in, unsigned* bad) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  void* p = in[(t * 7919u) % (gridDim.x * blockDim.x)];  // another thread's block
  if (p && static_cast<unsigned*>(p)[0] != (t * 7919u) % (gridDim.x * blockDim.x)) atomicAdd(bad, 1u);
  h.deallocate(p);
}
__global__ void whole_k(toga::cuda::heap_ref h, void** out) { out[0] = h.allocate(h.capacity()); }

}  // namespace

TEST(CudaHeap, EightGiBHeapIsReadyQuickly) {
  TOGA_TEST_REQUIRE_GPU();
  size_t free_b = 0, total = 0;
  TOGA_TEST_CUDA(cudaMemGetInfo(&free_b, &total));
  if (free_b < (9ull << 30)) GTEST_SKIP() << "needs 9 GiB free";
  std::vector<float> ms;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    toga::cuda::heap h(8ull << 30);
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(static_cast<float>(wall));
    std::printf("[ figure ] 8 GiB heap: construction %.2f ms wall (initialisation on the stream %.3f ms)\n", wall, h.init_ms());
    EXPECT_EQ(h.capacity(), 8ull << 30);
  }
}

TEST(CudaHeap, AllocateFreeAcrossKernelsWithStatistics) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(1ull << 30);  // 2^16 x 8 KiB = 512 MiB live at the largest size
  const unsigned n = 1u << 16;
  blocks b(n);
  for (std::size_t bytes : {24ul, 700ul, 5000ul}) {
    alloc_k<<<n / 256, 256>>>(h.ref(), b.d, bytes);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    const auto mid = h.stats();
    const std::uint64_t served = bytes <= 1024 ? toga::geom::round_up(bytes) : 8192;
    EXPECT_EQ(mid.failed, 0u) << bytes;
    EXPECT_EQ(mid.allocations - mid.deallocations, n) << bytes;
    EXPECT_EQ(mid.used_bytes, n * served) << bytes;
    EXPECT_GE(mid.peak_used_bytes, mid.used_bytes);
    free_k<<<n / 256, 256>>>(h.ref(), b.d, b.bad);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    unsigned bad = 0;
    TOGA_TEST_CUDA(cudaMemcpy(&bad, b.bad, sizeof bad, cudaMemcpyDeviceToHost));
    EXPECT_EQ(bad, 0u);
    const auto end = h.stats();
    EXPECT_EQ(end.used_bytes, 0u) << bytes;
    EXPECT_EQ(end.allocations, end.deallocations) << bytes;
    h.reset_high_water();
    EXPECT_EQ(h.stats().peak_used_bytes, 0u);
  }
  EXPECT_TRUE(h.errors().empty());
}

// Hysteresis (E11, design.md §9.4) keeps empty 16 B bins and a cached chunk after every block is
// freed; trim() gives them back without touching live blocks.
TEST(CudaHeap, TrimGivesBackWhatHysteresisKeeps) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(256ull << 20);
  const unsigned n = 1u << 16;
  blocks b(n);
  alloc_k<<<n / 256, 256>>>(h.ref(), b.d, 16);
  free_k<<<n / 256, 256>>>(h.ref(), b.d, b.bad);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  const auto kept = h.stats();
  EXPECT_EQ(kept.used_bytes, 0u);
  EXPECT_GT(kept.chunk_bytes, 0u) << "hysteresis keeps empty 16 B bins";
  void* one = nullptr;
  alloc_k<<<1, 1>>>(h.ref(), b.d, 100000);  // one live TBuddy block (128 KiB: above the superbin classes) survives the trim
  TOGA_TEST_CUDA(cudaMemcpy(&one, b.d, sizeof one, cudaMemcpyDeviceToHost));
  ASSERT_NE(one, nullptr);
  h.trim();
  const auto after = h.stats();
  EXPECT_EQ(after.chunk_bytes, 0u);
  EXPECT_EQ(after.superbin_bytes, 0u);
  EXPECT_EQ(after.buddy_bytes, 131072u) << "only the live 128 KiB block";
  EXPECT_EQ(after.used_bytes, 131072u);
  unsigned bad = 0;
  free_k<<<1, 1>>>(h.ref(), b.d, b.bad);
  TOGA_TEST_CUDA(cudaMemcpy(&bad, b.bad, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(h.stats().buddy_bytes, 0u);
  toga::cuda::heap moved(std::move(h));
  EXPECT_THROW(h.trim(), std::logic_error);
}

TEST(CudaHeap, ResetMakesTheWholeHeapAvailable) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(32ull << 20);
  const unsigned n = 1u << 14;
  blocks b(n);
  alloc_k<<<n / 256, 256>>>(h.ref(), b.d, 1024);  // chunks held by UAlloc: no whole-heap block now
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  whole_k<<<1, 1>>>(h.ref(), b.d);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  void* whole = reinterpret_cast<void*>(1);
  TOGA_TEST_CUDA(cudaMemcpy(&whole, b.d, sizeof whole, cudaMemcpyDeviceToHost));
  EXPECT_EQ(whole, nullptr) << "the whole heap cannot be free while blocks are live";
  h.reset();
  const auto s = h.stats();
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.allocations, 0u);
  whole_k<<<1, 1>>>(h.ref(), b.d);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  TOGA_TEST_CUDA(cudaMemcpy(&whole, b.d, sizeof whole, cudaMemcpyDeviceToHost));
  EXPECT_NE(whole, nullptr) << "after reset the heap serves a whole-heap block";
  EXPECT_TRUE(h.ref().contains(whole));
}

// The pre-split reserve (design.md §10.5): a fresh heap's lower half is superbin-sized blocks that
// climbs take with one atomic; the blocks no climb took are merged back when a request finds the
// rest of the heap empty, so a whole-heap block is still served; presplit_bytes = 0 gives none.
TEST(CudaHeap, PresplitReserve) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(256ull << 20);
  toga::heap_quality q;
  auto err = h.check(&q);
  ASSERT_FALSE(err.has_value()) << *err;
  const std::uint64_t fresh = q.presplit_blocks;
  EXPECT_GE(fresh, 2u) << "chunks and superbins in the lower half";
  const unsigned n = 1u << 16;
  blocks b(n);
  alloc_k<<<n / 256, 256>>>(h.ref(), b.d, 1024);  // 64 MiB of 1 KiB slots: superbins from the reserve
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  err = h.check(&q);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_LT(q.presplit_blocks, fresh) << "the first kernel's superbins come from the reserve";
  EXPECT_GT(q.presplit_blocks, 0u) << "the chunk tier: 1 KiB slots take superbins only";
  free_k<<<n / 256, 256>>>(h.ref(), b.d, b.bad);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  h.trim();
  whole_k<<<1, 1>>>(h.ref(), b.d);  // the rest of the reserve is drained, merged, and the whole heap served
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  void* whole = nullptr;
  TOGA_TEST_CUDA(cudaMemcpy(&whole, b.d, sizeof whole, cudaMemcpyDeviceToHost));
  EXPECT_NE(whole, nullptr) << "a whole-heap block after the reserve was partly used";
  err = h.check(&q);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(q.presplit_blocks, 0u) << "drained";
  free_k<<<1, 1>>>(h.ref(), b.d, b.bad);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  unsigned bad = 0;
  TOGA_TEST_CUDA(cudaMemcpy(&bad, b.bad, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, 0u);
  h.reset();  // a reset pre-splits again
  err = h.check(&q);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(q.presplit_blocks, fresh);
  toga::cuda::heap_options none;
  none.presplit_bytes = 0;
  toga::cuda::heap h0(256ull << 20, none);
  err = h0.check(&q);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(q.presplit_blocks, 0u);
}

TEST(CudaHeap, StreamOrderedPoolUpstream) {
  TOGA_TEST_REQUIRE_GPU();
  int dev = 0;
  TOGA_TEST_CUDA(cudaGetDevice(&dev));
  cudaMemPool_t pool;
  TOGA_TEST_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev));
  cudaStream_t s;
  TOGA_TEST_CUDA(cudaStreamCreate(&s));
  {
    toga::cuda::heap h(16ull << 20, {.device = -1, .limit_bytes = 0, .stream = s, .pool = pool, .arenas = 0});
    const unsigned n = 4096;
    blocks b(n);
    alloc_k<<<n / 256, 256, 0, s>>>(h.ref(), b.d, 64);
    free_k<<<n / 256, 256, 0, s>>>(h.ref(), b.d, b.bad);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaStreamSynchronize(s));
    const auto st = h.stats();
    EXPECT_EQ(st.allocations, n);
    EXPECT_EQ(st.used_bytes, 0u);
  }
  TOGA_TEST_CUDA(cudaStreamDestroy(s));
}

// heap_options::superbin_bytes: the size a user asks for is the size 4 KiB slots come in; values
// that are not a power of two in [8 KiB, 2 MiB] below the heap size are refused with the value.
TEST(CudaHeap, SuperbinBytesOption) {
  TOGA_TEST_REQUIRE_GPU();
  for (const std::uint64_t sb : {std::uint64_t{512} << 10, std::uint64_t{1} << 20, std::uint64_t{2} << 20}) {
    SCOPED_TRACE(std::to_string(sb) + " B superbins");
    toga::cuda::heap_options o;
    o.superbin_bytes = sb;
    toga::cuda::heap h(1ull << 30, o);
    EXPECT_EQ(h.superbin_bytes(), sb);
    const unsigned n = 1u << 14;
    blocks b(n);
    alloc_k<<<n / 256, 256>>>(h.ref(), b.d, 4096);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    const auto s = h.stats();
    EXPECT_EQ(s.failed, 0u);
    EXPECT_EQ(s.used_bytes, std::uint64_t{n} * 4096);
    const unsigned c4k = toga::geom::sb_class_of(4096);  // (superbin class 2 since 1 KiB joined them)
    EXPECT_GT(s.superbins[c4k], 0u) << "4 KiB requests are served by superbins";
    EXPECT_EQ(s.superbin_bytes, s.superbins[c4k] * sb) << "every superbin has the size asked for";
    // n blocks need at least n x 4 KiB of superbins and, per arena, less than one more superbin
    EXPECT_GE(s.superbin_bytes, std::uint64_t{n} * 4096);
    free_k<<<n / 256, 256>>>(h.ref(), b.d, b.bad);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    unsigned bad = 0;
    TOGA_TEST_CUDA(cudaMemcpy(&bad, b.bad, sizeof bad, cudaMemcpyDeviceToHost));
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(h.stats().used_bytes, 0u);
  }
  {
    // toga's choice on a 1 GiB heap: four superbins per SM and class fit (256 KiB on a 132-SM H100)
    const std::uint64_t d = toga::cuda::heap(1ull << 30).superbin_bytes();
    EXPECT_TRUE(d >= 8192 && d <= (std::uint64_t{2} << 20) && (d & (d - 1)) == 0) << d;
  }
  for (const std::uint64_t bad : {std::uint64_t{4096}, std::uint64_t{3} << 20, std::uint64_t{4} << 20, std::uint64_t{768} << 10}) {
    toga::cuda::heap_options o;
    o.superbin_bytes = bad;
    try {
      toga::cuda::heap h(1ull << 30, o);
      ADD_FAILURE() << "superbin_bytes " << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("superbin_bytes " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  toga::cuda::heap_options o;
  o.superbin_bytes = std::uint64_t{1} << 20;
  EXPECT_THROW(toga::cuda::heap(1ull << 20, o), std::invalid_argument) << "a superbin as large as the heap";
}

// heap_options::superbin_sharing: k SMs share one superbin arena, so the same 4 KiB blocks sit in
// fewer partly used superbins than with one superbin arena per SM (one block per warp: ~16 per SM
// in 64-slot superbins, so one superbin per SM against one per four SMs); values above 1024 are
// refused with the value, and k above the arena count leaves one superbin arena.
TEST(CudaHeap, SuperbinSharingOption) {
  TOGA_TEST_REQUIRE_GPU();
  const unsigned n = 1u << 16;
  std::uint64_t held[2] = {0, 0};
  for (const unsigned k : {0u, 4u}) {
    SCOPED_TRACE("superbin_sharing " + std::to_string(k));
    toga::cuda::heap_options o;
    o.superbin_sharing = k;
    toga::cuda::heap h(1ull << 30, o);
    const unsigned per = k > 1 ? k : 1;
    EXPECT_EQ(h.superbin_arenas(), (h.arenas() + per - 1) / per);
    blocks b(n);
    alloc_lane0_k<<<n / 256, 256>>>(h.ref(), b.d, 4096);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    const auto s = h.stats();
    EXPECT_EQ(s.failed, 0u);
    EXPECT_EQ(s.used_bytes, std::uint64_t{n / 32} * 4096);
    EXPECT_GE(s.superbin_bytes, std::uint64_t{n / 32} * 4096);
    held[k ? 1 : 0] = s.superbin_bytes;
    free_k<<<n / 256, 256>>>(h.ref(), b.d, b.bad);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    unsigned bad = 0;
    TOGA_TEST_CUDA(cudaMemcpy(&bad, b.bad, sizeof bad, cudaMemcpyDeviceToHost));
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(h.stats().used_bytes, 0u);
  }
  EXPECT_LT(held[1], held[0]) << "four SMs per superbin arena hold fewer superbin bytes for the same blocks";
  {
    toga::cuda::heap_options o;
    o.superbin_sharing = 1024;
    toga::cuda::heap h(1ull << 30, o);
    EXPECT_EQ(h.superbin_arenas(), 1u);
  }
  toga::cuda::heap_options o;
  o.superbin_sharing = 1025;
  try {
    toga::cuda::heap h(1ull << 30, o);
    ADD_FAILURE() << "superbin_sharing 1025 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("superbin_sharing 1025"), std::string::npos) << e.what();
  }
}
