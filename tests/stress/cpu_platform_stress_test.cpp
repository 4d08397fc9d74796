// Stress tests of toga::cpu::platform on real OS threads (label `stress`).
//
// Built twice: normally, and with -fsanitize=thread (see tests/stress/README.md). Every test
// asserts properties of its results (exact totals, unique old values, mutual exclusion, no
// stale data, no store buffering behind fences), which a non-atomic read-modify-write or a
// broken launcher violates at run time. A weakened memory order often does not show at run
// time on x86 (TSO hides it); in the TSan build, plain (non-atomic) data published through
// the platform's acquire/release operations lets TSan check the happens-before edges
// themselves, so a release store weakened to relaxed is reported as a data race.
//
// Sizes: about 4.5 million platform operations in all, about 1 s under TSan on a 2-core
// machine. TOGA_STRESS_SCALE=<n> in the environment multiplies the iteration counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "toga/cpu/platform.hpp"

namespace {

using P = toga::cpu::platform;
constexpr auto dev = toga::device_scope;
constexpr auto blk = toga::block_scope;

static_assert(toga::Platform<P>);
static_assert(P::noexcept_ops);

//! Iteration count scaled by TOGA_STRESS_SCALE (default 1).
unsigned scaled(unsigned n) {
  static const unsigned scale = [] {
    const char* s = std::getenv("TOGA_STRESS_SCALE");
    const long v = s ? std::strtol(s, nullptr, 10) : 1;
    return v > 0 ? static_cast<unsigned>(v) : 1u;
  }();
  return n * scale;
}

//! Prints a test's operation count (a platform operation = one atomic, fence, collective or
//! backoff call; spin iterations are included).
void report(const char* what, unsigned threads, std::uint64_t ops, const std::string& extra = {}) {
  std::printf("[   stress ] %s: %llu platform operations on %u threads%s%s\n", what,
              static_cast<unsigned long long>(ops), threads, extra.empty() ? "" : "; ",
              extra.c_str());
  std::fflush(stdout);
}

//! Gives up the processor every `period` iterations. A test body runs for well under a
//! scheduler time slice, so without this the 16 threads on a 2-core machine mostly run one
//! after another; yielding often makes the OS interleave them at a fine grain (and, inside a
//! critical section, makes the other threads find the lock held).
void churn(unsigned i, unsigned period) {
  if (i % period == period - 1) std::this_thread::yield();
}

//! Per-thread counters, padded to a cache line so that the threads do not share lines.
struct alignas(64) per_thread {
  std::uint64_t ops = 0;
  std::uint64_t events = 0;      // test-specific (CAS failures, waits, ...)
  std::uint64_t violations = 0;  // observed breaches of the tested property
};

std::uint64_t sum_ops(const std::vector<per_thread>& v) {
  std::uint64_t s = 0;
  for (const per_thread& t : v) s += t.ops;
  return s;
}
std::uint64_t sum_events(const std::vector<per_thread>& v) {
  std::uint64_t s = 0;
  for (const per_thread& t : v) s += t.events;
  return s;
}
std::uint64_t sum_violations(const std::vector<per_thread>& v) {
  std::uint64_t s = 0;
  for (const per_thread& t : v) s += t.violations;
  return s;
}

// ------------------------------------------------------------------------------------------
// Launcher and identity
// ------------------------------------------------------------------------------------------

struct seen_identity {
  unsigned lane, warp, thread, block, block_dim, grid_dim, sm, num_sms, global;
  bool in_launch;
};

TEST(CpuLaunch, IdentityMatchesTheLaunchShape) {
  struct shape {
    unsigned threads, per_block, sms;
  };
  std::uint64_t ops = 0;
  for (const shape s : {shape{16, 4, 3}, shape{12, 12, 1}, shape{8, 1, 5}, shape{10, 5, 64}}) {
    SCOPED_TRACE(testing::Message() << s.threads << " threads, " << s.per_block
                                    << " per block, " << s.sms << " SMs");
    std::vector<seen_identity> seen(s.threads);
    std::vector<std::uint32_t> hits(s.threads, 0);
    toga::cpu::launch(s.threads, s.per_block, s.sms, [&] {
      const unsigned g = P::global_thread_id();
      P::fetch_add(&hits[g], 1u, toga::relaxed, dev);
      seen[g] = seen_identity{P::lane_id(),  P::warp_id(),  P::thread_id(),
                              P::block_id(), P::block_dim(), P::grid_dim(),
                              P::sm_id(),    P::num_sms(),   g,
                              P::in_launch()};
    });
    ops += s.threads * 10ull;
    std::set<std::pair<unsigned, unsigned>> block_thread;
    for (unsigned g = 0; g < s.threads; ++g) {
      const seen_identity& id = seen[g];
      EXPECT_EQ(hits[g], 1u) << "global thread " << g << " ran the body " << hits[g] << " times";
      EXPECT_TRUE(id.in_launch);
      EXPECT_EQ(id.lane, 0u);
      EXPECT_EQ(id.warp, id.thread) << "a warp is one thread";
      EXPECT_EQ(id.block_dim, s.per_block);
      EXPECT_EQ(id.grid_dim, s.threads / s.per_block);
      EXPECT_EQ(id.num_sms, s.sms);
      EXPECT_LT(id.thread, id.block_dim);
      EXPECT_LT(id.block, id.grid_dim);
      EXPECT_EQ(id.block * id.block_dim + id.thread, g);
      EXPECT_EQ(id.sm, id.block % s.sms);
      EXPECT_LT(id.sm, id.num_sms);
      block_thread.emplace(id.block, id.thread);
    }
    EXPECT_EQ(block_thread.size(), s.threads) << "every (block, thread) pair exactly once";
  }
  EXPECT_FALSE(P::in_launch()) << "the test's own thread has no identity";
  report("identity", 16, ops, "4 launch shapes");
}

TEST(CpuLaunch, ThreadsStartTogetherAndTheRecordIsPerThread) {
  // Every thread must be running before any body proceeds past its first step: each thread
  // counts itself in, then waits until all have; with a start latch this terminates, and the
  // identity read afterwards must still be the thread's own (thread_local, not shared).
  constexpr unsigned threads = 16;
  unsigned arrived = 0;
  std::vector<per_thread> stats(threads);
  toga::cpu::launch(threads, 8, 2, [&] {
    const unsigned g = P::global_thread_id();
    per_thread& me = stats[g];
    P::fetch_add(&arrived, 1u, toga::acq_rel, dev);
    ++me.ops;
    for (unsigned attempt = 0; P::load(&arrived, toga::acquire, dev) != threads; ++attempt) {
      P::backoff(attempt);
      me.ops += 2;
    }
    ++me.ops;
    if (P::global_thread_id() != g || P::block_id() * 8 + P::thread_id() != g) ++me.violations;
  });
  EXPECT_EQ(arrived, threads);
  EXPECT_EQ(sum_violations(stats), 0u);
  report("start together", threads, sum_ops(stats));
}

TEST(CpuLaunch, RethrowsTheFirstExceptionAfterJoiningAll) {
  constexpr unsigned threads = 12;
  unsigned finished = 0;
  try {
    toga::cpu::launch(threads, 4, 2, [&] {
      const unsigned g = P::global_thread_id();
      if (g == 5 || g == 9) throw std::runtime_error("thread " + std::to_string(g));
      P::fetch_add(&finished, 1u, toga::relaxed, dev);
    });
    ADD_FAILURE() << "launch did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "thread 5") << "the lowest-numbered thread's exception";
  }
  // launch returned only after joining: every thread that did not throw has finished.
  EXPECT_EQ(finished, threads - 2);

  EXPECT_THROW(toga::cpu::launch(10, 4, 1, [] {}), std::invalid_argument);
  EXPECT_THROW(toga::cpu::launch(0, 4, 1, [] {}), std::invalid_argument);
  EXPECT_THROW(toga::cpu::launch(8, 0, 1, [] {}), std::invalid_argument);
  EXPECT_THROW(toga::cpu::launch(8, 4, 0, [] {}), std::invalid_argument);
  report("exceptions", threads, threads - 2);
}

TEST(CpuWarp, EveryThreadIsAWarpOfOneLane) {
  constexpr unsigned threads = 8;
  std::vector<per_thread> stats(threads);
  toga::cpu::launch(threads, 4, 2, [&] {
    per_thread& me = stats[P::global_thread_id()];
    for (std::uint32_t i = 0; i < 1000; ++i) {
      const std::uint64_t wide = (std::uint64_t{i} << 40) | 0xabcdu;
      const std::uint32_t mask = P::activemask();
      bool ok = mask == 1u && P::lanemask_lt() == 0u && P::lane_id() == 0u;
      ok = ok && P::ballot(mask, (i & 1u) != 0) == (i & 1u);
      ok = ok && P::shfl(mask, i, 0) == i && P::shfl(mask, wide, 0) == wide;
      ok = ok && P::match_any(mask, i) == 1u && P::match_any(mask, wide) == 1u;
      P::syncwarp(mask);
      me.ops += 9;
      if (!ok) ++me.violations;
    }
  });
  EXPECT_EQ(sum_violations(stats), 0u);
  report("warp of one lane", threads, sum_ops(stats));
}

using CpuPlatformDeathTest = testing::Test;

TEST_F(CpuPlatformDeathTest, FailPrintsTheMessageAndAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(P::fail("planted failure"),
               "toga: planted failure \\(os thread [0-9]+, not started by toga::cpu::launch\\)");
  EXPECT_DEATH(toga::cpu::launch(4, 2, 1,
                                 [] {
                                   if (P::global_thread_id() == 3) P::fail("inside");
                                 }),
               "toga: inside \\(cpu thread 3: block 1, thread 1 of 2; os thread [0-9]+\\)");
  // Collectives naming a lane that does not exist, and identity outside a launch.
  EXPECT_DEATH(toga::cpu::launch(1, 1, 1, [] { P::syncwarp(toga::full_mask); }),
               "syncwarp: mask must be 1");
  EXPECT_DEATH(toga::cpu::launch(1, 1, 1, [] { (void)P::shfl(3u, std::uint32_t{7}, 0); }),
               "shfl: mask must be 1");
  EXPECT_DEATH(toga::cpu::launch(1, 1, 1, [] { (void)P::shfl(1u, std::uint64_t{7}, 1); }),
               "shfl: source lane must be 0");
  EXPECT_DEATH((void)P::ballot(0x3u, true), "ballot: mask must be 1");
  EXPECT_DEATH((void)P::block_id(), "identity queried on a thread not started");
}

// ------------------------------------------------------------------------------------------
// Atomics
// ------------------------------------------------------------------------------------------

TEST(CpuStress, FetchAddTotalsAreExactAndOldValuesUnique) {
  constexpr unsigned threads = 16;
  const unsigned per_thread_n = scaled(25'000);
  const std::uint64_t total = std::uint64_t{threads} * per_thread_n;
  alignas(64) std::uint64_t c64 = 0;
  alignas(64) std::uint32_t c32 = 0;
  std::vector<std::vector<std::uint64_t>> olds(threads);
  std::vector<per_thread> stats(threads);
  toga::cpu::launch(threads, 4, 4, [&] {
    const unsigned g = P::global_thread_id();
    std::vector<std::uint64_t>& mine = olds[g];
    mine.reserve(per_thread_n);
    for (unsigned i = 0; i < per_thread_n; ++i) {
      mine.push_back(P::fetch_add(&c64, 1u, toga::relaxed, dev));
      P::fetch_add(&c32, 3u, toga::acq_rel, blk);
      P::fetch_sub(&c32, 1u, toga::seq_cst, dev);
      churn(i, 256);
    }
    stats[g].ops = 3ull * per_thread_n;
  });
  EXPECT_EQ(c64, total);
  EXPECT_EQ(c32, static_cast<std::uint32_t>(2 * total));
  // Each fetch_add(1) returned a distinct old value, and together they are exactly [0, total).
  std::vector<std::uint64_t> all;
  all.reserve(total);
  for (const auto& v : olds) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end())) << "one thread's old values must increase";
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  bool permutation = all.size() == total;
  for (std::uint64_t i = 0; permutation && i < total; ++i) permutation = all[i] == i;
  EXPECT_TRUE(permutation) << "old values of fetch_add(1) are not a permutation of [0, total)";
  report("fetch_add/fetch_sub", threads, sum_ops(stats));
}

TEST(CpuStress, StrongCasIncrementIsExact) {
  // Each increment is a CAS loop that never reloads: on failure, compare_exchange must have
  // stored the current value into `expected` (a loop on a stale `expected` would never
  // finish), and a successful CAS must be atomic (the totals must be exact).
  constexpr unsigned threads = 16;
  const unsigned per_thread_n = scaled(10'000);
  alignas(64) std::uint64_t c64 = 0;
  alignas(64) std::uint32_t c32 = 0;
  std::vector<per_thread> stats(threads);
  toga::cpu::launch(threads, 16, 1, [&] {
    per_thread& me = stats[P::global_thread_id()];
    for (unsigned i = 0; i < per_thread_n; ++i) {
      std::uint64_t e64 = P::load(&c64, toga::relaxed, dev);
      ++me.ops;
      for (unsigned attempt = 0; !P::compare_exchange(&c64, e64, e64 + 1, toga::acq_rel, dev);
           ++attempt) {
        P::backoff(attempt);
        ++me.events;
        me.ops += 2;
      }
      ++me.ops;
      std::uint32_t e32 = P::load(&c32, toga::acquire, dev);
      ++me.ops;
      for (unsigned attempt = 0; !P::compare_exchange(&c32, e32, e32 + 2u, toga::release, blk);
           ++attempt) {
        P::backoff(attempt);
        ++me.events;
        me.ops += 2;
      }
      ++me.ops;
      churn(i, 64);
    }
  });
  EXPECT_EQ(c64, std::uint64_t{threads} * per_thread_n);
  EXPECT_EQ(c32, 2u * threads * per_thread_n);
  report("CAS increment", threads, sum_ops(stats),
         std::to_string(sum_events(stats)) + " CAS failures (contention)");
}

TEST(CpuStress, BitOwnershipThroughFetchOrFetchAndExchange) {
  // Thread g owns bit g of a shared 32-bit word and bits 2g and 2g+1 of a shared 64-bit word,
  // and toggles them. Nobody else touches its bits, so the old value returned by every RMW
  // must show exactly the state this thread left them in. A lost update (a non-atomic RMW)
  // breaks that, and the words end non-zero.
  constexpr unsigned threads = 16;
  const unsigned per_thread_n = scaled(20'000);
  alignas(64) std::uint32_t w32 = 0;
  alignas(64) std::uint64_t w64 = 0;
  alignas(64) std::uint32_t token = 0;  // passed around by exchange; counts handovers
  std::vector<per_thread> stats(threads);
  toga::cpu::launch(threads, 4, 2, [&] {
    const unsigned g = P::global_thread_id();
    per_thread& me = stats[g];
    const std::uint32_t b32 = 1u << g;
    const std::uint64_t b64 = std::uint64_t{3} << (2 * g);
    for (unsigned i = 0; i < per_thread_n; ++i) {
      if (P::fetch_or(&w32, b32, toga::relaxed, dev) & b32) ++me.violations;
      if (P::fetch_or(&w64, b64, toga::acq_rel, dev) & b64) ++me.violations;
      if ((P::fetch_and(&w32, ~b32, toga::release, blk) & b32) != b32) ++me.violations;
      if ((P::fetch_and(&w64, ~b64, toga::seq_cst, dev) & b64) != b64) ++me.violations;
      P::exchange(&token, g, toga::acq_rel, dev);
      me.ops += 5;
      churn(i, 256);
    }
  });
  EXPECT_EQ(sum_violations(stats), 0u) << "an RMW returned an old value showing another "
                                          "thread's write to bits it does not own";
  EXPECT_EQ(w32, 0u);
  EXPECT_EQ(w64, 0u);
  EXPECT_LT(token, threads);
  report("fetch_or/fetch_and/exchange", threads, sum_ops(stats));
}

TEST(CpuStress, FetchMaxKeepsTheLargestValueAndReturnsMonotoneOlds) {
  // Every thread raises a shared maximum with increasing values; the olds each thread sees
  // never decrease (the word only grows), and the final value is the largest operand.
  constexpr unsigned threads = 16;
  const unsigned per_thread_n = scaled(20'000);
  alignas(64) std::uint64_t m64 = 0;
  alignas(64) std::uint32_t m32 = 0;
  std::vector<per_thread> stats(threads);
  toga::cpu::launch(threads, 4, 2, [&] {
    const unsigned g = P::global_thread_id();
    per_thread& me = stats[g];
    std::uint64_t last = 0;
    for (unsigned i = 0; i < per_thread_n; ++i) {
      const std::uint64_t v = std::uint64_t{i} * threads + g;
      const std::uint64_t old = P::fetch_max(&m64, v, toga::relaxed, dev);
      if (old < last) ++me.violations;
      last = old;
      P::fetch_max(&m32, static_cast<std::uint32_t>(v), toga::acq_rel, blk);
      me.ops += 2;
      churn(i, 256);
    }
  });
  EXPECT_EQ(sum_violations(stats), 0u) << "fetch_max returned a smaller old value than before";
  EXPECT_EQ(m64, std::uint64_t{per_thread_n - 1} * threads + threads - 1);
  EXPECT_EQ(m32, (per_thread_n - 1) * threads + threads - 1);
  report("fetch_max", threads, sum_ops(stats));
}

// ------------------------------------------------------------------------------------------
// Synchronisation: lock, message passing, fences
// ------------------------------------------------------------------------------------------

//! A test-and-set spin lock written only with platform operations, the way core code would.
//! lock: strong CAS 0 -> 1 with acquire (even threads) or exchange(1) with acquire (odd ones),
//! backoff between attempts; unlock: store 0 with release.
struct spin_lock {
  std::uint32_t word = 0;

  //! Returns the failed attempts; counts in `bad` failures whose observed value was not 1.
  std::uint64_t lock(bool use_exchange, std::uint64_t& bad) {
    std::uint64_t failed = 0;
    for (unsigned attempt = 0;; ++attempt) {
      if (use_exchange) {
        if (P::exchange(&word, 1u, toga::acquire, dev) == 0) return failed;
      } else {
        std::uint32_t expected = 0;
        if (P::compare_exchange(&word, expected, 1u, toga::acquire, dev)) return failed;
        if (expected != 1u) ++bad;  // a failed CAS must report the current value: 1 (held)
      }
      ++failed;
      P::backoff(attempt);
    }
  }
  void unlock() { P::store(&word, 0u, toga::release, dev); }
};

TEST(CpuStress, SpinLockProtectsPlainData) {
  constexpr unsigned threads = 16;
  const unsigned per_thread_n = scaled(6'000);
  alignas(64) spin_lock lock;
  alignas(64) std::uint32_t inside = 0;  // occupancy of the critical section
  // Plain, non-atomic data: only the lock orders these accesses (TSan checks it).
  struct {
    std::uint64_t counter = 0;
    std::uint64_t tripled = 0;  // always 3 * counter outside the critical section
    unsigned last_owner = 0;
    std::uint64_t owner_changes = 0;
  } shared;
  std::vector<per_thread> stats(threads);
  toga::cpu::launch(threads, 4, 2, [&] {
    const unsigned g = P::global_thread_id();
    per_thread& me = stats[g];
    std::uint64_t bad_cas = 0;
    for (unsigned i = 0; i < per_thread_n; ++i) {
      const std::uint64_t failed = lock.lock(g % 2 == 1, bad_cas);
      me.events += failed;
      me.ops += 2 * failed + 1;  // each failed attempt also called backoff
      if (P::fetch_add(&inside, 1u, toga::relaxed, dev) != 0) ++me.violations;
      if (shared.tripled != 3 * shared.counter) ++me.violations;
      ++shared.counter;
      shared.tripled = 3 * shared.counter;
      if (shared.last_owner != g) ++shared.owner_changes;
      shared.last_owner = g;
      churn(i, 32);  // sometimes while holding the lock: the others must wait for it
      P::fetch_sub(&inside, 1u, toga::relaxed, dev);
      lock.unlock();
      me.ops += 3;
      churn(i, 8);
    }
    me.violations += bad_cas;
  });
  EXPECT_EQ(sum_violations(stats), 0u) << "mutual exclusion or CAS failure value violated";
  EXPECT_EQ(shared.counter, std::uint64_t{threads} * per_thread_n);
  EXPECT_EQ(shared.tripled, 3 * shared.counter);
  EXPECT_EQ(inside, 0u);
  EXPECT_EQ(lock.word, 0u);
  report("spin lock", threads, sum_ops(stats),
         std::to_string(sum_events(stats)) + " failed lock attempts, " +
             std::to_string(shared.owner_changes) + " owner changes");
}

TEST(CpuStress, MessagePassingReleaseAcquire) {
  // 8 producer/consumer pairs; each pair passes `messages` messages, each in a fresh slot:
  // the producer writes plain payload words and a relaxed atomic `data`, then sets the slot's
  // flag with release; the consumer waits for the flag with acquire, then must see the
  // payload and the data of that message. Every message is an independent instance of the
  // message-passing litmus test, run while the producer races ahead of (or behind) the
  // consumer.
  constexpr unsigned pairs = 8;
  constexpr unsigned threads = 2 * pairs;
  const unsigned messages = scaled(10'000);
  struct alignas(64) slot {
    std::uint64_t payload[4];  // plain
    std::uint64_t data;        // atomic, relaxed
    std::uint32_t flag;        // atomic: release / acquire
  };
  std::vector<std::vector<slot>> lanes(pairs, std::vector<slot>(messages, slot{{0, 0, 0, 0}, 0, 0}));
  auto value = [](unsigned pair, unsigned m, unsigned k) {
    return (std::uint64_t{pair} << 48) ^ (std::uint64_t{m} << 8) ^ (k * 0x9e3779b97f4a7c15ull);
  };
  std::vector<per_thread> stats(threads);
  // Block of 2 = one pair: thread 0 produces, thread 1 consumes.
  toga::cpu::launch(threads, 2, 4, [&] {
    const unsigned pair = P::block_id();
    per_thread& me = stats[P::global_thread_id()];
    std::vector<slot>& s = lanes[pair];
    if (P::thread_id() == 0) {
      for (unsigned m = 0; m < messages; ++m) {
        for (unsigned k = 0; k < 4; ++k) s[m].payload[k] = value(pair, m, k);
        P::store(&s[m].data, value(pair, m, 7), toga::relaxed, dev);
        P::store(&s[m].flag, 1u, toga::release, dev);
        me.ops += 2;
        churn(m, 16);  // let the consumer catch up and wait on slots being written
      }
    } else {
      for (unsigned m = 0; m < messages; ++m) {
        for (unsigned attempt = 0; P::load(&s[m].flag, toga::acquire, dev) == 0; ++attempt) {
          P::backoff(attempt);
          me.ops += 2;
          ++me.events;
        }
        ++me.ops;
        if (P::load(&s[m].data, toga::relaxed, dev) != value(pair, m, 7)) ++me.violations;
        ++me.ops;
        for (unsigned k = 0; k < 4; ++k)
          if (s[m].payload[k] != value(pair, m, k)) ++me.violations;
      }
    }
  });
  EXPECT_EQ(sum_violations(stats), 0u) << "a consumer saw the flag but stale data";
  report("message passing", threads, sum_ops(stats),
         std::to_string(pairs * messages) + " messages, " + std::to_string(sum_events(stats)) +
             " consumer waits");
}

TEST(CpuStress, SeqCstFenceForbidsStoreBuffering) {
  // Store buffering (Dekker): thread A: x = r; fence; a = y.  Thread B: y = r; fence; b = x.
  // With seq_cst fences between the relaxed store and load, at least one thread must see the
  // other's round-r store. Without them x86 does produce a == b == "old" (the store buffer).
  // All accesses are atomic, so TSan (which does not model fences) has nothing to report.
  // The pairs poll tightly at the round barrier, so there is one pair per two hardware
  // threads (one pair on a 2-core machine): more would only wait for each other's time
  // slices and almost never overlap. (Checked: with the fence removed, about 30% of the
  // rounds of one pair on a 2-core machine end with both seeing the old value.)
  const unsigned pairs = std::clamp(std::thread::hardware_concurrency() / 2, 1u, 8u);
  const unsigned threads = 2 * pairs;
  const unsigned rounds = scaled(10'000);
  struct alignas(64) pair_state {
    std::uint32_t x = 0, y = 0;
    std::uint32_t arrivals = 0;  // round barrier: 2 arrivals per round
  };
  std::vector<pair_state> st(pairs);
  std::vector<per_thread> stats(threads);
  // saw_old[p][side][r]: written by one thread, read by the test after the join.
  std::vector<std::vector<std::uint8_t>> saw_old(2 * pairs, std::vector<std::uint8_t>(rounds));
  toga::cpu::launch(threads, 2, 2, [&] {
    const unsigned p = P::block_id();
    const unsigned side = P::thread_id();
    pair_state& s = st[p];
    per_thread& me = stats[P::global_thread_id()];
    std::uint32_t* mine = side == 0 ? &s.x : &s.y;
    std::uint32_t* theirs = side == 0 ? &s.y : &s.x;
    std::vector<std::uint8_t>& out = saw_old[2 * p + side];
    for (unsigned r = 0; r < rounds; ++r) {
      // Both threads of the pair enter round r together.
      P::fetch_add(&s.arrivals, 1u, toga::acq_rel, dev);
      ++me.ops;
      // A litmus harness, not core code: the waiter polls 1024 times between backoffs, so
      // that both threads leave the barrier within a cache-line transfer of each other (a
      // yield per poll makes the late thread finish its round before the early one resumes).
      for (unsigned spin = 0; P::load(&s.arrivals, toga::acquire, dev) < 2 * (r + 1); ++spin) {
        if (spin % 1024 == 1023) {
          P::backoff(spin / 1024);
          ++me.ops;
        }
        ++me.ops;
      }
      ++me.ops;
      P::store(mine, r + 1, toga::relaxed, dev);
      P::fence(toga::seq_cst, dev);
      out[r] = P::load(theirs, toga::relaxed, dev) < r + 1;
      me.ops += 3;
    }
  });
  std::uint64_t both_old = 0, one_old = 0, none_old = 0;
  for (unsigned p = 0; p < pairs; ++p)
    for (unsigned r = 0; r < rounds; ++r) {
      const int n = saw_old[2 * p][r] + saw_old[2 * p + 1][r];
      both_old += n == 2;
      one_old += n == 1;
      none_old += n == 0;
    }
  EXPECT_EQ(both_old, 0u) << "store buffering observed despite seq_cst fences";
  report("store buffering with fences", threads, sum_ops(stats),
         std::to_string(pairs * rounds) + " rounds: " + std::to_string(none_old) +
             " with both threads seeing the new value (the stores overlapped), " +
             std::to_string(one_old) + " with one seeing the old value, " +
             std::to_string(both_old) + " with both (forbidden)");
}

}  // namespace
