// The drop-in device API: toga::cuda::allocate / deallocate without a heap_ref, after the host
// names a default heap with set_default_heap. Kernels in two translation units (this file and
// default_heap_gpu_kernels.cu, no -rdc) must see the same default; destroying the default heap
// must clear it. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "default_heap_gpu_kernels.cuh"
#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace {

__global__ void alloc_default_k(void** out, unsigned n, std::size_t bytes, std::size_t alignment) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  void* p = alignment != 0 ? toga::cuda::allocate(bytes, alignment) : toga::cuda::allocate(bytes);
  if (p != nullptr) static_cast<unsigned*>(p)[0] = t;
  out[t] = p;
}
// deallocate without a default heap must do nothing, even with a pointer it never saw
__global__ void free_without_default_k(void* p) { toga::cuda::deallocate(p); }

//! n pointers on the device plus a counter, freed on scope exit.
struct slots {
  void** d = nullptr;
  unsigned* bad = nullptr;
  int* flag = nullptr;
  unsigned n;
  explicit slots(unsigned count) : n(count) {
    (void)cudaMalloc(&d, n * sizeof(void*));
    (void)cudaMalloc(&bad, sizeof(unsigned));
    (void)cudaMalloc(&flag, sizeof(int));
    (void)cudaMemset(bad, 0, sizeof(unsigned));
  }
  ~slots() {
    (void)cudaFree(d);
    (void)cudaFree(bad);
    (void)cudaFree(flag);
  }
  std::vector<void*> host() const {
    std::vector<void*> v(n);
    (void)cudaMemcpy(v.data(), d, n * sizeof(void*), cudaMemcpyDeviceToHost);
    return v;
  }
  unsigned bad_count() const {
    unsigned b = 0;
    (void)cudaMemcpy(&b, bad, sizeof b, cudaMemcpyDeviceToHost);
    return b;
  }
  int has_default() const {
    int f = -1;
    if (toga::test::launch_has_default(flag) != cudaSuccess) return -1;
    (void)cudaMemcpy(&f, flag, sizeof f, cudaMemcpyDeviceToHost);
    return f;
  }
};

void alloc_default(const slots& s, std::size_t bytes, std::size_t alignment = 0) {
  alloc_default_k<<<(s.n + 255) / 256, 256>>>(s.d, s.n, bytes, alignment);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Every test leaves the device without a default heap.
class DefaultHeap : public ::testing::Test {
 protected:
  void TearDown() override {
    if (toga::test::no_cuda_device_reason().empty()) toga::cuda::clear_default_heap();
  }
};

}  // namespace

TEST_F(DefaultHeap, NoneSetAllocateReturnsNullptrAndDeallocateDoesNothing) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::clear_default_heap();
  slots s(1024);
  EXPECT_EQ(s.has_default(), 0);
  alloc_default(s, 64);
  for (void* p : s.host()) EXPECT_EQ(p, nullptr);
  free_without_default_k<<<1, 1>>>(reinterpret_cast<void*>(0x1000));  // never dereferenced
  TOGA_TEST_CUDA(cudaGetLastError());
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
}

// Allocated in this translation unit, freed (by other threads) in the other one; the heap's
// statistics see both, so both translation units reached the same heap.
TEST_F(DefaultHeap, KernelsOfTwoTranslationUnitsShareTheDefault) {
  TOGA_TEST_REQUIRE_GPU();
  // 2^16 blocks of 8 KiB (5000 B) are 512 MiB; of 1 KiB (1000 B) about 88 MiB of chunks
  toga::cuda::heap h(1ull << 30);
  toga::cuda::set_default_heap(h);
  slots s(1u << 16);
  EXPECT_EQ(s.has_default(), 1) << "the other translation unit's slot was not set";
  for (std::size_t bytes : {24ul, 1000ul, 5000ul}) {
    SCOPED_TRACE(bytes);
    alloc_default(s, bytes);
    const std::vector<void*> p = s.host();
    unsigned in_heap = 0;
    for (void* q : p) in_heap += (q != nullptr && h.ref().contains(q)) ? 1u : 0u;
    EXPECT_EQ(in_heap, s.n) << "every block from the default heap";
    const auto mid = h.stats();
    EXPECT_EQ(mid.allocations - mid.deallocations, s.n);
    TOGA_TEST_CUDA(toga::test::launch_free_default(s.d, s.n, s.bad));
    EXPECT_EQ(s.bad_count(), 0u) << "a block did not hold its tag";
    const auto end = h.stats();
    EXPECT_EQ(end.allocations, end.deallocations);
    EXPECT_EQ(end.used_bytes, 0u);
    EXPECT_EQ(end.failed, 0u);
  }
}

TEST_F(DefaultHeap, AlignedAllocate) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(64ull << 20);
  toga::cuda::set_default_heap(h);
  slots s(4096);
  alloc_default(s, 48, 512);
  for (void* p : s.host()) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 512, 0u);
  }
  TOGA_TEST_CUDA(toga::test::launch_free_default(s.d, s.n, s.bad));
  EXPECT_EQ(h.stats().used_bytes, 0u);
}

TEST_F(DefaultHeap, ANewDefaultReplacesTheOld) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap a(16ull << 20), b(16ull << 20);
  toga::cuda::set_default_heap(a);
  toga::cuda::set_default_heap(b);
  slots s(256);
  alloc_default(s, 128);
  for (void* p : s.host()) EXPECT_TRUE(p != nullptr && b.ref().contains(p));
  EXPECT_EQ(a.stats().allocations, 0u);
  TOGA_TEST_CUDA(toga::test::launch_free_default(s.d, s.n, s.bad));
  EXPECT_EQ(b.stats().used_bytes, 0u);
}

// The default follows the heap's memory through a move, and goes with it.
TEST_F(DefaultHeap, DestroyingTheDefaultHeapClearsIt) {
  TOGA_TEST_REQUIRE_GPU();
  slots s(256);
  {
    toga::cuda::heap first(16ull << 20);
    toga::cuda::set_default_heap(first);
    toga::cuda::heap moved(std::move(first));
    EXPECT_EQ(s.has_default(), 1) << "a move keeps the memory, so the default stays";
    alloc_default(s, 64);
    for (void* p : s.host()) EXPECT_TRUE(p != nullptr && moved.ref().contains(p));
    EXPECT_THROW(toga::cuda::set_default_heap(first), std::logic_error);
  }
  EXPECT_EQ(s.has_default(), 0) << "the default heap was destroyed: no kernel may use its memory";
  alloc_default(s, 64);
  for (void* p : s.host()) EXPECT_EQ(p, nullptr);
}

TEST_F(DefaultHeap, ClearDefaultHeap) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(16ull << 20);
  toga::cuda::set_default_heap(h);
  slots s(32);
  EXPECT_EQ(s.has_default(), 1);
  toga::cuda::clear_default_heap();
  EXPECT_EQ(s.has_default(), 0);
  alloc_default(s, 64);
  for (void* p : s.host()) EXPECT_EQ(p, nullptr);
  EXPECT_EQ(h.stats().allocations, 0u);
}
