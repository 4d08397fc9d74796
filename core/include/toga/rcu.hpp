//! @file toga/rcu.hpp
//! SRCU-style read-copy-update with delegated reclamation (Gelado & Garland, PPoPP'19,
//! §4.2.1 and Fig. 4; toga's design.md §5).
//!
//! State per domain: an epoch, two reader counters (one per epoch parity), a barrier mutex, a
//! `pending` flag and a lock-free LIFO of retired items. No per-thread state (a GPU has ~10^5
//! threads). Readers register under the live parity and re-check the epoch (design.md §5.2: without
//! the re-check a reader that stalled across a flip registers under a parity nobody waits for).
//!
//! A writer that retires an item pushes it on the LIFO. If a barrier is already pending (it has
//! not yet collected the LIFO), that barrier will cover the item: the writer returns at once
//! (delegation). Otherwise the writer becomes the barrier: clear pending, collect the LIFO, flip
//! the epoch, wait for the old parity's readers to leave, release the mutex, and only then run
//! the collected callbacks (design.md §5.3, steps 1-5, in that order).
//!
//! Memory orders (E4; design.md §5.2, departures in §18): the read side is a store-buffering pairing
//! in which both sides meet on the old parity's counter instead of at two seq_cst fences. Reader:
//! relaxed epoch load, ACQUIRE increment of its parity's counter, acquire re-load of the epoch;
//! unlock is a release decrement. Writer: a release store of the new epoch, then an ACQ_REL RMW
//! (fetch_add 0) of the old parity's counter, then acquire loads of it. RMWs on one word are
//! totally ordered (coherence), so of the reader's increment R and the writer's RMW W one comes
//! first: if R, W reads a count that includes the reader and waits for its release decrement; if
//! W, R reads W's value or a later one of its release sequence, so W (release) synchronises with
//! R (acquire), the writer's epoch store happens before the reader's re-load, which therefore sees
//! the new epoch and retries under the new parity. The acquire re-load also makes every unlink
//! before the flip to the epoch it reads visible to the reader. No full barrier on the read side:
//! an acquire RMW and an acquire load to enter, a release RMW to leave (E4 had a seq_cst fence on
//! every read_lock; the writer, rare, pays one acq_rel RMW instead of a seq_cst fence).
//! Items are 64-bit handles (addresses or indices, never 0); each carries an intrusive 64-bit
//! link that the caller provides through `link_of(item)`. Thread-safety: everything may be called
//! concurrently from any thread; never call `retire` or `synchronize` inside a read-side
//! critical section of the same domain (it would wait for itself; invariant R5).
#pragma once

#include <cstdint>

#include "toga/config.hpp"
#include "toga/fault.hpp"
#include "toga/platform.hpp"

namespace toga {

//! Deliberate bugs for the planted-bug tests (never use outside tests).
enum class rcu_bug : std::uint8_t {
  none,
  no_epoch_recheck,      //!< readers register without re-checking the epoch
  barrier_skips_wait,    //!< the barrier does not wait for the old parity's readers
  collect_before_clear,  //!< collect the LIFO before clearing pending: a delegated item is lost
  reader_relaxed_rmw,    //!< read_lock's increment is relaxed: a reader the writer missed may miss the flip (weak memory)
  relaxed_unlock,        //!< read_unlock is relaxed: the reader's accesses may follow the grace period (weak memory)
  relaxed_recheck,       //!< the reader's epoch re-load is relaxed: it may miss unlinks made before the flip (weak memory)
  writer_load_not_rmw,   //!< the grace period's first look at the readers is a load, not an RMW: it may read a count
                         //!< from before a reader's increment while that reader reads the old epoch (weak memory)
};

//! What a retire did.
struct rcu_retire_result {
  bool delegated;      //!< handed to a pending barrier; returned without waiting
  unsigned reclaimed;  //!< callbacks this call ran (its own item and delegated ones)
};

template <class P, rcu_bug Bug = rcu_bug::none>
  requires Platform<P>
class rcu_domain {
 public:
  //! Enters a read-side critical section; returns the token for read_unlock. Three atomics
  //! (epoch, counter, epoch), no fence; never blocks.
  TOGA_DEVICE std::uint32_t read_lock() TOGA_NOEXCEPT(P) {
    for (;;) {
      const std::uint32_t e = P::load(&epoch_, relaxed, device_scope);
      // [SB] acquire: if the writer's RMW on this counter came first, its epoch store happens
      // before our re-load (see the file comment).
      if constexpr (Bug == rcu_bug::reader_relaxed_rmw) P::fetch_add(&readers_[e & 1u], 1u, relaxed, device_scope);
      else P::fetch_add(&readers_[e & 1u], 1u, acquire, device_scope);
      if constexpr (Bug == rcu_bug::no_epoch_recheck) return e;
      // [HB] acquire: if we see the new epoch, every unlink before the flip is visible to us.
      const std::uint32_t now = Bug == rcu_bug::relaxed_recheck ? P::load(&epoch_, relaxed, device_scope)
                                                                 : P::load(&epoch_, acquire, device_scope);
      if (now == e) return e;
      P::fetch_sub(&readers_[e & 1u], 1u, relaxed, device_scope);  // raced with a flip: retry (read nothing yet)
    }
  }
  //! Leaves the read-side section (release: [HB] our reads of protected memory happen before the
  //! grace period's end, which the writer observes with acquire loads).
  TOGA_DEVICE void read_unlock(std::uint32_t token) TOGA_NOEXCEPT(P) {
    if constexpr (Bug == rcu_bug::relaxed_unlock) P::fetch_sub(&readers_[token & 1u], 1u, relaxed, device_scope);
    else P::fetch_sub(&readers_[token & 1u], 1u, release, device_scope);
  }

  //! Retires `item` (already unlinked from every structure readers can reach: R2). Runs
  //! `reclaim(item)` for it and for any delegated items after a grace period, or delegates it
  //! to a pending barrier and returns at once.
  template <class LinkOf, class Reclaim>
  TOGA_DEVICE rcu_retire_result retire(std::uint64_t item, LinkOf link_of, Reclaim reclaim) TOGA_NOEXCEPT(P) {
    // push (lock-free LIFO, seq_cst)
    std::uint64_t* link = link_of(item);
    std::uint64_t head = P::load(&cb_head_, relaxed, device_scope);
    for (unsigned lost = 0;; ++lost) {
      P::store(link, head, relaxed, device_scope);
      if (P::compare_exchange(&cb_head_, head, item, seq_cst, device_scope)) break;
      P::backoff(lost);  // many retirers at once: no lock-step retries
    }
    std::uint32_t zero = 0;
    if (!P::compare_exchange(&pending_, zero, 1u, seq_cst, device_scope)) return {true, 0};  // delegated
    return {false, run_barrier(link_of, reclaim)};
  }

  //! Retires `item` without running a barrier: the next retire or flush of this domain runs its
  //! callback after a grace period. For callers inside a read-side section of the domain (which
  //! must not wait for a grace period); they call flush after leaving it.
  template <class LinkOf>
  TOGA_DEVICE void defer(std::uint64_t item, LinkOf link_of) TOGA_NOEXCEPT(P) {
    std::uint64_t* link = link_of(item);
    std::uint64_t head = P::load(&cb_head_, relaxed, device_scope);
    for (unsigned lost = 0;; ++lost) {
      P::store(link, head, relaxed, device_scope);
      if (P::compare_exchange(&cb_head_, head, item, seq_cst, device_scope)) return;
      P::backoff(lost);
    }
  }

  //! Runs the callbacks of items retired so far (after a grace period), unless a barrier is
  //! already pending (it will). Never call it inside a read-side section of this domain. For
  //! reclamation under memory pressure. Returns the callbacks it ran.
  template <class LinkOf, class Reclaim>
  TOGA_DEVICE unsigned flush(LinkOf link_of, Reclaim reclaim) TOGA_NOEXCEPT(P) {
    if (P::load(&cb_head_, relaxed, device_scope) == 0) return 0;
    std::uint32_t zero = 0;
    if (!P::compare_exchange(&pending_, zero, 1u, seq_cst, device_scope)) return 0;
    return run_barrier(link_of, reclaim);
  }

 private:
  // We set pending: become the barrier (design.md §5.3 steps 1-5).
  template <class LinkOf, class Reclaim>
  TOGA_DEVICE unsigned run_barrier(LinkOf link_of, Reclaim reclaim) TOGA_NOEXCEPT(P) {
    lock_barrier();
    std::uint64_t batch;
    if constexpr (Bug == rcu_bug::collect_before_clear) {
      batch = P::exchange(&cb_head_, std::uint64_t{0}, seq_cst, device_scope);
      P::store(&pending_, 0u, seq_cst, device_scope);
    } else {
      P::store(&pending_, 0u, seq_cst, device_scope);                    // (1) clear pending first
      batch = P::exchange(&cb_head_, std::uint64_t{0}, seq_cst, device_scope);  // (2) collect
    }
    if (batch == 0) {  // a previous barrier took our item: it covers it
      unlock_barrier();
      return 0;
    }
    flip_and_wait();  // (3) flip, (4) grace period
    unlock_barrier();
    unsigned n = 0;   // (5) callbacks outside the mutex
    while (batch != 0) {
      const std::uint64_t next = P::load(link_of(batch), relaxed, device_scope);
      reclaim(batch);
      batch = next;
      ++n;
    }
    return n;
  }

 public:

  //! Classical grace period: returns when every reader that was inside a read-side critical
  //! section at the call has left it.
  TOGA_DEVICE void synchronize() TOGA_NOEXCEPT(P) {
    lock_barrier();
    flip_and_wait();
    unlock_barrier();
  }

  //! Raw fields, for the simulator's invariants (read without scheduling points).
  std::uint32_t epoch_raw() const { return epoch_; }
  std::uint32_t readers_raw(unsigned parity) const { return readers_[parity & 1u]; }
  std::uint32_t pending_raw() const { return pending_; }
  std::uint64_t cb_head_raw() const { return cb_head_; }
  //! The retired-item list head word (for a cheap "anything pending?" load).
  TOGA_HOST_DEVICE std::uint64_t& cb_head_word() { return cb_head_; }

 private:
  TOGA_DEVICE void flip_and_wait() TOGA_NOEXCEPT(P) {
    P::inject(fault_site::delay_grace_period);
    const std::uint32_t e = P::load(&epoch_, relaxed, device_scope);  // under barrier_mtx: only we write it
    P::store(&epoch_, e + 1, release, device_scope);  // [HB] unlinks before the flip, for readers that see it
    if constexpr (Bug == rcu_bug::barrier_skips_wait) return;
    // [SB] an acq_rel RMW on the counter: ordered with every reader's increment (see the file
    // comment); then acquire loads until the old parity's readers have left.
    std::uint32_t n = Bug == rcu_bug::writer_load_not_rmw ? P::load(&readers_[e & 1u], acquire, device_scope)
                                                           : P::fetch_add(&readers_[e & 1u], 0u, acq_rel, device_scope);
    for (unsigned attempt = 0; n != 0; ++attempt) {
      P::backoff(attempt);
      n = P::load(&readers_[e & 1u], acquire, device_scope);
    }
  }
  TOGA_DEVICE void lock_barrier() TOGA_NOEXCEPT(P) {
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t expected = 0;
      if (P::compare_exchange(&barrier_mtx_, expected, 1u, acquire, device_scope)) return;
      P::backoff(attempt);
    }
  }
  TOGA_DEVICE void unlock_barrier() TOGA_NOEXCEPT(P) { P::store(&barrier_mtx_, 0u, release, device_scope); }

  std::uint32_t epoch_ = 0;
  std::uint32_t readers_[2] = {0, 0};
  std::uint32_t barrier_mtx_ = 0;
  std::uint32_t pending_ = 0;
  std::uint64_t cb_head_ = 0;
};

}  // namespace toga
