//! @file toga/group.hpp
//! Warp-collective groups, the collective mutex and collective list pop (Gelado & Garland,
//! PPoPP'19, §2.2 and §4.2.2; toga's design.md §4).
//!
//! A coalesced group is the set of lanes of one warp that call the same operation with the
//! same key at the same time: `mask = match_any(activemask(), key)`. Its leader is the lowest
//! lane, ranks are 0..size-1 by lane order. [DECISION design.md §4.1] The group scope is the warp;
//! a group of one is always legal (and is what the single-thread paths use).
//!
//! The collective mutex is the counted form (design.md §4.2): the leader acquires it once for the
//! whole group, storing the group size; every member releases its share when it leaves, and the
//! last one out frees it. Members may leave at different times; no closing barrier.
#pragma once

#include <cstdint>

#include "toga/bits.hpp"
#include "toga/config.hpp"
#include "toga/platform.hpp"

namespace toga {

template <class P>
  requires Platform<P>
struct coalesced_group {
  std::uint32_t mask;  //!< lanes in the group
  unsigned leader;     //!< lowest lane of the group
  unsigned rank;       //!< this lane's rank in [0, size)
  unsigned size;       //!< lanes in the group (1..32)

  //! The group of lanes in `mask` (which must contain the caller). No scheduling point.
  TOGA_DEVICE static coalesced_group of(std::uint32_t mask) TOGA_NOEXCEPT(P) {
    coalesced_group g;
    g.mask = mask;
    g.leader = bits::ctz(mask);
    g.rank = bits::popc(mask & P::lanemask_lt());
    g.size = bits::popc(mask);
    return g;
  }
  //! The lanes active now that pass the same key (an address, a size class, ...). (The simulator
  //! groups the lanes that reach one activemask call site together: code with two grouping points
  //! that lanes of one warp can reach at once calls match_any(activemask(), key) at each instead.)
  TOGA_DEVICE static coalesced_group by_key(std::uint64_t key) TOGA_NOEXCEPT(P) {
    return of(P::match_any(P::activemask(), key));
  }
  //! A group of only the calling lane.
  TOGA_DEVICE static coalesced_group self() TOGA_NOEXCEPT(P) { return of(1u << P::lane_id()); }

  TOGA_DEVICE bool is_leader() const TOGA_NOEXCEPT(P) { return rank == 0; }
  //! The leader's value in every lane (32- or 64-bit).
  template <class T>
  TOGA_DEVICE T broadcast(T v) const TOGA_NOEXCEPT(P) {
    return size == 1 ? v : P::shfl(mask, v, static_cast<int>(leader));
  }
  //! The value of the lane with rank r.
  template <class T>
  TOGA_DEVICE T from_rank(T v, unsigned r) const TOGA_NOEXCEPT(P) {
    if (size == 1) return v;
    std::uint32_t m = mask;
    for (unsigned i = 0; i < r; ++i) m &= m - 1;
    return P::shfl(mask, v, static_cast<int>(bits::ctz(m)));
  }
  TOGA_DEVICE void sync() const TOGA_NOEXCEPT(P) {
    if (size > 1) P::syncwarp(mask);
  }
  TOGA_DEVICE std::uint32_t ballot(bool pred) const TOGA_NOEXCEPT(P) {
    return size == 1 ? (pred ? mask : 0u) : P::ballot(mask, pred);
  }
  //! Sum of v over the lanes of lower rank (exclusive scan), and the total in `total`.
  TOGA_DEVICE std::uint32_t exclusive_scan(std::uint32_t v, std::uint32_t& total) const TOGA_NOEXCEPT(P) {
    std::uint32_t below = 0, sum = 0;
    for (std::uint32_t m = mask; m; m &= m - 1) {
      const unsigned l = bits::ctz(m);
      const std::uint32_t x = size == 1 ? v : P::shfl(mask, v, static_cast<int>(l));
      if (l < P::lane_id()) below += x;
      sum += x;
    }
    total = sum;
    return below;
  }
};

//! Deliberate bugs for the planted-bug tests (never use outside tests).
enum class mutex_bug : std::uint8_t {
  none,
  no_entry_sync,      //!< members enter before the leader holds the lock (no group barrier)
  lock_count_one,     //!< the leader stores 1, not the group size: the first member out frees it
  leader_frees_all,   //!< the leader's unlock frees the lock while members are still inside
  // memory-order and scope mutants (visible only under the simulator's --memory weak)
  relaxed_lock,       //!< the leader's lock CAS is relaxed: the group may read what the previous holder wrote stale
  relaxed_unlock,     //!< the members' unlock is relaxed: the next holder may not see their writes
  block_scope_lock,   //!< the lock word is accessed with block scope although groups of other blocks use it
};

//! Collective mutex, counted form. word == 0: free; word == k: k members still inside.
template <class P, mutex_bug Bug = mutex_bug::none>
  requires Platform<P>
struct collective_mutex {
  std::uint32_t word = 0;

  //! Every lane of g calls it; returns when the group holds the lock (acquire).
  TOGA_DEVICE void lock(const coalesced_group<P>& g) TOGA_NOEXCEPT(P) {
    if (g.is_leader()) {
      const std::uint32_t hold = Bug == mutex_bug::lock_count_one ? 1u : g.size;
      for (unsigned attempt = 0;; ++attempt) {
        std::uint32_t expected = 0;
        if constexpr (Bug == mutex_bug::relaxed_lock) {
          if (P::compare_exchange(&word, expected, hold, relaxed, device_scope)) break;
        } else if constexpr (Bug == mutex_bug::block_scope_lock) {
          if (P::compare_exchange(&word, expected, hold, acquire, block_scope)) break;
        } else {
          // [HB] acquire: pairs with the release in unlock; the group reads what the last holder wrote
          if (P::compare_exchange(&word, expected, hold, acquire, device_scope)) break;
        }
        P::backoff(attempt);
      }
    }
    if constexpr (Bug != mutex_bug::no_entry_sync) g.sync();
    // Members read what the previous holder wrote: the leader's acquire plus the warp barrier
    // order them on the GPU; the fence makes it explicit for every member.
    if (!g.is_leader()) P::fence(acquire, device_scope);
  }
  //! Every member calls it once when it leaves the critical section (release).
  TOGA_DEVICE void unlock(const coalesced_group<P>& g) TOGA_NOEXCEPT(P) {
    if constexpr (Bug == mutex_bug::leader_frees_all) {
      if (g.is_leader()) P::store(&word, 0u, release, device_scope);
      return;
    }
    if constexpr (Bug == mutex_bug::lock_count_one) {
      std::uint32_t one = 1;
      P::compare_exchange(&word, one, 0u, release, device_scope);  // first one out frees it
      return;
    }
    if constexpr (Bug == mutex_bug::relaxed_unlock) P::fetch_sub(&word, 1u, relaxed, device_scope);
    else if constexpr (Bug == mutex_bug::block_scope_lock) P::fetch_sub(&word, 1u, release, block_scope);
    else P::fetch_sub(&word, 1u, release, device_scope);  // [HB] release: our writes before the next holder's
  }
};

//! Deliberate bugs for pop_k.
enum class pop_bug : std::uint8_t {
  none,
  no_read_barrier,  //!< the last lane moves the head before the others have read it
  head_off_by_one,  //!< the head is set to the last taken element instead of its successor
  block_scope_head, //!< the head is read and written with block scope although groups of other blocks pop
};

//! Collective pop (design.md §4.3): each lane of g takes one element of the singly linked list
//! (`head`, links `next[i]`, 0 = end) under the collective mutex; one head update for all.
//! Returns the element (0 if the list ran out).
template <class P, pop_bug Bug = pop_bug::none, mutex_bug MB = mutex_bug::none>
  requires Platform<P>
TOGA_DEVICE std::uint32_t pop_k(collective_mutex<P, MB>& m, std::uint32_t* head, std::uint32_t* next,
                                const coalesced_group<P>& g) TOGA_NOEXCEPT(P) {
  m.lock(g);
  std::uint32_t node = Bug == pop_bug::block_scope_head ? P::load(head, relaxed, block_scope) : P::load(head, relaxed, device_scope);
  for (unsigned i = 0; i < g.rank && node != 0; ++i) node = P::load(&next[node], relaxed, device_scope);
  if constexpr (Bug != pop_bug::no_read_barrier) g.sync();  // everyone has read the old head
  if (g.rank == g.size - 1) {
    const std::uint32_t after = node == 0 ? 0u : P::load(&next[node], relaxed, device_scope);
    if constexpr (Bug == pop_bug::block_scope_head) P::store(head, after, relaxed, block_scope);
    else P::store(head, Bug == pop_bug::head_off_by_one ? node : after, relaxed, device_scope);
  }
  m.unlock(g);
  return node;
}

}  // namespace toga
