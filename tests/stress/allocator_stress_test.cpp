// Stress tests of toga's core on real OS threads (label `stress`): the bulk semaphore, RCU and
// the allocator front end (UAlloc + TBuddy), through toga::cpu::platform.
//
// Built twice, like cpu_platform_stress_test.cpp: normally, and with -fsanitize=thread (see
// tests/stress/README.md). Every test asserts properties of its results (exact accounting,
// patterns intact, callbacks exactly once, quiescent invariants, utilisation); in the TSan
// build the plain (non-atomic) data each test hands from thread to thread (token payloads, RCU
// node payloads, the contents of allocated blocks) lets TSan check that the core's own
// acquire/release operations order every previous owner's accesses before the next owner's.
//
//  1. BulkSemaphore: producers/consumers over one bulk semaphore, with batches taken from a
//     backing store that runs out; real tokens flow through a lock-free stack, so a unit granted
//     without a published resource shows up as an empty pop. Out of memory must reach every
//     thread (no hang); the final C/E/R must match the tokens.
//  2. Rcu: readers traverse lists inside read-side sections while writers replace, unlink and
//     insert nodes and retire the old ones (or synchronize and reclaim); the callback poisons
//     the node. No reader may see poison; every callback runs exactly once per retirement.
//  3. AllocatorStorm: random sizes 1 B .. 8 KiB and some 64 KiB, some with an alignment, each
//     block patterned and verified at free, about half the blocks handed to other threads (and
//     arenas) through mailboxes; at the end the heap must be quiescent, empty and mergeable to
//     one free root.
//  4. Exhaustion: all threads allocate 4 KiB (256 B) until nullptr, free all; utilisation and
//     recovery (a whole-heap allocation after merging), three rounds each.
//  5. ByteLimit: limit = heap / 4; allocations past it fail and the live bytes never exceed it.
//
// Sizes: a few seconds in the normal build and well under a minute under TSan on a 2-core
// machine. TOGA_STRESS_SCALE=<n> in the environment multiplies the iteration counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "toga/allocator.hpp"
#include "toga/bulk_semaphore.hpp"
#include "toga/cpu/platform.hpp"
#include "toga/heap_walk.hpp"
#include "toga/rcu.hpp"

namespace {

using P = toga::cpu::platform;
constexpr auto dev = toga::device_scope;

#if defined(__SANITIZE_THREAD__)
constexpr bool under_tsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool under_tsan = true;
#else
constexpr bool under_tsan = false;
#endif
#else
constexpr bool under_tsan = false;
#endif

//! Iteration count: `normal` (or `tsan` in a ThreadSanitizer build), times TOGA_STRESS_SCALE.
unsigned scaled(unsigned normal, unsigned tsan) {
  static const unsigned scale = [] {
    const char* s = std::getenv("TOGA_STRESS_SCALE");
    const long v = s ? std::strtol(s, nullptr, 10) : 1;
    return v > 0 ? static_cast<unsigned>(v) : 1u;
  }();
  return (under_tsan ? tsan : normal) * scale;
}

//! splitmix64 (Steele, Lea, Flood 2014): portable, the same sequence everywhere.
struct splitmix64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};
//! The splitmix64 finaliser: a 64-bit hash (patterns derived from a block's handle).
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

//! Gives up the processor every `period` iterations (see cpu_platform_stress_test.cpp: without
//! it, 16 threads on 2 cores mostly run one after another).
void churn(std::uint64_t i, unsigned period) {
  if (i % period == period - 1) std::this_thread::yield();
}

//! Wall-clock seconds since construction.
struct stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

//! Prints a test's operation count and rate. An operation is one call of the tested interface
//! (wait/signal/try_wait; read-side section/update; allocate/deallocate).
void report(const char* what, unsigned threads, std::uint64_t ops, double secs,
            const std::string& extra = {}) {
  std::printf("[   stress ] %s: %llu operations on %u threads in %.3f s (%.0f operations/s)%s%s\n",
              what, static_cast<unsigned long long>(ops), threads, secs,
              secs > 0 ? static_cast<double>(ops) / secs : 0.0, extra.empty() ? "" : "; ",
              extra.c_str());
  std::fflush(stdout);
}

//! Aborts the process if not destroyed within `limit`: a hang (a lost wake-up, a waiter that
//! never learns of out-of-memory) becomes a failure with a message instead of a stuck run.
class watchdog {
 public:
  watchdog(const char* what, std::chrono::seconds limit)
      : what_(what), thread_([this, limit] {
          std::unique_lock<std::mutex> l(m_);
          if (!cv_.wait_for(l, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish within %lld s (a hang)\n", what_,
                         static_cast<long long>(limit.count()));
            std::fflush(stderr);
            std::abort();
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard<std::mutex> l(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  const char* what_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts after the other members exist
};
constexpr std::chrono::seconds hang_limit{under_tsan ? 300 : 120};

//! A counting barrier for one launch: every thread arrives once, then waits for all.
void arrive_and_wait(std::uint32_t* counter, std::uint32_t threads) {
  P::fetch_add(counter, 1u, toga::acq_rel, dev);
  for (unsigned attempt = 0; P::load(counter, toga::acquire, dev) < threads; ++attempt)
    P::backoff(attempt);
}

std::string str(std::uint64_t v) { return std::to_string(v); }

// ------------------------------------------------------------------------------------------
// 1. Bulk semaphore: producers and consumers, batches, a backing store that runs out
// ------------------------------------------------------------------------------------------

//! Treiber stack of token indices 1..n (0 = empty), with a 32-bit ABA tag in the head word.
//! Push is a release CAS, pop an acquire CAS: the token's plain payload travels with it.
struct token_stack {
  std::uint64_t head = 0;
  std::vector<std::uint32_t> next;  // touched only through P atomics

  explicit token_stack(std::size_t n) : next(n + 1, 0) {}
  static std::uint64_t word(std::uint64_t tag, std::uint32_t t) { return (tag << 32) | t; }

  void push(std::uint32_t t) {
    std::uint64_t cur = P::load(&head, toga::relaxed, dev);
    for (;;) {
      P::store(&next[t], static_cast<std::uint32_t>(cur), toga::relaxed, dev);
      if (P::compare_exchange(&head, cur, word((cur >> 32) + 1, t), toga::release, dev)) return;
    }
  }
  std::uint32_t pop() {
    std::uint64_t cur = P::load(&head, toga::acquire, dev);
    for (;;) {
      const std::uint32_t t = static_cast<std::uint32_t>(cur);
      if (t == 0) return 0;
      const std::uint32_t n = P::load(&next[t], toga::relaxed, dev);
      if (P::compare_exchange(&head, cur, word((cur >> 32) + 1, n), toga::acquire, dev)) return t;
    }
  }
  //! Quiescent: tokens on the stack.
  std::uint64_t size() const {
    std::uint64_t n = 0;
    for (std::uint32_t t = static_cast<std::uint32_t>(head); t != 0 && n <= next.size(); t = next[t]) ++n;
    return n;
  }
};

TEST(CoreStress, BulkSemaphoreBatchesUntilTheStoreRunsOut) {
  // 16 threads, each both consumer and producer: wait(n, B) with n in 1..8 and B = 32. OK: pop
  // n tokens, which must exist (the semaphore counts only published units). GROW: take a batch
  // of B fresh tokens from the store, keep n, publish B - n, signal(B - n, B - n); if the store
  // has run out, withdraw with signal(0, B - n): that thread has met out-of-memory and stops.
  // A quarter of the acquisitions are burned (never returned), so the store must run out; the
  // others are held (at most 4 per thread) and returned with signal(n, 0). Every thread must
  // end by meeting out-of-memory, including those reserved on a promise that was withdrawn.
  watchdog dog("BulkSemaphoreBatchesUntilTheStoreRunsOut", hang_limit);
  constexpr unsigned threads = 16;
  constexpr std::uint64_t batch = 32;
  constexpr unsigned max_held = 4;
  using sem_t = toga::arena_semaphore<P>;
  const std::uint64_t store_units = std::uint64_t{scaled(20000, 6000)} * batch;
  // Per thread at most 4 * store_units iterations: each burns >= 1 unit with probability 1/4.
  const std::uint64_t iteration_cap = 4 * store_units + 1000;

  alignas(64) sem_t sem;
  sem.init(0);
  alignas(64) std::uint64_t store_left = store_units;
  alignas(64) std::uint32_t finished = 0;
  token_stack stack(static_cast<std::size_t>(store_units));
  std::vector<std::uint64_t> payload(store_units + 1, 0);  // plain; owned by the token's holder
  auto free_mark = [](std::uint32_t t) { return mix(t) | 1u; };
  auto owned_mark = [](unsigned g, std::uint32_t t) { return (std::uint64_t{g + 1} << 40) | (std::uint64_t{t} << 1); };
  constexpr std::uint64_t burned_mark = 0xb0b0b0b0b0b0b0b0ull;

  struct alignas(64) sem_thread {
    std::uint64_t ops = 0, oks = 0, grows = 0, try_oks = 0, try_fails = 0, produced = 0, burned = 0;
    std::uint64_t returned = 0, reserved_seen = 0, violations = 0;
    bool oom = false;
    std::string first_violation;
  };
  std::vector<sem_thread> st(threads);

  stopwatch clock;
  toga::cpu::launch(threads, 4, 4, [&] {
    const unsigned g = P::global_thread_id();
    sem_thread& me = st[g];
    splitmix64 rng{0x5e3a0000ull + g};
    auto violation = [&](const std::string& what) {
      if (me.violations++ == 0) me.first_violation = what;
    };
    auto take = [&](std::uint64_t n, std::vector<std::uint32_t>& got) {
      for (std::uint64_t k = 0; k < n; ++k) {
        const std::uint32_t t = stack.pop();
        if (t == 0) {
          violation("a unit was granted but no published token was on the stack");
          continue;
        }
        if (payload[t] != free_mark(t)) violation("token " + str(t) + " popped while not free");
        payload[t] = owned_mark(g, t);
        got.push_back(t);
      }
    };
    auto give_back = [&](const std::vector<std::uint32_t>& got) {
      for (std::uint32_t t : got) {
        if (payload[t] != owned_mark(g, t)) violation("held token " + str(t) + " was overwritten");
        payload[t] = free_mark(t);
        stack.push(t);
      }
      sem.signal(got.size(), 0);
      me.returned += got.size();
      ++me.ops;
    };
    std::deque<std::vector<std::uint32_t>> held;
    for (std::uint64_t iter = 0;; ++iter) {
      if (iter == iteration_cap) {
        violation("no out-of-memory after " + str(iteration_cap) + " iterations");
        break;
      }
      const std::uint64_t n = 1 + rng.below(8);
      std::vector<std::uint32_t> got;
      if (rng.below(16) == 0) {  // non-blocking path: takes from C, ignoring E and R
        ++me.ops;
        if (!sem.try_wait(n)) {
          ++me.try_fails;
          churn(iter, 4);
          continue;
        }
        ++me.try_oks;
        take(n, got);
      } else {
        ++me.ops;
        if (sem.wait(n, batch) == toga::sem_result::ok) {
          ++me.oks;
          take(n, got);
        } else {
          ++me.grows;
          std::uint64_t left = P::load(&store_left, toga::relaxed, dev);
          while (left >= batch && !P::compare_exchange(&store_left, left, left - batch, toga::relaxed, dev)) {
          }
          if (left < batch) {  // the store ran out: withdraw the promise, out-of-memory
            sem.signal(0, batch - n);
            ++me.ops;
            me.oom = true;
            break;
          }
          const std::uint32_t first = static_cast<std::uint32_t>(store_units - left + 1);
          for (std::uint32_t t = first; t < first + batch; ++t) payload[t] = free_mark(t);
          for (std::uint32_t t = first; t < first + n; ++t) {
            payload[t] = owned_mark(g, t);
            got.push_back(t);
          }
          std::this_thread::yield();  // a slow producer: let others find the promise and reserve
          if (sem.peek().r > 0) ++me.reserved_seen;
          for (std::uint32_t t = static_cast<std::uint32_t>(first + n); t < first + batch; ++t) stack.push(t);
          sem.signal(batch - n, batch - n);
          ++me.ops;
          me.produced += batch;
        }
      }
      if (rng.below(4) == 0) {
        for (std::uint32_t t : got) payload[t] = burned_mark;
        me.burned += got.size();
      } else {
        held.push_back(std::move(got));
      }
      while (held.size() > max_held) {
        give_back(held.front());
        held.pop_front();
      }
      churn(iter, 8);
    }
    // Keep the held tokens out of circulation until every thread has met out-of-memory.
    arrive_and_wait(&finished, threads);
    for (const auto& h : held) give_back(h);
  });
  const double secs = clock.seconds();

  std::uint64_t ops = 0, oks = 0, grows = 0, try_oks = 0, try_fails = 0, produced = 0, burned = 0;
  std::uint64_t returned = 0, reserved_seen = 0;
  for (unsigned g = 0; g < threads; ++g) {
    const sem_thread& t = st[g];
    EXPECT_EQ(t.violations, 0u) << "thread " << g << ": " << t.first_violation;
    EXPECT_TRUE(t.oom) << "thread " << g << " never met out-of-memory";
    ops += t.ops, oks += t.oks, grows += t.grows, try_oks += t.try_oks, try_fails += t.try_fails;
    produced += t.produced, burned += t.burned, returned += t.returned, reserved_seen += t.reserved_seen;
  }
  const sem_t::fields f = sem.peek();
  EXPECT_EQ(f.e, 0u) << "promises left at quiescence";
  EXPECT_EQ(f.r, 0u) << "reservations left at quiescence";
  EXPECT_EQ(f.c, stack.size()) << "C must count exactly the published tokens";
  EXPECT_EQ(f.c, produced - burned) << "C must be what was produced minus what was burned";
  EXPECT_LT(store_left, batch) << "the store did not run out";
  EXPECT_EQ(produced, store_units - store_left);
  EXPECT_GT(reserved_seen, 0u) << "no producer ever saw a reserved waiter (the wait path was not exercised)";
  report("bulk semaphore", threads, ops, secs,
         str(oks) + " OK, " + str(grows) + " GROW (" + str(produced / batch) + " batches produced, " +
             str(threads) + " out-of-memory), try_wait " + str(try_oks) + " ok / " + str(try_fails) +
             " failed; " + str(burned) + " units burned, " + str(returned) + " returned; " +
             str(reserved_seen) + " slow producers saw reserved waiters; final C/E/R " + str(f.c) + "/" +
             str(f.e) + "/" + str(f.r));
}

// ------------------------------------------------------------------------------------------
// 2. RCU: readers traverse lists while writers replace, unlink and retire nodes
// ------------------------------------------------------------------------------------------

TEST(CoreStress, RcuReadersNeverSeeReclaimedNodes) {
  // Lists of nodes (4 buckets, 4..24 nodes each). Readers: read_lock, walk a bucket, check each
  // node's plain payload (its index and never POISON), sometimes stall (yield) on a node and
  // check it again, read_unlock. Writers, under a per-bucket writer mutex: replace a node by a
  // fresh copy, unlink one or insert one; after unlocking they retire the unlinked node
  // (rcu.retire; a third of the writers use synchronize() and reclaim it themselves). The
  // reclaim callback poisons the payload and returns the node to the pool, so a reader that
  // can still reach a reclaimed node sees POISON (and TSan sees the plain write race with
  // the reader's plain read unless the grace period orders them).
  watchdog dog("RcuReadersNeverSeeReclaimedNodes", hang_limit);
  constexpr unsigned threads = 16;
  constexpr unsigned buckets = 4;
  constexpr unsigned initial_len = 12, min_len = 4, max_len = 24;
  constexpr unsigned nodes_total = buckets * max_len + 512;  // the rest is the pool
  constexpr std::uint64_t poison = 0xdeaddeaddeaddeadull;
  const unsigned writer_ops = scaled(12'000, 8'000);
  auto is_writer = [](unsigned g) { return g % 8 < 3; };  // 6 writers: 0, 1, 2, 8, 9, 10
  auto uses_synchronize = [](unsigned g) { return g % 8 == 2; };
  constexpr unsigned writers = 6;

  struct alignas(64) rcu_node {
    std::uint64_t payload = 0;   // plain: (index << 32) | generation, or POISON once reclaimed
    std::uint64_t next = 0;      // atomic: index of the next node, 0 = end
    std::uint64_t rcu_link = 0;  // atomic: the domain's intrusive link
    std::uint32_t retired = 0;   // atomic: retirements of this node
    std::uint32_t reclaimed = 0; // atomic: callbacks run for it
    std::uint32_t generation = 0;  // plain: written by the writer that took it from the pool
  };
  std::vector<rcu_node> nodes(nodes_total + 1);  // index 0 unused
  struct alignas(64) bucket {
    std::uint64_t head = 0;  // atomic
    unsigned len = 0;        // plain, under the writer mutex
  };
  std::vector<bucket> lists(buckets);
  std::vector<std::mutex> writer_mutex(buckets);
  std::mutex pool_mutex;
  std::vector<std::uint32_t> pool;
  toga::rcu_domain<P> rcu;
  alignas(64) std::uint32_t writers_left = writers;
  alignas(64) std::uint64_t callbacks = 0, bad_callbacks = 0;

  // Initial lists, built before the launch (joined into every thread's history by the launch).
  std::uint32_t next_free = 1;
  for (unsigned b = 0; b < buckets; ++b) {
    for (unsigned k = 0; k < initial_len; ++k) {
      const std::uint32_t i = next_free++;
      nodes[i].payload = std::uint64_t{i} << 32;
      nodes[i].next = lists[b].head;
      lists[b].head = i;
    }
    lists[b].len = initial_len;
  }
  for (std::uint32_t i = next_free; i <= nodes_total; ++i) pool.push_back(i);

  auto pool_pop = [&]() -> std::uint32_t {
    std::lock_guard<std::mutex> l(pool_mutex);
    if (pool.empty()) return 0;
    const std::uint32_t i = pool.back();
    pool.pop_back();
    return i;
  };
  auto reclaim = [&](std::uint64_t item) {
    rcu_node& x = nodes[item];
    const std::uint32_t n = P::fetch_add(&x.reclaimed, 1u, toga::relaxed, dev) + 1;
    if (n != P::load(&x.retired, toga::relaxed, dev)) P::fetch_add(&bad_callbacks, std::uint64_t{1}, toga::relaxed, dev);
    x.payload = poison;
    P::fetch_add(&callbacks, std::uint64_t{1}, toga::relaxed, dev);
    std::lock_guard<std::mutex> l(pool_mutex);
    pool.push_back(static_cast<std::uint32_t>(item));
  };
  auto link_of = [&](std::uint64_t item) { return &nodes[item].rcu_link; };

  struct alignas(64) rcu_thread {
    std::uint64_t ops = 0, sections = 0, visited = 0, stalls = 0, updates = 0, retires = 0;
    std::uint64_t delegated = 0, reclaimed_here = 0, starved = 0, violations = 0;
    std::string first_violation;
  };
  std::vector<rcu_thread> st(threads);

  stopwatch clock;
  toga::cpu::launch(threads, 4, 2, [&] {
    const unsigned g = P::global_thread_id();
    rcu_thread& me = st[g];
    splitmix64 rng{0x7c0000ull + g};
    auto violation = [&](const std::string& what) {
      if (me.violations++ == 0) me.first_violation = what;
    };
    if (!is_writer(g)) {
      for (std::uint64_t s = 0; P::load(&writers_left, toga::acquire, dev) != 0; ++s) {
        const unsigned b = static_cast<unsigned>(rng.below(buckets));
        const std::uint32_t token = rcu.read_lock();
        std::uint64_t count = 0;
        for (std::uint64_t cur = P::load(&lists[b].head, toga::acquire, dev); cur != 0;
             cur = P::load(&nodes[cur].next, toga::acquire, dev)) {
          const std::uint64_t pl = nodes[cur].payload;
          if (pl == poison) violation("a reader reached reclaimed node " + str(cur));
          else if ((pl >> 32) != cur) violation("node " + str(cur) + " holds payload of node " + str(pl >> 32));
          if (rng.below(16) == 0) {  // stall on the node; the writers go on meanwhile
            std::this_thread::yield();
            ++me.stalls;
            if (nodes[cur].payload != pl) violation("node " + str(cur) + " changed under a reader");
          }
          if (++count > nodes_total) {
            violation("a traversal did not end (cycle)");
            break;
          }
        }
        rcu.read_unlock(token);
        me.visited += count;
        ++me.sections;
        me.ops += 2;
        churn(s, 4);
      }
      return;
    }
    for (unsigned i = 0; i < writer_ops; ++i) {
      const unsigned b = static_cast<unsigned>(rng.below(buckets));
      const std::uint32_t fresh = pool_pop();
      if (fresh == 0) {  // every spare node waits for a grace period
        ++me.starved;
        P::backoff(static_cast<unsigned>(std::min<std::uint64_t>(me.starved, 12)));
        continue;
      }
      rcu_node& f = nodes[fresh];
      f.payload = (std::uint64_t{fresh} << 32) | ++f.generation;  // before publication
      std::uint32_t victim = 0;
      {
        std::lock_guard<std::mutex> l(writer_mutex[b]);
        bucket& L = lists[b];
        unsigned kind = static_cast<unsigned>(rng.below(3));  // 0 replace, 1 unlink, 2 insert
        if (kind == 1 && L.len <= min_len) kind = 0;
        if (kind == 2 && L.len >= max_len) kind = 0;
        const unsigned k = static_cast<unsigned>(rng.below(kind == 2 ? L.len + 1 : L.len));
        std::uint64_t* link = &L.head;  // the link that points at position k
        for (unsigned j = 0; j < k; ++j) link = &nodes[P::load(link, toga::relaxed, dev)].next;
        const std::uint64_t at = P::load(link, toga::relaxed, dev);
        if (kind == 2) {  // insert fresh before position k
          P::store(&f.next, at, toga::relaxed, dev);
          P::store(link, std::uint64_t{fresh}, toga::release, dev);
          ++L.len;
        } else {
          victim = static_cast<std::uint32_t>(at);
          const std::uint64_t succ = P::load(&nodes[victim].next, toga::relaxed, dev);
          if (kind == 0) {  // replace the victim by a fresh copy (the victim's next stays)
            P::store(&f.next, succ, toga::relaxed, dev);
            P::store(link, std::uint64_t{fresh}, toga::release, dev);
          } else {  // unlink
            P::store(link, succ, toga::release, dev);
            --L.len;
          }
        }
        if (kind == 1) {  // the fresh node was not needed: never published, back to the pool
          std::lock_guard<std::mutex> pl(pool_mutex);
          pool.push_back(fresh);
        }
      }
      if (victim == 0) {
        ++me.updates;
        ++me.ops;
        churn(i, 4);
        continue;
      }
      ++me.updates;
      P::fetch_add(&nodes[victim].retired, 1u, toga::relaxed, dev);
      ++me.retires;
      if (uses_synchronize(g)) {
        rcu.synchronize();
        reclaim(victim);
        ++me.reclaimed_here;
      } else {
        const toga::rcu_retire_result r = rcu.retire(victim, link_of, reclaim);
        me.delegated += r.delegated;
        me.reclaimed_here += r.reclaimed;
      }
      me.ops += 2;
      churn(i, 4);
    }
    P::fetch_sub(&writers_left, 1u, toga::release, dev);
  });
  const double secs = clock.seconds();

  std::uint64_t ops = 0, sections = 0, visited = 0, stalls = 0, updates = 0, retires = 0, delegated = 0;
  std::uint64_t reclaimed_here = 0, starved = 0;
  for (unsigned g = 0; g < threads; ++g) {
    const rcu_thread& t = st[g];
    EXPECT_EQ(t.violations, 0u) << "thread " << g << ": " << t.first_violation;
    ops += t.ops, sections += t.sections, visited += t.visited, stalls += t.stalls;
    updates += t.updates, retires += t.retires, delegated += t.delegated;
    reclaimed_here += t.reclaimed_here, starved += t.starved;
  }
  EXPECT_EQ(bad_callbacks, 0u) << "a callback ran twice for one retirement, or before it";
  EXPECT_EQ(callbacks, retires) << "every retired node's callback must run exactly once";
  EXPECT_EQ(reclaimed_here, retires) << "callbacks reported by retire/synchronize";
  for (std::uint32_t i = 1; i <= nodes_total; ++i)
    ASSERT_EQ(nodes[i].reclaimed, nodes[i].retired) << "node " << i;
  EXPECT_EQ(rcu.readers_raw(0), 0u);
  EXPECT_EQ(rcu.readers_raw(1), 0u);
  EXPECT_EQ(rcu.pending_raw(), 0u);
  EXPECT_EQ(rcu.cb_head_raw(), 0u);
  // The lists are intact: every node is either listed (once, unpoisoned) or in the pool.
  std::vector<unsigned> seen(nodes_total + 1, 0);
  std::uint64_t listed = 0;
  for (unsigned b = 0; b < buckets; ++b) {
    unsigned len = 0;
    for (std::uint64_t cur = lists[b].head; cur != 0 && len <= nodes_total; cur = nodes[cur].next, ++len) {
      ++seen[cur];
      EXPECT_NE(nodes[cur].payload, poison) << "listed node " << cur << " was reclaimed";
    }
    EXPECT_EQ(len, lists[b].len) << "bucket " << b;
    listed += len;
  }
  for (std::uint32_t i : pool) ++seen[i];
  for (std::uint32_t i = 1; i <= nodes_total; ++i) ASSERT_EQ(seen[i], 1u) << "node " << i << " listed/pooled " << seen[i] << " times";
  EXPECT_EQ(listed + pool.size(), nodes_total);
  report("rcu", threads, ops, secs,
         str(sections) + " read-side sections (" + str(visited) + " nodes visited, " + str(stalls) +
             " stalls inside), " + str(updates) + " updates, " + str(retires) + " retirements (" +
             str(delegated) + " delegated), " + str(callbacks) + " callbacks, " + str(starved) +
             " writer waits for spare nodes");
}

// ------------------------------------------------------------------------------------------
// Allocator: a heap, block patterns, handles
// ------------------------------------------------------------------------------------------

namespace geom = toga::geom;
using A = toga::allocator<P>;

struct free_deleter {
  void operator()(char* p) const { std::free(p); }
};

//! A heap of 4 KiB x 2^k bytes (at least `bytes`) with `arenas` arenas, set up as the
//! simulator's scenarios do: 4 KiB aligned heap, zeroed metadata, init_after_zero(limit).
struct test_heap {
  toga::heap_layout layout;
  std::unique_ptr<char, free_deleter> heap;
  std::vector<std::uint64_t> meta;
  A a{};

  test_heap(std::uint64_t bytes, unsigned arenas, std::uint64_t limit = 0) {
    layout = toga::heap_layout::make<P>(toga::heap_layout::levels_for(bytes), arenas);
    const std::uint64_t hb = geom::page_bytes << (layout.levels - 1);
    heap.reset(static_cast<char*>(std::aligned_alloc(geom::page_bytes, hb)));
    meta.assign(layout.bytes / 8 + 1, 0);
    a = A::make(heap.get(), reinterpret_cast<char*>(meta.data()), layout);
    a.init_after_zero(limit);
  }
  std::uint64_t bytes() const { return a.heap_bytes; }
  std::uint32_t root_state() const { return a.small.buddy.state[1]; }
};


//! Words a block of `bytes` carries: its first and last 8 bytes and a stride between (64 B up
//! to 8 KiB, 1 KiB above). Blocks under 8 B get one word (the served block is >= 16 B).
template <class F>
void for_each_pattern_word(std::uint64_t bytes, F&& f) {
  const std::uint64_t len = bytes < 8 ? 8 : (bytes + 7) & ~std::uint64_t{7};
  const std::uint64_t stride = len <= 8192 ? 64 : 1024;
  for (std::uint64_t off = 0; off + 8 < len; off += stride) f(off);
  f(len - 8);
}
std::uint64_t pattern_word(std::uint64_t pattern, std::uint64_t off) {
  return pattern ^ (off * 0x9e3779b97f4a7c15ull);
}
void fill_block(char* p, std::uint64_t bytes, std::uint64_t pattern) {
  for_each_pattern_word(bytes, [&](std::uint64_t off) {
    *reinterpret_cast<std::uint64_t*>(p + off) = pattern_word(pattern, off);
  });
}
//! The first byte offset whose word is wrong, or nullopt; then scribbles over the words (so a
//! second owner of the same memory sees the damage at its own check).
std::optional<std::uint64_t> check_and_scribble(char* p, std::uint64_t bytes, std::uint64_t pattern) {
  std::optional<std::uint64_t> bad;
  for_each_pattern_word(bytes, [&](std::uint64_t off) {
    auto* w = reinterpret_cast<std::uint64_t*>(p + off);
    if (*w != pattern_word(pattern, off) && !bad) bad = off;
    *w = ~pattern_word(pattern, off);
  });
  return bad;
}

//! A live block in one word: heap offset (32 bits), requested bytes (17 bits), log2 of the
//! requested alignment (4 bits, 0: none), random tag (11 bits). Never 0 (bytes >= 1). The
//! block's pattern is mix(handle).
std::uint64_t make_handle(std::uint64_t off, std::uint64_t bytes, std::uint64_t tag, std::uint64_t alignment = 0) {
  const std::uint64_t align_log = alignment ? static_cast<std::uint64_t>(std::countr_zero(alignment)) : 0;
  return off | (bytes << 32) | (align_log << 49) | ((tag & 0x7ff) << 53);
}
std::uint64_t handle_off(std::uint64_t h) { return h & 0xffffffffull; }
std::uint64_t handle_bytes(std::uint64_t h) { return (h >> 32) & 0x1ffff; }
std::uint64_t handle_alignment(std::uint64_t h) {
  const std::uint64_t l = (h >> 49) & 0xf;
  return l ? std::uint64_t{1} << l : 0;
}
//! Served bytes of the block a handle names.
std::uint64_t handle_served(const A& a, std::uint64_t h) { return a.served_bytes(handle_bytes(h), handle_alignment(h)); }

//! A racy look at the buddy tree (relaxed loads, any thread): free bytes in AVAILABLE nodes,
//! and the largest AVAILABLE block. For diagnosing a nullptr: fragmentation or not.
struct buddy_snapshot {
  std::uint64_t free_bytes = 0, largest_free = 0, free_chunk_sized = 0;
  std::int64_t chunks = 0;  // chunks UAlloc holds (all arenas)
};
buddy_snapshot snapshot_buddy(const A& a) {
  buddy_snapshot s;
  for (unsigned i = 0; i < a.small.num_arenas; ++i)
    s.chunks += static_cast<std::int64_t>(P::load(&a.small.arenas[i].stats.chunks, toga::relaxed, dev));
  const auto& b = a.small.buddy;
  for (std::uint64_t v = 1; v < (std::uint64_t{1} << b.levels); ++v) {
    if (P::load(&b.state[v], toga::relaxed, dev) != toga::node_available) continue;
    const std::uint64_t bytes = geom::page_bytes << b.height(v);
    s.free_bytes += bytes;
    s.largest_free = std::max(s.largest_free, bytes);
    if (bytes >= geom::chunk_bytes) s.free_chunk_sized += bytes / geom::chunk_bytes;
  }
  return s;
}

//! Quiescent: what UAlloc still holds although nothing is live. Empty bins still listed (their
//! retirement gave up: try_retire's try_wait(cap) failed) and entirely free chunks still listed
//! (release_bin's try_wait failed) keep their chunk from TBuddy, so the root cannot merge.
std::string stranded_report(const test_heap& h) {
  std::uint64_t empty_bins = 0, free_chunks = 0;
  for (unsigned ai = 0; ai < h.a.small.num_arenas; ++ai) {
    const auto& ar = h.a.small.arenas[ai];
    for (unsigned c = 0; c < geom::num_classes; ++c) {
      for (std::uint64_t bin = ar.lists[c].inbox; bin != 0;
           bin = reinterpret_cast<const toga::bin_header*>(h.a.small.base + bin)->inbox_next) {
        const auto* bh = reinterpret_cast<const toga::bin_header*>(h.a.small.base + bin);
        if (bh->free == bh->capacity) ++empty_bins;
      }
      for (unsigned s = 0; s < toga::max_pin_slots; ++s) {
        const std::uint64_t bin = ar.lists[c].pins[s];
        if (bin && reinterpret_cast<const toga::bin_header*>(h.a.small.base + bin)->free ==
                       reinterpret_cast<const toga::bin_header*>(h.a.small.base + bin)->capacity)
          ++empty_bins;
      }
    }
    for (std::uint64_t link = ar.chunk_head; link != 0;) {
      const auto* ch = reinterpret_cast<const toga::chunk_header*>(h.a.small.base + link - 1);
      if (ch->free_bins == geom::usable_bins) ++free_chunks;
      link = ch->next;
    }
  }
  return str(empty_bins) + " empty bins still pinned or queued, " + str(free_chunks) + " entirely free chunks still listed";
}

//! Quiescent checks after everything was freed: the invariants hold, the statistics balance,
//! and after a trim and merging free buddies the whole heap is one AVAILABLE root again.
void expect_empty_and_mergeable(test_heap& h, const char* when, std::uint64_t expected_allocations) {
  SCOPED_TRACE(when);
  toga::heap_quality q;
  if (auto e = toga::check_quiescent(h.a, &q)) ADD_FAILURE() << "check_quiescent: " << *e;
  const toga::heap_statistics s = toga::collect_statistics(h.a);
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.allocations, s.deallocations);
  EXPECT_EQ(s.allocations, expected_allocations);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_EQ(q.live_blocks, 0u);
  // hysteresis keeps empty bins and a free chunk per arena (E11, design.md §9.4): the heap is as new
  // after a trim (what the host's heap::trim does at quiescence)
  toga::cpu::launch(1, 1, 1, [&] { h.a.trim(); });
  if (auto e = toga::check_quiescent(h.a)) ADD_FAILURE() << "check_quiescent after the trim: " << *e;
  const std::uint64_t merges = toga::merge_free_buddies_quiescent(h.a);
  toga::heap_quality q2;
  if (auto e = toga::check_quiescent(h.a, &q2)) ADD_FAILURE() << "check_quiescent after merging: " << *e;
  EXPECT_EQ(h.root_state(), static_cast<std::uint32_t>(toga::node_available))
      << "the buddy root is not AVAILABLE after freeing everything, a trim and merging (" << q2.chunks
      << " chunks and " << q2.bins << " bins still held by UAlloc: " << stranded_report(h) << "; "
      << merges << " merges)";
  std::printf("[   stress ]   %s: quiescent; %llu unmerged buddy pairs, %llu chunks / %llu bins left, "
              "%llu merges; peak used since the heap was made (sum of per-SM peaks) %llu B\n",
              when, static_cast<unsigned long long>(q.unmerged_pairs),
              static_cast<unsigned long long>(q.chunks), static_cast<unsigned long long>(q.bins),
              static_cast<unsigned long long>(merges), static_cast<unsigned long long>(s.peak_used_bytes));
  std::fflush(stdout);
}

//! From a one-thread launch (identity is needed): allocate(bytes) must succeed, and the block
//! is written, checked and freed.
void expect_whole_allocation(test_heap& h, std::uint64_t bytes) {
  bool ok = false;
  toga::cpu::launch(1, 1, 1, [&] {
    void* p = h.a.allocate(bytes);
    if (!p) return;
    fill_block(static_cast<char*>(p), bytes, 0x1234);
    ok = !check_and_scribble(static_cast<char*>(p), bytes, 0x1234).has_value() && p == h.a.small.base;
    h.a.deallocate(p);
  });
  EXPECT_TRUE(ok) << "allocate(" << bytes << ") on the empty, merged heap failed";
}

struct alignas(64) mailbox {
  std::uint64_t word = 0;  // a handle, or 0
};

// ------------------------------------------------------------------------------------------
// 3. Allocator storm
// ------------------------------------------------------------------------------------------

TEST(AllocatorStress, StormWithCrossThreadFrees) {
  // 16 threads in 8 blocks of 2 on 4 SMs (4 arenas). Each thread: ops operations; an
  // allocation draws 1 B .. 8 KiB log-uniformly (1 in 64: 32 KiB + 1 .. 64 KiB), 1 in 8 with
  // an alignment of 8 B .. 4 KiB; the block gets its pattern; half the blocks are deposited in
  // a random other thread's mailbox (an atomic exchange, which hands back what was there), and
  // threads drain their own mailbox now and then. A free picks one of the thread's blocks at
  // random, verifies and scribbles the pattern, and deallocates. A thread holds at most `keep`
  // blocks, so the live memory stays far below the heap: every nullptr is a failure.
  watchdog dog("StormWithCrossThreadFrees", hang_limit);
  constexpr unsigned threads = 16, per_block = 2, sms = 4;
  constexpr std::uint64_t heap_bytes = 16ull << 20;
  constexpr std::size_t keep = 12;
  const unsigned ops = scaled(100'000, 80'000);
  test_heap h(heap_bytes, sms);
  std::vector<mailbox> mail(threads);
  alignas(64) std::uint32_t finished = 0;

  alignas(64) std::uint64_t live = 0;  // served bytes of live blocks (after allocate, before free)
  struct alignas(64) storm_thread {
    std::uint64_t ops = 0, allocs = 0, frees = 0, failed = 0, aligned = 0, large = 0, handed = 0;
    std::uint64_t received = 0, bytes = 0, violations = 0;
    std::string first_violation;
    std::string failures;  // the first few nullptrs, with the state of the heap
  };
  std::vector<storm_thread> st(threads);

  stopwatch clock;
  toga::cpu::launch(threads, per_block, sms, [&] {
    const unsigned g = P::global_thread_id();
    storm_thread& me = st[g];
    splitmix64 rng{0xa110c000ull + g};
    char* const base = h.a.small.base;
    auto violation = [&](const std::string& what) {
      if (me.violations++ == 0) me.first_violation = what;
    };
    auto do_alloc = [&]() -> std::uint64_t {
      std::uint64_t bytes;
      if (rng.below(64) == 0) {
        bytes = 32768 + 1 + rng.below(32768);
        ++me.large;
      } else {
        bytes = 1 + rng.below(std::uint64_t{1} << rng.below(14));
      }
      std::uint64_t alignment = 0;
      void* p;
      if (rng.below(8) == 0) {
        alignment = std::uint64_t{1} << (3 + rng.below(10));
        ++me.aligned;
        p = h.a.allocate(bytes, alignment);
      } else {
        p = h.a.allocate(bytes);
      }
      ++me.ops;
      const std::uint64_t served = h.a.served_bytes(bytes, alignment);
      if (!p) {
        if (me.failed++ < 3) {
          const buddy_snapshot b = snapshot_buddy(h.a);
          me.failures += "\n  thread " + str(g) + " (SM " + str(P::sm_id()) + "): allocate(" + str(bytes) +
                         (alignment ? ", " + str(alignment) : std::string()) + ") [" + str(served) + " B served] -> nullptr with " +
                         str(P::load(&live, toga::relaxed, dev)) + " B live; buddy tree: " + str(b.free_bytes) +
                         " B free, largest free block " + str(b.largest_free) + " B, " + str(b.free_chunk_sized) +
                         " free chunk-sized regions; UAlloc holds " + std::to_string(b.chunks) + " chunks";
        }
        return 0;
      }
      ++me.allocs;
      P::fetch_add(&live, served, toga::relaxed, dev);
      me.bytes += served;
      const std::uint64_t off = static_cast<std::uint64_t>(static_cast<char*>(p) - base);
      if (!h.a.contains(p) || off + served > h.bytes()) violation("block at " + str(off) + " outside the heap");
      // superbin slots (1 KiB .. sb_max_bytes) are aligned to their size, so the 4 KiB rule does not
      // apply to them; a 1 KiB block without a superbin to serve it is a UAlloc slot (or a TBuddy block)
      const bool in_superbin = served >= geom::sb_min_class_bytes && served <= h.a.sb_max_bytes;
      const bool small = served <= geom::max_class_bytes;
      if (!in_superbin && small == (off % geom::page_bytes == 0)) violation("block at " + str(off) + " of " + str(served) + " B on the wrong side of the 4 KiB rule");
      if (off % (small ? std::min<std::uint64_t>(served, 128) : served) != 0) violation("block at " + str(off) + " misaligned for its size " + str(served));
      if (alignment && reinterpret_cast<std::uintptr_t>(p) % alignment != 0) violation("block at " + str(off) + " misses alignment " + str(alignment));
      const std::uint64_t handle = make_handle(off, bytes, rng.next(), alignment);
      fill_block(static_cast<char*>(p), bytes, mix(handle));
      return handle;
    };
    auto do_free = [&](std::uint64_t handle) {
      const std::uint64_t off = handle_off(handle), bytes = handle_bytes(handle);
      if (auto bad = check_and_scribble(base + off, bytes, mix(handle)))
        violation("block at " + str(off) + " (" + str(bytes) + " B) corrupted at byte " + str(*bad) + ": another owner wrote it");
      P::fetch_sub(&live, handle_served(h.a, handle), toga::relaxed, dev);
      h.a.deallocate(base + off);
      ++me.frees;
      ++me.ops;
    };
    std::vector<std::uint64_t> mine;
    mine.reserve(keep + 4);
    auto take_mail = [&](unsigned box) {
      const std::uint64_t got = P::exchange(&mail[box].word, std::uint64_t{0}, toga::acq_rel, dev);
      if (got) {
        mine.push_back(got);
        ++me.received;
      }
    };
    for (unsigned i = 0; i < ops; ++i) {
      if (!mine.empty() && (mine.size() >= keep || rng.below(2) == 0)) {
        const std::size_t k = static_cast<std::size_t>(rng.below(mine.size()));
        do_free(mine[k]);
        mine[k] = mine.back();
        mine.pop_back();
      } else if (const std::uint64_t handle = do_alloc()) {
        if (rng.below(2) == 0) {  // hand it to another thread (likely another block and SM)
          const unsigned to = static_cast<unsigned>((g + 1 + rng.below(threads - 1)) % threads);
          const std::uint64_t got = P::exchange(&mail[to].word, handle, toga::acq_rel, dev);
          ++me.handed;
          if (got) {
            mine.push_back(got);
            ++me.received;
          }
        } else {
          mine.push_back(handle);
        }
      }
      if (rng.below(16) == 0) take_mail(g);
      churn(i, 8);
    }
    for (std::uint64_t handle : mine) do_free(handle);
    // Deposits happen only in the loop above: once every thread is past it, a last drain of
    // our own mailbox leaves it empty for good.
    P::fetch_add(&finished, 1u, toga::release, dev);
    for (unsigned attempt = 0;; ++attempt) {
      const bool all = P::load(&finished, toga::acquire, dev) == threads;
      const std::uint64_t got = P::exchange(&mail[g].word, std::uint64_t{0}, toga::acq_rel, dev);
      if (got) do_free(got);
      if (all) break;
      P::backoff(attempt);
    }
  });
  const double secs = clock.seconds();

  std::uint64_t total_ops = 0, allocs = 0, frees = 0, failed = 0, aligned = 0, large = 0, handed = 0;
  std::uint64_t received = 0, bytes = 0;
  std::string failures;
  for (unsigned g = 0; g < threads; ++g) {
    const storm_thread& t = st[g];
    failures += t.failures;
    EXPECT_EQ(t.violations, 0u) << "thread " << g << ": " << t.first_violation;
    total_ops += t.ops, allocs += t.allocs, frees += t.frees, failed += t.failed, aligned += t.aligned;
    large += t.large, handed += t.handed, received += t.received, bytes += t.bytes;
  }
  for (const mailbox& m : mail) EXPECT_EQ(m.word, 0u) << "a block was left in a mailbox";
  // A nullptr here is a core fault: the live blocks never need more than a few MiB. The
  // snapshot taken at each failure tells the kind: much free memory (or a free root) right
  // after the failure means free units were invisible to the climb; a heap full of chunks with
  // little live memory means memory held back (e.g. retired bins awaiting a grace period).
  EXPECT_EQ(failed, 0u) << "allocations failed although the live memory is far below the heap size:" << failures;
  EXPECT_EQ(live, 0u);
  EXPECT_EQ(allocs, frees);
  EXPECT_EQ(toga::collect_statistics(h.a).failed, failed);
  report("allocator storm", threads, total_ops, secs,
         str(allocs) + " allocations (" + str(aligned) + " aligned, " + str(large) + " of 32-64 KiB, " +
             str(bytes >> 20) + " MiB served), " + str(frees) + " frees, " + str(handed) +
             " handed to other threads, " + str(failed) + " failed; heap " + str(h.bytes() >> 20) + " MiB, " +
             str(sms) + " arenas");
  expect_empty_and_mergeable(h, "after the storm", allocs);
  expect_whole_allocation(h, h.bytes());
}

// ------------------------------------------------------------------------------------------
// 4. Exhaustion and recovery
// ------------------------------------------------------------------------------------------

//! Three rounds on one heap: all threads allocate `size` until nullptr (writing a pattern),
//! wait for each other, free everything (round 1: each thread frees the next thread's blocks,
//! on another SM), then the heap must be empty, quiescent and mergeable, and serve the whole
//! heap in one block. Returns the lowest utilisation of the rounds.
void exhaust_and_recover(std::uint64_t size, std::uint64_t heap_bytes, double min_utilisation) {
  watchdog dog("exhaust_and_recover", hang_limit);
  constexpr unsigned threads = 16, per_block = 2, sms = 4;
  test_heap h(heap_bytes, sms);
  std::uint64_t expected_allocations = 0;
  for (unsigned round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + str(round));
    const std::uint64_t failed_before = toga::collect_statistics(h.a).failed;
    std::vector<std::vector<char*>> blocks(threads);
    std::vector<std::uint64_t> violations(threads, 0);
    alignas(64) std::uint32_t exhausted = 0;
    stopwatch clock;
    toga::cpu::launch(threads, per_block, sms, [&] {
      const unsigned g = P::global_thread_id();
      std::vector<char*>& mine = blocks[g];
      mine.reserve(static_cast<std::size_t>(heap_bytes / size / threads * 2));
      for (std::uint64_t i = 0;; ++i) {
        char* p = static_cast<char*>(h.a.allocate(size));
        if (!p) break;
        fill_block(p, size, mix(static_cast<std::uint64_t>(p - h.a.small.base) ^ round));
        mine.push_back(p);
        churn(i, 16);
      }
      arrive_and_wait(&exhausted, threads);
      const unsigned from = round == 1 ? (g + per_block) % threads : g;  // round 1: another block's
      for (char* p : blocks[from]) {
        if (check_and_scribble(p, size, mix(static_cast<std::uint64_t>(p - h.a.small.base) ^ round))) ++violations[g];
        h.a.deallocate(p);
      }
    });
    const double secs = clock.seconds();
    std::uint64_t n = 0, most = 0, fewest = ~std::uint64_t{0};
    for (unsigned g = 0; g < threads; ++g) {
      n += blocks[g].size();
      most = std::max<std::uint64_t>(most, blocks[g].size());
      fewest = std::min<std::uint64_t>(fewest, blocks[g].size());
      EXPECT_EQ(violations[g], 0u) << "thread " << g << " found corrupted blocks";
    }
    expected_allocations += n;
    const double utilisation = static_cast<double>(n * size) / static_cast<double>(h.bytes());
    EXPECT_GE(utilisation, min_utilisation) << n << " blocks of " << size << " B in a heap of " << h.bytes() << " B";
    const toga::heap_statistics s = toga::collect_statistics(h.a);
    const std::uint64_t failed = s.failed - failed_before;
    EXPECT_GE(failed, threads) << "every thread ends with a nullptr";
    report(("exhaustion " + str(size) + " B, round " + str(round)).c_str(), threads, 2 * n + failed, secs,
           str(n) + " blocks (" + str(n * size) + " B of " + str(h.bytes()) + "): utilisation " +
               std::to_string(utilisation) + "; " + str(failed) + " nullptr; blocks per thread " +
               str(fewest) + " .. " + str(most));
    expect_empty_and_mergeable(h, ("exhaustion " + str(size) + " B, round " + str(round)).c_str(), expected_allocations);
    expect_whole_allocation(h, h.bytes());
    ++expected_allocations;  // the whole-heap block
  }
}

TEST(AllocatorStress, ExhaustAndRecover4KiB) { exhaust_and_recover(4096, 16ull << 20, 0.99); }
TEST(AllocatorStress, ExhaustAndRecover256B) { exhaust_and_recover(256, 16ull << 20, 0.90); }

// ------------------------------------------------------------------------------------------
// 5. Byte limit
// ------------------------------------------------------------------------------------------

TEST(AllocatorStress, ByteLimitIsNeverExceeded) {
  // limit = heap / 4. Phase 1: all threads allocate 4 KiB until nullptr: exactly limit bytes
  // must be obtained (no frees, so no transient over-charge can cause an early nullptr).
  // Phase 2: everything freed, then a churn of mixed sizes (1 B .. 64 KiB) whose live volume
  // would exceed the limit: nullptrs are expected, and the live served bytes (counted after
  // each allocation returns, before each free) never exceed the limit. Phase 3: free all; the
  // heap must be empty, the charged bytes exactly the chunks UAlloc still holds; after
  // merging, allocate(limit) succeeds and allocate(limit + 1) does not.
  watchdog dog("ByteLimitIsNeverExceeded", hang_limit);
  constexpr unsigned threads = 16, per_block = 4, sms = 2;
  constexpr std::uint64_t heap_bytes = 16ull << 20, limit = heap_bytes / 4;
  constexpr std::size_t keep = 24;
  const unsigned ops = scaled(40'000, 30'000);
  test_heap h(heap_bytes, sms, limit);
  alignas(64) std::uint64_t live = 0;  // served bytes of live blocks (a lower bound of the truth)
  alignas(64) std::uint64_t peak_live = 0;
  alignas(64) std::uint32_t phase_done = 0;
  struct alignas(64) limit_thread {
    std::uint64_t ops = 0, first_phase = 0, allocs = 0, failed = 0, over = 0, violations = 0;
  };
  std::vector<limit_thread> st(threads);

  stopwatch clock;
  toga::cpu::launch(threads, per_block, sms, [&] {
    const unsigned g = P::global_thread_id();
    limit_thread& me = st[g];
    splitmix64 rng{0x1171700ull + g};
    char* const base = h.a.small.base;
    std::vector<std::uint64_t> mine;
    // Phase 1: 4 KiB until nullptr.
    for (;;) {
      void* p = h.a.allocate(4096);
      ++me.ops;
      if (!p) break;
      const std::uint64_t handle = make_handle(static_cast<std::uint64_t>(static_cast<char*>(p) - base), 4096, rng.next());
      fill_block(static_cast<char*>(p), 4096, mix(handle));
      mine.push_back(handle);
      ++me.first_phase;
      if (P::fetch_add(&live, std::uint64_t{4096}, toga::relaxed, dev) + 4096 > limit) ++me.over;
    }
    arrive_and_wait(&phase_done, threads);
    auto do_free = [&](std::uint64_t handle) {
      const std::uint64_t off = handle_off(handle), bytes = handle_bytes(handle);
      if (check_and_scribble(base + off, bytes, mix(handle))) ++me.violations;
      P::fetch_sub(&live, h.a.served_bytes(bytes), toga::relaxed, dev);
      h.a.deallocate(base + off);
      ++me.ops;
    };
    for (std::uint64_t handle : mine) do_free(handle);
    mine.clear();
    // Phase 2: mixed churn against the limit.
    for (unsigned i = 0; i < ops; ++i) {
      if (!mine.empty() && (mine.size() >= keep || rng.below(3) == 0)) {
        const std::size_t k = static_cast<std::size_t>(rng.below(mine.size()));
        do_free(mine[k]);
        mine[k] = mine.back();
        mine.pop_back();
      } else {
        const std::uint64_t bytes = rng.below(4) == 0 ? 65536 : 1 + rng.below(std::uint64_t{1} << rng.below(15));
        void* p = h.a.allocate(bytes);
        ++me.ops;
        if (!p) {
          ++me.failed;
        } else {
          ++me.allocs;
          const std::uint64_t now = P::fetch_add(&live, h.a.served_bytes(bytes), toga::relaxed, dev) + h.a.served_bytes(bytes);
          if (now > limit) ++me.over;
          std::uint64_t pk = P::load(&peak_live, toga::relaxed, dev);  // a lower bound of the peak
          while (now > pk && !P::compare_exchange(&peak_live, pk, now, toga::relaxed, dev)) {
          }
          const std::uint64_t handle = make_handle(static_cast<std::uint64_t>(static_cast<char*>(p) - base), bytes, rng.next());
          fill_block(static_cast<char*>(p), bytes, mix(handle));
          mine.push_back(handle);
        }
      }
      churn(i, 8);
    }
    for (std::uint64_t handle : mine) do_free(handle);
  });
  const double secs = clock.seconds();

  std::uint64_t ops_total = 0, first_phase = 0, allocs = 0, failed = 0;
  for (unsigned g = 0; g < threads; ++g) {
    const limit_thread& t = st[g];
    EXPECT_EQ(t.violations, 0u) << "thread " << g << " found corrupted blocks";
    EXPECT_EQ(t.over, 0u) << "thread " << g << " saw the live bytes exceed the limit";
    ops_total += t.ops, first_phase += t.first_phase, allocs += t.allocs, failed += t.failed;
  }
  EXPECT_EQ(first_phase * 4096, limit) << "4 KiB allocations until nullptr must obtain exactly the limit";
  EXPECT_LE(peak_live, limit);
  EXPECT_GT(failed, 0u) << "the churn never reached the limit";
  EXPECT_EQ(live, 0u);
  const toga::heap_statistics s = toga::collect_statistics(h.a);
  EXPECT_EQ(h.a.globals->limit.reserved, s.chunk_bytes + s.superbin_bytes) << "charged bytes at quiescence must be the chunks and superbins UAlloc holds";
  report("byte limit", threads, ops_total, secs,
         "limit " + str(limit) + " B of " + str(h.bytes()) + ": phase 1 obtained " + str(first_phase * 4096) +
             " B; churn " + str(allocs) + " allocations, " + str(failed) + " nullptr, peak live " +
             str(peak_live) + " B (" + std::to_string(static_cast<double>(peak_live) / limit) + " of the limit)");
  expect_empty_and_mergeable(h, "after the byte-limit churn", first_phase + allocs);
  EXPECT_EQ(h.a.globals->limit.reserved, 0u) << "bytes still charged after merging";
  bool big_fails = false;
  toga::cpu::launch(1, 1, 1, [&] { big_fails = h.a.allocate(limit + 1) == nullptr; });
  EXPECT_TRUE(big_fails) << "allocate(limit + 1) succeeded";
  expect_whole_allocation(h, limit);
}

}  // namespace
