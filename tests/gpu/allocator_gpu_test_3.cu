//! toga's allocator on the GPU, test 5: mixed churn in one kernel with a deadline (split from allocator_gpu_test.cu for build time).
//! allocator_gpu_test.cu's file comment describes the tests, the set-up and the hang handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "allocator_gpu_test_common.cuh"

namespace {

using namespace ::toga::test::agpu;  // the shared harness (allocator_gpu_test_common.cuh)

//! Copies n T's from the device on stream `s` while a kernel may still run (post-mortem).
template <class T>
std::vector<T> agpu_peek(const T* dev, std::size_t n, cudaStream_t s) {
  std::vector<T> h(n);
  if (cudaMemcpyAsync(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    std::printf("allocator_gpu_test: post-mortem copy failed\n");
  return h;
}

__device__ __forceinline__ std::uint64_t agpu_globaltimer() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// --- 5. Mixed churn --------------------------------------------------------------------------

struct agpu_churn_counters {
  unsigned long long pairs;       //!< allocate + free pairs completed
  unsigned long long nulls;       //!< allocations that returned nullptr
  unsigned long long corrupt;     //!< blocks whose pattern changed between write and verify
  unsigned long long timed_out;   //!< threads that stopped at the device-side deadline
  unsigned long long finished;    //!< threads that left the loop (post-mortem progress)
};

__constant__ std::uint32_t agpu_churn_sizes[8] = {16, 32, 64, 128, 256, 512, 1024, 4096};

__global__ void agpu_churn_kernel(alloc_view a, unsigned rounds, std::uint32_t seed, std::uint64_t budget_ns,
                                  agpu_churn_counters* c) {
  const unsigned i = agpu_gtid();
  const std::uint64_t t0 = agpu_globaltimer();
  unsigned long long pairs = 0;
  for (unsigned r = 0; r < rounds; ++r) {
    if (agpu_globaltimer() - t0 > budget_ns) {  // device-side deadline: stop, and say so
      atomicAdd(&c->timed_out, 1ull);
      break;
    }
    const std::uint64_t x = agpu_mix64((std::uint64_t{seed} << 40) ^ (std::uint64_t{i} << 8) ^ r);
    const std::uint32_t s = agpu_churn_sizes[x & 7];
    char* p = static_cast<char*>(a.allocate(s));
    if (p == nullptr) {
      atomicAdd(&c->nulls, 1ull);
      continue;
    }
    // volatile: the compiler may not fold the verify into the write
    volatile std::uint64_t* w = reinterpret_cast<volatile std::uint64_t*>(p);
    const unsigned words = s / 8;
    const std::uint32_t salt = seed * 31u + r;
    for (unsigned k = 0; k < words; ++k) w[k] = agpu_pattern(i, k, salt);
    unsigned wrong = 0;
    for (unsigned k = 0; k < words; ++k) wrong += w[k] != agpu_pattern(i, k, salt);
    if (wrong) atomicAdd(&c->corrupt, 1ull);
    a.deallocate(p);
    ++pairs;
  }
  atomicAdd(&c->pairs, pairs);
  atomicAdd(&c->finished, 1ull);
}

TEST(CudaAllocator, MixedChurnOneKernelWithDeadline) {
  AGPU_REQUIRE_CUDA_DEVICE();
  AGPU_REQUIRE_WORKING_BITS();
  agpu_heap h;
  AGPU_RUN(agpu_make_heap(h, std::uint64_t{256} << 20));
  agpu_host_copy c;
  constexpr unsigned n = 1u << 16;
  constexpr unsigned rounds = 16;
  constexpr std::uint64_t budget_ns = 20ull * 1000 * 1000 * 1000;  // device-side, below the host's 60 s
  agpu_buffer<agpu_churn_counters> ctr;
  AGPU_ALLOC(ctr, 1);
  const alloc_view a = h.view;
  std::vector<float> times;
  std::uint64_t total_pairs = 0;
  for (unsigned run = 0; run < 4; ++run) {  // run 0: warm-up
    AGPU_CUDA_CHECK(cudaMemset(ctr.ptr, 0, ctr.bytes()));
    float ms = 0;
    const std::string what = run == 0 ? "churn warm-up" : "churn run " + std::to_string(run);
    const agpu_dump_fn dump = [&](cudaStream_t side) {
      const auto hc = agpu_peek(ctr.ptr, 1, side);
      std::printf("allocator_gpu_test: churn post-mortem: %llu of %u threads finished (%llu pairs), %llu nulls, "
                  "%llu corrupt, %llu past the device deadline\n",
                  hc[0].finished, n, hc[0].pairs, hc[0].nulls, hc[0].corrupt, hc[0].timed_out);
    };
    AGPU_CUDA_CHECK(agpu_run(what.c_str(), ms, [&](cudaStream_t st) {
      agpu_churn_kernel<<<n / kBlock, kBlock, 0, st>>>(a, rounds, 1000 + run, budget_ns, ctr.ptr);
    }, dump));
    std::vector<agpu_churn_counters> hc;
    AGPU_TO_HOST(hc, ctr);
    EXPECT_EQ(hc[0].timed_out, 0ull) << what << ": " << hc[0].timed_out
                                     << " threads hit the device-side deadline (20 s): the allocator is far too slow "
                                        "or livelocking";
    EXPECT_EQ(hc[0].corrupt, 0ull) << what << ": blocks written by two threads at once (overlapping blocks)";
    EXPECT_EQ(hc[0].nulls, 0ull) << what << ": nullptr from a 256 MiB heap that never holds more than 2^16 blocks";
    EXPECT_EQ(hc[0].pairs + hc[0].nulls, std::uint64_t{n} * rounds) << what;
    total_pairs += hc[0].pairs;
    if (run > 0) times.push_back(ms);
    if (HasFailure()) return;
  }
  std::sort(times.begin(), times.end());
  const double med = times[1];
  const double ops = 2.0 * n * rounds;  // one allocate + one deallocate per round and thread
  std::printf("[  figure  ] churn: %u threads x %u rounds, sizes {16..1024, 4096}: median %.3f ms (runs %.3f / %.3f / "
              "%.3f ms) = %.1f M operations/s (allocate or deallocate, write+verify included), %.1f M pairs/s\n",
              n, rounds, med, times[0], times[1], times[2], ops / (med * 1e3), ops / 2 / (med * 1e3));
  toga::heap_quality q;
  toga::heap_statistics s;
  AGPU_RUN(agpu_check_quiescent(h, c, "churn: after 4 runs", q, s));
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(q.live_blocks, 0u);
  EXPECT_EQ(s.allocations, total_pairs);
  EXPECT_EQ(s.deallocations, total_pairs);
}

}  // namespace
