// GPU stress: 2^20 threads, rounds of random sizes (16 B .. about 1 MiB) with every block filled with a
// per-allocation pattern and verified before it is freed, blocks handed to other threads between
// kernels, for TOGA_STRESS_SECONDS seconds (default 30) of GPU time. A host watchdog fails the
// test with a clear message if a kernel does not finish. No overlap (patterns), no hang
// (watchdog), no leak (statistics return to zero). TOGA_STRESS_THREADS (default 2^20) and
// TOGA_STRESS_SECONDS shrink it, e.g. for compute-sanitizer. Skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace {

__device__ unsigned long long mix(unsigned long long x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}
__device__ std::size_t draw_size(unsigned long long r) {
  // mostly small (the common case, UAlloc), some superbin classes (1 KiB .. 64 KiB, not always a
  // power of two), some 4 KiB, and now and then a TBuddy block of 64 KiB .. 1 MiB
  const unsigned k = static_cast<unsigned>(r % 16);
  if (k < 12) return 16 + (r >> 8) % 1009;                              // 16 .. 1024
  if (k < 14) return (std::size_t{1024} << ((r >> 8) % 7)) + (r >> 16) % 1024;  // 1 KiB .. 65 KiB
  if (k < 15) return 4096;
  return (r >> 8) % 64 == 0 ? 65537 + (r >> 16) % (1u << 20) : 8192;  // 1 in 1,024: 64 KiB .. 1 MiB + 64 KiB
}

struct slot {
  unsigned long long* p;
  unsigned long long tag;
  unsigned long long bytes;
};

// Each thread frees the block of another thread (chosen by the round), verifying its pattern,
// then allocates a new block of a random size and fills it.
__global__ void round_k(toga::cuda::heap_ref h, slot* slots, unsigned n, unsigned round, unsigned long long* errors) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const unsigned victim = static_cast<unsigned>((t * 2654435761ull + round * 40503ull) % n);
  // the permutation t -> victim is a bijection when n is a power of two and the multiplier odd
  slot s = slots[victim];
  if (s.p) {
    for (unsigned long long i = 0; i < s.bytes / 8; ++i)
      if (s.p[i] != (s.tag ^ i)) {
        atomicAdd(&errors[0], 1ull);
        break;
      }
    h.deallocate(s.p);
  }
  const unsigned long long r = mix((static_cast<unsigned long long>(round) << 32) | t);
  const std::size_t bytes = draw_size(r);
  auto* p = static_cast<unsigned long long*>(h.allocate(bytes));
  slot out{p, r, bytes};
  if (p == nullptr) {
    atomicAdd(&errors[1], 1ull);  // nullptr: exhaustion must not happen with this heap size
  } else {
    for (unsigned long long i = 0; i < bytes / 8; ++i) p[i] = r ^ i;
  }
  slots[victim] = out;
}

__global__ void drain_k(toga::cuda::heap_ref h, slot* slots, unsigned n, unsigned long long* errors) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  slot s = slots[t];
  if (!s.p) return;
  for (unsigned long long i = 0; i < s.bytes / 8; ++i)
    if (s.p[i] != (s.tag ^ i)) {
      atomicAdd(&errors[0], 1ull);
      break;
    }
  h.deallocate(s.p);
}

// Waits for the stream with a deadline; false if it did not finish.
bool wait_with_deadline(cudaStream_t s, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) return true;  // an error: reported by the caller's checks
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace

TEST(CudaStress, RandomSizesVerifiedForSeconds) {
  TOGA_TEST_REQUIRE_GPU();
  const unsigned n = std::getenv("TOGA_STRESS_THREADS") ? static_cast<unsigned>(std::atoi(std::getenv("TOGA_STRESS_THREADS"))) : 1u << 20;
  const double seconds = std::getenv("TOGA_STRESS_SECONDS") ? std::atof(std::getenv("TOGA_STRESS_SECONDS")) : 30.0;
  // live data averages about 7 KiB per thread at its served sizes (superbin classes and the rare
  // 1 MiB block dominate): 32 KiB per thread leaves room for fragmentation and cached superbins
  const std::uint64_t heap_bytes = std::max<std::uint64_t>(std::uint64_t{n} * 32768, 64ull << 20);
  toga::cuda::heap h(heap_bytes);
  slot* slots;
  unsigned long long* errors;
  ASSERT_EQ(cudaMalloc(&slots, n * sizeof(slot)), cudaSuccess);
  ASSERT_EQ(cudaMemset(slots, 0, n * sizeof(slot)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&errors, 2 * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemset(errors, 0, 2 * sizeof(unsigned long long)), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  double gpu_ms = 0;
  unsigned rounds = 0;
  unsigned long long ops = 0;
  while (gpu_ms < seconds * 1000.0) {
    cudaEventRecord(a, s);
    round_k<<<(n + 255) / 256, 256, 0, s>>>(h.ref(), slots, n, rounds, errors);
    cudaEventRecord(b, s);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_TRUE(wait_with_deadline(s, 60.0)) << "round " << rounds << " did not finish within 60 s: the allocator hangs";
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << "round " << rounds;
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    gpu_ms += ms;
    ops += 2ull * n;
    ++rounds;
  }
  drain_k<<<(n + 255) / 256, 256, 0, s>>>(h.ref(), slots, n, errors);
  ASSERT_TRUE(wait_with_deadline(s, 60.0)) << "the drain kernel did not finish within 60 s";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  unsigned long long err[2];
  ASSERT_EQ(cudaMemcpy(err, errors, sizeof err, cudaMemcpyDeviceToHost), cudaSuccess);
  const auto st = h.stats();
  std::printf("[ figure ] stress: %u threads, %u rounds, %.1f s of GPU time, %.1f M allocate+free operations/s, "
              "%llu corrupted blocks, %llu nullptr, peak <= %.1f MiB\n",
              n, rounds, gpu_ms / 1000.0, ops / (gpu_ms / 1000.0) / 1e6, err[0], err[1], st.peak_used_bytes / 1048576.0);
  EXPECT_EQ(err[0], 0u) << "blocks were corrupted: two owners wrote the same memory";
  EXPECT_EQ(err[1], 0u) << "allocations failed although the heap cannot be full";
  EXPECT_EQ(st.used_bytes, 0u) << "leak: bytes still in use after every block was freed";
  EXPECT_EQ(st.allocations, st.deallocations);
  cudaStreamDestroy(s);
  cudaFree(slots);
  cudaFree(errors);
}
