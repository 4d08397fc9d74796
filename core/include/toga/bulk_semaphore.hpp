//! @file toga/bulk_semaphore.hpp
//! Bulk semaphore: two-stage resource accounting (Gelado & Garland, PPoPP'19, §3.2-3.3;
//! toga's design.md §3, with the fast path E2 of §3.4).
//!
//! One 64-bit word holds three unsigned fields, C in the low bits:
//!   C (count)    units available now (stored with a bias, see below);
//!   E (expected) units promised by producers that are making a batch;
//!   R (reserved) units claimed by waiters that wait for promised units.
//! Expected availability A = C + E - R. `wait(N, B)` takes N units from C (OK), reserves and
//! waits when A >= N, and otherwise returns GROW: the caller must produce one batch of B units,
//! keep N, publish the other B - N and then `signal(B - N, B - N)`; a producer that fails must
//! withdraw its promise with `signal(0, B - N)`, so that out-of-memory reaches every waiter.
//!
//! Fast path (E2, design.md §3.4; reverses the spec's [DECISION] "CAS for every decrement"): with a
//! `Bias` > 0, C is stored as C_true + Bias, and a take is one speculative `fetch_sub(T)` judged
//! on the returned word with the spec's own condition (C >= T and C + E - R >= T); on failure it
//! is undone with `fetch_add(T)` and the CAS loop decides. The bias keeps the stored field from
//! borrowing from E while at most Bias units of speculative decrements are in flight (per-SM
//! semaphores: at most 2048 lanes, so Bias = 2^12). The CAS loop never decides on a snapshot
//! whose stored C is below the bias (in-flight decrements make C_true unknown): it backs off and
//! reads again. Invariants: S1' C_stored >= 0 and C_true = C_stored - Bias + inflight >= 0;
//! E and R are never changed by a fast-path operation; S4' a wait returns OK only from an RMW
//! whose returned word satisfied the take condition. With Bias == 0 every decrement is a CAS
//! (the spec's form; TBuddy's device-wide semaphores until issue 11).
//!
//! `signal` is one fetch_add (valid because E >= b, so no borrow crosses a field). Every spin
//! calls `P::backoff`.
//!
//! Units: N, B, n, b count resources (slots, bins, buddy nodes), not bytes. Thread-safety: all
//! members may be called concurrently from any thread of the device. Field ranges are checked
//! on every update (`P::fail` on overflow: invariant S1).
#pragma once

#include <cstdint>

#include "toga/config.hpp"
#include "toga/fault.hpp"
#include "toga/ghost.hpp"
#include "toga/group.hpp"
#include "toga/platform.hpp"

namespace toga {

//! Result of a wait: OK means the caller owns N units of already-published resources; GROW
//! means it owns nothing yet and must produce (design.md §3.2); REFUSED (only from the
//! `wait_slow` with a refusal) means it owns nothing, promised nothing, and must not produce: the
//! caller's predicate said the batch cannot be made (design.md §13.5).
enum class sem_result : std::uint8_t { ok, grow, refused };

//! The refusal of a plain wait: never (the CAS loop's GROW branch compiles to what it was).
struct never_refuse {
  TOGA_HOST_DEVICE constexpr bool operator()() const { return false; }
};

//! Deliberate bugs for the simulator's planted-bug tests (never use outside tests).
enum class sem_bug : std::uint8_t {
  none,
  fast_path_fetch_sub,    //!< (unbiased) decrement C with fetch_sub and undo on underflow (C briefly < 0)
  spin_ignores_shortfall, //!< a waiter leaves its spin only when C >= N, never when R >= C + E
  grow_promises_full_batch, //!< GROW adds B to E instead of B - N (an off-by-one promise)
  fast_no_undo,           //!< (biased) a failed speculative decrement is not undone
  fast_undo_short,        //!< (biased) the undo gives back one unit less than it took
  fast_ignores_bias,      //!< (biased) the fast path judges the stored C without subtracting the bias
  slow_decides_below_bias,//!< (biased) the CAS loop decides on a snapshot whose C is below the bias
  shortfall_leave_short,  //!< on a shortfall each waiter leaves with probability (excess - 1) / R: one withdrawal releases nobody
  upto_takes_all_asked,   //!< try_wait_upto(n) takes all n units whenever any is available, not min(n, C)
};

//! Outcome of a collective wait, identical in every lane of the group (invariant S7).
struct collective_wait_result {
  sem_result result;
  unsigned batches;  //!< GROW: the number m of batches the group must produce (lanes rank < m)
};

template <class P, unsigned CBITS, unsigned EBITS, unsigned RBITS, sem_bug Bug = sem_bug::none, std::uint64_t Bias = 0>
  requires Platform<P>
class bulk_semaphore {
  static_assert(CBITS + EBITS + RBITS <= 64, "the three fields must fit one 64-bit word");
  static_assert(CBITS >= 1 && EBITS >= 1 && RBITS >= 1);
  static_assert(Bias < (std::uint64_t{1} << (CBITS - 1)), "the bias must leave room for C");

 public:
  using word_t = std::uint64_t;
  static constexpr word_t c_max = (word_t{1} << CBITS) - 1;
  static constexpr word_t e_max = (word_t{1} << EBITS) - 1;
  static constexpr word_t r_max = (word_t{1} << RBITS) - 1;
  static constexpr unsigned e_shift = CBITS;
  static constexpr unsigned r_shift = CBITS + EBITS;
  //! Stored C = true C + bias (0: no fast path).
  static constexpr word_t bias = Bias;
  static constexpr bool has_fast_path = Bias > 0;

  struct fields {
    word_t c, e, r;
  };
  TOGA_HOST_DEVICE static constexpr fields unpack(word_t w) {
    return {w & c_max, (w >> e_shift) & e_max, (w >> r_shift) & r_max};
  }
  TOGA_HOST_DEVICE static constexpr word_t pack(fields f) { return f.c | (f.e << e_shift) | (f.r << r_shift); }

  //! Whether a word's fields show that a take of t units would have to produce (the CAS loop would
  //! answer GROW): true C is not negative (no speculative decrement in flight) and C + E - R < t.
  //! A relaxed reader's guess for callers that act on it (steal, refusals); the CAS loop decides.
  TOGA_HOST_DEVICE static constexpr bool grow_next(fields f, word_t t) { return f.c >= Bias && f.c - Bias + f.e < f.r + t; }

  //! True C of a word, as a signed number (negative while speculative decrements are in flight).
  TOGA_HOST_DEVICE static constexpr std::int64_t c_of(word_t w) {
    return static_cast<std::int64_t>(w & c_max) - static_cast<std::int64_t>(Bias);
  }

  //! Sets C = count, E = R = 0. Not concurrent with anything (initialisation).
  TOGA_HOST_DEVICE void init(word_t count) { word_ = pack({count + Bias, 0, 0}); }

  //! Stage 1 for one thread: returns OK (took n units) or GROW (produce a batch of b units, keep
  //! n of them). Requires 1 <= n <= b. Blocks (spinning with backoff) while enough units are
  //! promised but not yet signalled.
  TOGA_DEVICE sem_result wait(word_t n, word_t b) TOGA_NOEXCEPT(P) {
    if constexpr (has_fast_path)
      if (try_take(n)) return sem_result::ok;
    return wait_total(n, b, never_refuse{});
  }

  //! The fast path alone (E2): one speculative fetch_sub of t units, judged on the returned word
  //! with the take condition (C >= t and C + E - R >= t); undone when it fails. True: the caller
  //! owns t units. Never blocks. Requires a bias (has_fast_path) and t <= Bias.
  //! Order: acquire on the take (the caller owns published units; [HB] pairs with the release in
  //! the producer's signal where a caller relies on it; toga's stage 2 synchronises on its own).
  TOGA_DEVICE TOGA_FORCEINLINE bool try_take(word_t t) TOGA_NOEXCEPT(P) {
    static_assert(has_fast_path, "try_take needs a biased semaphore");
    const word_t old = P::fetch_sub(&word_, t, acquire, device_scope);
    ghost_add<P>(ghost_kind::sem_inflight, this, static_cast<std::int64_t>(t));
    const fields f = unpack(old);
    const bool ok = Bug == sem_bug::fast_ignores_bias ? (f.c >= t && f.c + f.e >= f.r + t)
                                                      : (f.c >= Bias + t && f.c + f.e >= Bias + f.r + t);
    if (ok) {
      ghost_add<P>(ghost_kind::sem_inflight, this, -static_cast<std::int64_t>(t));  // kept: now held
      return true;
    }
    undo(t);
    return false;
  }

  //! Adds n units to C and removes b promised units from E, in one atomic step (release).
  //! Plain release of n units: signal(n, 0). A producer that got GROW from wait(k, B) delivers
  //! signal(B - k, B - k) after publishing, or withdraws with signal(0, B - k) on failure.
  TOGA_DEVICE void signal(word_t n, word_t b) TOGA_NOEXCEPT(P) { signal_with(n, b, release); }
  //! signal without a release: for callers whose resources are published by their own release
  //! store or found by RMWs (which read the latest value whatever the order), e.g. UAlloc's
  //! slots (E4, design.md §17.1). Saves a full barrier per call on the GPU.
  TOGA_DEVICE void signal_relaxed(word_t n, word_t b) TOGA_NOEXCEPT(P) { signal_with(n, b, relaxed); }

  //! Adds b promised units to E (a producer announcing a batch it already holds; settle it
  //! with signal(b, b) or withdraw it with signal(0, b)).
  TOGA_DEVICE void promise(word_t b) TOGA_NOEXCEPT(P) {
    const word_t old = P::fetch_add(&word_, b << e_shift, relaxed, device_scope);
    if (unpack(old).e + b > e_max) P::fail("bulk_semaphore::promise: E overflows (invariant S1)");
  }

  //! Non-blocking: takes n units from C if C >= n (acquire); ignores E and R.
  //! With a bias, a snapshot whose C is below bias + n (speculative decrements in flight) counts as
  //! "not available": try_wait never blocks, and its callers (retirement, merges) treat false as
  //! "keep the resource", which is always safe.
  TOGA_DEVICE bool try_wait(word_t n) TOGA_NOEXCEPT(P) {
    word_t cur = P::load(&word_, relaxed, device_scope);
    for (unsigned lost = 0;; ++lost) {
      fields f = unpack(cur);
      if (f.c < n + Bias) return false;
      f.c -= n;
      if (P::compare_exchange(&word_, cur, pack(f), acquire, device_scope)) return true;
      P::backoff(lost);  // as in wait_total: no lock-step retries under contention
      cur = P::load(&word_, relaxed, device_scope);
    }
  }

  //! Non-blocking: takes min(n, C) units from C in one CAS (acquire) and returns how many (0 when
  //! C has none); ignores E and R, as try_wait does. With a bias, C is the stored C less the bias
  //! (units that speculative decrements hold in flight are not available). For a group that
  //! takes what an arena's semaphore (its own SM's or another's) has for as many of its lanes as
  //! it can (UAlloc's out-of-memory fallback, design.md §8.6). Requires n >= 1.
  TOGA_DEVICE word_t try_wait_upto(word_t n) TOGA_NOEXCEPT(P) {
    word_t cur = P::load(&word_, relaxed, device_scope);
    for (unsigned lost = 0;; ++lost) {
      fields f = unpack(cur);
      if (f.c <= Bias) return 0;
      const word_t avail = f.c - Bias;
      const word_t k = Bug == sem_bug::upto_takes_all_asked || avail >= n ? n : avail;
      f.c -= k;
      if (P::compare_exchange(&word_, cur, pack(f), acquire, device_scope)) return k;
      P::backoff(lost);
      cur = P::load(&word_, relaxed, device_scope);
    }
  }

  //! Collective stage 1 (design.md §3.5): every lane of the group `g` (lanes calling with this
  //! semaphore) asks for n units; the leader does one CAS for T = n * g.size units and the
  //! result is broadcast. GROW(m): lanes of rank < m each produce one batch of b units; lane r
  //! is served from batch r / (b / n); each producer signals what its batch has left over
  //! (or withdraws it). A group of one is the single-thread path.
  TOGA_DEVICE collective_wait_result wait_collective(const coalesced_group<P>& g, word_t n, word_t b) TOGA_NOEXCEPT(P) {
    if (g.size == 1) return {wait(n, b), 1};
    std::uint32_t packed = 0;
    if (g.is_leader()) {
      const word_t t = n * g.size;
      const word_t per_batch = b / n;  // lanes one batch serves
      const word_t m = (g.size + per_batch - 1) / per_batch;
      bool ok = false;
      if constexpr (has_fast_path) ok = try_take(t);
      packed = ok || wait_total(t, m * b, never_refuse{}) == sem_result::ok ? 0u : static_cast<std::uint32_t>(m);
    }
    packed = g.broadcast(packed);
    return packed == 0 ? collective_wait_result{sem_result::ok, 0} : collective_wait_result{sem_result::grow, packed};
  }

  //! The units left over in batch j of a collective GROW(m) for a group of `size` lanes asking
  //! n units each from batches of b: what producer j must signal (or withdraw).
  TOGA_HOST_DEVICE static constexpr word_t batch_leftover(unsigned j, unsigned size, word_t n, word_t b) {
    const word_t per_batch = b / n;
    const word_t first = j * per_batch;
    const word_t served = first >= size ? 0 : (size - first < per_batch ? size - first : per_batch);
    return b - served * n;
  }

  //! The CAS loop alone, for a group leader that already tried try_take(t): takes t units, waits
  //! for promised ones, or returns GROW having promised `total - t` units (`total` = the batches
  //! the caller will make, in units).
  TOGA_DEVICE sem_result wait_slow(word_t t, word_t total) TOGA_NOEXCEPT(P) { return wait_total(t, total, never_refuse{}); }
  //! The CAS loop with a refusal (design.md §13.5): each time it would promise a batch (nothing
  //! available or promised covers t), it first calls `refuse()`; when that returns true it returns
  //! REFUSED with nothing taken, reserved or promised, so that no waiter queues behind a promise
  //! that is bound to be withdrawn. A reservation that a withdrawal breaks decides again, and so
  //! asks again. `refuse` must be a predicate on records (it may be called more than once).
  //! A refusal is confirmed before it is returned: the word must still hold the snapshot the
  //! decision was made on (a CAS of the snapshot onto itself, acq_rel), or the loop decides again
  //! on the new word. Without it a producer's promise and its take of what the refusal reads
  //! (the arena's last chunk bin, say) can both fall between the snapshot and `refuse()`: the
  //! records then say "bound to fail" while promised units would serve the caller (design.md
  //! §13.5; found by the fallback-race scenario). `confirm = false` skips it: UAlloc's planted bug
  //! `cas_refusal_unconfirmed` (simulator only), and TBuddy's climb, whose refusal reads only its
  //! own failure record and is linearised at that load, as alloc's first test is (design.md §13.1,
  //! "Refused waits").
  template <class Refuse>
  TOGA_DEVICE sem_result wait_slow(word_t t, word_t total, Refuse&& refuse, bool confirm = true) TOGA_NOEXCEPT(P) {
    return wait_total(t, total, refuse, confirm);
  }

  //! A relaxed load of the whole word: a snapshot for a decision that `unchanged` confirms.
  TOGA_DEVICE word_t snapshot() const TOGA_NOEXCEPT(P) { return P::load(const_cast<word_t*>(&word_), relaxed, device_scope); }
  //! Whether the word holds `w` at this RMW: a CAS of w onto itself (acq_rel; it changes nothing).
  //! True: a decision made on `w` takes effect here (the word may have left w and come back, as a
  //! fast path's speculative take and its undo do: the decision holds at this point all the same),
  //! and a producer whose later promise (an acq_rel CAS) reads this RMW's value sees everything
  //! sequenced before it (its release half is the one the argument needs). Any thread.
  TOGA_DEVICE bool unchanged(word_t w) TOGA_NOEXCEPT(P) { return P::compare_exchange(&word_, w, w, acq_rel, device_scope); }

  //! Quiescent only (nothing else uses the semaphore): C = count, E = R = 0, by a relaxed store
  //! (a recount after a trim; the caller's barrier publishes it).
  TOGA_DEVICE void store_quiescent(word_t count) TOGA_NOEXCEPT(P) {
    P::store(&word_, pack({count + Bias, 0, 0}), relaxed, device_scope);
  }
  //! A relaxed snapshot of the three fields, C as stored (with the bias; for statistics).
  TOGA_DEVICE fields peek() const TOGA_NOEXCEPT(P) {
    return unpack(P::load(const_cast<word_t*>(&word_), relaxed, device_scope));
  }
  //! The raw word, for the simulator's invariant checks (read without a scheduling point).
  const word_t& raw() const { return word_; }

 private:
  // The CAS loop of wait: takes t units, or on GROW promises `total - t` (one batch minus what
  // the caller keeps; for a collective GROW(m): m batches minus what the group keeps).
  template <class Refuse>
  TOGA_DEVICE sem_result wait_total(word_t t, word_t total, Refuse&& refuse, bool confirm = true) TOGA_NOEXCEPT(P) {
    for (unsigned attempt = 0;;) {
      word_t cur = P::load(&word_, relaxed, device_scope);
      if constexpr (Bug == sem_bug::fast_path_fetch_sub) {
        if (unpack(cur).c >= t) {
          const word_t old = P::fetch_sub(&word_, t, acquire, device_scope);
          if (unpack(old).c >= t) return sem_result::ok;
          P::fetch_add(&word_, t, relaxed, device_scope);  // undo; C was briefly negative
          cur = P::load(&word_, relaxed, device_scope);
        }
      }
      // A failed CAS backs off before reading again: thousands of threads arriving at one word
      // at once would otherwise retry in lock step, one success per round (quadratic traffic).
      for (unsigned lost = 0;; ++lost) {
        fields f = unpack(cur);
        if (Bias > 0 && f.c < Bias && Bug != sem_bug::slow_decides_below_bias) {
          // speculative decrements in flight: the true C is unknown; never GROW or reserve on it
        } else {
          const word_t c = f.c - Bias;  // (the planted bug decides on a wrapped C)
          P::inject(fault_site::stall_read_to_rmw);
          if (c + f.e < f.r + t) {  // A = C + E - R < t: nothing suffices, we produce
            if (refuse()) {  // the batch is known to fail: refused, once the word is confirmed
              if (!confirm || unchanged(cur)) return sem_result::refused;
              // (the word moved since the snapshot: decide again on the new one)
            } else {
              f.e += (Bug == sem_bug::grow_promises_full_batch) ? total : total - t;
              check(f);
              if (P::compare_exchange(&word_, cur, pack(f), acq_rel, device_scope)) return sem_result::grow;
            }
          } else if (c >= t) {  // take now
            f.c -= t;
            if (P::compare_exchange(&word_, cur, pack(f), acquire, device_scope)) return sem_result::ok;
          } else {  // enough is promised: reserve and wait for it
            f.r += t;
            check(f);
            if (P::compare_exchange(&word_, cur, pack(f), relaxed, device_scope)) {
              if constexpr (CBITS == 26) TOGA_PROFILE_COUNT(prof_sem_reserve);  // (TBuddy's semaphores only)
              break;
            }
          }
        }
        if constexpr (CBITS == 26) TOGA_PROFILE_COUNT(prof_sem_cas_lost);
        P::backoff(lost);
        cur = P::load(&word_, relaxed, device_scope);
      }
      // Reserved: wait until units arrived (C >= t: take them and drop the reservation in one
      // CAS, which is un-reserve-then-take without anything in between) or the promises no
      // longer cover the reservations (R > C + E: a producer withdrew, or try_wait drained C:
      // un-reserve and decide again from scratch). [Deviation from the spec (design.md §3.2), which leaves the
      // spin at R >= C + E: a waiter that reserved the last promised unit (A == N before it
      // reserved, common with TBuddy's B = 2) has R == C + E at once, so it would un-reserve,
      // find A == N again, reserve again, and so on: two atomics per poll on the hot word by
      // every such waiter, which made 65,536 concurrent 4 KiB allocations take 1.2 s on an H100.
      // R == C + E means every reservation is covered by what is available or promised, so
      // waiting is right; a withdrawal or a drain makes R > C + E and still ends the spin.] Taking directly matters under contention:
      // when one unit arrives for many waiters, a loser only re-reads instead of un-reserving
      // and reserving again (three atomics on the hot word per loser per unit).
      for (;;) {
        P::backoff(attempt++);
        word_t now = P::load(&word_, acquire, device_scope);
        fields f = unpack(now);
        // Crowd control: R waiters poll this one word. Sleep about R / 1024 more backoff
        // periods (the polls per unit of time stay bounded however many wait), and when C < R
        // units arrive, only about C of the R waiters try to take one (each with probability
        // C / R, drawn from the lane and the attempt), so that one unit does not cost R failed
        // CASes on the word its producers need (a thundering herd: quadratic traffic).
        for (word_t extra = f.r >> 10; extra > 0; --extra) P::backoff(attempt);
        if constexpr (Bias > 0)
          if (f.c < Bias) continue;  // speculative decrements in flight: look again
        const word_t c = f.c - Bias;
        if constexpr (CBITS == 26) TOGA_PROFILE_COUNT(prof_sem_poll);
        if (c >= t) {
          if (f.r > c && spread(attempt) % f.r >= c) continue;
          f.c -= t;
          f.r -= t;
          if (P::compare_exchange(&word_, now, pack(f), acquire, device_scope)) return sem_result::ok;
          continue;
        }
        // A shortfall (R > C + E: a producer withdrew, or try_wait drained C) needs only the
        // excess R - C - E of the R waiters to leave and decide again: each leaves with
        // probability about excess / R (drawn from its lane and attempt), so that a withdrawal
        // does not send every waiter through an un-reserve and a new decision on the word
        // (thousands of climbers at a full heap made each TBuddy level a herd: design.md §3.2).
        if (Bug != sem_bug::spin_ignores_shortfall && f.r > c + f.e) {
          const word_t excess = f.r - c - f.e - (Bug == sem_bug::shortfall_leave_short ? 1 : 0);
          if (spread(attempt + shortfall_salt) % f.r < excess) {
            if constexpr (CBITS == 26) TOGA_PROFILE_COUNT(prof_sem_break);  // (TBuddy's semaphores only)
            break;
          }
        }
      }
      P::fetch_sub(&word_, t << r_shift, relaxed, device_scope);
    }
  }
  // Undo of a failed speculative decrement (relaxed: it only gives back what we took).
  TOGA_DEVICE void undo(word_t t) TOGA_NOEXCEPT(P) {
    P::inject(fault_site::stall_speculative_undo);
    if constexpr (Bug == sem_bug::fast_no_undo) return;
    const word_t back = Bug == sem_bug::fast_undo_short ? t - 1 : t;
    P::fetch_add(&word_, back, relaxed, device_scope);
    ghost_add<P>(ghost_kind::sem_inflight, this, -static_cast<std::int64_t>(t));
  }
  TOGA_DEVICE void signal_with_check(word_t old, word_t n, word_t b) const TOGA_NOEXCEPT(P) {
    const fields f = unpack(old);
    if (f.e < b || f.c + n > c_max) P::fail("bulk_semaphore::signal: E < b or C overflows (invariant S1)");
  }
  template <class O>
  TOGA_DEVICE void signal_with(word_t n, word_t b, O order) TOGA_NOEXCEPT(P) {
    const word_t old = P::fetch_add(&word_, n - (b << e_shift), order, device_scope);
    signal_with_check(old, n, b);
  }
  // Decorrelates the shortfall's draw from the take's (spread(attempt) in the same poll).
  static constexpr unsigned shortfall_salt = 7919;
  // A per-lane, per-attempt pseudo-random number (splitmix64 finaliser of lane and attempt).
  TOGA_DEVICE static word_t spread(unsigned attempt) TOGA_NOEXCEPT(P) {
    word_t x = (word_t{P::block_id()} << 32 | P::thread_id()) * 0x9e3779b97f4a7c15ull + attempt;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  TOGA_DEVICE static void check(const fields& f) TOGA_NOEXCEPT(P) {
    if (f.e > e_max || f.r > r_max) P::fail("bulk_semaphore: E or R overflows its field (invariant S1)");
  }

  word_t word_ = 0;
};

//! Field widths chosen by the spec (§2.4 [DECISION]).
template <class P, sem_bug Bug = sem_bug::none>
using tbuddy_semaphore = bulk_semaphore<P, 26, 19, 19, Bug>;
template <class P, sem_bug Bug = sem_bug::none>
using arena_semaphore = bulk_semaphore<P, 31, 21, 12, Bug>;
//! Per-SM semaphores with the fast path (E2, design.md §3.4): C biased by 2^12 > 2048, the most
//! lanes of one SM that can have a speculative decrement in flight at once.
inline constexpr std::uint64_t arena_bias = std::uint64_t{1} << 12;
template <class P, sem_bug Bug = sem_bug::none, std::uint64_t Bias = arena_bias>
using fast_arena_semaphore = bulk_semaphore<P, 31, 21, 12, Bug, Bias>;

}  // namespace toga
