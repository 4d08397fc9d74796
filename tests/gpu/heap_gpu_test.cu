// toga::cuda::heap and heap_ref on a real GPU: construction and initialisation time, device
// allocate/deallocate with statistics, reset, high-water reset, cooperative-groups overloads,
// stream-ordered pool upstream, move semantics and the documented host errors.
// Skips cleanly without a GPU.
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

TEST(CudaHeap, MoveAndErrors) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap a(1u << 20);
  toga::cuda::heap b(std::move(a));
  EXPECT_EQ(b.capacity(), 1u << 20);
  EXPECT_THROW((void)a.stats(), std::logic_error);
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
