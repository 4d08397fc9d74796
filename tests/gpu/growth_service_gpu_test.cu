// The growth service and the host tier on a real GPU (issue 30; docs/usage.md §9.1, design.md §12.6): one kernel
// allocates 8 GiB in 4 KiB blocks from an empty growable heap, in a single launch with no
// nullptr, while a host thread maps granules under it; its time beside the same kernel on the
// heap once mapped (printed as figures: the target is checked by benchmarks, not here); small and
// mixed sizes from an empty heap; a range too small for the launch releases the waiting threads
// with nullptr (no hang); the host tier: a 4 GiB workload under a 1 GiB device budget, every
// block's words verified, the read bandwidth of each tier, trims that give host granules back
// first. Every block's words are checked and the heap walk passes. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include <utility>

#ifdef SVC_PROFILE
// A profiling build (not the figures: counters cost atomics): -DSVC_PROFILE counts config.hpp's
// events in this file's kernels (the allocator's code inlined into them; heap.cu's own kernels are
// not counted) and records when each thread of the allocation kernel started and finished
// (%globaltimer); each figure is followed by the nonzero counters and the finish-time quantiles.
// [4t] start, [4t + 1] end (ns), [4t + 2] the events thread t went through (bits), [4t + 3] its SM
// (null: not recorded)
__device__ unsigned long long* svc_timeline;
// (toga_prof[] comes with profile_counters.cuh; the macros expand where the events are)
#define TOGA_PROFILE_COUNT(e)                                                                      \
  do {                                                                                             \
    atomicAdd(&toga_prof[(e)], 1ull);                                                              \
    if (svc_timeline) svc_timeline[4 * (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) + 2] |= 1ull << (e); \
  } while (0)
#include "toga/cuda/profile_counters.cuh"
#endif
#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace {

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

// Thread t allocates `bytes` << (t % 3 when mixed) and stamps it; counts nullptrs.
__global__ void __launch_bounds__(256) svc_alloc_k(toga::cuda::heap_ref h, void** out, std::uint64_t n, std::size_t bytes, bool mixed,
                                                   unsigned long long* failed) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n) return;
  const std::size_t b = mixed ? bytes << (t % 3) : bytes;
#ifdef SVC_PROFILE
  if (svc_timeline) {
    svc_timeline[4 * t] = toga::cuda::platform::clock_ns();
    svc_timeline[4 * t + 3] = toga::cuda::platform::sm_id();
  }
#endif
  void* p = h.allocate(b);
#ifdef SVC_PROFILE
  if (svc_timeline) svc_timeline[4 * t + 1] = toga::cuda::platform::clock_ns();
#endif
  out[t] = p;
  if (p == nullptr) {
    atomicAdd(failed, 1ull);
    return;
  }
  static_cast<std::uint64_t*>(p)[0] = t;
  static_cast<std::uint64_t*>(p)[(b - 8) / 8] = t;
}
__global__ void __launch_bounds__(256) svc_free_k(toga::cuda::heap_ref h, void** out, std::uint64_t n, std::size_t bytes, bool mixed,
                                                  unsigned long long* wrong) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n) return;
  void* p = out[t];
  if (p == nullptr) return;
  const std::size_t b = mixed ? bytes << (t % 3) : bytes;
  if (static_cast<std::uint64_t*>(p)[0] != t || static_cast<std::uint64_t*>(p)[(b - 8) / 8] != t) atomicAdd(wrong, 1ull);
  h.deallocate(p);
  out[t] = nullptr;
}

unsigned blocks_for(std::uint64_t n) { return static_cast<unsigned>((n + 255) / 256); }

#ifdef SVC_PROFILE
const char* const event_names[] = {
    "tb_alloc", "tb_climb", "tb_visit", "tb_restart", "tb_claim_lost", "tb_lock_spin", "tb_split", "tb_propagate", "tb_free",
    "tb_merge", "tb_t_stage1", "tb_t_search", "tb_t_split", "ua_group", "ua_fast", "ua_take_failed", "ua_no_pin", "ua_short",
    "ua_emptied", "ua_lost_bits", "ua_find_step", "ua_grow", "ua_reconcile", "ua_lock_spin", "ua_free_group", "ua_free_cold",
    "ua_retire", "ua_steal", "ua_reclaim", "ua_reclaim_walk", "ua_fallback", "ua_t_reclaim_walk", "gw_attempt", "gw_overlap",
    "gw_post", "gw_t_attempt", "gw_t_wait", "ua_t_stage1", "ua_t_grow", "ua_t_fallback", "tb_top_fail", "tb_gave_up", "sem_reserve", "sem_break", "sem_poll", "sem_cas_lost", "ua_fallback_take", "tb_stale_fail", "tb_drain", "tb_refused"};
static_assert(sizeof event_names / sizeof event_names[0] == toga::prof_event_count, "one name per profiling event");
unsigned long long* g_timeline = nullptr;  // device copy of svc_timeline (4 words per thread)
std::uint64_t g_timeline_n = 0;
// Before a launch to profile: zero the counters; record n threads' start, end, events and SM.
void profile_begin(std::uint64_t n) {
  unsigned long long z[64] = {};
  cudaMemcpyToSymbol(toga_prof, z, sizeof z);
  if (g_timeline_n < n) {
    cudaFree(g_timeline);
    cudaMalloc(&g_timeline, 4 * n * sizeof(unsigned long long));
    g_timeline_n = n;
  }
  cudaMemset(g_timeline, 0, 4 * n * sizeof(unsigned long long));
  cudaMemcpyToSymbol(svc_timeline, &g_timeline, sizeof g_timeline);
}
// After it: print the counters (times in cycles, summed over the lanes that ran them), when the
// threads started and finished (ms after the first start: quantiles), their latencies, and for
// the slowest 1 % of the threads the share that went through each event; stop recording.
void profile_end(const char* what, std::uint64_t n) {
  unsigned long long c[64];
  cudaMemcpyFromSymbol(c, toga_prof, sizeof c);
  std::printf("[ profile ] %s:", what);
  for (unsigned e = 0; e < toga::prof_event_count; ++e)
    if (c[e] != 0) std::printf(" %s=%llu", event_names[e], c[e]);
  std::printf("\n");
  std::vector<unsigned long long> tl(4 * n);
  cudaMemcpy(tl.data(), g_timeline, tl.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
  unsigned long long* none = nullptr;
  cudaMemcpyToSymbol(svc_timeline, &none, sizeof none);
  unsigned long long first = ~0ull;
  for (std::uint64_t t = 0; t < n; ++t)
    if (tl[4 * t] != 0) first = std::min(first, tl[4 * t]);
  std::vector<double> start, end, lat;
  std::vector<std::pair<double, std::uint64_t>> by_lat;
  for (std::uint64_t t = 0; t < n; ++t) {
    if (tl[4 * t] == 0 || tl[4 * t + 1] == 0) continue;
    start.push_back((tl[4 * t] - first) / 1e6);
    end.push_back((tl[4 * t + 1] - first) / 1e6);
    lat.push_back((tl[4 * t + 1] - tl[4 * t]) / 1e6);
    by_lat.push_back({lat.back(), t});
  }
  if (end.empty()) return;
  const auto q = [](std::vector<double> v, const char* name) {
    std::sort(v.begin(), v.end());
    std::printf("[ profile ]   %s (ms): 50%% %.3f, 90%% %.3f, 99%% %.3f, 99.9%% %.3f, max %.3f; sum %.1f\n", name, v[v.size() / 2],
                v[v.size() * 9 / 10], v[v.size() * 99 / 100], v[v.size() * 999 / 1000], v.back(), [&] {
                  double x = 0;
                  for (const double y : v) x += y;
                  return x;
                }());
  };
  q(start, "started, after the first start");
  q(end, "finished, after the first start");
  q(lat, "latency per thread");
  std::sort(by_lat.begin(), by_lat.end());
  const std::size_t k = std::max<std::size_t>(1, by_lat.size() / 100);
  std::vector<std::uint64_t> hits(toga::prof_event_count, 0);
  std::vector<std::uint64_t> sms(1024, 0);
  for (std::size_t i = by_lat.size() - k; i < by_lat.size(); ++i) {
    const std::uint64_t t = by_lat[i].second;
    for (unsigned e = 0; e < toga::prof_event_count; ++e) hits[e] += (tl[4 * t + 2] >> e) & 1u;
    sms[tl[4 * t + 3] % 1024]++;
  }
  std::printf("[ profile ]   slowest %zu threads (latency >= %.3f ms) went through:", k, by_lat[by_lat.size() - k].first);
  for (unsigned e = 0; e < toga::prof_event_count; ++e)
    if (hits[e] != 0) std::printf(" %s %.0f%%", event_names[e], 100.0 * hits[e] / k);
  unsigned distinct = 0;
  for (const auto x : sms) distinct += x != 0;
  std::printf("; on %u SMs\n", distinct);
  // the slowest thread's story
  const std::uint64_t t = by_lat.back().second;
  std::printf("[ profile ]   slowest thread %llu: start %.3f end %.3f ms, SM %llu, events:", static_cast<unsigned long long>(t),
              (tl[4 * t] - first) / 1e6, (tl[4 * t + 1] - first) / 1e6, tl[4 * t + 3]);
  for (unsigned e = 0; e < toga::prof_event_count; ++e)
    if ((tl[4 * t + 2] >> e) & 1u) std::printf(" %s", event_names[e]);
  std::printf("\n");
}
#else
void profile_begin(std::uint64_t) {}
void profile_end(const char*, std::uint64_t) {}
#endif

struct run {
  void** d = nullptr;
  unsigned long long* c = nullptr;  // [0] failed [1] wrong
  std::uint64_t n;
  explicit run(std::uint64_t n_) : n(n_) {
    cudaMalloc(&d, n * sizeof(void*));
    cudaMemset(d, 0, n * sizeof(void*));
    cudaMalloc(&c, 2 * sizeof(unsigned long long));
    cudaMemset(c, 0, 2 * sizeof(unsigned long long));
  }
  ~run() {
    cudaFree(d);
    cudaFree(c);
  }
  unsigned long long take(unsigned i) {
    unsigned long long v = 0;
    cudaMemcpy(&v, c + i, sizeof v, cudaMemcpyDeviceToHost);
    cudaMemset(c + i, 0, sizeof v);
    return v;
  }
  // One launch of the allocation kernel, timed with events (ms).
  float alloc(toga::cuda::heap& h, std::size_t bytes, bool mixed) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    svc_alloc_k<<<blocks_for(n), 256>>>(h.ref(), d, n, bytes, mixed, c);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
  }
  void free_all(toga::cuda::heap& h, std::size_t bytes, bool mixed) {
    svc_free_k<<<blocks_for(n), 256>>>(h.ref(), d, n, bytes, mixed, c + 1);
    cudaDeviceSynchronize();
  }
};

std::uint64_t free_device_bytes() {
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  return f;
}

toga::cuda::heap_options service_options(std::uint64_t max_bytes, std::uint64_t wait_us = 60'000'000) {
  toga::cuda::heap_options o;
  o.max_bytes = max_bytes;
  o.growth_service = true;
  o.growth_wait_us = wait_us;
  return o;
}

}  // namespace

// Issue 30's first target: 8 GiB of 4 KiB blocks from an empty heap in one launch, with
// growth_ahead_percent `ahead` (0: each round maps only what was posted since the last; 100:
// doubling), `headroom` bytes of headroom_bytes, and granule_bytes / max_run_bytes (0: toga's
// choice, 2 MiB granules in runs of up to 32 MiB; design.md §12.8).
void eight_gib_fill(std::uint64_t ahead, std::uint64_t headroom, std::uint64_t granule = 0, std::uint64_t max_run = 0) {
  if (free_device_bytes() < 20 * GiB) GTEST_SKIP() << "needs 20 GiB free";
  SCOPED_TRACE("ahead " + std::to_string(ahead) + " %, headroom " + std::to_string(headroom / MiB) + " MiB, granule " +
               std::to_string(granule / MiB) + " MiB, largest run " + std::to_string(max_run / MiB) + " MiB");
  toga::cuda::heap_options o = service_options(16 * GiB);
  o.headroom_bytes = headroom;
  o.growth_ahead_percent = ahead;
  o.granule_bytes = granule;
  o.max_run_bytes = max_run;
  toga::cuda::heap h(o);
  ASSERT_EQ(h.mapped_bytes(), 0u);
  const std::uint64_t n = 2u << 20;  // 2^21 x 4 KiB = 8 GiB
  run r(n);
  svc_alloc_k<<<1, 32>>>(h.ref(), r.d, 0, 4096, false, r.c);  // load the kernels (nothing allocated)
  svc_free_k<<<1, 32>>>(h.ref(), r.d, 0, 4096, false, r.c + 1);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  profile_begin(n);
  const float grow_ms = r.alloc(h, 4096, false);
  TOGA_TEST_CUDA(cudaGetLastError());
  profile_end(("8 GiB fill, ahead " + std::to_string(ahead) + ", headroom " + std::to_string(headroom / MiB) + " MiB").c_str(), n);
  EXPECT_EQ(r.take(0), 0u) << "every request is served in the one launch";
  const std::uint64_t walks = h.stats().reclaim_walks;  // of the growing launch (the warm ones add theirs)
  toga::cuda::heap_attributes a = h.attributes();
  EXPECT_GE(a.mapped_mem_current, 8 * GiB);
  EXPECT_GT(a.service_rounds, 0u);
  EXPECT_EQ(a.service_timeouts + a.service_gave_up, 0u);
  EXPECT_EQ(a.service_served, a.service_waits);
  const auto err = h.check();
  EXPECT_FALSE(err.has_value()) << *err;
  r.free_all(h, 4096, false);
  EXPECT_EQ(r.take(1), 0u) << "blocks overwritten by another owner";
  // the same kernel on the heap now mapped (warm; median of 5)
  std::vector<float> warm;
  for (int i = 0; i < 5; ++i) {
    warm.push_back(r.alloc(h, 4096, false));
    EXPECT_EQ(r.take(0), 0u);
    r.free_all(h, 4096, false);
    EXPECT_EQ(r.take(1), 0u);
  }
  std::sort(warm.begin(), warm.end());
  a = h.attributes();
  std::printf("[ figure ] 2^21 x 4 KiB from an empty heap with the service, ahead %llu %%, headroom %llu MiB, granule %llu MiB, runs up to "
              "%llu MiB: %.3f ms; on the mapped heap: %.3f ms "
              "(median of 5); %.2fx; mapped %llu MiB in %llu granules, %llu runs, %llu rounds (%.3f ms in rounds, %.3f ms mapping), %llu waits, "
              "%llu reclaim walks\n",
              static_cast<unsigned long long>(ahead), static_cast<unsigned long long>(headroom / MiB),
              static_cast<unsigned long long>(a.granule_bytes / MiB), static_cast<unsigned long long>(a.max_run_bytes / MiB), grow_ms, warm[2],
              grow_ms / warm[2], static_cast<unsigned long long>(a.mapped_mem_current / MiB),
              static_cast<unsigned long long>(a.mapped_mem_current / a.granule_bytes), static_cast<unsigned long long>(a.mapped_runs),
              static_cast<unsigned long long>(a.service_rounds), a.service_round_ns / 1e6, a.service_map_ns / 1e6,
              static_cast<unsigned long long>(a.service_waits), static_cast<unsigned long long>(walks));
  EXPECT_EQ(h.trim_to(0), a.mapped_mem_current);
}
TEST(GrowthService, EightGiBOfFourKiBBlocksInOneLaunchFromEmpty) {
  TOGA_TEST_REQUIRE_GPU();
  eight_gib_fill(100, 0);  // the default
}
TEST(GrowthService, EightGiBInOneLaunchWithHeadroom) {
  TOGA_TEST_REQUIRE_GPU();
  eight_gib_fill(100, 2 * GiB);
}
TEST(GrowthService, EightGiBInOneLaunchMappingOnlyDemand) {
  TOGA_TEST_REQUIRE_GPU();
  eight_gib_fill(0, 0);
}
TEST(GrowthService, EightGiBInOneLaunchWithAHandlePerThirtyTwoMiBGranule) {  // the policy before runs
  TOGA_TEST_REQUIRE_GPU();
  eight_gib_fill(100, 0, 32 * MiB, 32 * MiB);
}
TEST(GrowthService, EightGiBInOneLaunchWithAHandlePerTwoMiBGranule) {  // runs of one granule
  TOGA_TEST_REQUIRE_GPU();
  eight_gib_fill(100, 0, 2 * MiB, 2 * MiB);
}

TEST(GrowthService, SmallAndMixedSizesFromEmptyInOneLaunch) {
  TOGA_TEST_REQUIRE_GPU();
  // toga's granules (2 MiB in runs of up to 32 MiB), and for the small sizes 32 MiB granules beside them
  for (const std::size_t bytes : {std::size_t{16}, std::size_t{256}, std::size_t{1024}, std::size_t{40960}})
  for (const std::uint64_t granule : {std::uint64_t{0}, 32 * MiB}) {
    if (granule != 0 && bytes > 256) continue;
    SCOPED_TRACE("bytes " + std::to_string(bytes) + ", granule_bytes " + std::to_string(granule));
    toga::cuda::heap_options o = service_options(32 * GiB);
    o.granule_bytes = granule;
    toga::cuda::heap h(o);
    const std::uint64_t n = bytes >= 40960 ? (1u << 16) : (1u << 20);
    run r(n);
    profile_begin(n);
    const float ms = r.alloc(h, bytes, true);
    TOGA_TEST_CUDA(cudaGetLastError());
    profile_end((std::to_string(bytes) + " B mix from empty, granule " + std::to_string(granule >> 20) + " MiB").c_str(), n);
    EXPECT_EQ(r.take(0), 0u);
    const toga::cuda::heap_attributes a = h.attributes();
    std::printf("[ figure ] %llu threads x %zu B (x1, x2, x4) from empty, granule %llu MiB in runs of up to %llu MiB: %.3f ms, mapped %llu MiB, "
                "%llu rounds (%.3f ms in rounds, %.3f ms mapping), %llu waits, %llu timeouts, %llu reclaim walks\n",
                static_cast<unsigned long long>(n), bytes, static_cast<unsigned long long>(a.granule_bytes / MiB),
                static_cast<unsigned long long>(a.max_run_bytes / MiB), ms, static_cast<unsigned long long>(a.mapped_mem_current / MiB),
                static_cast<unsigned long long>(a.service_rounds), a.service_round_ns / 1e6, a.service_map_ns / 1e6,
                static_cast<unsigned long long>(a.service_waits), static_cast<unsigned long long>(a.service_timeouts),
                static_cast<unsigned long long>(h.stats().reclaim_walks));
    const auto err = h.check();
    EXPECT_FALSE(err.has_value()) << *err;
    r.free_all(h, bytes, true);
    EXPECT_EQ(r.take(1), 0u);
  }
}

TEST(GrowthService, ARangeTooSmallReleasesTheWaitersWithNullptr) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap h(service_options(256 * MiB, 60'000'000));
  const std::uint64_t n = 1u << 18;  // 2^18 x 4 KiB = 1 GiB asked of 256 MiB
  run r(n);
  const float ms = r.alloc(h, 4096, false);
  TOGA_TEST_CUDA(cudaGetLastError());
  const unsigned long long failed = r.take(0);
  const toga::cuda::heap_attributes a = h.attributes();
  std::printf("[ figure ] 2^18 x 4 KiB into a 256 MiB range: %llu nullptr in %.3f ms\n", failed, ms);
  EXPECT_GT(failed, n / 2);
  EXPECT_LT(ms, 10'000.f) << "the waiters must give up once the range is mapped, not at the 60 s bound";
  EXPECT_EQ(a.mapped_mem_current, 256 * MiB);
  EXPECT_EQ(a.service_timeouts, 0u);
  EXPECT_EQ(a.failed_exhausted + a.service_gave_up, failed) << "every nullptr counted once";
  r.free_all(h, 4096, false);
  EXPECT_EQ(r.take(1), 0u);
  const auto err = h.check();
  EXPECT_FALSE(err.has_value()) << *err;
}

TEST(GrowthService, BadWaitBoundIsRefusedByName) {
  TOGA_TEST_REQUIRE_GPU();
  for (const std::uint64_t us : {std::uint64_t{0}, std::uint64_t{60'000'001}}) {
    try {
      toga::cuda::heap h(service_options(GiB, us));
      ADD_FAILURE() << "growth_wait_us " << us << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("service_wait_us"), std::string::npos) << e.what();
    }
  }
}

// ---- the host tier (heap_options::spill) ----

namespace {
// Thread t sums the 64-bit words of block out[t] when flag[t] (a read of the whole block).
__global__ void __launch_bounds__(256) read_blocks_k(void* const* out, const unsigned char* flag, std::uint64_t n, std::size_t bytes,
                                                     unsigned long long* sink) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n || !flag[t] || out[t] == nullptr) return;
  const std::uint64_t* w = static_cast<const std::uint64_t*>(out[t]);
  unsigned long long s = 0;
  for (std::size_t i = 0; i < bytes / 8; ++i) s += w[i];
  if (s == 42) atomicAdd(sink, 1ull);  // (keeps the reads)
}
// Fills block out[t] with t + word index, then checks it (another kernel).
__global__ void __launch_bounds__(256) fill_k(void* const* out, std::uint64_t n, std::size_t bytes) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n || out[t] == nullptr) return;
  std::uint64_t* w = static_cast<std::uint64_t*>(out[t]);
  for (std::size_t i = 1; i + 1 < bytes / 8; ++i) w[i] = t * 1'000'003ull + i;  // (words 0 and last keep the stamp t)
}
__global__ void __launch_bounds__(256) verify_k(void* const* out, std::uint64_t n, std::size_t bytes, unsigned long long* wrong) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n || out[t] == nullptr) return;
  const std::uint64_t* w = static_cast<const std::uint64_t*>(out[t]);
  for (std::size_t i = 0; i < bytes / 8; ++i)
    if (w[i] != (i == 0 || i + 1 == bytes / 8 ? t : t * 1'000'003ull + i)) {
      atomicAdd(wrong, 1ull);
      return;
    }
}
}  // namespace

// Issue 30's second target: a device budget of 1 GiB, a 4 GiB workload: the rest from host memory.
TEST(HostTier, OneGiBBudgetFourGiBWorkloadSpillsAndEveryBlockIsIntact) {
  TOGA_TEST_REQUIRE_GPU();
  int dev = 0;
  TOGA_TEST_CUDA(cudaGetDevice(&dev));
  toga::cuda::heap_options o = service_options(8 * GiB);
  o.spill = toga::spill_policy::when_device_full;
  std::unique_ptr<toga::cuda::heap> hp;
  try {
    toga::cuda::set_device_budget(dev, GiB);
    hp = std::make_unique<toga::cuda::heap>(o);
  } catch (const std::invalid_argument& e) {
    toga::cuda::set_device_budget(dev, 0);
    GTEST_SKIP() << "no host tier on this driver: " << e.what();
  }
  toga::cuda::heap& h = *hp;
  const std::size_t bytes = 64 * 1024;
  const std::uint64_t n = 4 * GiB / bytes;  // 65,536 blocks of 64 KiB
  run r(n);
  const float ms = r.alloc(h, bytes, false);
  TOGA_TEST_CUDA(cudaGetLastError());
  EXPECT_EQ(r.take(0), 0u) << "the blocks beyond the budget come from the host tier";
  const toga::cuda::heap_attributes a = h.attributes();
  const std::uint64_t device_mapped = a.mapped_mem_current - a.mapped_host_mem_current;
  EXPECT_LE(device_mapped + a.metadata_bytes, GiB) << "the device tier stays within the budget";
  EXPECT_GE(a.mapped_host_mem_current, 3 * GiB - a.metadata_bytes);
  EXPECT_GT(a.spilled_granules, 0u);
  EXPECT_EQ(a.service_timeouts + a.service_gave_up, 0u);
  fill_k<<<blocks_for(n), 256>>>(r.d, n, bytes);
  verify_k<<<blocks_for(n), 256>>>(r.d, n, bytes, r.c + 1);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(r.take(1), 0u) << "every word of every block intact, on either tier";
  // which blocks are on which tier, and the bandwidth of reading each
  std::vector<void*> ptrs(n);
  TOGA_TEST_CUDA(cudaMemcpy(ptrs.data(), r.d, n * sizeof(void*), cudaMemcpyDeviceToHost));
  std::vector<unsigned char> on_host(n), on_device(n);
  std::uint64_t host_blocks = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    on_host[i] = h.tier_of(ptrs[i]) == toga::memory_tier::host;
    on_device[i] = !on_host[i];
    host_blocks += on_host[i];
  }
  unsigned char* flag = nullptr;
  TOGA_TEST_CUDA(cudaMalloc(&flag, n));
  const auto bandwidth = [&](const std::vector<unsigned char>& f, std::uint64_t count) -> double {
    cudaMemcpy(flag, f.data(), n, cudaMemcpyHostToDevice);
    std::vector<float> t;
    for (int i = 0; i < 5; ++i) {
      cudaEvent_t a0, b0;
      cudaEventCreate(&a0);
      cudaEventCreate(&b0);
      cudaEventRecord(a0);
      read_blocks_k<<<blocks_for(n), 256>>>(r.d, flag, n, bytes, r.c + 1);
      cudaEventRecord(b0);
      cudaEventSynchronize(b0);
      float x = 0;
      cudaEventElapsedTime(&x, a0, b0);
      t.push_back(x);
      cudaEventDestroy(a0);
      cudaEventDestroy(b0);
    }
    std::sort(t.begin(), t.end());
    return static_cast<double>(count * bytes) / (t[2] * 1e-3) / 1e9;
  };
  const double gbs_host = bandwidth(on_host, host_blocks), gbs_device = bandwidth(on_device, n - host_blocks);
  TOGA_TEST_CUDA(cudaFree(flag));
  std::printf("[ figure ] 4 GiB of 64 KiB blocks under a 1 GiB budget: %.3f ms with the service; device tier %llu MiB, host tier %llu MiB "
              "(%llu blocks), %llu granules spilled; reading blocks: device tier %.1f GB/s, host tier %.1f GB/s (median of 5)\n",
              ms, static_cast<unsigned long long>(device_mapped / MiB), static_cast<unsigned long long>(a.mapped_host_mem_current / MiB),
              static_cast<unsigned long long>(host_blocks), static_cast<unsigned long long>(a.spilled_granules), gbs_device, gbs_host);
  EXPECT_GT(host_blocks, 0u);
  r.free_all(h, bytes, false);
  EXPECT_EQ(r.take(1), 0u);
  // trim after freeing everything: host granules first, then everything; the driver's free memory comes back
  size_t free_before = 0, total = 0;
  TOGA_TEST_CUDA(cudaMemGetInfo(&free_before, &total));
  EXPECT_EQ(h.trim_to(device_mapped), a.mapped_host_mem_current);
  EXPECT_EQ(h.attributes().mapped_host_mem_current, 0u);
  size_t free_mid = 0;
  TOGA_TEST_CUDA(cudaMemGetInfo(&free_mid, &total));
  EXPECT_LE(free_mid, free_before + 64 * MiB) << "unmapping host granules gives no device memory back";
  EXPECT_EQ(h.trim_to(0), device_mapped);
  size_t free_after = 0;
  TOGA_TEST_CUDA(cudaMemGetInfo(&free_after, &total));
  EXPECT_GE(free_after + 64 * MiB, free_before + device_mapped);
  const auto err = h.check();
  EXPECT_FALSE(err.has_value()) << *err;
  hp.reset();
  toga::cuda::set_device_budget(dev, 0);
}

TEST(HostTier, SpillOnAFixedHeapIsRefusedByName) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap_options o;
  o.spill = toga::spill_policy::when_device_full;
  try {
    toga::cuda::heap h(64 * MiB, o);
    ADD_FAILURE() << "spill accepted on a fixed heap";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("spill"), std::string::npos) << e.what();
  }
  o.spill = toga::spill_policy::never;
  o.growth_service = true;
  try {
    toga::cuda::heap h(64 * MiB, o);
    ADD_FAILURE() << "growth_service accepted on a fixed heap";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("growth_service"), std::string::npos) << e.what();
  }
}
