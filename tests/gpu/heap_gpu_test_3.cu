// toga::cuda::heap on a real GPU: one warp over two heaps, the checked mode's error log, moves, host errors (split from heap_gpu_test.cu for build time).
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_support.cuh"
#include "heap_gpu_test_common.cuh"
#include "toga/cuda/heap.cuh"

namespace {

using ::toga::test::heap_gpu::blocks;

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

}  // namespace

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
