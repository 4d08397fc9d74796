// toga::cuda::heap and heap_ref on a real GPU: construction and initialisation time, device
// allocate/deallocate with statistics, reset, high-water reset, cooperative-groups overloads,
// stream-ordered pool upstream, move semantics and the documented host errors, the memory-pool
// attributes (reserved / used, current / high, failures by cause; peaks never above the
// capacity), and the caller's current device kept by every host member (two heaps on two GPUs
// where there are two). Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cooperative_groups.h>

#include <chrono>
#include <cstdio>

#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace cg = cooperative_groups;

namespace {

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
__global__ void coop_k(toga::cuda::heap_ref h, void** out, std::size_t bytes) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = nullptr;
  if (t % 3 == 0) return;  // partial warps
  cg::coalesced_group g = cg::coalesced_threads();
  void* p = h.allocate(g, bytes);
  out[t] = p;
  if (p) static_cast<unsigned*>(p)[0] = t;
  h.deallocate(g, p);
}
using checked_allocator = toga::allocator<toga::cuda::platform, toga::ualloc_bug::none, toga::tbuddy_bug::none, true>;
__global__ void bad_frees_k(checked_allocator a, char* foreign) {
  char* small = static_cast<char*>(a.allocate(64));
  char* keep = static_cast<char*>(a.allocate(64));  // keeps the bin live: the second free is a double free
  char* big = static_cast<char*>(a.allocate(8192));
  a.deallocate(small);
  a.deallocate(small);       // double free
  a.deallocate(big + 4096);  // inside a block
  a.deallocate(foreign);     // not from this heap
  a.deallocate(big);
  a.deallocate(keep);
}
__global__ void whole_k(toga::cuda::heap_ref h, void** out) { out[0] = h.allocate(h.capacity()); }

// Lanes of one warp alternate between two heaps at the same call: each must get a block of its
// own heap (the warp groups are keyed by addresses, so two heaps never share a group).
__global__ void two_heaps_k(toga::cuda::heap_ref h0, toga::cuda::heap_ref h1, std::size_t bytes, unsigned* bad) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const toga::cuda::heap_ref& h = (t & 1u) ? h1 : h0;
  void* p = h.allocate(bytes << (t % 3u));
  if (p == nullptr || !h.contains(p)) atomicAdd(bad, 1u);
  if (p) static_cast<unsigned*>(p)[0] = t;
  __syncwarp();
  if (p && static_cast<unsigned*>(p)[0] != t) atomicAdd(bad, 1u);
  h.deallocate(p);
}

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

TEST(CudaHeap, OneWarpOverTwoHeaps) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h0(64ull << 20), h1(64ull << 20);
  blocks b(1);
  for (std::size_t bytes : {16ul, 256ul}) {
    two_heaps_k<<<256, 256>>>(h0.ref(), h1.ref(), bytes, b.bad);
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
  }
  unsigned bad = 0;
  TOGA_TEST_CUDA(cudaMemcpy(&bad, b.bad, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, 0u) << "lanes got a block of the other heap, or a corrupt one";
  EXPECT_EQ(h0.stats().used_bytes, 0u);
  EXPECT_EQ(h1.stats().used_bytes, 0u);
  EXPECT_EQ(h0.stats().allocations, 2u * 32768u);
  EXPECT_EQ(h1.stats().allocations, 2u * 32768u);
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

TEST(CudaHeap, CooperativeGroupsOverloadsOverPartialWarps) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(64ull << 20);
  const unsigned n = 1u << 16;
  blocks b(n);
  coop_k<<<n / 256, 256>>>(h.ref(), b.d, 100);
  TOGA_TEST_CUDA(cudaGetLastError());
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  const auto s = h.stats();
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.allocations, n - (n + 2) / 3);
  EXPECT_EQ(s.allocations, s.deallocations);
  EXPECT_EQ(s.used_bytes, 0u);
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

// The checked mode on the GPU: a checked view over a heap's memory reports bad frees in the
// heap's error log, read by the host after the kernel.
TEST(CudaHeap, CheckedFreesAreLoggedOnTheDevice) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(8u << 20);
  const toga::cuda::heap_ref r = h.ref();
  const auto& v = r.view();
  checked_allocator c;
  c.small = v.small;
  c.globals = v.globals;
  c.heap_bytes = v.heap_bytes;
  c.sb_max_bytes = v.sb_max_bytes;
  char* foreign = nullptr;
  TOGA_TEST_CUDA(cudaMalloc(&foreign, 256));
  bad_frees_k<<<1, 1>>>(c, foreign);
  TOGA_TEST_CUDA(cudaGetLastError());
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  const auto errs = h.errors();
  ASSERT_EQ(errs.size(), 3u);
  EXPECT_EQ(errs[0].kind, toga::heap_error_kind::double_free);
  EXPECT_EQ(errs[1].kind, toga::heap_error_kind::invalid_pointer);
  EXPECT_EQ(errs[2].kind, toga::heap_error_kind::foreign_pointer);
  EXPECT_EQ(errs[2].where, reinterpret_cast<std::uint64_t>(foreign));
  const auto s = h.stats();
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.errors, 3u);
  TOGA_TEST_CUDA(cudaFree(foreign));
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

TEST(CudaHeap, MoveAndErrors) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap a(1u << 20);
  toga::cuda::heap b(std::move(a));
  EXPECT_EQ(b.capacity(), 1u << 20);
  EXPECT_THROW((void)a.stats(), std::logic_error);
  EXPECT_THROW((void)a.attributes(), std::logic_error);
  EXPECT_EQ(a.capacity(), 0u) << "a moved-from heap owns nothing";
  // ref() of a moved-from heap would hand out memory it no longer owns: an error, not a handle
  try {
    (void)a.ref();
    ADD_FAILURE() << "ref() of a moved-from heap returned a handle";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("moved from"), std::string::npos) << e.what();
  }
  toga::cuda::heap c0(1u << 20);
  c0 = std::move(b);
  EXPECT_THROW((void)b.ref(), std::logic_error);
  EXPECT_EQ(c0.capacity(), 1u << 20);
  EXPECT_TRUE(c0.ref().contains(reinterpret_cast<const void*>(c0.ref().view().small.base)));
  EXPECT_THROW(toga::cuda::heap(0), std::invalid_argument);
  size_t free_b = 0, total = 0;
  TOGA_TEST_CUDA(cudaMemGetInfo(&free_b, &total));
  EXPECT_THROW(toga::cuda::heap(toga::heap_layout::max_heap_bytes + 1), std::invalid_argument);
  try {
    // 128 GiB: more than an H100 has (an H200 may hold it; then it must simply work)
    toga::cuda::heap too_big(toga::heap_layout::max_heap_bytes);
    EXPECT_EQ(too_big.capacity(), toga::heap_layout::max_heap_bytes);
  } catch (const toga::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("cannot obtain"), std::string::npos) << e.what();
    const std::bad_alloc& base = e;  // part of the std::bad_alloc hierarchy
    (void)base;
  }
  // the device is still usable after the failed construction
  toga::cuda::heap c(1u << 20);
  EXPECT_EQ(c.stats().allocations, 0u);
}

namespace {
__global__ void alloc_n_k(toga::cuda::heap_ref h, void** out, unsigned n, std::size_t bytes) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) out[t] = h.allocate(bytes);
}
__global__ void free_n_k(toga::cuda::heap_ref h, void** in, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) h.deallocate(in[t]);
}
//! Only block `active` works: its 1024 threads each allocate `per` blocks of `bytes`, then free
//! them. Run with one block per SM, so that successive rounds peak on different SMs (arenas).
// __launch_bounds__(1024): a block of 1024 threads needs <= 64 registers per thread (docs/usage.md:
// kernels that call toga say how many threads they launch)
__global__ void __launch_bounds__(1024) one_block_peak_k(toga::cuda::heap_ref h, unsigned active, unsigned per, std::size_t bytes, unsigned* failed) {
  if (blockIdx.x != active) return;
  void* p[8];
  for (unsigned i = 0; i < per; ++i) {
    p[i] = h.allocate(bytes);
    if (p[i] == nullptr) atomicAdd(failed, 1u);
  }
  __syncthreads();
  for (unsigned i = 0; i < per; ++i) h.deallocate(p[i]);
}
}  // namespace

// The attributes of CUDA's stream-ordered pools: reserved (TBuddy blocks carved out of the heap)
// and used (live blocks at their served size), current and high; reset_high_water resets both.
TEST(CudaHeap, AttributesLikeAMemoryPool) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(256ull << 20);
  const auto fresh = h.attributes();
  EXPECT_EQ(fresh.capacity, 256ull << 20);
  EXPECT_GT(fresh.device_bytes, fresh.capacity);
  EXPECT_EQ(fresh.used_mem_current, 0u);
  EXPECT_EQ(fresh.reserved_mem_current, 0u);
  EXPECT_EQ(fresh.used_mem_high, 0u);
  const unsigned n = 1u << 14;
  blocks b(n);
  // TBuddy blocks (1 MiB: above every superbin class): reserved == used == 128 x 1 MiB
  constexpr unsigned nl = 128;
  constexpr std::uint64_t big = 1u << 20;
  alloc_n_k<<<1, nl>>>(h.ref(), b.d, nl, big);
  TOGA_TEST_CUDA(cudaGetLastError());
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  auto a = h.attributes();
  EXPECT_EQ(a.used_mem_current, nl * big);
  EXPECT_EQ(a.reserved_mem_current, nl * big);
  EXPECT_GE(a.reserved_mem_high, a.reserved_mem_current);
  EXPECT_GE(a.used_mem_high, a.used_mem_current);
  EXPECT_EQ(a.allocations, nl);
  EXPECT_EQ(a.failed(), 0u);
  free_n_k<<<1, nl>>>(h.ref(), b.d, nl);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  a = h.attributes();
  EXPECT_EQ(a.used_mem_current, 0u);
  EXPECT_EQ(a.reserved_mem_current, 0u);
  EXPECT_EQ(a.reserved_mem_high, nl * big) << "the block high-water mark is exact";
  EXPECT_GE(a.used_mem_high, nl * big);
  EXPECT_EQ(a.deallocations, nl);
  // small blocks (16 B and 32 B are UAlloc's; 64 B and up go to superbins): used counts their
  // class, reserved the 512 KiB chunks that hold them
  alloc_n_k<<<n / 256, 256>>>(h.ref(), b.d, n, 30);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  a = h.attributes();
  EXPECT_EQ(a.used_mem_current, n * 32ull);
  EXPECT_GE(a.reserved_mem_current, n * 32ull);
  EXPECT_EQ(a.reserved_mem_current % (512 * 1024), 0u) << "small blocks live in 512 KiB chunks";
  h.reset_high_water();
  a = h.attributes();
  EXPECT_EQ(a.used_mem_high, a.used_mem_current) << "reset_high_water: the used mark is the current value";
  EXPECT_EQ(a.reserved_mem_high, a.reserved_mem_current) << "reset_high_water: the reserved mark is the current value";
  free_n_k<<<n / 256, 256>>>(h.ref(), b.d, n);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  h.reset();
  a = h.attributes();
  EXPECT_EQ(a.allocations, 0u);
  EXPECT_EQ(a.reserved_mem_high, 0u);
  EXPECT_EQ(a.used_mem_high, 0u);
}

// Rounds that each fill most of a 16 MiB heap from one SM and free it again: the per-SM peaks
// add up to several times the capacity (29.5 MB was reported on a 16 MiB heap); the reported
// peak is clipped to the block high-water mark and never exceeds the capacity.
TEST(CudaHeap, PeakNeverExceedsTheCapacity) {
  TOGA_TEST_REQUIRE_GPU();
  int dev = 0, sms = 0;
  TOGA_TEST_CUDA(cudaGetDevice(&dev));
  TOGA_TEST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  toga::cuda::heap h(16ull << 20);
  blocks b(1);
  const unsigned rounds = 8;
  for (unsigned r = 0; r < rounds; ++r) {
    one_block_peak_k<<<sms, 1024>>>(h.ref(), (r * 17u) % static_cast<unsigned>(sms), 8, 1024, b.bad);  // 8 MiB of 1 KiB blocks
    TOGA_TEST_CUDA(cudaGetLastError());
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
  }
  const auto a = h.attributes();
  const auto s = h.stats();
  std::printf("[ figure ] 16 MiB heap after %u one-SM rounds of 8 MiB: used_mem_high %llu, reserved_mem_high %llu, failed %llu\n", rounds,
              static_cast<unsigned long long>(a.used_mem_high), static_cast<unsigned long long>(a.reserved_mem_high),
              static_cast<unsigned long long>(a.failed()));
  EXPECT_LE(a.used_mem_high, a.capacity);
  EXPECT_LE(a.reserved_mem_high, a.capacity);
  EXPECT_LE(a.used_mem_high, a.reserved_mem_high);
  EXPECT_LE(s.peak_used_bytes, s.heap_bytes);
  EXPECT_GE(a.used_mem_high, 8ull << 20) << "one round alone held 8 MiB";
  EXPECT_EQ(a.used_mem_current, 0u);
}

// A heap whose byte limit refuses a request counts it apart from a heap that is exhausted, and
// apart from a request larger than the heap.
TEST(CudaHeap, FailuresByCause) {
  TOGA_TEST_REQUIRE_GPU();
  const unsigned n = 1024;
  blocks b(n);
  {
    toga::cuda::heap limited(16ull << 20, {.device = -1, .limit_bytes = 4ull << 20, .stream = nullptr, .pool = nullptr, .arenas = 0});
    alloc_n_k<<<n / 256, 256>>>(limited.ref(), b.d, n, 8192);  // 8 MiB asked, 4 MiB allowed
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    const auto a = limited.attributes();
    EXPECT_EQ(a.limit_bytes, 4ull << 20);
    EXPECT_EQ(a.allocations + a.failed_limit, n);
    EXPECT_LE(a.allocations, 512u) << "at most 4 MiB of 8 KiB blocks";
    EXPECT_GE(a.failed_limit, 512u);
    EXPECT_EQ(a.failed_exhausted, 0u) << "the heap had room: the limit refused them";
    EXPECT_EQ(a.failed_too_large, 0u);
    EXPECT_LE(a.reserved_mem_high, a.limit_bytes);
  }
  {
    toga::cuda::heap small(4ull << 20);
    alloc_n_k<<<n / 256, 256>>>(small.ref(), b.d, n, 8192);  // 8 MiB asked of a 4 MiB heap
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    alloc_n_k<<<1, 1>>>(small.ref(), b.d, 1, 8ull << 20);  // larger than the heap
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    const auto a = small.attributes();
    EXPECT_EQ(a.allocations + a.failed_exhausted, n);
    EXPECT_LE(a.allocations, 512u) << "a 4 MiB heap holds 512 blocks of 8 KiB";
    EXPECT_GE(a.allocations, 256u);
    EXPECT_EQ(a.failed_limit, 0u) << "no limit: the heap was exhausted";
    EXPECT_EQ(a.failed_too_large, 1u);
    EXPECT_EQ(a.failed(), a.failed_exhausted + 1);
  }
}

// Every host member leaves the caller's current device as it was. With two GPUs: heaps on both,
// each member called while the other device is current, then a kernel launched on the current
// device must use that device's heap (on the wrong device it would fault).
TEST(CudaHeap, HostCallsKeepTheCallersDevice) {
  TOGA_TEST_REQUIRE_GPU();
  int count = 0;
  TOGA_TEST_CUDA(cudaGetDeviceCount(&count));
  if (count < 2) {
    // One device: the members still must not change it (nothing else to switch to); check the
    // calls run and the device is unchanged, then skip the two-device part.
    int before = -1, after = -2;
    TOGA_TEST_CUDA(cudaGetDevice(&before));
    {
      toga::cuda::heap h(1u << 20, {.device = before, .limit_bytes = 0, .stream = nullptr, .pool = nullptr, .arenas = 0});
      (void)h.stats();
      h.reset_high_water();
      h.reset();
      (void)h.errors();
    }
    TOGA_TEST_CUDA(cudaGetDevice(&after));
    EXPECT_EQ(before, after);
    GTEST_SKIP() << "one CUDA device: the two-heap, two-GPU check needs two";
  }
  auto current = [] {
    int d = -1;
    (void)cudaGetDevice(&d);
    return d;
  };
  TOGA_TEST_CUDA(cudaSetDevice(1));
  toga::cuda::heap h0(16ull << 20, {.device = 0, .limit_bytes = 0, .stream = nullptr, .pool = nullptr, .arenas = 0});
  EXPECT_EQ(current(), 1) << "constructor";
  TOGA_TEST_CUDA(cudaSetDevice(0));
  toga::cuda::heap h1(16ull << 20, {.device = 1, .limit_bytes = 0, .stream = nullptr, .pool = nullptr, .arenas = 0});
  EXPECT_EQ(current(), 0) << "constructor";
  TOGA_TEST_CUDA(cudaSetDevice(1));
  (void)h0.stats();
  EXPECT_EQ(current(), 1) << "stats";
  (void)h0.attributes();
  EXPECT_EQ(current(), 1) << "attributes";
  h0.reset_high_water();
  EXPECT_EQ(current(), 1) << "reset_high_water";
  h0.reset();
  EXPECT_EQ(current(), 1) << "reset";
  (void)h0.errors();
  EXPECT_EQ(current(), 1) << "errors";
  {
    toga::cuda::heap tmp(1u << 20, {.device = 0, .limit_bytes = 0, .stream = nullptr, .pool = nullptr, .arenas = 0});
    TOGA_TEST_CUDA(cudaSetDevice(1));
  }
  EXPECT_EQ(current(), 1) << "destructor";
  // device 1 is current: a kernel on it uses h1
  void** d = nullptr;
  TOGA_TEST_CUDA(cudaMalloc(&d, 256 * sizeof(void*)));
  alloc_n_k<<<1, 256>>>(h1.ref(), d, 256, 64);
  TOGA_TEST_CUDA(cudaGetLastError());
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  free_n_k<<<1, 256>>>(h1.ref(), d, 256);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  TOGA_TEST_CUDA(cudaFree(d));
  const auto a1 = h1.attributes();
  EXPECT_EQ(a1.allocations, 256u);
  EXPECT_EQ(a1.used_mem_current, 0u);
  EXPECT_EQ(h0.attributes().allocations, 0u);
  EXPECT_EQ(current(), 1);
  TOGA_TEST_CUDA(cudaSetDevice(0));
}
