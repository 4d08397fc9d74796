// The growth service on the CPU (issue 30; design.md §12.6, toga/growth_service.hpp): a growable
// heap with growth_options::service grows while its threads run, so that a launch that needs
// more than is mapped succeeds in one go (no nullptr, no grow_if_needed, no relaunch); a service
// that cannot map (max_bytes reached, an injected driver refusal, a budget) releases its waiters
// with nullptr in bounded time; the wait bound; the trim and reset after growth; the options'
// errors. Every test checks every block's words (no overlap) and the heap walk. Label `unit`.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "toga/cpu/growable_heap.hpp"

namespace {

using toga::cpu::growable_heap;
using P = toga::cpu::platform;
constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB;

toga::growth_options service_opts(std::uint64_t max, std::uint64_t granule, std::uint64_t initial = 0, std::uint64_t wait_us = 10'000'000) {
  toga::growth_options o;
  o.max_bytes = max;
  o.granule_bytes = granule;
  o.initial_bytes = initial;
  o.service = true;
  o.service_wait_us = wait_us;
  return o;
}

unsigned tpb(unsigned threads) { return threads % 16 == 0 ? 16 : threads; }

// `threads` threads (4 SMs) each allocate `per` blocks of `bytes` (size i % 3 scaled when mixed)
// and stamp them; returns the nullptrs. Blocks go to out[t * per + k].
unsigned alloc_all(growable_heap& h, std::vector<void*>& out, unsigned threads, unsigned per, std::size_t bytes, bool mixed = false) {
  std::atomic<unsigned> failed{0};
  toga::cpu::launch(threads, tpb(threads), 4, [&] {
    const std::uint64_t t = P::block_id() * P::block_dim() + P::thread_id();
    for (unsigned k = 0; k < per; ++k) {
      const std::uint64_t i = t * per + k;
      const std::size_t b = mixed ? bytes << (i % 3) : bytes;
      void* p = h.view().allocate(b);
      out[i] = p;
      if (p == nullptr) {
        failed.fetch_add(1);
        continue;
      }
      static_cast<std::uint64_t*>(p)[0] = i;
      static_cast<std::uint64_t*>(p)[(b - 8) / 8] = i;
    }
  });
  return failed.load();
}
// Frees every block of out, checking its stamps; returns the blocks whose words were overwritten.
unsigned free_all(growable_heap& h, std::vector<void*>& out, unsigned threads, unsigned per, std::size_t bytes, bool mixed = false) {
  std::atomic<unsigned> wrong{0};
  toga::cpu::launch(threads, tpb(threads), 4, [&] {
    const std::uint64_t t = P::block_id() * P::block_dim() + P::thread_id();
    for (unsigned k = 0; k < per; ++k) {
      const std::uint64_t i = t * per + k;
      const std::size_t b = mixed ? bytes << (i % 3) : bytes;
      void* p = out[i];
      if (p == nullptr) continue;
      if (static_cast<std::uint64_t*>(p)[0] != i || static_cast<std::uint64_t*>(p)[(b - 8) / 8] != i) wrong.fetch_add(1);
      h.view().deallocate(p);
      out[i] = nullptr;
    }
  });
  return wrong.load();
}

}  // namespace

TEST(GrowthService, OneLaunchGrowsFromNothingWithoutANullptr) {
  // granule 2 MiB chosen (a handle each), and toga's choice (2 MiB granules in runs of up to
  // 32 MiB, one ring entry and handle per run: design.md §12.8)
  for (const std::uint64_t granule : {2 * MiB, std::uint64_t{0}})
  for (const std::size_t bytes : {std::size_t{16}, std::size_t{256}, std::size_t{4096}, std::size_t{40 * KiB}}) {
    SCOPED_TRACE("bytes " + std::to_string(bytes) + ", granule_bytes " + std::to_string(granule));
    growable_heap h(service_opts(256 * MiB, granule));
    ASSERT_TRUE(h.has_service());
    EXPECT_EQ(h.mapped_bytes(), 0u);
    const unsigned threads = 64, per = bytes >= 4096 ? 16 : 256;  // at most 93 MiB of the 256
    std::vector<void*> out(threads * per, nullptr);
    EXPECT_EQ(alloc_all(h, out, threads, per, bytes, true), 0u) << "every request is served in the one launch";
    const toga::growth_counters c = h.counters();
    EXPECT_GT(h.mapped_bytes(), 0u);
    EXPECT_GT(c.service_rounds, 0u);
    EXPECT_GT(c.service_waits, 0u);
    EXPECT_EQ(c.service_served, c.service_waits) << "every wait ended with a block";
    EXPECT_EQ(c.service_timeouts + c.service_gave_up, 0u);
    EXPECT_EQ(h.device_state().demand_requests, 0u) << "with the service, failures are not recorded as demand";
    EXPECT_EQ(h.stats().failed, 0u);
    EXPECT_FALSE(h.check().has_value()) << *h.check();
    const std::uint64_t granules = h.mapped_bytes() / h.granule_bytes(), runs = h.granules().mapped_runs();
    EXPECT_EQ(h.granules().provider().live_handles, static_cast<long>(runs));
    EXPECT_EQ(h.device_state().mapped_granules, granules) << "every granule of every run adopted";
    if (granule == 2 * MiB) EXPECT_EQ(runs, granules);
    if (granule == 0 && granules >= 16) EXPECT_LE(2 * runs, granules) << "runs of several granules";
    EXPECT_EQ(free_all(h, out, threads, per, bytes, true), 0u);
    // everything back: a trim to 0 unmaps every granule
    EXPECT_EQ(h.trim_to(0), c.mapped_bytes);
    EXPECT_EQ(h.mapped_bytes(), 0u);
    EXPECT_FALSE(h.check().has_value());
  }
}

TEST(GrowthService, AtMaxBytesWaitersGetNullptrAtOnceNotAtTheDeadline) {
  // 8 MiB can be mapped; 64 threads ask for 16 x 64 KiB each (64 MiB): most fail, none hangs
  growable_heap h(service_opts(8 * MiB, 2 * MiB, 0, 60'000'000));
  const unsigned threads = 64, per = 16;
  std::vector<void*> out(threads * per, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const unsigned failed = alloc_all(h, out, threads, per, 64 * KiB);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(failed, 0u);
  EXPECT_LT(s, 30.0) << "waiters must give up when nothing more can be mapped, not at the 60 s bound";
  EXPECT_EQ(h.mapped_bytes(), 8 * MiB);
  const toga::growth_counters c = h.counters();
  EXPECT_EQ(c.service_timeouts, 0u);
  EXPECT_EQ(h.stats().failed + c.service_gave_up, failed) << "every nullptr is counted once, as exhaustion or a refusal";
  EXPECT_EQ(free_all(h, out, threads, per, 64 * KiB), 0u);
  EXPECT_FALSE(h.check().has_value());
}

TEST(GrowthService, ADriverRefusalReleasesTheWaitersWithNullptr) {
  growable_heap h(service_opts(64 * MiB, 2 * MiB, 2 * MiB, 60'000'000));
  // the 3rd granule's map fails from now on, every time (a driver that refuses device memory)
  for (int k = 0; k < 1; ++k) h.granules().inject_failure(toga::growth_step::create, 2);
  const unsigned threads = 16, per = 64;
  std::vector<void*> out(threads * per, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const unsigned failed = alloc_all(h, out, threads, per, 64 * KiB);  // 64 MiB asked, 2 + 2 MiB mappable before the refusal
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30.0);
  const toga::growth_counters c = h.counters();
  EXPECT_GE(c.growth_failures, 1u) << "the refused granule is counted";
  EXPECT_EQ(h.granules().provider().live_handles, static_cast<long>(h.mapped_bytes() / (2 * MiB))) << "nothing half mapped";
  EXPECT_EQ(free_all(h, out, threads, per, 64 * KiB), 0u);
  EXPECT_FALSE(h.check().has_value());
  // (the injection was one-shot: later rounds could map again, so not every request failed)
  std::printf("driver refusal: %u of %u requests got nullptr, %llu rounds, %llu refused rounds, %.3f s\n", failed, threads * per,
              static_cast<unsigned long long>(c.service_rounds), static_cast<unsigned long long>(c.service_refusals), s);
}

TEST(GrowthService, ABudgetRefusalReleasesTheWaiters) {
  toga::memory_ledger ledger;
  ledger.set_budget(toga::memory_backend::cpu, 0, 8 * MiB + 64 * KiB + (1u << 20));  // metadata + 4 granules of 2 MiB, about
  growable_heap h(service_opts(64 * MiB, 2 * MiB, 0, 60'000'000), 4, 0, toga::cpu::cpu_accounting{&ledger, 0});
  const unsigned threads = 16, per = 32;
  std::vector<void*> out(threads * per, nullptr);
  const unsigned failed = alloc_all(h, out, threads, per, 64 * KiB);  // 32 MiB asked
  const toga::growth_counters c = h.counters();
  EXPECT_GT(failed, 0u);
  EXPECT_GT(c.budget_refusals, 0u);
  EXPECT_GT(c.service_refusals, 0u);
  EXPECT_EQ(c.service_timeouts, 0u);
  EXPECT_LE(h.mapped_bytes(), 8 * MiB);
  EXPECT_EQ(free_all(h, out, threads, per, 64 * KiB), 0u);
  EXPECT_FALSE(h.check().has_value());
}

TEST(GrowthService, ResetAndTrimAfterGrowthAndAgain) {
  growable_heap h(service_opts(128 * MiB, 2 * MiB));
  const unsigned threads = 32, per = 64;
  std::vector<void*> out(threads * per, nullptr);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(alloc_all(h, out, threads, per, 1024, true), 0u) << "round " << round;
    if (round == 1) {
      h.reset();  // every block freed at once
      std::fill(out.begin(), out.end(), nullptr);
    } else {
      ASSERT_EQ(free_all(h, out, threads, per, 1024, true), 0u);
      h.trim_to(0);
      EXPECT_EQ(h.mapped_bytes(), 0u) << "round " << round;
    }
    EXPECT_FALSE(h.check().has_value()) << *h.check();
  }
}

TEST(GrowthService, BadWaitBoundsAreRefusedByName) {
  for (const std::uint64_t us : {std::uint64_t{0}, toga::max_service_wait_us + 1}) {
    try {
      growable_heap h(service_opts(64 * MiB, 2 * MiB, 0, us));
      ADD_FAILURE() << "service_wait_us " << us << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("service_wait_us"), std::string::npos) << e.what();
    }
  }
  // the bound only matters with the service
  toga::growth_options o = service_opts(64 * MiB, 2 * MiB, 0, 0);
  o.service = false;
  EXPECT_NO_THROW(growable_heap h(o));
  toga::growth_options a = service_opts(64 * MiB, 2 * MiB);
  a.service_ahead_percent = toga::max_service_ahead_percent + 1;
  try {
    growable_heap h(a);
    ADD_FAILURE() << "service_ahead_percent " << a.service_ahead_percent << " accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("service_ahead_percent"), std::string::npos) << e.what();
  }
}

// service_ahead_percent (design.md §12.6): with doubling, filling a heap from empty takes a few
// rounds, not one per granule, and maps at most twice what the blocks need (plus the demand's
// quarter); with 0, each round maps only what was posted.
TEST(GrowthService, RoundsMapAheadOfDemandGeometrically) {
  std::uint64_t rounds[2] = {0, 0}, mapped[2] = {0, 0};
  for (const std::uint64_t pct : {std::uint64_t{0}, std::uint64_t{100}}) {
    SCOPED_TRACE("service_ahead_percent " + std::to_string(pct));
    toga::growth_options o = service_opts(512 * MiB, 2 * MiB);
    o.service_ahead_percent = pct;
    growable_heap h(o);
    // one thread at a time asks for a 64 KiB block, 1,024 times (64 MiB): each failure is a round
    const unsigned threads = 1, per = 1024;
    std::vector<void*> out(threads * per, nullptr);
    EXPECT_EQ(alloc_all(h, out, threads, per, 64 * KiB), 0u);
    const toga::growth_counters c = h.counters();
    rounds[pct != 0] = c.service_rounds;
    mapped[pct != 0] = c.mapped_bytes;
    EXPECT_FALSE(h.check().has_value()) << *h.check();
    EXPECT_EQ(free_all(h, out, threads, per, 64 * KiB), 0u);
    EXPECT_EQ(h.trim_to(0), c.mapped_bytes) << "the part mapped ahead is given back like the rest";
  }
  std::printf("64 MiB from empty, one thread: %llu rounds mapping %llu MiB without mapping ahead, %llu rounds mapping %llu MiB with doubling\n",
              static_cast<unsigned long long>(rounds[0]), static_cast<unsigned long long>(mapped[0] / MiB),
              static_cast<unsigned long long>(rounds[1]), static_cast<unsigned long long>(mapped[1] / MiB));
  EXPECT_GE(rounds[0], 32u) << "without mapping ahead, one round per 2 MiB granule";
  EXPECT_LE(rounds[1], 8u) << "doubling: about log2(32) rounds";
  EXPECT_LE(mapped[1], 2 * 64 * MiB + 4 * MiB) << "at most twice what was needed";
}

// ---- the host tier (growth_options::spill; design.md §12.7) ----

namespace {
toga::growth_options spill_opts(std::uint64_t max, std::uint64_t granule, bool service) {
  toga::growth_options o = service_opts(max, granule);
  o.service = service;
  o.spill = toga::spill_policy::when_device_full;
  return o;
}
// The retry protocol without the service: launch, grow, launch again until nothing fails.
unsigned alloc_with_growth(growable_heap& h, std::vector<void*>& out, unsigned threads, unsigned per, std::size_t bytes) {
  unsigned failed = 0;
  for (int launch = 0; launch < 8; ++launch) {
    failed = alloc_all(h, out, threads, per, bytes);
    if (failed == 0) return 0;
    (void)free_all(h, out, threads, per, bytes);
    if (h.grow_if_needed() == 0) break;
  }
  return failed;
}
}  // namespace

TEST(HostTier, GranulesTheBudgetRefusesComeFromTheHostAndTrimGivesThemBackFirst) {
  for (const bool service : {true, false}) {
    SCOPED_TRACE(service ? "with the growth service" : "by the retry protocol");
    toga::memory_ledger ledger;
    const std::uint64_t g = 2 * MiB;
    growable_heap probe(spill_opts(128 * MiB, g, false), 4, 0, toga::cpu::cpu_accounting{&ledger, 1});
    const std::uint64_t metadata = ledger.budget(toga::memory_backend::cpu, 1).used;  // what a heap records before any granule
    // device 0's budget: the metadata and 4 granules (8 MiB); the workload asks for 32 MiB of 64 KiB blocks
    ledger.set_budget(toga::memory_backend::cpu, 0, metadata + 4 * g);
    growable_heap h(spill_opts(128 * MiB, g, service), 4, 0, toga::cpu::cpu_accounting{&ledger, 0});
    const unsigned threads = 16, per = 32;
    std::vector<void*> out(threads * per, nullptr);
    const unsigned failed = service ? alloc_all(h, out, threads, per, 64 * KiB) : alloc_with_growth(h, out, threads, per, 64 * KiB);
    EXPECT_EQ(failed, 0u) << "the granules beyond the budget come from the host tier";
    const toga::growth_counters c = h.counters();
    const toga::budget_state b = ledger.budget(toga::memory_backend::cpu, 0);
    EXPECT_LE(b.used, b.budget) << "the device tier stays within its budget";
    EXPECT_EQ(b.used, metadata + (c.mapped_bytes - c.host_mapped_bytes)) << "the ledger charges exactly the device granules";
    EXPECT_EQ(b.host_bytes, c.host_mapped_bytes) << "and records the host granules beside them";
    EXPECT_GE(c.host_mapped_bytes, 32 * MiB - 4 * g);
    EXPECT_EQ(c.spilled_granules * g, c.host_mapped_bytes);
    EXPECT_GT(c.budget_refusals, 0u);
    EXPECT_EQ(c.growth_failures, 0u);
    EXPECT_EQ(h.granules().host_granules() * g, c.host_mapped_bytes);
    EXPECT_FALSE(h.check().has_value()) << *h.check();
    EXPECT_EQ(free_all(h, out, threads, per, 64 * KiB), 0u) << "every block's words intact, on either tier";
    // trim after freeing everything: the host granules go first (they sit at the top of the range)
    const std::uint64_t device_mapped = c.mapped_bytes - c.host_mapped_bytes;
    EXPECT_EQ(h.trim_to(device_mapped), c.host_mapped_bytes);
    EXPECT_EQ(h.counters().host_mapped_bytes, 0u) << "a trim down to the device granules unmaps every host granule";
    EXPECT_EQ(h.mapped_bytes(), device_mapped);
    EXPECT_EQ(ledger.budget(toga::memory_backend::cpu, 0).host_bytes, 0u);
    EXPECT_EQ(h.trim_to(0), device_mapped);
    EXPECT_EQ(h.mapped_bytes(), 0u);
    EXPECT_EQ(h.granules().provider().live_handles, 0);
    EXPECT_EQ(ledger.budget(toga::memory_backend::cpu, 0).used, metadata);
    EXPECT_FALSE(h.check().has_value());
  }
}

TEST(HostTier, ADeviceThatRefusesEveryGranuleGrowsOnTheHost) {
  growable_heap h(spill_opts(64 * MiB, 2 * MiB, true));
  h.granules().refuse_tier(toga::memory_tier::device, true);  // the driver has no device memory left
  const unsigned threads = 16, per = 64;
  std::vector<void*> out(threads * per, nullptr);
  EXPECT_EQ(alloc_all(h, out, threads, per, 4096, true), 0u);
  const toga::growth_counters c = h.counters();
  EXPECT_GT(c.mapped_bytes, 0u);
  EXPECT_EQ(c.host_mapped_bytes, c.mapped_bytes);
  EXPECT_EQ(free_all(h, out, threads, per, 4096, true), 0u);
  EXPECT_FALSE(h.check().has_value());
}

TEST(HostTier, WithoutSpillTheSameRefusalsAreGrowthFailures) {
  toga::memory_ledger ledger;
  toga::growth_options o = spill_opts(64 * MiB, 2 * MiB, true);
  o.spill = toga::spill_policy::never;
  growable_heap h(o, 4, 0, toga::cpu::cpu_accounting{&ledger, 0});
  h.granules().refuse_tier(toga::memory_tier::device, true);
  const unsigned threads = 8, per = 8;
  std::vector<void*> out(threads * per, nullptr);
  EXPECT_EQ(alloc_all(h, out, threads, per, 4096), threads * per) << "nothing can be mapped: every request fails, none hangs";
  const toga::growth_counters c = h.counters();
  EXPECT_EQ(c.host_mapped_bytes, 0u);
  EXPECT_GT(c.growth_failures, 0u);
  EXPECT_EQ(c.service_gave_up, threads * per);
}
