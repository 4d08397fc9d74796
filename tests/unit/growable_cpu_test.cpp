// The host growth policy of growable heaps (issue 14, done-when 7) against toga::cpu's
// memfd/mmap provider, without a GPU: plan_growth's choices; granule_map's exact rollback of a
// failed create / map / set-access (injected at the k-th granule: the handle count and the
// range's access say nothing is half mapped); a heap that grows from 0 bytes by the retry
// protocol with threads allocating; headroom; trim_to returning exactly the wholly free granules
// the heap walk counts (and their memory: unmapped granules fault, EFAULT here); the release
// threshold at synchronising calls; option errors. Label `unit`.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "toga/cpu/growable_heap.hpp"

namespace {

using toga::cpu::growable_heap;
using P = toga::cpu::platform;
constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB;

//! Whether `p` can be read (write() from an unreadable address fails with EFAULT, no signal).
bool readable(const void* p) {
  int fd[2];
  if (pipe(fd) != 0) return false;
  const bool ok = write(fd[1], p, 1) == 1;
  close(fd[0]);
  close(fd[1]);
  return ok;
}

//! Threads per block: 16 (blocks spread over 4 SMs, hence arenas), or all of a smaller launch.
unsigned tpb(unsigned threads) { return threads % 16 == 0 ? 16 : threads; }

//! `threads` launched threads (4 SMs) each allocate `bytes` into out[first + t] and write their
//! index into the block's first and last words. Returns the failures.
unsigned alloc_round(growable_heap& h, std::vector<void*>& out, std::uint64_t first, unsigned threads, std::size_t bytes) {
  std::atomic<unsigned> failed{0};
  toga::cpu::launch(threads, tpb(threads), 4, [&] {
    const std::uint64_t i = first + P::block_id() * P::block_dim() + P::thread_id();
    void* p = h.view().allocate(bytes);
    out[i] = p;
    if (p == nullptr) {
      failed.fetch_add(1);
      return;
    }
    static_cast<std::uint64_t*>(p)[0] = i;
    static_cast<std::uint64_t*>(p)[(bytes - 8) / 8] = i;
  });
  return failed.load();
}
//! Frees out[first .. first + n) (nullptr: nothing) on `n` threads; returns blocks whose words
//! another owner overwrote.
unsigned free_round(growable_heap& h, std::vector<void*>& out, std::uint64_t first, unsigned n, std::size_t bytes,
                    const std::vector<bool>* only = nullptr) {
  std::atomic<unsigned> wrong{0};
  toga::cpu::launch(n, tpb(n), 4, [&] {
    const std::uint64_t i = first + P::block_id() * P::block_dim() + P::thread_id();
    void* p = out[i];
    if (p == nullptr || (only && !(*only)[i])) return;
    if (static_cast<std::uint64_t*>(p)[0] != i || static_cast<std::uint64_t*>(p)[(bytes - 8) / 8] != i) wrong.fetch_add(1);
    h.view().deallocate(p);
    out[i] = nullptr;
  });
  return wrong.load();
}
//! The retry protocol: launch; while something failed, free this launch's blocks, grow, launch
//! again. Returns the launches (0: growth gave nothing while requests still failed).
int with_growth(growable_heap& h, std::vector<void*>& out, std::uint64_t first, unsigned threads, std::size_t bytes) {
  for (int launch = 1; launch <= 8; ++launch) {
    if (alloc_round(h, out, first, threads, bytes) == 0) return launch;
    EXPECT_EQ(free_round(h, out, first, threads, bytes), 0u);
    if (h.grow_if_needed() == 0) return 0;
  }
  return 0;
}

toga::growth_options opts(std::uint64_t max, std::uint64_t granule, std::uint64_t initial = 0) {
  toga::growth_options o;
  o.max_bytes = max;
  o.granule_bytes = granule;
  o.initial_bytes = initial;
  return o;
}

}  // namespace

TEST(GrowthPolicy, PlanTakesTheLowestUnmappedGranulesAndAlignedRunsForLargeBlocks) {
  std::vector<bool> mapped(16, false);
  auto is = [&](std::uint64_t i) { return static_cast<bool>(mapped[i]); };
  // 100 KiB of demand + a quarter + 0 headroom, in 64 KiB granules: 2
  EXPECT_EQ(toga::plan_growth(100 * KiB, 0, 0, 64 * KiB, 16, is), (std::vector<std::uint64_t>{0, 1}));
  // headroom adds granules; mapped ones are skipped
  mapped[0] = mapped[2] = true;
  EXPECT_EQ(toga::plan_growth(100 * KiB, 0, 128 * KiB, 64 * KiB, 16, is), (std::vector<std::uint64_t>{1, 3, 4, 5}));
  // a 256 KiB block (order 6) needs 4 aligned unmapped granules: granules 4-7 (0-3 hold mapped ones)
  EXPECT_EQ(toga::plan_growth(256 * KiB, 6, 0, 64 * KiB, 16, is), (std::vector<std::uint64_t>{1, 4, 5, 6, 7}));
  // no demand still maps one granule; nothing unmapped: nothing
  EXPECT_EQ(toga::plan_growth(0, 0, 0, 64 * KiB, 16, is), (std::vector<std::uint64_t>{1}));
  std::fill(mapped.begin(), mapped.end(), true);
  EXPECT_TRUE(toga::plan_growth(MiB, 0, 0, 64 * KiB, 16, is).empty());
  // a block larger than the whole range: the granules there are, no run
  std::fill(mapped.begin(), mapped.end(), false);
  EXPECT_EQ(toga::plan_growth(64 * KiB, 30, 0, 64 * KiB, 16, is).size(), 2u);
}

TEST(GrowthPolicy, GroupRunsCutsAlignedRunsOfConsecutiveGranules) {
  using R = std::vector<std::pair<std::uint64_t, unsigned>>;
  auto runs = [](const std::vector<std::uint64_t>& g, unsigned k) {
    R out;
    for (const toga::granule_run& r : toga::group_runs(g, k)) out.emplace_back(r.first, r.log2);
    return out;
  };
  // one granule of demand: one granule; from granule 3 up, aligned runs grow to the largest
  EXPECT_EQ(runs({5}, 4), (R{{5, 0}}));
  EXPECT_EQ(runs({3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, 3), (R{{3, 0}, {4, 2}, {8, 3}, {16, 1}, {18, 0}}));
  // the largest run caps them; gaps cut them
  EXPECT_EQ(runs({0, 1, 2, 3, 4, 5, 6, 7}, 1), (R{{0, 1}, {2, 1}, {4, 1}, {6, 1}}));
  EXPECT_EQ(runs({0, 1, 3, 4, 5, 6, 7}, 3), (R{{0, 1}, {3, 0}, {4, 2}}));
  EXPECT_EQ(runs({0, 1, 2, 3}, 0), (R{{0, 0}, {1, 0}, {2, 0}, {3, 0}}));
  EXPECT_TRUE(runs({}, 4).empty());
}

TEST(GrowableCpuHeap, DefaultGranulesAreSizedByDemand) {
  // toga's choice: 2 MiB granules, runs of up to 32 MiB
  growable_heap h(opts(512 * MiB, 0));
  EXPECT_EQ(h.granule_bytes(), 2 * MiB);
  // a small demand maps one granule
  std::vector<void*> out(4096, nullptr);
  ASSERT_EQ(with_growth(h, out, 0, 1, 64 * KiB), 2);
  EXPECT_EQ(h.mapped_bytes(), 2 * MiB);
  EXPECT_EQ(h.granules().mapped_runs(), 1u);
  // 256 MiB more: mapped in runs, far fewer handles than granules
  const int launches = with_growth(h, out, 1, 4095, 64 * KiB);
  EXPECT_GT(launches, 0);
  const std::uint64_t granules = h.mapped_bytes() / (2 * MiB), runs = h.granules().mapped_runs();
  std::printf("[ runs     ] 256 MiB of 64 KiB blocks from 2 MiB mapped: %d launches, %llu granules in %llu runs (handles %ld)\n", launches,
              static_cast<unsigned long long>(granules), static_cast<unsigned long long>(runs), h.granules().provider().live_handles);
  EXPECT_GE(granules, 128u);
  EXPECT_LE(runs * 4, granules) << "runs of up to 16 granules";
  EXPECT_EQ(h.granules().provider().live_handles, static_cast<long>(runs));
  EXPECT_EQ(h.counters().runs_mapped, runs);
  EXPECT_EQ(free_round(h, out, 0, 4096, 64 * KiB), 0u);
  auto err = h.check();
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(h.trim_to(0), granules * 2 * MiB);
  EXPECT_EQ(h.granules().provider().live_handles, 0);
  EXPECT_EQ(h.counters().runs_unmapped, runs);
}

TEST(GrowthPolicy, GranuleMapRollsBackExactlyWhatSucceeded) {
  for (toga::growth_step step : {toga::growth_step::create, toga::growth_step::map, toga::growth_step::set_access}) {
    toga::granule_map<toga::cpu::memfd_provider> m(toga::cpu::memfd_provider{}, 64 * KiB, 8, 64 * KiB);
    m.inject_failure(step, 3);
    EXPECT_TRUE(m.map(0));
    EXPECT_TRUE(m.map(1));
    EXPECT_FALSE(m.map(2)) << toga::to_string(step);
    EXPECT_NE(m.last_error().find("injected"), std::string::npos) << m.last_error();
    EXPECT_NE(m.last_error().find(toga::to_string(step)), std::string::npos) << m.last_error();
    EXPECT_EQ(m.mapped_granules(), 2u);
    EXPECT_EQ(m.provider().live_handles, 2) << "the failed granule's handle was not released";
    EXPECT_EQ(m.provider().mapped.size(), 2u) << "the failed granule's memory stayed mapped";
    EXPECT_FALSE(m.is_mapped(2));
    EXPECT_TRUE(readable(m.base() + 64 * KiB));
    EXPECT_FALSE(readable(m.base() + 2 * 64 * KiB)) << "a half-mapped granule is accessible";
    EXPECT_TRUE(m.map(2));  // the next try succeeds
    EXPECT_EQ(m.provider().live_handles, 3);
    m.unmap(1);
    EXPECT_FALSE(readable(m.base() + 64 * KiB));
    EXPECT_EQ(m.provider().live_handles, 2);
  }
}

TEST(GrowableCpuHeap, GrowsFromZeroByTheRetryProtocol) {
  growable_heap h(opts(256 * MiB, 256 * KiB));
  EXPECT_EQ(h.mapped_bytes(), 0u);
  struct round {
    std::size_t bytes;
    unsigned threads;
  };
  const std::vector<round> rounds = {{16, 256}, {3000, 128}, {40 * KiB, 64}, {MiB, 16}, {200, 256}, {4 * MiB, 4}};
  std::uint64_t total = 0;
  for (const round& r : rounds) total += r.threads;
  std::vector<void*> out(total, nullptr);
  std::uint64_t first = 0;
  for (const round& r : rounds) {
    const int launches = with_growth(h, out, first, r.threads, r.bytes);
    ASSERT_GT(launches, 0) << r.bytes << " B: growth stopped while requests still failed";
    if (first == 0) {
      EXPECT_GT(launches, 1) << "a heap of 0 bytes served a request";
    }
    EXPECT_LE(launches, 2) << r.bytes << " B: one growth must serve a launch that failed (retry protocol)";
    first += r.threads;
  }
  const toga::growth_counters c = h.counters();
  const toga::growth_state d = h.device_state();
  EXPECT_EQ(c.mapped_bytes, h.mapped_bytes());
  EXPECT_EQ(c.grown_bytes, c.mapped_bytes);
  EXPECT_EQ(d.mapped_granules * h.granule_bytes(), h.mapped_bytes());
  EXPECT_EQ(d.adopted, d.mapped_granules) << "every granule adopted once";
  EXPECT_EQ(h.granules().provider().live_handles, static_cast<long>(h.granules().mapped_runs())) << "a handle per run";
  EXPECT_EQ(h.granules().provider().mapped.size(), h.granules().mapped_runs()) << "every run mapped, nothing else";
  EXPECT_GT(c.demand_requests, 0u);
  EXPECT_EQ(c.growth_failures, 0u);
  toga::heap_quality q;
  const auto err = h.check(&q);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(q.live_blocks, total);
  first = 0;
  for (const round& r : rounds) {
    EXPECT_EQ(free_round(h, out, first, r.threads, r.bytes), 0u);
    first += r.threads;
  }
  // trim_to(0): every granule back, every handle released, nothing accessible
  EXPECT_EQ(h.trim_to(0), c.mapped_bytes);
  EXPECT_EQ(h.mapped_bytes(), 0u);
  EXPECT_EQ(h.granules().provider().live_handles, 0);
  EXPECT_FALSE(readable(h.granules().base()));
  const auto err2 = h.check(&q);
  ASSERT_FALSE(err2.has_value()) << *err2;
  EXPECT_EQ(q.unmapped_granules, h.capacity() / h.granule_bytes());
}

TEST(GrowableCpuHeap, HeadroomAndInitialBytes) {
  toga::growth_options o = opts(64 * MiB, 64 * KiB, 100 * KiB);
  o.headroom_bytes = MiB;
  growable_heap h(o);
  EXPECT_EQ(h.mapped_bytes(), 128 * KiB);  // initial, rounded up to granules
  std::vector<void*> out(64, nullptr);
  const unsigned failed = alloc_round(h, out, 0, 64, 64 * KiB);
  EXPECT_GE(failed, 62u);  // 128 KiB serve at most two blocks of 64 KiB
  EXPECT_EQ(free_round(h, out, 0, 64, 64 * KiB), 0u);
  // the growth maps the demand (the failed blocks), a quarter more and the 1 MiB of headroom
  const std::uint64_t want = failed * 64 * KiB * 5 / 4 + MiB;
  EXPECT_EQ(h.grow_if_needed(), (want + 64 * KiB - 1) / (64 * KiB) * (64 * KiB));
  ASSERT_EQ(with_growth(h, out, 0, 64, 64 * KiB), 1) << "the growth served the relaunch";
  EXPECT_EQ(free_round(h, out, 0, 64, 64 * KiB), 0u);
}

TEST(GrowableCpuHeap, TrimUnmapsExactlyTheWhollyFreeGranulesTheWalkCounts) {
  for (std::uint64_t granule : {64 * KiB, MiB}) {
    growable_heap h(opts(128 * MiB, granule, 64 * MiB));
    const unsigned n = 512;  // 512 x 64 KiB = 32 MiB
    std::vector<void*> out(n, nullptr);
    ASSERT_EQ(alloc_round(h, out, 0, n, 64 * KiB), 0u);
    std::vector<bool> half(n);
    std::mt19937_64 rng(granule);
    for (unsigned i = 0; i < n; ++i) half[i] = rng() & 1;
    EXPECT_EQ(free_round(h, out, 0, n, 64 * KiB, &half), 0u);
    h.trim();  // reclaim first, as trim_to does
    toga::heap_quality q;
    auto err = h.check(&q);
    ASSERT_FALSE(err.has_value()) << *err;
    const std::uint64_t mapped = h.mapped_bytes();
    const long handles = h.granules().provider().live_handles;
    const std::uint64_t back = h.trim_to(0);
    EXPECT_EQ(back, q.free_granules * granule) << "granule " << granule;
    EXPECT_GT(back, 0u) << "half of the initial mapping was never touched";
    EXPECT_EQ(h.mapped_bytes(), mapped - back);
    EXPECT_EQ(h.granules().provider().live_handles, handles - static_cast<long>(back / granule));
    EXPECT_EQ(h.granules().provider().mapped.size(), h.mapped_bytes() / granule);
    toga::heap_quality q2;
    err = h.check(&q2);
    ASSERT_FALSE(err.has_value()) << *err;
    EXPECT_EQ(q2.free_granules, 0u);
    // every live block is still intact and readable; the trimmed granules are not
    EXPECT_EQ(free_round(h, out, 0, n, 64 * KiB), 0u);
    std::uint64_t unreadable = 0;
    for (std::uint64_t g = 0; g < h.capacity() / granule; ++g) unreadable += !readable(h.granules().base() + g * granule);
    EXPECT_EQ(unreadable, h.capacity() / granule - h.mapped_bytes() / granule);
  }
}

TEST(GrowableCpuHeap, ReleaseThresholdAtSynchronisingCalls) {
  toga::growth_options o = opts(64 * MiB, 64 * KiB);
  o.release_threshold = 2 * MiB;
  growable_heap h(o);
  const unsigned n = 256;  // 256 x 64 KiB = 16 MiB
  std::vector<void*> out(n, nullptr);
  ASSERT_GT(with_growth(h, out, 0, n, 64 * KiB), 0);
  EXPECT_GE(h.mapped_bytes(), 16 * MiB);
  for (unsigned keep_every : {1u, 16u, 0u}) {  // free all but every k-th block (0: all)
    std::vector<bool> sel(n);
    for (unsigned i = 0; i < n; ++i) sel[i] = keep_every == 0 || i % keep_every != 0;
    EXPECT_EQ(free_round(h, out, 0, n, 64 * KiB, &sel), 0u);
    h.synchronize();
    toga::heap_quality q;
    const auto err = h.check(&q);
    ASSERT_FALSE(err.has_value()) << *err;
    const std::uint64_t live_granules = h.mapped_bytes() / h.granule_bytes() - q.free_granules;
    EXPECT_LE(h.mapped_bytes(), std::max(o.release_threshold, live_granules * h.granule_bytes())) << keep_every;
    EXPECT_TRUE(h.mapped_bytes() <= o.release_threshold || q.free_granules == 0) << keep_every;
  }
  EXPECT_LE(h.mapped_bytes(), o.release_threshold);
  EXPECT_GT(h.counters().trims, 0u);
}

TEST(GrowableCpuHeap, InjectedFailuresAtTheKthGranule) {
  for (toga::growth_step step : {toga::growth_step::create, toga::growth_step::map, toga::growth_step::set_access}) {
    growable_heap h(opts(64 * MiB, 64 * KiB));
    const unsigned n = 32;  // 32 x 64 KiB = 2 MiB: 32 granules and more
    std::vector<void*> out(n, nullptr);
    EXPECT_EQ(alloc_round(h, out, 0, n, 64 * KiB), n);
    h.granules().inject_failure(step, 3);
    EXPECT_EQ(h.grow_if_needed(), 2 * 64 * KiB) << toga::to_string(step);
    EXPECT_EQ(h.counters().growth_failures, 1u);
    EXPECT_EQ(h.granules().provider().live_handles, 2);
    EXPECT_FALSE(readable(h.granules().base() + 2 * 64 * KiB));
    toga::heap_quality q;
    auto err = h.check(&q);
    ASSERT_FALSE(err.has_value()) << *err;
    EXPECT_EQ(q.unmapped_granules, h.capacity() / h.granule_bytes() - 2);
    EXPECT_EQ(h.device_state().mapped_granules, 2u);
    // the heap works on
    EXPECT_EQ(free_round(h, out, 0, n, 64 * KiB), 0u);
    ASSERT_GT(with_growth(h, out, 0, n, 64 * KiB), 0);
    EXPECT_EQ(free_round(h, out, 0, n, 64 * KiB), 0u);
    EXPECT_EQ(h.counters().growth_failures, 1u);
    err = h.check(&q);
    ASSERT_FALSE(err.has_value()) << *err;
  }
}

TEST(GrowableCpuHeap, ExhaustionAtMaxBytesIsAFailureNotDemand) {
  growable_heap h(opts(4 * MiB, 256 * KiB, 4 * MiB));
  std::vector<void*> out(8, nullptr);
  EXPECT_EQ(alloc_round(h, out, 0, 8, 4 * MiB), 7u);  // one 4 MiB block fills the heap
  EXPECT_EQ(h.device_state().demand_requests, 0u) << "nothing left to map: exhaustion, not demand";
  EXPECT_EQ(h.stats().failed_exhausted, 7u);
  EXPECT_EQ(h.grow_if_needed(), 0u);
  EXPECT_EQ(free_round(h, out, 0, 8, 4 * MiB), 0u);
}

// heap_statistics::reclaim_walks counts UAlloc's shared reclaim walks (the statistic the growth
// service's GPU figures print): a full heap's failures walk, and once a walk found nothing to give
// back, failures walk no more until something changes (a free).
TEST(GrowableCpuHeap, ReclaimWalksAreCountedAndSkippedWhileNothingChanged) {
  growable_heap h(opts(4 * MiB, 256 * KiB, 4 * MiB));  // all of max_bytes mapped: failures are exhaustion
  std::vector<void*> out(8192, nullptr);
  ASSERT_GT(alloc_round(h, out, 0, 8192, 1024), 0u) << "8 MiB of 1 KiB blocks cannot fit in 4 MiB";
  EXPECT_GE(h.stats().reclaim_walks, 1u) << "the failures walked for something to reclaim";
  std::vector<void*> more(64, nullptr);
  EXPECT_EQ(alloc_round(h, more, 0, 64, 1024), 64u);
  const std::uint64_t walks = h.stats().reclaim_walks;
  EXPECT_EQ(alloc_round(h, more, 0, 64, 1024), 64u);
  EXPECT_EQ(h.stats().reclaim_walks, walks) << "nothing changed since a walk that found nothing: no walk";
  EXPECT_EQ(free_round(h, out, 0, 8192, 1024), 0u);
  EXPECT_EQ(alloc_round(h, more, 0, 64, 1024), 0u);
  EXPECT_EQ(free_round(h, more, 0, 64, 1024), 0u);
}

TEST(GrowableCpuHeap, MaxBytesCapsTheMappedMemory) {
  // 5 MiB in a range of 8 MiB: at most 5 granules of 1 MiB are ever mapped
  growable_heap h(opts(5 * MiB, MiB));
  EXPECT_EQ(h.capacity(), 8 * MiB);
  std::vector<void*> out(16, nullptr);
  EXPECT_EQ(alloc_round(h, out, 0, 16, 512 * KiB), 16u);
  EXPECT_EQ(h.grow_if_needed(), 5 * MiB);
  EXPECT_EQ(free_round(h, out, 0, 16, 512 * KiB), 0u);
  EXPECT_EQ(alloc_round(h, out, 0, 16, 512 * KiB), 6u);  // 10 blocks fit in 5 MiB
  EXPECT_EQ(h.device_state().demand_requests, 0u) << "nothing more can be mapped: exhaustion, not demand";
  EXPECT_EQ(h.stats().failed_exhausted, 6u);
  EXPECT_EQ(h.grow_if_needed(), 0u);
  EXPECT_EQ(h.mapped_bytes(), 5 * MiB);
  EXPECT_EQ(free_round(h, out, 0, 16, 512 * KiB), 0u);
  // reset: every block gone, the mapped memory kept, the counts from 0
  h.reset();
  EXPECT_EQ(h.mapped_bytes(), 5 * MiB);
  EXPECT_EQ(h.counters().growth_requests, 0u);
  EXPECT_EQ(alloc_round(h, out, 0, 10, 512 * KiB), 0u);
  EXPECT_EQ(free_round(h, out, 0, 10, 512 * KiB), 0u);
  const auto err = h.check();
  EXPECT_FALSE(err.has_value()) << *err;
}

TEST(GrowableCpuHeap, OptionErrorsNameTheOption) {
  auto message = [](const toga::growth_options& o) -> std::string {
    try {
      growable_heap h(o);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message(opts(0, 0)).find("max_bytes"), std::string::npos);
  EXPECT_NE(message(opts(1ull << 40, 0)).find("max_bytes"), std::string::npos);
  EXPECT_NE(message(opts(64 * MiB, 3 * 64 * KiB)).find("granule_bytes"), std::string::npos);
  EXPECT_NE(message(opts(64 * MiB, 128 * MiB)).find("granule_bytes"), std::string::npos);
  {
    toga::growth_options r = opts(64 * MiB, 64 * KiB);
    r.max_run_bytes = 3 * 64 * KiB;  // not a power of two
    EXPECT_NE(message(r).find("max_run_bytes"), std::string::npos) << message(r);
    r.max_run_bytes = 32 * KiB;  // below the granule
    EXPECT_NE(message(r).find("max_run_bytes"), std::string::npos) << message(r);
  }
  EXPECT_NE(message(opts(64 * MiB, 0, 128 * MiB)).find("initial_bytes"), std::string::npos);
  EXPECT_NE(message(opts(5 * MiB, MiB, 6 * MiB)).find("initial_bytes"), std::string::npos);
  // a range smaller than one granule of the provider (the CUDA VMM's 2 MiB on an H100): the
  // message gives the smallest valid max_bytes
  {
    toga::growth_options tiny{};
    tiny.max_bytes = 1;
    std::string got = "no error";
    try {
      (void)toga::growth_granule_bytes(tiny, toga::growth_capacity(tiny, 1ull << 37), 2 * MiB);
    } catch (const std::invalid_argument& e) {
      got = e.what();
    }
    EXPECT_NE(got.find("the smallest valid max_bytes is 2097152 B"), std::string::npos) << got;
  }
  // toga's choice: 2 MiB granules (less on a smaller range) in runs of up to 32 MiB (at most the
  // range); a granule the user chose is one handle each
  EXPECT_EQ(growable_heap(opts(1ull << 30, 0)).granule_bytes(), 2 * MiB);
  EXPECT_EQ(growable_heap(opts(MiB, 0)).granule_bytes(), MiB);
  toga::growth_options d = opts(1ull << 30, 0);
  EXPECT_EQ(toga::growth_max_run_bytes(d, 1ull << 30, 2 * MiB), 32 * MiB);
  EXPECT_EQ(toga::growth_max_run_bytes(opts(8 * MiB, 0), 8 * MiB, 2 * MiB), 8 * MiB);
  EXPECT_EQ(toga::growth_max_run_bytes(opts(1ull << 30, 4 * MiB), 1ull << 30, 4 * MiB), 4 * MiB);
  d.max_run_bytes = 128 * MiB;
  EXPECT_EQ(toga::growth_max_run_bytes(d, 1ull << 30, 2 * MiB), 128 * MiB);
}

// ---- planted bugs of the host policy (toga::growth_bug): each scenario returns its violations;
// the unmutated policy has none, and every planted bug is caught by at least one scenario.
namespace {

template <toga::growth_bug B>
std::string rollback_scenario(toga::growth_step step) {
  toga::granule_map<toga::cpu::memfd_provider, B> m(toga::cpu::memfd_provider{}, 64 * KiB, 8, 64 * KiB);
  m.inject_failure(step, 3);
  std::string v;
  if (!m.map(0) || !m.map(1)) v += "granules 0 and 1 were not mapped; ";
  if (m.map(2)) v += "the injected failure was not reported; ";
  if (m.mapped_granules() != 2) v += "granules counted mapped: " + std::to_string(m.mapped_granules()) + " (2 are); ";
  if (m.provider().live_handles != 2) v += "live handles: " + std::to_string(m.provider().live_handles) + " (2 granules); ";
  if (m.provider().mapped.size() != 2) v += "live mappings: " + std::to_string(m.provider().mapped.size()) + " (2 granules); ";
  if (readable(m.base() + 2 * 64 * KiB)) v += "the failed granule is accessible; ";
  return v;
}

template <toga::growth_bug B>
std::string large_block_scenario() {
  toga::cpu::basic_growable_heap<B> h(opts(64 * MiB, 64 * KiB));
  std::string v;
  // a small block first (a 512 KiB chunk in the lowest granules), then one 4 MiB block: one
  // growth must make an aligned run of 64 granules for it
  std::atomic<int> failed{0};
  void* small = nullptr;
  for (int i = 0; i < 4 && !small; ++i) {
    toga::cpu::launch(1, 1, 1, [&] { small = h.view().allocate(16); });
    if (!small) h.grow_if_needed();
  }
  if (!small) return "the 16 B block was never served; ";
  int launches = 0;
  void* big = nullptr;
  for (; launches < 8 && !big; ++launches) {
    toga::cpu::launch(1, 1, 1, [&] { big = h.view().allocate(4 * MiB); });
    if (!big && h.grow_if_needed() == 0) break;
  }
  if (!big) v += "the 4 MiB block was never served; ";
  else if (launches != 2) v += "the 4 MiB block took " + std::to_string(launches) + " launches (one growth must serve it); ";
  toga::cpu::launch(1, 1, 1, [&] {
    h.view().deallocate(small);
    h.view().deallocate(big);
  });
  (void)failed;
  return v;
}

//! Granules sized by demand (design.md §12.8): 64 KiB granules in runs of up to 4 (256 KiB, one
//! memfd each); 1 MiB mapped at construction is 4 runs. One 64 KiB block kept, the rest freed:
//! trim_to(0) must give back every run but the one holding it (a run goes back whole), and the
//! kept block stays readable and intact.
template <toga::growth_bug B>
std::string runs_scenario() {
  toga::growth_options o = opts(16 * MiB, 64 * KiB, MiB);
  o.max_run_bytes = 256 * KiB;
  toga::cpu::basic_growable_heap<B> h(o);
  std::string v;
  if (h.granules().mapped_runs() != 4 || h.granules().provider().live_handles != 4)
    v += "1 MiB in runs of 256 KiB mapped " + std::to_string(h.granules().mapped_runs()) + " runs, " +
         std::to_string(h.granules().provider().live_handles) + " handles (4 each); ";
  std::vector<void*> blocks(8, nullptr);
  toga::cpu::launch(8, 8, 1, [&] { blocks[P::thread_id()] = h.view().allocate(64 * KiB); });
  for (void* p : blocks)
    if (!p) return v + "a 64 KiB block of 8 in 1 MiB was refused; ";
  std::memset(blocks[5], 0x5a, 64 * KiB);
  toga::cpu::launch(8, 8, 1, [&] {
    if (P::thread_id() != 5) h.view().deallocate(blocks[P::thread_id()]);
  });
  std::uint64_t back = 0;
  try {
    back = h.trim_to(0);
  } catch (const std::logic_error& e) {
    return v + "trim_to(0) threw: " + e.what() + "; ";
  }
  if (h.mapped_bytes() != 256 * KiB || back != MiB - 256 * KiB)
    v += "trim_to(0) with one live 64 KiB block gave back " + std::to_string(back) + " B and kept " + std::to_string(h.mapped_bytes()) +
         " B (the block's run: 256 KiB); ";
  if (h.granules().provider().live_handles != 1) v += std::to_string(h.granules().provider().live_handles) + " handles live (1); ";
  const auto* b = static_cast<const unsigned char*>(blocks[5]);
  if (!readable(b) || b[0] != 0x5a || b[64 * KiB - 1] != 0x5a) v += "the kept block lost its memory or contents; ";
  else toga::cpu::launch(1, 1, 1, [&] { h.view().deallocate(blocks[5]); });
  if (h.trim_to(0) != 256 * KiB || h.granules().provider().live_handles != 0) v += "the last run did not go back; ";
  return v;
}

template <toga::growth_bug B>
std::string threshold_scenario() {
  toga::growth_options o = opts(64 * MiB, 64 * KiB, 16 * MiB);
  o.release_threshold = 2 * MiB;
  toga::cpu::basic_growable_heap<B> h(o);
  h.synchronize();  // every granule wholly free: exactly the threshold stays
  std::string v;
  if (h.mapped_bytes() != 2 * MiB) v += "after a synchronising call " + std::to_string(h.mapped_bytes()) + " B stay mapped (threshold 2 MiB); ";
  return v;
}

//! A growth whose granule failed to map is retried: the budget must hold each mapped granule
//! once (a ledger of its own; the failure injected at the first map of the growth).
template <toga::growth_bug B>
std::string budget_retry_scenario() {
  toga::memory_ledger ledger([](const char*) -> const char* { return nullptr; });
  std::string v;
  {
    toga::cpu::basic_growable_heap<B> h(opts(16 * MiB, 256 * KiB), 1, 0, toga::cpu::cpu_accounting{&ledger, 0});
    const auto granule_bytes = [&] {
      std::uint64_t n = 0;
      for (const auto& r : ledger.records()) n += r.what == "granule" ? r.bytes : 0;
      return n;
    };
    h.granules().inject_failure(toga::growth_step::map, 1);
    void* p = nullptr;
    int launches = 0;
    for (; launches < 4 && !p; ++launches) {
      toga::cpu::launch(1, 1, 1, [&] { p = h.view().allocate(64 * KiB); });
      if (!p) (void)h.grow_if_needed();
    }
    if (!p) v += "the block was never served; ";
    if (h.counters().growth_failures != 1) v += "growth failures " + std::to_string(h.counters().growth_failures) + " (1 injected); ";
    if (granule_bytes() != h.mapped_bytes())
      v += "granules charged " + std::to_string(granule_bytes()) + " B, mapped " + std::to_string(h.mapped_bytes()) + " B; ";
    if (p) toga::cpu::launch(1, 1, 1, [&] { h.view().deallocate(p); });
  }
  if (!ledger.records().empty()) v += std::to_string(ledger.records().size()) + " records outlive the heap; ";
  return v;
}

//! The host tier: granules the device budget refuses spill to the host; after the budget is raised
//! more granules come from the device; after freeing everything, a trim down to the device
//! granules must unmap exactly the host ones (host granules sit at the top of the range).
template <toga::growth_bug B>
std::string host_tier_scenario() {
  toga::memory_ledger ledger([](const char*) -> const char* { return nullptr; });
  std::string v;
  toga::growth_options o = opts(16 * MiB, 256 * KiB);
  o.spill = toga::spill_policy::when_device_full;
  toga::cpu::basic_growable_heap<B> h(o, 1, 0, toga::cpu::cpu_accounting{&ledger, 0});
  const std::uint64_t metadata = ledger.budget(toga::memory_backend::cpu, 0).used;
  ledger.set_budget(toga::memory_backend::cpu, 0, metadata + 2 * 256 * KiB);
  std::vector<void*> blocks(32, nullptr);
  const auto round = [&](unsigned first) {
    for (int launch = 0; launch < 6; ++launch) {
      toga::cpu::launch(16, 16, 1, [&] {  // each thread its own slot
        void*& p = blocks[first + P::thread_id()];
        if (!p) p = h.view().allocate(64 * KiB);
      });
      std::uint64_t missing = 0;
      for (unsigned i = first; i < first + 16; ++i) missing += blocks[i] == nullptr;
      if (missing == 0) return true;
      if (h.grow_if_needed() == 0) return false;
    }
    return false;
  };
  if (!round(0)) v += "the first 16 blocks were not served (spill); ";
  if (h.counters().host_mapped_bytes == 0) v += "nothing spilled to the host tier under a budget of 2 granules; ";
  ledger.set_budget(toga::memory_backend::cpu, 0, metadata + 64 * 256 * KiB);
  if (!round(16)) v += "the next 16 blocks were not served (device); ";
  toga::cpu::launch(32, 16, 1, [&] {
    void*& p = blocks[P::block_id() * P::block_dim() + P::thread_id()];
    if (p) h.view().deallocate(p);
    p = nullptr;
  });
  const toga::growth_counters c = h.counters();
  const std::uint64_t host = c.host_mapped_bytes, device = c.mapped_bytes - host;
  const std::uint64_t trimmed = h.trim_to(device);
  if (trimmed != host || h.counters().host_mapped_bytes != 0)
    v += "a trim to the device granules' " + std::to_string(device) + " B unmapped " + std::to_string(trimmed) + " B and left " +
         std::to_string(h.counters().host_mapped_bytes) + " B of host granules (of " + std::to_string(host) + "); ";
  if (ledger.budget(toga::memory_backend::cpu, 0).used > ledger.budget(toga::memory_backend::cpu, 0).budget) v += "over the budget; ";
  return v;
}

template <toga::growth_bug B>
std::string all_scenarios() {
  std::string v;
  for (toga::growth_step s : {toga::growth_step::create, toga::growth_step::map, toga::growth_step::set_access}) {
    const std::string r = rollback_scenario<B>(s);
    if (!r.empty()) v += std::string("[rollback at ") + toga::to_string(s) + "] " + r;
  }
  if (const std::string r = large_block_scenario<B>(); !r.empty()) v += "[large block] " + r;
  if (const std::string r = threshold_scenario<B>(); !r.empty()) v += "[threshold] " + r;
  if (const std::string r = runs_scenario<B>(); !r.empty()) v += "[runs] " + r;
  if (const std::string r = budget_retry_scenario<B>(); !r.empty()) v += "[budget retry] " + r;
  if (const std::string r = host_tier_scenario<B>(); !r.empty()) v += "[host tier] " + r;
  return v;
}

}  // namespace

TEST(GrowthPolicy, PlantedBugsAreCaught) {
  EXPECT_EQ(all_scenarios<toga::growth_bug::none>(), "") << "the unmutated policy";
  const std::pair<const char*, std::string> kills[] = {
      {"rollback_leaks_handle", all_scenarios<toga::growth_bug::rollback_leaks_handle>()},
      {"counted_before_access", all_scenarios<toga::growth_bug::counted_before_access>()},
      {"plan_ignores_alignment", all_scenarios<toga::growth_bug::plan_ignores_alignment>()},
      {"threshold_releases_all", all_scenarios<toga::growth_bug::threshold_releases_all>()},
      {"charge_kept_on_failed_map", all_scenarios<toga::growth_bug::charge_kept_on_failed_map>()},
      {"host_placed_in_plan", all_scenarios<toga::growth_bug::host_placed_in_plan>()},
      {"run_table_empty", all_scenarios<toga::growth_bug::run_table_empty>()},
      {"host_charged_as_device", all_scenarios<toga::growth_bug::host_charged_as_device>()},
  };
  for (const auto& [name, violations] : kills) {
    std::printf("[ mutant   ] growth.%s: %s\n", name, violations.empty() ? "SURVIVED" : ("killed: " + violations).c_str());
    EXPECT_FALSE(violations.empty()) << "planted bug growth." << name << " survived every scenario";
  }
}
