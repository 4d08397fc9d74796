// Simulator scenarios for the core synchronisation primitives (design.md §3-§5, §20.1): the
// bulk semaphore, the collective mutex and pop-k, and RCU with delegated reclamation. Each has
// ghost state checked at every scheduling step and a `bug` parameter that selects a planted bug
// (0 = the correct code). Ghost updates are plain C++ placed where no scheduling point separates
// them from the atomic step they mirror. Plain state that lanes share or invariants read is
// declared (ghost<T>, and the words each invariant reads: toga/sim/plain.hpp), so `toga-sim
// dpor` orders only the steps that touch the same words (docs/simulator.md §20.1).
#include <algorithm>
#include <mutex>
#include <set>
#include <sstream>

#include "toga/bulk_semaphore.hpp"
#include "toga/group.hpp"
#include "toga/rcu.hpp"
#include "toga/sim/ghost.hpp"
#include "toga/sim/plain.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {
namespace {

using P = toga::sim::platform;
constexpr std::uint32_t none = ~0u;

std::string str(std::uint64_t v) { return std::to_string(v); }

// ---- bulk semaphore: producers and consumers with batches ---------------------------------------
//
// Resources are items in a pool (avail[i] == 1). A lane waits for one unit; OK: it claims an
// available item; GROW: it takes a batch of B new items from a backing store of `capacity`
// batches (failing when it is used up), keeps one, publishes B-1 and signals them. It uses its
// item, then puts it back and signals 1. bug: 1 fast-path fetch_sub, 2 spin ignores shortfall,
// 3 GROW promises the full batch, 4 a failing producer does not withdraw its promise. fast=1 (and
// bugs 5-8) use the biased semaphore with the speculative fetch_sub fast path (E2, design.md §3.4):
// C is then the stored C minus the bias plus the ghost count of units in flight (S1'), and no unit
// may be in flight at quiescence. bug: 5 no undo, 6 undo one short, 7 fast path ignores the bias,
// 8 CAS loop decides below the bias.
template <sem_bug Bug, std::uint64_t Bias = 0>
struct semaphore_inst final : instance {
  using sem_t = bulk_semaphore<P, 31, 21, 12, Bug, Bias>;
  sem_t sem;
  unsigned lanes, b, capacity, rounds;
  bool keep;  // lanes keep their items (nothing comes back: out-of-memory must reach waiters)
  bool withdraw;
  bool upto;  // each wait starts with try_wait_upto(2): a lane that gets two units puts one item back at once
  std::uint32_t made = 0;              // batches taken from the backing store
  std::vector<std::uint32_t> avail;    // 1 = in the pool
  // ghost state
  ghost<std::uint64_t> held = 0, unsignalled = 0;
  std::vector<ghost<std::uint64_t>> debt;  // per lane: promised units not yet settled
  std::vector<ghost<std::uint32_t>> owner;  // per item: lane using it, or none
  ghost<unsigned> oom = 0;

  semaphore_inst(world& w, const params& p, bool withdraw_promises)
      : lanes(w.config().lanes()),
        b(static_cast<unsigned>(std::clamp<std::int64_t>(p.get("batch", 3), 2, 64))),
        capacity(static_cast<unsigned>(std::max<std::int64_t>(0, p.get("capacity", w.config().lanes())))),
        rounds(static_cast<unsigned>(std::max<std::int64_t>(1, p.get("rounds", 2)))),
        keep(p.get("keep", 0) != 0),
        withdraw(withdraw_promises),
        upto(p.get("upto", 0) != 0),
        avail(capacity * b, 0),
        debt(w.config().lanes(), 0),
        owner(capacity * b, none) {
    ghost_table::current().clear();
    sem.init(0);
    const auto inflight = ghost_table::word(ghost_kind::sem_inflight, &sem);
    const std::pair<const void*, const void*> c_words[] = {range_of_object(sem), {inflight, static_cast<const char*>(inflight) + 1}};
    w.add_invariant_reading(
        "S1 fields in range",
        [this]() -> std::optional<std::string> {
          const auto f = sem_t::unpack(sem.raw());
          if (sem_t::pack(f) != sem.raw()) return "stray bits";
          const std::int64_t c = c_true();
          if (c < 0) return "true C = " + std::to_string(c) + " is negative (a unit taken twice)";
          if (static_cast<std::uint64_t>(c) > avail.size()) return "C = " + str(c) + " exceeds every item there is (a borrow from C)";
          return std::nullopt;
        },
        world::watched_ranges{c_words[0], c_words[1]});
    w.add_invariant_reading(
        "S2 E == promises",
        [this]() -> std::optional<std::string> {
          std::uint64_t sum = 0;
          for (const auto& d : debt) sum += d.peek();
          const auto f = sem_t::unpack(sem.raw());
          if (f.e != sum) return "E = " + str(f.e) + " but lanes promised " + str(sum);
          return std::nullopt;
        },
        world::watched_ranges{range_of_object(sem), range_of(debt)}, world::invariant_form::sum_equal);  // E - sum of debt == 0
    w.add_invariant_reading(
        "S5 published == C + held + unsignalled",
        [this]() -> std::optional<std::string> {
          std::uint64_t pool = 0;
          for (auto a : avail) pool += a;
          const std::int64_t c = c_true();
          if (static_cast<std::int64_t>(pool) != c + static_cast<std::int64_t>(held.peek() + unsignalled.peek()))
            return "pool " + str(pool) + " != C " + std::to_string(c) + " + held " + str(held.peek()) + " + unsignalled " +
                   str(unsignalled.peek());
          return std::nullopt;
        },
        // pool - C - inflight - held - unsignalled == 0: one term per word
        world::watched_ranges{c_words[0], c_words[1], range_of(avail), range_of_object(held), range_of_object(unsignalled)},
        world::invariant_form::sum_equal);
  }
  // C as the spec counts it: the stored C without the bias, plus the units speculative
  // decrements hold in flight (ghost state from the core, toga/ghost.hpp).
  std::int64_t c_true() const {
    return sem_t::c_of(sem.raw()) + ghost_table::current().get(ghost_kind::sem_inflight, &sem);
  }

  std::uint32_t claim() {
    for (unsigned attempt = 0;; ++attempt) {
      for (std::uint32_t i = 0; i < avail.size(); ++i) {
        std::uint32_t one = 1;
        if (P::load(&avail[i], relaxed, device_scope) == 1 &&
            P::compare_exchange(&avail[i], one, 0u, acquire, device_scope)) {
          --held;
          return i;
        }
      }
      P::backoff(attempt);  // a publisher may be between its store and its signal
    }
  }
  void use(std::uint32_t item, unsigned me) {
    if (owner[item] != none) P::violated("item " + str(item) + " handed to lane " + str(me) + " while lane " + str(owner[item]) + " uses it");
    owner[item] = me;
    // A scheduling point while the item is in use. A relaxed fence changes no view: a seq_cst one
    // would synchronise the lanes through the seq_cst order and could hide a missing acquire or
    // release of the semaphore under --memory weak (and order every use against every other for dpor).
    P::fence(relaxed, device_scope);
    owner[item] = none;
  }
  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    for (unsigned r = 0; r < rounds; ++r) {
      std::uint32_t item;
      const std::uint64_t took = upto ? sem.try_wait_upto(2) : 0;
      if (took > 0) {
        held += took;
        item = claim();
        for (std::uint64_t k = 1; k < took; ++k) {  // the spare unit's item goes back to the pool
          const std::uint32_t spare = claim();
          P::store(&avail[spare], 1u, release, device_scope);
          ++unsignalled;
          sem.signal(1, 0);
          --unsignalled;
        }
      } else if (sem.wait(1, b) == sem_result::ok) {
        ++held;
        item = claim();
      } else {
        debt[me] += (Bug == sem_bug::grow_promises_full_batch) ? b : b - 1;
        const std::uint32_t batch = P::fetch_add(&made, 1u, relaxed, device_scope);
        if (batch >= capacity) {
          ++oom;
          if (withdraw) {
            sem.signal(0, b - 1);
            debt[me] -= b - 1;
          }
          return;  // out of memory: this lane gives up
        }
        item = batch * b;
        for (unsigned j = 1; j < b; ++j) {
          P::store(&avail[batch * b + j], 1u, release, device_scope);
          ++unsignalled;
        }
        sem.signal(b - 1, b - 1);
        unsignalled -= b - 1;
        debt[me] -= b - 1;
      }
      use(item, me);
      if (keep) continue;
      P::store(&avail[item], 1u, release, device_scope);
      ++unsignalled;
      sem.signal(1, 0);
      --unsignalled;
    }
  }
  std::optional<std::string> check_final() override {
    const auto f = sem_t::unpack(sem.raw());
    std::uint64_t pool = 0;
    for (auto a : avail) pool += a;
    if (f.e != 0 || f.r != 0) return "quiescent E = " + str(f.e) + ", R = " + str(f.r) + " (want 0, 0)";
    if (const auto inflight = ghost_table::current().get(ghost_kind::sem_inflight, &sem))
      return std::to_string(inflight) + " units of speculative decrements still in flight at quiescence (never undone)";
    if (sem_t::c_of(sem.raw()) != static_cast<std::int64_t>(pool))
      return "quiescent C = " + std::to_string(sem_t::c_of(sem.raw())) + " but " + str(pool) + " items are in the pool";
    // (upto without keep: a lane holds two items for a moment, so the store must cover twice the
    // lanes; with keep, each round makes at most one GROW whatever upto does)
    if (capacity * (keep ? 1 : b) >= lanes * (keep ? rounds : 1) * (upto && !keep ? 2 : 1) && oom.peek())
      return str(oom.peek()) + " lanes ran out of memory with a backing store that suffices";
    return std::nullopt;
  }
};

// ---- collective semaphore wait over partial warps ------------------------------------------------
// Lanes (a random subset of each warp, by a schedule choice) wait collectively for one unit each;
// on GROW(m) the first m ranks each produce a batch and serve the ranks assigned to it.
struct semaphore_collective_inst final : instance {
  using sem_t = arena_semaphore<P>;
  sem_t sem;
  unsigned b, capacity;
  std::uint32_t made = 0;
  std::vector<std::uint32_t> avail;
  std::vector<std::uint32_t> got;  // per lane: item, or none (OOM / not taking part)
  unsigned lanes;
  semaphore_collective_inst(world& w, const params& p)
      : b(static_cast<unsigned>(std::clamp<std::int64_t>(p.get("batch", 4), 2, 64))),
        capacity(static_cast<unsigned>(std::max<std::int64_t>(0, p.get("capacity", w.config().lanes())))),
        avail(capacity * b, 0),
        got(w.config().lanes(), none),
        lanes(w.config().lanes()) {
    sem.init(0);
    w.add_invariant_reading(
        "S1 fields in range",
        [this]() -> std::optional<std::string> {
          if (sem_t::unpack(sem.raw()).c > avail.size()) return "C exceeds the items there are";
          return std::nullopt;
        },
        world::watched_ranges{range_of_object(sem)}, world::invariant_form::word_bounds);  // one word's field
  }
  std::uint32_t claim() {
    for (unsigned attempt = 0;; ++attempt) {
      for (std::uint32_t i = 0; i < avail.size(); ++i) {
        std::uint32_t one = 1;
        if (P::load(&avail[i], relaxed, device_scope) == 1 && P::compare_exchange(&avail[i], one, 0u, acquire, device_scope))
          return i;
      }
      P::backoff(attempt);
    }
  }
  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    if (P::choose(4, 2) == 0) return;  // partial warps: about a quarter of the lanes do not take part (dpor: 2 branches)
    const auto g = coalesced_group<P>::by_key(reinterpret_cast<std::uintptr_t>(&sem));
    const auto w = sem.wait_collective(g, 1, b);
    if (w.result == sem_result::ok) {
      got[me] = claim();
      return;
    }
    // GROW(m): ranks < m produce batch `rank`; rank r is served by batch r / b.
    std::uint32_t base = none;
    if (g.rank < w.batches) {
      const std::uint64_t left = sem_t::batch_leftover(g.rank, g.size, 1, b);
      const std::uint32_t batch = P::fetch_add(&made, 1u, relaxed, device_scope);
      if (batch >= capacity) {
        sem.signal(0, left);
      } else {
        base = batch * b;
        for (std::uint64_t j = b - left; j < b; ++j) P::store(&avail[base + j], 1u, release, device_scope);
        sem.signal(left, left);
      }
    }
    const std::uint32_t my_base = g.from_rank(base, g.rank / b);
    if (my_base != none) got[me] = my_base + g.rank % b;
  }
  std::optional<std::string> check_final() override {
    std::set<std::uint32_t> seen;
    for (unsigned i = 0; i < lanes; ++i)
      if (got[i] != none) {
        if (!seen.insert(got[i]).second) return "item " + str(got[i]) + " handed to two lanes";
        if (avail[got[i]]) return "item " + str(got[i]) + " is held and in the pool";
      }
    const auto f = sem_t::unpack(sem.raw());
    std::uint64_t pool = 0;
    for (auto a : avail) pool += a;
    if (f.e != 0 || f.r != 0 || f.c != pool)
      return "quiescent C/E/R = " + str(f.c) + "/" + str(f.e) + "/" + str(f.r) + " with " + str(pool) + " items in the pool";
    return std::nullopt;
  }
};

// ---- collective mutex ------------------------------------------------------------------------------
// Lanes of several warps lock collectively (grouped by the mutex's address), increment a shared
// counter with a separate load and store inside, and unlock. M1/M2: everyone inside belongs to
// one group, and nobody is inside while the lock word is 0. bug: 1 no entry barrier, 2 lock
// count 1, 3 the leader frees the lock for everyone.
template <mutex_bug Bug>
struct mutex_inst final : instance {
  collective_mutex<P, Bug> m;
  std::uint32_t counter = 0;
  unsigned rounds, lanes;
  std::vector<ghost<std::uint64_t>> inside;  // per lane: the group it is inside with, or 0
  mutex_inst(world& w, const params& p)
      : rounds(static_cast<unsigned>(std::max<std::int64_t>(1, p.get("rounds", 2)))), lanes(w.config().lanes()), inside(lanes, 0) {
    w.add_invariant_reading(
        "M1/M2 one group inside, lock held",
        [this]() -> std::optional<std::string> {
          std::uint64_t id = 0;
          for (unsigned i = 0; i < lanes; ++i)
            if (const std::uint64_t g = inside[i].peek()) {
              if (id && g != id) return "lanes of two groups are inside the critical section";
              id = g;
            }
          if (id && m.word == 0) return "a lane is inside while the lock word is 0";
          return std::nullopt;
        },
        world::watched_ranges{range_of(inside), range_of_object(m)});
  }
  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    for (unsigned r = 0; r < rounds; ++r) {
      const auto g = coalesced_group<P>::by_key(reinterpret_cast<std::uintptr_t>(&m));
      const std::uint32_t tag = g.broadcast(me * 64 + r + 1);  // the leader's (lane, round)
      m.lock(g);
      inside[me] = tag;
      // The group works inside in parallel; only its leader updates the shared counter (by the
      // group size), so lost updates can only come from two groups inside at once.
      if (g.is_leader()) {
        const std::uint32_t v = P::load(&counter, relaxed, device_scope);
        P::store(&counter, v + g.size, relaxed, device_scope);
      } else {
        P::fence(relaxed, device_scope);  // a scheduling point inside (relaxed: it synchronises nothing)
      }
      inside[me] = 0;
      m.unlock(g);
    }
  }
  std::optional<std::string> check_final() override {
    if (counter != lanes * rounds) return "counter " + str(counter) + ", want " + str(lanes * rounds) + " (updates lost)";
    if (m.word != 0) return "lock word " + str(m.word) + " at quiescence";
    return std::nullopt;
  }
};

// ---- pop-k ------------------------------------------------------------------------------------------
// A list of `nodes` elements; every lane pops one collectively. M4: distinct elements, the list
// stays well formed, nothing is lost. bug: 1 no read barrier, 2 head off by one, 3 mutex lock
// count 1 (two groups inside).
template <pop_bug PB, mutex_bug MB>
struct pop_inst final : instance {
  collective_mutex<P, MB> m;
  std::uint32_t head = 1;
  std::vector<std::uint32_t> next;
  unsigned nodes;
  std::vector<std::uint32_t> got;
  pop_inst(world& w, const params& p)
      : nodes(static_cast<unsigned>(std::max<std::int64_t>(1, p.get("nodes", w.config().lanes() + 2)))),
        got(w.config().lanes(), 0) {
    next.assign(nodes + 1, 0);
    for (unsigned i = 1; i < nodes; ++i) next[i] = i + 1;
  }
  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    const auto g = coalesced_group<P>::by_key(reinterpret_cast<std::uintptr_t>(&m));
    got[me] = pop_k<P, PB, MB>(m, &head, next.data(), g);
  }
  std::optional<std::string> check_final() override {
    std::vector<unsigned> seen(nodes + 1, 0);
    unsigned guard = 0;
    for (std::uint32_t n = head; n != 0; n = next[n]) {
      if (++guard > nodes) return "the list has a cycle";
      ++seen[n];
    }
    for (auto n : got)
      if (n) ++seen[n];
    for (unsigned n = 1; n <= nodes; ++n)
      if (seen[n] != 1) return "element " + str(n) + " is owned " + str(seen[n]) + " times (list and lanes)";
    return std::nullopt;
  }
};

// ---- RCU ------------------------------------------------------------------------------------------
// Readers traverse a list inside read-side critical sections; writers unlink one node each under
// a list lock and retire it; the callback poisons the node. R1: no reader reads poison, and (under
// --memory weak) every reader's access to a node happens before the node's reclamation: a
// reclamation not ordered after a reader's read_unlock is a data race on the node's memory even
// where the model cannot produce the stale value (load buffering). R3: every retired node is
// reclaimed exactly once. R4 at quiescence. bug: 1 no epoch re-check, 2 the barrier does not
// wait, 3 collect before clearing pending, 4 no reader fence, 5 relaxed read_unlock, 6 relaxed
// epoch re-check.
template <rcu_bug Bug>
struct rcu_inst final : instance {
  rcu_domain<P, Bug> d;
  std::uint32_t list_lock = 0;
  std::uint32_t head = 1;
  std::vector<std::uint32_t> next, poison;
  std::vector<std::uint64_t> link;
  std::vector<ghost<unsigned>> reclaimed, retired;
  unsigned readers, writers, passes, nodes;
  std::vector<ghost<hb_mark>> read_at;  // nodes x readers: the reader's last access to the node
  ghost<unsigned> delegated = 0;
  rcu_inst(world& w, const params& p)
      : readers(static_cast<unsigned>(std::max<std::int64_t>(1, p.get("readers", 2)))),
        writers(w.config().lanes() - readers),
        passes(static_cast<unsigned>(std::max<std::int64_t>(1, p.get("passes", 2)))),
        nodes(writers + 2) {
    next.assign(nodes + 1, 0);
    poison.assign(nodes + 1, 0);
    link.assign(nodes + 1, 0);
    reclaimed.assign(nodes + 1, 0);
    retired.assign(nodes + 1, 0);
    read_at.assign(std::size_t{nodes + 1} * readers, hb_mark{});
    for (unsigned i = 1; i < nodes; ++i) next[i] = i + 1;
    w.add_invariant_reading(
        "R4 reader counts",
        [this]() -> std::optional<std::string> {
          if (d.readers_raw(0) > readers || d.readers_raw(1) > readers) return "a reader counter exceeds the readers";
          if (d.pending_raw() > 1) return "pending is not 0/1";
          return std::nullopt;
        },
        world::watched_ranges{range_of_object(d)}, world::invariant_form::word_bounds);  // three words, each alone
  }
  void lane() override {
    const unsigned me = P::thread_id();
    if (me < readers) {
      for (unsigned k = 0; k < passes; ++k) {
        const std::uint32_t e = d.read_lock();
        for (std::uint32_t n = P::load(&head, acquire, device_scope); n != 0; n = P::load(&next[n], acquire, device_scope))
          if (P::load(&poison[n], relaxed, device_scope))
            P::violated("R1: a reader inside its read-side critical section reached node " + str(n) + ", already reclaimed");
          else
            read_at[std::size_t{n} * readers + me] = P::hb_here();
        d.read_unlock(e);
      }
      return;
    }
    // writer: unlink node 2 + (me - readers) (never the head, so the head stays valid)
    const std::uint32_t victim = 2 + (me - readers);
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t z = 0;
      if (P::compare_exchange(&list_lock, z, 1u, acquire, device_scope)) break;
      P::backoff(attempt);
    }
    std::uint32_t pred = P::load(&head, relaxed, device_scope);
    while (P::load(&next[pred], relaxed, device_scope) != victim) pred = P::load(&next[pred], relaxed, device_scope);
    P::store(&next[pred], P::load(&next[victim], relaxed, device_scope), release, device_scope);  // victim.next kept
    P::store(&list_lock, 0u, release, device_scope);
    ++retired[victim];
    const auto r = d.retire(
        victim, [this](std::uint64_t item) { return &link[item]; },
        [this](std::uint64_t item) {
          for (unsigned r = 0; r < readers; ++r)
            if (!P::hb_before(read_at[item * readers + r]))
              P::violated("R1 (happens-before): reader " + str(r) + "'s access to node " + str(item) +
                          " in its read-side section does not happen before the node's reclamation: the grace "
                          "period did not synchronise with that reader's read_unlock (a data race on the node)");
          ++reclaimed[item];
          P::store(&poison[item], 1u, relaxed, device_scope);
        });
    delegated += r.delegated;
  }
  std::optional<std::string> check_final() override {
    for (unsigned n = 1; n <= nodes; ++n)
      if (reclaimed[n].peek() != retired[n].peek())
        return "R3: node " + str(n) + " retired " + str(retired[n].peek()) + " times, reclaimed " + str(reclaimed[n].peek()) + " times";
    if (d.readers_raw(0) || d.readers_raw(1) || d.pending_raw())
      return "R4: readers " + str(d.readers_raw(0)) + "/" + str(d.readers_raw(1)) + ", pending " + str(d.pending_raw()) + " at quiescence";
    return std::nullopt;
  }
};

// ---- publication of initialised records (how the allocator publishes a bin or chunk header) ----
// Block 0's lanes each initialise a record (three fields, relaxed stores) and push it onto a
// Treiber stack; block 1's lanes each pop one and check its fields. The push is a release CAS,
// the pop an acquire load and CAS ([HB] release/acquire), or with fence=1 the fence form:
// relaxed CAS after fence(release), relaxed pop then fence(acquire). Records are never pushed
// again, so there is no ABA. bug: 1 relaxed push CAS, 2 relaxed pop (load and CAS), 3 publish
// before initialise, 4 no release fence, 5 no acquire fence, 6 block-scope push (the consumers
// are in another block: a scoped race), 7 the acquire fence narrowed to block scope (4, 5 and 7
// use the fence form).
template <int Bug>
struct publish_inst final : instance {
  static constexpr bool fence_form_bug = Bug == 4 || Bug == 5 || Bug == 7;
  std::uint32_t head = 0;
  std::vector<std::uint32_t> next, class_id, capacity, free_slots;
  std::vector<std::uint32_t> popped;  // per consumer: record, or 0
  unsigned per_block;
  bool fence_form;
  publish_inst(world& w, const params& p)
      : next(w.config().threads_per_block + 1, 0),
        class_id(w.config().threads_per_block + 1, 0),
        capacity(w.config().threads_per_block + 1, 0),
        free_slots(w.config().threads_per_block + 1, 0),
        popped(w.config().threads_per_block, 0),
        per_block(w.config().threads_per_block),
        fence_form(fence_form_bug || p.get("fence", 0) != 0) {}
  static std::uint32_t want_class(std::uint32_t r) { return 100 + r; }
  static std::uint32_t want_capacity(std::uint32_t r) { return 7 * r + 3; }
  void init(std::uint32_t r) {
    P::store(&class_id[r], want_class(r), relaxed, device_scope);
    P::store(&capacity[r], want_capacity(r), relaxed, device_scope);
    P::store(&free_slots[r], want_capacity(r), relaxed, device_scope);
  }
  void push(std::uint32_t r) {
    std::uint32_t h = P::load(&head, relaxed, device_scope);
    for (unsigned attempt = 0;; ++attempt) {
      P::store(&next[r], h, relaxed, device_scope);
      if (fence_form && Bug != 4) P::fence(release, device_scope);  // [HB] the record and its link before the CAS
      bool ok;
      if (fence_form || Bug == 1) ok = P::compare_exchange(&head, h, r, relaxed, device_scope);
      else if (Bug == 6) ok = P::compare_exchange(&head, h, r, release, block_scope);
      else ok = P::compare_exchange(&head, h, r, release, device_scope);  // [HB] publishes next and the record
      if (ok) return;
      P::backoff(attempt);
    }
  }
  std::uint32_t pop() {
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t h;
      if (fence_form || Bug == 2) h = P::load(&head, relaxed, device_scope);
      else h = P::load(&head, acquire, device_scope);  // [HB] pairs with the push's release
      if (h != 0) {
        if (fence_form && Bug != 5) {
          if (Bug == 7) P::fence(acquire, block_scope);
          else P::fence(acquire, device_scope);  // [HB] with the pusher's release fence
        }
        const std::uint32_t n = P::load(&next[h], relaxed, device_scope);
        const bool ok = (fence_form || Bug == 2) ? P::compare_exchange(&head, h, n, relaxed, device_scope)
                                                 : P::compare_exchange(&head, h, n, acquire, device_scope);
        if (ok) return h;
      }
      P::backoff(attempt);
    }
  }
  void lane() override {
    const std::uint32_t r = P::thread_id() + 1;
    if (P::block_id() == 0) {
      if constexpr (Bug == 3) {
        push(r);
        init(r);
      } else {
        init(r);
        push(r);
      }
      return;
    }
    const std::uint32_t got = pop();
    popped[P::thread_id()] = got;
    const std::uint32_t c = P::load(&class_id[got], relaxed, device_scope);
    const std::uint32_t cap = P::load(&capacity[got], relaxed, device_scope);
    const std::uint32_t f = P::load(&free_slots[got], relaxed, device_scope);
    if (c != want_class(got) || cap != want_capacity(got) || f != want_capacity(got))
      P::violated("record " + str(got) + " popped before its initialisation was visible: class " + str(c) + ", capacity " +
                  str(cap) + ", free " + str(f) + " (want " + str(want_class(got)) + ", " + str(want_capacity(got)) + ", " +
                  str(want_capacity(got)) + ")");
  }
  std::optional<std::string> check_final() override {
    std::vector<unsigned> seen(per_block + 1, 0);
    for (auto r : popped) ++seen[r];
    for (unsigned r = 1; r <= per_block; ++r)
      if (seen[r] != 1) return "record " + str(r) + " popped " + str(seen[r]) + " times";
    if (head != 0) return "the stack is not empty at the end";
    return std::nullopt;
  }
};

std::unique_ptr<instance> make_publish(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<publish_inst<1>>(w, p);
    case 2: return std::make_unique<publish_inst<2>>(w, p);
    case 3: return std::make_unique<publish_inst<3>>(w, p);
    case 4: return std::make_unique<publish_inst<4>>(w, p);
    case 5: return std::make_unique<publish_inst<5>>(w, p);
    case 6: return std::make_unique<publish_inst<6>>(w, p);
    case 7: return std::make_unique<publish_inst<7>>(w, p);
    default: return std::make_unique<publish_inst<0>>(w, p);
  }
}

void register_publish_scenario() {
  add_scenario(plain_declared(with_keys(
      {"publish",
       "publication of initialised records through a Treiber stack, producers in block 0, consumers in block 1 "
       "(how bins and chunks are published); params lanes=2 (per block) sms=2 fence=0 (1: fence form) bug=0 (1 "
       "relaxed push, 2 relaxed pop, 3 publish before initialise, 4 no release fence, 5 no acquire fence, 6 "
       "block-scope push, 7 block-scope acquire fence)",
       expectation::pass,
       [](const params& p) {
         return launch_config{static_cast<unsigned>(p.get("sms", 2)), 2, static_cast<unsigned>(p.get("lanes", 2))};
       },
       make_publish},
      {drawn({"lanes", 1, 32, 2, "producers (block 0) and consumers (block 1)"}, 1, 6),
       drawn({"sms", 1, 2, 2, "SMs (2: the blocks on different SMs)"}, 1, 2),
       drawn({"fence", 0, 1, 0, "1: publish with fence(release) + relaxed CAS, consume with relaxed loads + fence(acquire)"}, 0, 1),
       {"bug", 0, 7, 0, "planted bug"}})));
}

// ---- admission: a counting semaphore's try-acquire -----------------------------------------------
// Lanes take one of `cap` permits (load the count, check it is below cap, CAS it one up, retry
// on failure), hold it for a few scheduling points and give it back with fetch_sub. Invariant at
// every step: at most cap lanes hold a permit. The planted bugs need cap + 1 lanes past the check
// at once, so a failing schedule needs about cap preemptions (deep bugs, simulator.md §16.4): bug 1
// check then fetch_add (the check and the increment are separate steps; cap + 1 deviations), 2
// retry-less CAS (a failed CAS is taken for a success), 3 the permit is given back before the
// last scheduling point of the hold (cap deviations), 4 the check is <= cap (off by one; cap
// deviations).
template <int Bug>
struct admission_inst final : instance {
  std::uint32_t count = 0;
  ghost<unsigned> inside = 0;  // lanes holding a permit (declared: the invariant reads it)
  unsigned cap, hold;
  admission_inst(world& w, const params& p)
      : cap(static_cast<unsigned>(p.get("cap", 2))), hold(static_cast<unsigned>(p.get("hold", 2))) {
    w.add_invariant_reading(
        "at most cap permits held",
        [this]() -> std::optional<std::string> {
          if (inside.peek() > cap) return str(inside.peek()) + " lanes hold a permit, cap " + str(cap);
          return std::nullopt;
        },
        world::watched_ranges{range_of_object(inside)}, world::invariant_form::word_bounds);  // a bound on one counter
  }
  void take_permit() {
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t v = P::load(&count, relaxed, device_scope);
      if (Bug == 4 ? v <= cap : v < cap) {
        if constexpr (Bug == 1) {
          P::fetch_add(&count, 1u, acquire, device_scope);
          return;
        } else if constexpr (Bug == 2) {
          P::compare_exchange(&count, v, v + 1, acquire, device_scope);
          return;
        } else {
          if (P::compare_exchange(&count, v, v + 1, acquire, device_scope)) return;
        }
      }
      P::backoff(attempt);
    }
  }
  void lane() override {
    take_permit();
    ++inside;
    for (unsigned i = 0; i < hold; ++i) {
      if (Bug == 3 && i + 1 == hold) P::fetch_sub(&count, 1u, release, device_scope);  // too early
      P::fence(relaxed, device_scope);  // scheduling points while holding it
    }
    --inside;
    if constexpr (Bug != 3) P::fetch_sub(&count, 1u, release, device_scope);
  }
};

std::unique_ptr<instance> make_admission(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<admission_inst<1>>(w, p);
    case 2: return std::make_unique<admission_inst<2>>(w, p);
    case 3: return std::make_unique<admission_inst<3>>(w, p);
    case 4: return std::make_unique<admission_inst<4>>(w, p);
    default: return std::make_unique<admission_inst<0>>(w, p);
  }
}

launch_config one_warp(const params& p, std::int64_t def) {
  return {1, 1, static_cast<unsigned>(std::clamp<std::int64_t>(p.get("lanes", def), 1, 32))};
}
launch_config warps(const params& p, std::int64_t def_warps, std::int64_t def_threads) {
  return {static_cast<unsigned>(std::max<std::int64_t>(1, p.get("sms", 1))),
          static_cast<unsigned>(std::max<std::int64_t>(1, p.get("warps", def_warps))),
          static_cast<unsigned>(std::clamp<std::int64_t>(p.get("threads", def_threads), 1, 32))};
}

std::unique_ptr<instance> make_semaphore(world& w, const params& p) {
  constexpr std::uint64_t bias = arena_bias;
  const bool fast = p.get("fast", 0) != 0;
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<semaphore_inst<sem_bug::fast_path_fetch_sub>>(w, p, true);
    case 2: return std::make_unique<semaphore_inst<sem_bug::spin_ignores_shortfall>>(w, p, true);
    case 3: return std::make_unique<semaphore_inst<sem_bug::grow_promises_full_batch>>(w, p, true);
    case 4: return std::make_unique<semaphore_inst<sem_bug::none>>(w, p, false);
    case 5: return std::make_unique<semaphore_inst<sem_bug::fast_no_undo, bias>>(w, p, true);
    case 6: return std::make_unique<semaphore_inst<sem_bug::fast_undo_short, bias>>(w, p, true);
    case 7: return std::make_unique<semaphore_inst<sem_bug::fast_ignores_bias, bias>>(w, p, true);
    case 8: return std::make_unique<semaphore_inst<sem_bug::slow_decides_below_bias, bias>>(w, p, true);
    case 9: return std::make_unique<semaphore_inst<sem_bug::shortfall_leave_short>>(w, p, true);
    case 10: return std::make_unique<semaphore_inst<sem_bug::upto_takes_all_asked, bias>>(w, p, true);
    default:
      if (fast) return std::make_unique<semaphore_inst<sem_bug::none, bias>>(w, p, true);
      return std::make_unique<semaphore_inst<sem_bug::none>>(w, p, true);
  }
}
std::unique_ptr<instance> make_mutex(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<mutex_inst<mutex_bug::no_entry_sync>>(w, p);
    case 2: return std::make_unique<mutex_inst<mutex_bug::lock_count_one>>(w, p);
    case 3: return std::make_unique<mutex_inst<mutex_bug::leader_frees_all>>(w, p);
    case 4: return std::make_unique<mutex_inst<mutex_bug::relaxed_lock>>(w, p);
    case 5: return std::make_unique<mutex_inst<mutex_bug::relaxed_unlock>>(w, p);
    case 6: return std::make_unique<mutex_inst<mutex_bug::block_scope_lock>>(w, p);
    default: return std::make_unique<mutex_inst<mutex_bug::none>>(w, p);
  }
}
std::unique_ptr<instance> make_pop(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<pop_inst<pop_bug::no_read_barrier, mutex_bug::none>>(w, p);
    case 2: return std::make_unique<pop_inst<pop_bug::head_off_by_one, mutex_bug::none>>(w, p);
    case 3: return std::make_unique<pop_inst<pop_bug::none, mutex_bug::lock_count_one>>(w, p);
    case 4: return std::make_unique<pop_inst<pop_bug::none, mutex_bug::relaxed_lock>>(w, p);
    case 5: return std::make_unique<pop_inst<pop_bug::block_scope_head, mutex_bug::none>>(w, p);
    default: return std::make_unique<pop_inst<pop_bug::none, mutex_bug::none>>(w, p);
  }
}
std::unique_ptr<instance> make_rcu(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<rcu_inst<rcu_bug::no_epoch_recheck>>(w, p);
    case 2: return std::make_unique<rcu_inst<rcu_bug::barrier_skips_wait>>(w, p);
    case 3: return std::make_unique<rcu_inst<rcu_bug::collect_before_clear>>(w, p);
    case 4: return std::make_unique<rcu_inst<rcu_bug::reader_relaxed_rmw>>(w, p);
    case 5: return std::make_unique<rcu_inst<rcu_bug::relaxed_unlock>>(w, p);
    case 6: return std::make_unique<rcu_inst<rcu_bug::relaxed_recheck>>(w, p);
    case 7: return std::make_unique<rcu_inst<rcu_bug::writer_load_not_rmw>>(w, p);
    default: return std::make_unique<rcu_inst<rcu_bug::none>>(w, p);
  }
}

}  // namespace

void register_primitive_scenarios() {
  // Random shapes (docs/simulator.md §18) draw up to 4 warps of up to 32 lanes on up to 3 SMs.
  const param_spec warps_key = drawn({"warps", 1, 64, 2, "warps (one block each)"}, 1, 4);
  const param_spec threads_key = drawn({"threads", 1, 32, 4, "threads per warp"}, 1, 32, draw_kind::near_pow2);
  const param_spec sms_key = drawn({"sms", 1, 64, 1, "SMs"}, 1, 3);
  add_scenario(plain_declared(with_keys(
      {"semaphore",
       "bulk semaphore: producers/consumers with batches, out-of-memory withdrawal; params lanes=4 batch=3 "
       "capacity=lanes rounds=2 keep=0 fast=0 (1: biased semaphore, speculative fetch_sub) bug=0 (1 fast-path "
       "fetch_sub, 2 spin ignores shortfall, 3 GROW promises full batch, 4 failing producer keeps its promise; biased: 5 no "
       "undo, 6 undo one short, 7 fast path ignores the bias, 8 CAS loop decides below the bias; 9 a shortfall releases one "
       "waiter fewer than it needs; 10 (biased) try_wait_upto takes all it asked for) upto=0 (1: each wait starts with "
       "try_wait_upto(2), a second unit's item goes back at once)",
       expectation::pass, [](const params& p) { return one_warp(p, 4); }, make_semaphore},
      {drawn({"lanes", 1, 32, 4, "lanes in one warp"}, 1, 12),
       drawn({"batch", 2, 64, 3, "units per GROW batch"}, 2, 8),
       drawn({"capacity", 0, 4096, 4, "batches the backing store holds (default: lanes)"}, 0, 16),
       drawn({"rounds", 1, 100, 2, "waits per lane"}, 1, 4),
       drawn({"keep", 0, 1, 0, "1: lanes keep their items"}, 0, 1),
       drawn({"fast", 0, 1, 0, "1: the biased semaphore with the speculative fetch_sub fast path"}, 0, 1),
       drawn({"upto", 0, 1, 0, "1: each wait starts with try_wait_upto(2)"}, 0, 1),
       {"bug", 0, 10, 0, "planted bug"}})));
  add_scenario(plain_declared(with_keys(
      {"semaphore-collective",
       "collective (warp) semaphore waits over partial warps, GROW(m) shared by m producers; params warps=2 "
       "threads=8 batch=4 capacity=lanes",
       expectation::pass, [](const params& p) { return warps(p, 2, 8); },
       [](world& w, const params& p) { return std::make_unique<semaphore_collective_inst>(w, p); }},
      {warps_key, drawn({"threads", 1, 32, 8, "threads per warp"}, 1, 32, draw_kind::near_pow2), sms_key,
       drawn({"batch", 2, 64, 4, "units per GROW batch"}, 2, 8),
       drawn({"capacity", 0, 4096, 16, "batches the backing store holds (default: lanes)"}, 0, 32)})));
  add_scenario(plain_declared(with_keys(
      {"collective-mutex",
       "collective mutex (counted form) across warps; params warps=2 threads=4 rounds=2 bug=0 (1 no entry "
       "barrier, 2 lock count 1, 3 leader frees for all, 4 relaxed lock CAS, 5 relaxed unlock, 6 block-scope "
       "lock word)",
       expectation::pass, [](const params& p) { return warps(p, 2, 4); }, make_mutex},
      {warps_key, threads_key, sms_key, drawn({"rounds", 1, 100, 2, "lock/unlock rounds per lane"}, 1, 3),
       {"bug", 0, 6, 0, "planted bug"}})));
  add_scenario(plain_declared(with_keys(
      {"pop-k",
       "collective list pop; params warps=2 threads=4 nodes=lanes+2 bug=0 (1 no read barrier, 2 head off by "
       "one, 3 mutex lock count 1, 4 mutex relaxed lock CAS, 5 block-scope head)",
       expectation::pass, [](const params& p) { return warps(p, 2, 4); }, make_pop},
      {warps_key, threads_key, sms_key, drawn({"nodes", 1, 4096, 10, "list elements (default: lanes + 2)"}, 1, 40),
       {"bug", 0, 5, 0, "planted bug"}})));
  scenario rcu = plain_declared(with_keys(
      {"rcu",
       "RCU readers vs writers that unlink and retire, delegated reclamation; params lanes=5 readers=2 "
       "passes=2 bug=0 (1 no epoch re-check, 2 barrier does not wait, 3 collect before clearing pending; weak memory: "
       "4 relaxed increment in read_lock, 5 relaxed read_unlock, 6 relaxed epoch re-check, 7 the grace period reads "
       "the counter with a load instead of an RMW)",
       expectation::pass, [](const params& p) { return one_warp(p, 5); }, make_rcu},
      {drawn({"lanes", 2, 32, 5, "lanes in one warp: readers, then writers"}, 2, 10),
       drawn({"readers", 1, 31, 2, "reading lanes (fewer than lanes)"}, 1, 8),
       drawn({"passes", 1, 100, 2, "read-side sections per reader"}, 1, 4),
       {"bug", 0, 7, 0, "planted bug"}}));
  rcu.check = [](const params& p) -> std::optional<std::string> {
    if (p.get("readers", 2) >= p.get("lanes", 5))
      return "readers=" + std::to_string(p.get("readers", 2)) + " must be below lanes=" + std::to_string(p.get("lanes", 5)) +
             " (the other lanes are the writers)";
    return std::nullopt;
  };
  add_scenario(std::move(rcu));
  register_publish_scenario();
  scenario adm = plain_declared(with_keys(
      {"admission",
       "try-acquire of a counting semaphore (load, check < cap, CAS, retry), held for a few points; params lanes=4 cap=2 "
       "hold=2 bug=0 (1 check then fetch_add, 2 retry-less CAS, 3 permit given back before the hold ends, 4 check "
       "off by one; 1, 3 and 4 need about cap preemptions)",
       expectation::pass, [](const params& p) { return one_warp(p, 4); }, make_admission},
      {drawn({"lanes", 2, 32, 4, "lanes in one warp"}, 2, 10),
       drawn({"cap", 1, 31, 2, "permits"}, 1, 6),
       drawn({"hold", 1, 100, 2, "scheduling points a permit is held"}, 1, 6),
       {"bug", 0, 4, 0, "planted bug"}}));
  adm.check = [](const params& p) -> std::optional<std::string> {
    if (p.get("cap", 2) >= p.get("lanes", 4)) return "cap must be below lanes (otherwise nothing contends)";
    return std::nullopt;
  };
  add_scenario(std::move(adm));
}

}  // namespace toga::sim
