// toga::cuda::heap on a GPU: cooperative-groups overloads, pool attributes, the caller's device kept (split from heap_gpu_test.cu for build time).
#include <gtest/gtest.h>

#include <cooperative_groups.h>

#include <cstdio>

#include <string>

#include "gpu_test_support.cuh"
#include "heap_gpu_test_common.cuh"
#include "toga/cuda/heap.cuh"

namespace cg = cooperative_groups;

namespace {

using ::toga::test::heap_gpu::blocks;

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
