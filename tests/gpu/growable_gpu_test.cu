// Growable heaps on a real GPU (issue 14, docs/usage.md §9 "Growable heaps"): a heap that starts at
// 0 bytes in a 64 GiB range and grows to 8 GiB by the retry protocol (nullptr, grow_if_needed,
// relaunch), every granule adopted once and the heap walk passing; trim_to(0) giving every mapped
// byte back to the driver; a trim after freeing a random half that unmaps exactly the wholly free
// granules a heap walk counts; the release threshold at synchronising calls; and failures of
// cuMemCreate / cuMemMap / cuMemSetAccess injected at the k-th granule (nullptr, one counted
// growth failure, nothing half mapped, the heap working on). Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace {

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

// Thread t allocates `bytes` into out[first + t] and writes its index into the block's first
// and last words; failures counted.
__global__ void grow_alloc_k(toga::cuda::heap_ref h, void** out, std::uint64_t first, std::uint64_t n, std::size_t bytes,
                             unsigned long long* failed) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n) return;
  void* p = h.allocate(bytes);
  out[first + t] = p;
  if (p == nullptr) {
    atomicAdd(failed, 1ull);
    return;
  }
  static_cast<std::uint64_t*>(p)[0] = first + t;
  static_cast<std::uint64_t*>(p)[(bytes - 8) / 8] = first + t;
}
// Frees out[first + t] for t < n (nullptr: nothing) and clears it; `wrong` counts blocks whose
// words another owner overwrote.
__global__ void grow_free_k(toga::cuda::heap_ref h, void** out, std::uint64_t first, std::uint64_t n, std::size_t bytes,
                            unsigned long long* wrong) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n) return;
  void* p = out[first + t];
  if (p == nullptr) return;
  if (static_cast<std::uint64_t*>(p)[0] != first + t || static_cast<std::uint64_t*>(p)[(bytes - 8) / 8] != first + t)
    atomicAdd(wrong, 1ull);
  h.deallocate(p);
  out[first + t] = nullptr;
}
// Frees the blocks whose index has flag[i] set.
__global__ void free_marked_k(toga::cuda::heap_ref h, void** out, const unsigned char* flag, std::uint64_t n) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n || !flag[t] || out[t] == nullptr) return;
  h.deallocate(out[t]);
  out[t] = nullptr;
}

unsigned blocks_for(std::uint64_t n) { return static_cast<unsigned>((n + 255) / 256); }

//! A device array of block pointers and two counters.
struct slots {
  void** d = nullptr;
  unsigned long long* counters = nullptr;  // [0] failed, [1] wrong
  explicit slots(std::uint64_t n) {
    cudaMalloc(&d, n * sizeof(void*));
    cudaMemset(d, 0, n * sizeof(void*));
    cudaMalloc(&counters, 2 * sizeof(unsigned long long));
    cudaMemset(counters, 0, 2 * sizeof(unsigned long long));
  }
  ~slots() {
    cudaFree(d);
    cudaFree(counters);
  }
  unsigned long long take(unsigned i) {
    unsigned long long v = 0;
    cudaMemcpy(&v, counters + i, sizeof v, cudaMemcpyDeviceToHost);
    cudaMemset(counters + i, 0, sizeof v);
    return v;
  }
};

std::uint64_t free_device_bytes() {
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  return f;
}

//! The retry protocol: launch; while some allocation failed, free what this launch got, grow,
//! and launch again. Returns the launches it took (0: growth gave nothing while it still failed).
int launch_with_growth(toga::cuda::heap& h, slots& s, std::uint64_t first, std::uint64_t n, std::size_t bytes, std::uint64_t* grown) {
  for (int launch = 1; launch <= 8; ++launch) {
    grow_alloc_k<<<blocks_for(n), 256>>>(h.ref(), s.d, first, n, bytes, s.counters);
    cudaDeviceSynchronize();
    if (s.take(0) == 0) return launch;
    grow_free_k<<<blocks_for(n), 256>>>(h.ref(), s.d, first, n, bytes, s.counters + 1);
    cudaDeviceSynchronize();
    const std::uint64_t g = h.grow_if_needed();
    *grown += g;
    if (g == 0) return 0;
  }
  return 0;
}

}  // namespace

// Done-when 1 of issue 14: from 0 bytes in a 64 GiB range to 8 GiB, by the retry protocol.
TEST(GrowableHeap, FromZeroToEightGiBByTheRetryProtocol) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 12 * GiB) GTEST_SKIP() << "needs 12 GiB free";
  toga::cuda::heap_options o;
  o.max_bytes = 64 * GiB;
  o.initial_bytes = 0;
  toga::cuda::heap h(o);
  ASSERT_TRUE(h.growable());
  EXPECT_EQ(h.capacity(), 64 * GiB);
  EXPECT_EQ(h.mapped_bytes(), 0u);
  // rounds of one size each; live blocks accumulate to 8 GiB: 16 B, 4 KiB, 64 KiB, 1 MiB, 256 KiB
  struct round {
    std::size_t bytes;
    std::uint64_t n;
  };
  const std::vector<round> rounds = {{16, 1u << 20},        {4096, 1u << 18},    {65536, 1u << 14},
                                     {1u << 20, 3u << 10}, {256u << 10, 1u << 14}, {1u << 20, 512}};
  std::uint64_t total = 0, live = 0;
  for (const round& r : rounds) total += r.n;
  slots s(total);
  // the kernels' local memory is reserved at their first launch: before the baseline
  grow_alloc_k<<<1, 256>>>(h.ref(), s.d, 0, 0, 16, s.counters);
  grow_free_k<<<1, 256>>>(h.ref(), s.d, 0, 0, 16, s.counters + 1);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  const std::uint64_t free0 = free_device_bytes();
  std::uint64_t first = 0, grown = 0;
  for (const round& r : rounds) {
    const std::uint64_t before = h.mapped_bytes();
    const int launches = launch_with_growth(h, s, first, r.n, r.bytes, &grown);
    std::printf("[ figure ] %llu x %zu B: %d launch(es), mapped %llu -> %llu MiB\n", static_cast<unsigned long long>(r.n), r.bytes,
                launches, static_cast<unsigned long long>(before / MiB), static_cast<unsigned long long>(h.mapped_bytes() / MiB));
    ASSERT_GT(launches, 0) << r.bytes << " B: growth stopped while allocations still failed";
    if (first == 0) EXPECT_GT(launches, 1) << "the first launch on a heap of 0 bytes must fail and record its demand";
    EXPECT_LE(launches, 2) << r.bytes << " B: one grow_if_needed() must serve the launch that failed";
    first += r.n;
    live += r.n * r.bytes;
  }
  EXPECT_GE(live, 8 * GiB);
  const toga::cuda::heap_attributes a = h.attributes();
  EXPECT_EQ(a.mapped_mem_current, h.mapped_bytes());
  EXPECT_EQ(a.grown_bytes, a.mapped_mem_current);  // initial 0, no trim: every mapped byte came from a growth
  EXPECT_EQ(a.growth_failures, 0u);
  EXPECT_GT(a.failed_growable, 0u);
  EXPECT_EQ(a.failed_exhausted + a.failed_limit + a.failed_too_large, 0u);
  EXPECT_LE(a.mapped_mem_current, 64 * GiB);
  std::printf("[ figure ] live %llu MiB, mapped %llu MiB (%.3f), growth requests %llu, demand requests %llu, metadata %llu MiB\n",
              static_cast<unsigned long long>(live / MiB), static_cast<unsigned long long>(a.mapped_mem_current / MiB),
              static_cast<double>(a.mapped_mem_current) / static_cast<double>(live), static_cast<unsigned long long>(a.growth_requests),
              static_cast<unsigned long long>(a.failed_growable), static_cast<unsigned long long>(a.metadata_bytes / MiB));
  // reserved equals mapped: the driver's free memory fell by the mapped bytes (its own
  // page tables aside: at most 1 %)
  const std::uint64_t drop = free0 - free_device_bytes();
  EXPECT_GE(drop, a.mapped_mem_current);
  EXPECT_LE(drop, a.mapped_mem_current + a.mapped_mem_current / 100 + 64 * MiB);
  toga::heap_quality q;
  const auto err = h.check(&q);  // G7: the device's mapped count matches the tree; every granule adopted once
  EXPECT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(q.unmapped_granules, (64 * GiB - a.mapped_mem_current) / a.granule_bytes);
  EXPECT_EQ(a.mapped_mem_current % a.granule_bytes, 0u);
  // everything back: the words were intact
  first = 0;
  for (const round& r : rounds) {
    grow_free_k<<<blocks_for(r.n), 256>>>(h.ref(), s.d, first, r.n, r.bytes, s.counters + 1);
    first += r.n;
  }
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(s.take(1), 0u) << "blocks overwritten by another owner";
  EXPECT_EQ(h.attributes().used_mem_current, 0u);
}

// Done-when 3a: after freeing everything, trim_to(0) gives every mapped byte back.
TEST(GrowableHeap, TrimToZeroReturnsEveryMappedByte) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 3 * GiB) GTEST_SKIP() << "needs 3 GiB free";
  toga::cuda::heap_options o;
  o.max_bytes = 4 * GiB;
  o.initial_bytes = 0;
  toga::cuda::heap h(o);
  const std::uint64_t n = 1u << 16;
  slots s(n);
  std::uint64_t grown = 0;
  for (std::size_t bytes : {48ul, 3000ul, 40000ul}) {  // UAlloc, superbins, TBuddy
    ASSERT_GT(launch_with_growth(h, s, 0, n, bytes, &grown), 0);
    grow_free_k<<<blocks_for(n), 256>>>(h.ref(), s.d, 0, n, bytes, s.counters + 1);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
  }
  EXPECT_EQ(s.take(1), 0u);
  const std::uint64_t mapped = h.mapped_bytes();
  ASSERT_GT(mapped, 0u);
  const std::uint64_t free_before = free_device_bytes();
  const std::uint64_t back = h.trim_to(0);
  const std::uint64_t rise = free_device_bytes() - free_before;
  std::printf("[ figure ] trim_to(0): %llu of %llu MiB unmapped; cudaMemGetInfo's free memory rose by %llu MiB (%.2f %%)\n",
              static_cast<unsigned long long>(back / MiB), static_cast<unsigned long long>(mapped / MiB),
              static_cast<unsigned long long>(rise / MiB), 100.0 * static_cast<double>(rise) / static_cast<double>(mapped));
  EXPECT_EQ(back, mapped);
  EXPECT_EQ(h.mapped_bytes(), 0u);
  EXPECT_GE(static_cast<double>(rise), 0.99 * static_cast<double>(mapped));
  toga::heap_quality q;
  const auto err = h.check(&q);
  EXPECT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(q.unmapped_granules, h.capacity() / h.attributes().granule_bytes);
  // and it grows again
  ASSERT_GT(launch_with_growth(h, s, 0, n, 100, &grown), 0);
  grow_free_k<<<blocks_for(n), 256>>>(h.ref(), s.d, 0, n, 100, s.counters + 1);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(s.take(1), 0u);
}

// Done-when 3b: after freeing a random half of 1 MiB blocks, a trim unmaps exactly the wholly
// free granules a heap walk counts.
TEST(GrowableHeap, TrimUnmapsExactlyTheFreeGranulesTheWalkCounts) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 3 * GiB) GTEST_SKIP() << "needs 3 GiB free";
  for (std::uint64_t granule : {2 * MiB, 32 * MiB}) {
    toga::cuda::heap_options o;
    o.max_bytes = 4 * GiB;
    o.granule_bytes = granule;
    o.initial_bytes = 2 * GiB;
    toga::cuda::heap h(o);
    const std::uint64_t n = 1536;  // 1.5 GiB of 1 MiB blocks
    slots s(n);
    grow_alloc_k<<<blocks_for(n), 256>>>(h.ref(), s.d, 0, n, MiB, s.counters);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    ASSERT_EQ(s.take(0), 0u);
    std::vector<unsigned char> flag(n);
    std::mt19937_64 rng(granule);
    for (auto& f : flag) f = static_cast<unsigned char>(rng() & 1);
    unsigned char* dflag = nullptr;
    TOGA_TEST_CUDA(cudaMalloc(&dflag, n));
    TOGA_TEST_CUDA(cudaMemcpy(dflag, flag.data(), n, cudaMemcpyHostToDevice));
    free_marked_k<<<blocks_for(n), 256>>>(h.ref(), s.d, dflag, n);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    cudaFree(dflag);
    h.trim();  // reclaim (trim_to does it too): the walk then counts what trim_to can withdraw
    toga::heap_quality q;
    auto err = h.check(&q);
    ASSERT_FALSE(err.has_value()) << *err;
    const std::uint64_t mapped = h.mapped_bytes();
    const std::uint64_t back = h.trim_to(0);
    std::printf("[ figure ] granule %llu MiB: %llu of %llu blocks freed; the walk counts %llu wholly free granules of %llu mapped; "
                "trim_to(0) unmapped %llu MiB\n",
                static_cast<unsigned long long>(granule / MiB), static_cast<unsigned long long>(std::count(flag.begin(), flag.end(), 1)),
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(q.free_granules),
                static_cast<unsigned long long>(mapped / granule), static_cast<unsigned long long>(back / MiB));
    EXPECT_EQ(back, q.free_granules * granule);
    EXPECT_EQ(h.mapped_bytes(), mapped - back);
    toga::heap_quality q2;
    err = h.check(&q2);
    EXPECT_FALSE(err.has_value()) << *err;
    EXPECT_EQ(q2.free_granules, 0u);
    EXPECT_EQ(q2.live_blocks, n - static_cast<std::uint64_t>(std::count(flag.begin(), flag.end(), 1)));
    grow_free_k<<<blocks_for(n), 256>>>(h.ref(), s.d, 0, n, MiB, s.counters + 1);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(s.take(1), 0u);
  }
}

// Done-when 4: with release threshold T, after a synchronising call the heap maps at most
// max(T, the granules that hold live blocks).
TEST(GrowableHeap, ReleaseThresholdAtSynchronisingCalls) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap_options o;
  o.max_bytes = 2 * GiB;
  o.granule_bytes = 2 * MiB;
  o.release_threshold = 64 * MiB;
  toga::cuda::heap h(o);
  const std::uint64_t n = 4096;  // 1 GiB of 256 KiB blocks
  slots s(n);
  std::uint64_t grown = 0;
  ASSERT_GT(launch_with_growth(h, s, 0, n, 256 << 10, &grown), 0);
  const std::uint64_t peak = h.mapped_bytes();
  EXPECT_GE(peak, 1 * GiB);
  for (std::uint64_t keep_every : {1u, 64u, 1024u, 0u}) {  // keep every k-th block live (0: none)
    std::vector<unsigned char> flag(n);
    for (std::uint64_t i = 0; i < n; ++i) flag[i] = keep_every == 0 || i % keep_every != 0;
    unsigned char* dflag = nullptr;
    TOGA_TEST_CUDA(cudaMalloc(&dflag, n));
    TOGA_TEST_CUDA(cudaMemcpy(dflag, flag.data(), n, cudaMemcpyHostToDevice));
    free_marked_k<<<blocks_for(n), 256>>>(h.ref(), s.d, dflag, n);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    cudaFree(dflag);
    h.synchronize();
    toga::heap_quality q;
    const auto err = h.check(&q);
    ASSERT_FALSE(err.has_value()) << *err;
    const std::uint64_t mapped = h.mapped_bytes(), g = 2 * MiB;
    const std::uint64_t live_granules = mapped / g - q.free_granules;
    std::printf("[ figure ] threshold 64 MiB, %llu live blocks of 256 KiB (%llu MiB): mapped %llu MiB, granules with live blocks %llu\n",
                static_cast<unsigned long long>(q.live_blocks), static_cast<unsigned long long>(q.live_bytes / MiB),
                static_cast<unsigned long long>(mapped / MiB), static_cast<unsigned long long>(live_granules));
    EXPECT_LE(mapped, std::max<std::uint64_t>(o.release_threshold, live_granules * g));
    EXPECT_TRUE(mapped <= o.release_threshold || q.free_granules == 0) << "free granules stayed above the threshold";
  }
  EXPECT_LE(h.mapped_bytes(), o.release_threshold);
  EXPECT_GT(h.attributes().trims, 0u);
}

// Done-when 5: a failure of each VMM call injected at the k-th granule: nullptr, one counted
// growth failure, no half-mapped granule (the walk and the driver agree), the heap working on.
TEST(GrowableHeap, InjectedDriverFailuresRollBackExactly) {
  TOGA_TEST_REQUIRE_GPU();
  for (toga::growth_step step : {toga::growth_step::create, toga::growth_step::map, toga::growth_step::set_access}) {
    toga::cuda::heap_options o;
    o.max_bytes = 1 * GiB;
    o.granule_bytes = 2 * MiB;
    toga::cuda::heap h(o);
    const std::uint64_t n = 64;  // 64 x 256 KiB = 16 MiB: 8 granules, more with the quarter added
    slots s(n);
    grow_alloc_k<<<1, 64>>>(h.ref(), s.d, 0, n, 256 << 10, s.counters);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(s.take(0), n) << "a heap of 0 bytes serves nothing";
    const std::uint64_t free_before = free_device_bytes();
    h.inject_growth_failure(step, 3);  // the third granule of the growth fails
    const std::uint64_t got = h.grow_if_needed();
    const toga::cuda::heap_attributes a = h.attributes();
    std::printf("[ figure ] %s fails at granule 3: grow_if_needed mapped %llu MiB, growth failures %llu\n", toga::to_string(step),
                static_cast<unsigned long long>(got / MiB), static_cast<unsigned long long>(a.growth_failures));
    EXPECT_EQ(got, 2 * 2 * MiB) << toga::to_string(step);
    EXPECT_EQ(a.growth_failures, 1u);
    EXPECT_EQ(h.mapped_bytes(), 4 * MiB);
    const std::uint64_t drop = free_before - free_device_bytes();
    EXPECT_GE(drop, 4 * MiB);
    EXPECT_LT(drop, 6 * MiB) << "the failed granule's memory was not given back";
    toga::heap_quality q;
    auto err = h.check(&q);
    EXPECT_FALSE(err.has_value()) << *err;
    EXPECT_EQ(q.unmapped_granules, 1 * GiB / (2 * MiB) - 2);
    // the heap works on: the retry protocol completes the launch
    grow_free_k<<<1, 64>>>(h.ref(), s.d, 0, n, 256 << 10, s.counters + 1);
    std::uint64_t grown = 0;
    EXPECT_GT(launch_with_growth(h, s, 0, n, 256 << 10, &grown), 0);
    grow_free_k<<<1, 64>>>(h.ref(), s.d, 0, n, 256 << 10, s.counters + 1);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(s.take(1), 0u);
    toga::heap_quality q2;
    err = h.check(&q2);
    EXPECT_FALSE(err.has_value()) << *err;
  }
}

TEST(GrowableHeap, OptionErrors) {
  TOGA_TEST_REQUIRE_GPU();
  // each error names the option that was wrong
  auto message = [](const toga::cuda::heap_options& o, std::uint64_t fixed_bytes = 0) -> std::string {
    try {
      if (fixed_bytes) toga::cuda::heap h(fixed_bytes, o);
      else toga::cuda::heap h(o);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no std::invalid_argument";
  };
  toga::cuda::heap_options o;
  EXPECT_NE(message(o).find("max_bytes"), std::string::npos);  // heap(options) needs max_bytes
  o.max_bytes = 1 * GiB;
  EXPECT_NE(message(o, 64 * MiB).find("max_bytes"), std::string::npos);  // size and max_bytes
  o.granule_bytes = 3 * MiB;
  EXPECT_NE(message(o).find("granule_bytes"), std::string::npos);
  o.granule_bytes = 4096;  // below the VMM granularity
  EXPECT_NE(message(o).find("granule_bytes"), std::string::npos);
  o.granule_bytes = 0;
  o.max_run_bytes = 3 * MiB;  // not a power of two
  EXPECT_NE(message(o).find("max_run_bytes"), std::string::npos) << message(o);
  o.max_run_bytes = MiB;  // below the 2 MiB granule
  EXPECT_NE(message(o).find("max_run_bytes"), std::string::npos) << message(o);
  o.max_run_bytes = 0;
  o.initial_bytes = 2 * GiB;
  EXPECT_NE(message(o).find("initial_bytes"), std::string::npos);
  o.initial_bytes = 0;
  o.presplit_bytes = 64 * MiB;  // a fixed heap's option
  EXPECT_NE(message(o).find("presplit_bytes"), std::string::npos);
  o.presplit_bytes = ~std::uint64_t{0};
  o.max_bytes = 256ull * GiB;
  EXPECT_NE(message(o).find("max_bytes"), std::string::npos);
  o.max_bytes = 1;  // below one VMM granule: the message names the smallest valid max_bytes
  EXPECT_NE(message(o).find("the smallest valid max_bytes is"), std::string::npos) << message(o);
  toga::cuda::heap_options fixed_o;
  fixed_o.release_threshold = 0;  // a growth option on a fixed heap
  EXPECT_NE(message(fixed_o, 64 * MiB).find("release_threshold"), std::string::npos);
  o.max_bytes = 1 * GiB;
  cudaStream_t st = nullptr;
  cudaMemPool_t pool = nullptr;
  TOGA_TEST_CUDA(cudaDeviceGetDefaultMemPool(&pool, 0));
  o.pool = pool;
  o.stream = st;
  EXPECT_NE(message(o).find("pool"), std::string::npos);
  o.pool = nullptr;
  // a fixed heap's growth calls do nothing
  toga::cuda::heap f(64 * MiB);
  EXPECT_FALSE(f.growable());
  EXPECT_EQ(f.grow_if_needed(), 0u);
  EXPECT_EQ(f.mapped_bytes(), f.capacity());
  EXPECT_FALSE(f.check().has_value());
  // a growable heap moves
  o.max_bytes = 1 * GiB;
  o.initial_bytes = 64 * MiB;
  toga::cuda::heap g(o);
  toga::cuda::heap g2(std::move(g));
  EXPECT_EQ(g2.mapped_bytes(), 64 * MiB);
  EXPECT_EQ(g.mapped_bytes(), 0u);
  EXPECT_THROW(g.grow_if_needed(), std::logic_error);
}

// ---- device budgets and the allocation registry (issue 31; toga/budget.hpp) ---------------------

namespace {
//! Removes the test's budget of the current device whatever happens.
struct budget_guard {
  ~budget_guard() {
    try {
      toga::cuda::set_device_budget(-1, 0);
    } catch (...) {
    }
  }
};
}  // namespace

// Two heaps under one 2 GiB budget: the second construction fails with a message naming the
// budget, the usage and the holder; a growable heap grows to the budget and no further, its
// blocks intact; the usage equals what the heaps hold, and returns to where it was.
TEST(DeviceBudget, TwoHeapsUnderOneTwoGiBBudget) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 4 * GiB) GTEST_SKIP() << "needs 4 GiB free";
  budget_guard guard;
  const std::uint64_t u0 = toga::cuda::device_budget().used;  // heaps other tests left alive (the default heap's)
  toga::cuda::set_device_budget(-1, u0 + 2 * GiB);
  EXPECT_EQ(toga::cuda::device_budget().budget, u0 + 2 * GiB);
  EXPECT_EQ(toga::cuda::device_budget().source, toga::budget_source::api);
  std::string refused;
  {
    toga::cuda::heap a(GiB);
    const toga::cuda::heap_attributes aa = a.attributes();
    EXPECT_EQ(toga::cuda::device_budget().used, u0 + aa.device_bytes) << "a fixed heap is charged what it obtained";
    try {
      toga::cuda::heap b(GiB);
      ADD_FAILURE() << "a second 1 GiB heap fitted under a 2 GiB budget";
    } catch (const toga::bad_alloc& e) {
      refused = e.what();
    }
    std::printf("[ budget   ] second heap: %s\n", refused.c_str());
    EXPECT_NE(refused.find("the budget of cuda device"), std::string::npos) << refused;
    EXPECT_NE(refused.find(std::to_string(u0 + aa.device_bytes) + " B in use"), std::string::npos) << refused;
    EXPECT_NE(refused.find("largest holders: cuda heap #"), std::string::npos) << refused;
    EXPECT_EQ(toga::cuda::device_budget().used, u0 + aa.device_bytes) << "the refused heap left nothing recorded";
    // a budget below the usage is refused and changes nothing
    EXPECT_THROW(toga::cuda::set_device_budget(-1, u0 + GiB), std::invalid_argument);
    EXPECT_EQ(toga::cuda::device_budget().budget, u0 + 2 * GiB);
    EXPECT_THROW(toga::cuda::set_device_budget(1 << 20, GiB), std::invalid_argument);

    // a growable heap in the rest of the budget: 2^19 x 4 KiB (2 GiB) of demand, about 0.99 GiB fits
    toga::cuda::heap_options o;
    o.max_bytes = 4 * GiB;
    o.granule_bytes = 32 * MiB;
    toga::cuda::heap c(o);
    const std::uint64_t n = 1u << 19;
    slots s(n);
    std::uint64_t grown = 0;
    EXPECT_EQ(launch_with_growth(c, s, 0, n, 4096, &grown), 0) << "growth stops at the budget while requests still fail";
    const toga::cuda::heap_attributes ca = c.attributes();
    std::printf("[ budget   ] growable heap: %llu B mapped, %llu budget refusals, used %llu of %llu B\n",
                static_cast<unsigned long long>(ca.mapped_mem_current), static_cast<unsigned long long>(ca.growth_budget_refusals),
                static_cast<unsigned long long>(toga::cuda::device_budget().used), static_cast<unsigned long long>(u0 + 2 * GiB));
    EXPECT_GT(ca.mapped_mem_current, 512 * MiB);
    EXPECT_GE(ca.growth_budget_refusals, 1u);
    EXPECT_LE(toga::cuda::device_budget().used, u0 + 2 * GiB);
    EXPECT_GT(toga::cuda::device_budget().used + 32 * MiB, u0 + 2 * GiB - 32 * MiB) << "growth stopped a granule or so short of the budget";
    // the last launch's blocks are whole, the heap walk passes
    grow_alloc_k<<<blocks_for(n), 256>>>(c.ref(), s.d, 0, n, 4096, s.counters);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    const unsigned long long failed = s.take(0);
    EXPECT_GT(failed, 0u);
    grow_free_k<<<blocks_for(n), 256>>>(c.ref(), s.d, 0, n, 4096, s.counters + 1);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(s.take(1), 0u) << "corrupt blocks";
    const auto err = c.check();
    EXPECT_FALSE(err.has_value()) << *err;
    // the registry: every record of this device's heaps, granules with their addresses
    const toga::memory_report rep = toga::cuda::memory_report();
    std::uint64_t granule_bytes = 0;
    for (const auto& r : rep.records)
      if (r.what == "granule" && c.ref().contains(reinterpret_cast<const void*>(r.address))) granule_bytes += r.bytes;
    EXPECT_EQ(granule_bytes, ca.mapped_mem_current);
    std::printf("%s", toga::to_string(rep).c_str());
    // trimming gives the budget back
    const std::uint64_t before = toga::cuda::device_budget().used;
    EXPECT_EQ(c.trim_to(0), ca.mapped_mem_current);
    EXPECT_EQ(toga::cuda::device_budget().used, before - ca.mapped_mem_current);
    std::uint64_t left = 0;
    for (const auto& r : toga::cuda::memory_report().records)
      left += r.what == "granule" && c.ref().contains(reinterpret_cast<const void*>(r.address)) ? r.bytes : 0;
    EXPECT_EQ(left, 0u);
  }
  EXPECT_EQ(toga::cuda::device_budget().used, u0) << "destroyed heaps leave no record";
  // (budget_state::high is the device's lifetime high-water mark: earlier tests' heaps set it)
  EXPECT_GE(toga::cuda::device_budget().high, u0 + 2 * GiB - 64 * MiB);
}
