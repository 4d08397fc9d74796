//! @file toga/growth_service.hpp
//! Growth while a kernel runs (issue 30; design.md §12.6, docs/usage.md §9.1): the protocol
//! between the requests that wait for memory and a *growth service*, a host thread that maps
//! granules with the VMM API (or memfd on the CPU) while the kernel keeps running.
//!
//! Without the service a growable heap's request that finds no memory returns nullptr and
//! records its demand; the host grows between launches (grow_if_needed) and the kernel author
//! relaunches. With it, such a request *waits*: it posts its demand in the `growth_mailbox` (host
//! visible memory: mapped pinned memory on a GPU), the service maps granules for it and
//! publishes their offsets in the mailbox, and one waiting thread adopts them into the buddy tree
//! (allocator::adopt_granule; no kernel launch, which could never start while every SM is busy
//! waiting); then the waiters retry. The wait is bounded (heap_options::growth_wait_us): on
//! timeout the request returns nullptr, as without the service.
//!
//! The protocol, word by word (every word 64-bit, system scope):
//!  * Posting (device, `post`): the leader of a failed group adds its requests, bytes (at their
//!    served size), its block's order tagged with the service's round (a stale order is ignored)
//!    and, once per arena and round, a chunk (512 KiB) for arenas whose small classes need one.
//!    posted_requests is added last, with release.
//!  * A round (service, `service_round`): reads posted_requests P (acquire); if it is above
//!    `answered`, maps granules for what was posted since the last round (the backend's plan:
//!    growth_controller::plan, at most the ring's free entries), writes each granule's offset in
//!    the ring *after* mapping it, then `published` (release); a round whose mapping failed before
//!    it mapped anything (the driver or the budget refused) stores P in `refused` (a plan with
//!    nothing left to map is no refusal: granules an earlier round published may serve the
//!    waiters, who give up as exhausted once every granule is adopted); then `round` and finally
//!    `answered` = P (release). A waiter that sees `answered` >= its ticket therefore sees every
//!    granule that round published, and whether it refused.
//!  * Waiting (device, `await`): the lanes whose request failed post together (one group per
//!    warp) and get a ticket, posted_requests after their addition; they spin (backoff) until
//!    `answered` >= ticket, adopt, and retry the request, posting again if it fails. No wake-up
//!    is lost: the ticket is compared with a monotonic count, never with a "changed since"
//!    value read after posting. A waiter gives up with nullptr when the round that answered its
//!    ticket refused, when the service has stopped, when every granule is mapped, or at the
//!    deadline.
//!  * Adopting (device, `adopt_published`): one thread at a time (a try-lock, `adopt_lock`) adopts
//!    the entries from `adopted` to `published` in order and then stores `adopted` (release); the
//!    others wait for `adopted` to reach what they saw published. The service writes ring entry
//!    p only while p < adopted + ring, so an entry is never overwritten before it was adopted.
//!    Adopting a granule twice is an invariant violation (TOGA_REQUIRE).
//!
//! Device code only does atomics on the words the device owns (posted_*, adopt_lock, adopted,
//! the statistics) and loads of the service's words; the host only loads the device's words and
//! stores its own. So no word needs an atomic read-modify-write from both sides (on a PCIe
//! system the GPU's atomics on mapped memory are atomic between GPU threads only).
//!
//! Units: bytes; times in nanoseconds (P::clock_ns). Thread-safety: device functions from any
//! number of threads; `service_round` from one host thread at a time.
#pragma once

#include <cstdint>

#include "toga/config.hpp"
#include "toga/platform.hpp"

namespace toga {

//! Planted bugs of the growth service (the simulator's `grow-service` scenario kills each;
//! docs/simulator.md §16). `none` in every real build.
enum class service_bug : unsigned {
  none = 0,
  published_before_mapped,  //!< the service publishes a granule's offset before mapping it
  adopt_lock_not_atomic,    //!< the adopter's try-lock is a load and a store: two adopters take one granule
  lost_wakeup,              //!< the waiter waits for `round` to change from a value read after posting
  refusal_not_published,    //!< a round that maps nothing does not say so: waiters wait for memory that will not come
};

//! The words shared by the waiting requests and the growth service (see the file comment).
//! Zero it before use. 64 B aligned; about 1.6 KiB.
struct alignas(64) growth_mailbox {
  static constexpr unsigned ring = 64;          //!< published granules not yet adopted, at most
  static constexpr unsigned arena_words = 128;  //!< arenas beyond 128 share words (chunk demand counted less)
  // ---- written by the device (kernels) ----
  std::uint64_t posted_requests;  //!< failed requests posted for the service (monotonic)
  std::uint64_t posted_bytes;     //!< their bytes, each at its served size (monotonic)
  std::uint64_t posted_order;     //!< (round << 8) | the largest order of 4 KiB pages posted in that round
  std::uint64_t posted_chunks;    //!< arenas that needed a chunk of their own, once per round (monotonic)
  std::uint64_t adopt_lock;       //!< 1 while a thread adopts published granules
  std::uint64_t adopted;          //!< ring entries adopted (written by the lock holder only)
  std::uint64_t waits;            //!< requests that waited for the service (statistics)
  std::uint64_t exhausted;        //!< ... and gave up because growth could not serve it any more (limit, range)
  std::uint64_t timeouts;         //!< ... and gave up at the deadline (nullptr)
  std::uint64_t refusals;         //!< ... and gave up because the service could map nothing (nullptr)
  std::uint64_t pad0[6];
  // ---- written by the service (host) ----
  std::uint64_t round;      //!< rounds finished
  std::uint64_t answered;   //!< posted_requests as read by the last finished round
  std::uint64_t refused;    //!< posted_requests as read by the last round that mapped nothing (0: none)
  std::uint64_t published;  //!< ring entries written
  std::uint64_t stopped;    //!< 1 once the service stopped: waiters give up at once
  std::uint64_t pad1[3];
  // ---- device ----
  std::uint64_t arena_round[arena_words];  //!< per arena: 1 + the round its chunk demand was posted in
  // ---- service ----
  std::uint64_t granule[ring];  //!< heap offsets of published granules, entry p at p % ring
};

//! What one service round saw and did (host statistics).
struct service_round_result {
  bool answered = false;       //!< there was demand and the round answered it
  std::uint64_t requests = 0;  //!< requests posted since the last round
  std::uint64_t bytes = 0;     //!< their bytes
  unsigned order = 0;          //!< largest order posted in the round
  std::uint64_t chunks = 0;    //!< arenas that needed a chunk
  std::uint64_t mapped = 0;    //!< granules mapped and published
};

//! The service's own memory of what it has consumed (host side, one per mailbox).
struct service_cursor {
  std::uint64_t bytes = 0, chunks = 0;
};

//! A service map callback's failure.
inline constexpr std::uint64_t no_offset = ~std::uint64_t{0};

//! One round of the service (see the file comment). `plan(requests, bytes, order, chunks, room)`
//! returns the granule indices to map (a std::vector<std::uint64_t> or any range), at most
//! `room`; `map(i)` maps granule i (or another in its place: the host tier's) and returns the heap
//! offset of the granule it mapped, or `no_offset` when it could not (that ends the round's
//! mapping; it is the backend's to roll back and count); `offset(i)` is granule i's heap offset
//! (used by a planted bug only). P supplies the atomics (the host's, or the simulator's).
template <class P, service_bug Bug = service_bug::none, class Plan, class Map, class Offset>
service_round_result service_round(growth_mailbox* m, service_cursor& cur, Plan&& plan, Map&& map, Offset&& offset) {
  service_round_result r;
  const std::uint64_t posted = P::load(&m->posted_requests, acquire, system_scope);
  const std::uint64_t answered = P::load(&m->answered, relaxed, system_scope);
  if (posted == answered) return r;
  const std::uint64_t round = P::load(&m->round, relaxed, system_scope);
  const std::uint64_t bytes = P::load(&m->posted_bytes, relaxed, system_scope);
  const std::uint64_t chunks = P::load(&m->posted_chunks, relaxed, system_scope);
  const std::uint64_t ow = P::load(&m->posted_order, relaxed, system_scope);
  r.requests = posted - answered;
  r.bytes = bytes - cur.bytes;
  r.chunks = chunks - cur.chunks;
  r.order = (ow >> 8) == round ? static_cast<unsigned>(ow & 0xff) : 0u;
  cur.bytes = bytes;
  cur.chunks = chunks;
  std::uint64_t published = P::load(&m->published, relaxed, system_scope);
  const std::uint64_t adopted = P::load(&m->adopted, acquire, system_scope);
  const std::uint64_t room = growth_mailbox::ring - (published - adopted);
  if (room == 0) return r;  // the waiters have not adopted the last granules yet: answer later
  bool attempted = false;  // a plan with nothing to map (every granule mapped) refuses nothing:
                           // the waiters adopt what was published and give up once all is adopted
  for (const std::uint64_t i : plan(r.requests, r.bytes, r.order, r.chunks, room)) {
    if (r.mapped == room) break;
    attempted = true;
    if constexpr (Bug == service_bug::published_before_mapped) {
      P::store(&m->granule[published % growth_mailbox::ring], offset(i), relaxed, system_scope);
      P::store(&m->published, ++published, release, system_scope);
      ++r.mapped;
      if (map(i) == no_offset) break;
    } else {
      const std::uint64_t off = map(i);
      if (off == no_offset) break;
      P::store(&m->granule[published % growth_mailbox::ring], off, relaxed, system_scope);
      P::store(&m->published, ++published, release, system_scope);
      ++r.mapped;
    }
  }
  if (r.mapped == 0 && attempted && Bug != service_bug::refusal_not_published) P::store(&m->refused, posted, relaxed, system_scope);
  P::store(&m->round, round + 1, relaxed, system_scope);
  P::store(&m->answered, posted, release, system_scope);
  r.answered = true;
  return r;
}

//! The device side of the protocol (see the file comment), for toga::allocator.
template <class P, service_bug Bug = service_bug::none>
struct growth_waiter {
  //! Posts n failed requests of `bytes` in all (at their served sizes) that needed a block of 4 KiB
  //! x 2^order; `chunk_arena` >= 0: the arena needs a chunk of its own. One thread per group.
  //! Returns the group's ticket: posted_requests after its own addition.
  static TOGA_DEVICE std::uint64_t post(growth_mailbox* m, unsigned n, std::uint64_t bytes, unsigned order, int chunk_arena) TOGA_NOEXCEPT(P) {
    const std::uint64_t round = P::load(&m->round, relaxed, system_scope);
    P::fetch_add(&m->posted_bytes, bytes, relaxed, system_scope);
    P::fetch_max(&m->posted_order, (round << 8) | order, relaxed, system_scope);
    if (chunk_arena >= 0) {
      std::uint64_t* w = &m->arena_round[static_cast<unsigned>(chunk_arena) % growth_mailbox::arena_words];
      if (P::fetch_max(w, round + 1, relaxed, system_scope) < round + 1) P::fetch_add(&m->posted_chunks, std::uint64_t{1}, relaxed, system_scope);
    }
    // last: a round that reads it sees the rest
    return P::fetch_add(&m->posted_requests, std::uint64_t{n}, release, system_scope) + n;
  }

  //! Adopts every granule published so far (one thread at a time; `adopt(offset)` returns false
  //! if the granule was adopted already, a violated invariant) and waits until every entry
  //! published when it started is adopted, or the deadline passes (false).
  template <class Adopt>
  static TOGA_DEVICE bool adopt_published(growth_mailbox* m, Adopt&& adopt, std::uint64_t deadline) TOGA_NOEXCEPT(P) {
    const std::uint64_t want = P::load(&m->published, acquire, system_scope);
    for (unsigned attempt = 0;; ++attempt) {
      if (P::load(&m->adopted, acquire, system_scope) >= want) return true;
      bool locked;
      if constexpr (Bug == service_bug::adopt_lock_not_atomic) {
        locked = P::load(&m->adopt_lock, relaxed, system_scope) == 0;
        if (locked) P::store(&m->adopt_lock, std::uint64_t{1}, relaxed, system_scope);
        P::fence(acquire, system_scope);
      } else {
        std::uint64_t expected = 0;
        locked = P::compare_exchange(&m->adopt_lock, expected, std::uint64_t{1}, acquire, system_scope);
      }
      if (locked) {
        std::uint64_t a = P::load(&m->adopted, relaxed, system_scope);
        const std::uint64_t n = P::load(&m->published, acquire, system_scope);
        for (; a < n; ++a) {
          const std::uint64_t off = P::load(&m->granule[a % growth_mailbox::ring], relaxed, system_scope);
          TOGA_REQUIRE(P, adopt(off), "growth service: a published granule was adopted twice");
          P::store(&m->adopted, a + 1, release, system_scope);
        }
        P::store(&m->adopt_lock, std::uint64_t{0}, release, system_scope);
        continue;
      }
      if (P::clock_ns() > deadline) return false;
      P::backoff(attempt);
    }
  }

  //! Why a wait ended.
  enum class outcome : std::uint32_t { retry, refused, timeout, stopped };

  //! After a failed attempt posted `ticket` (post's result): waits until the service answered it.
  //! `retry`: adopt what it published (adopt_published) and try the request again (if it fails,
  //! post and wait again); the others: give up with nullptr.
  static TOGA_DEVICE outcome await(growth_mailbox* m, std::uint64_t deadline, std::uint64_t ticket) TOGA_NOEXCEPT(P) {
    if constexpr (Bug == service_bug::lost_wakeup) {
      const std::uint64_t r0 = P::load(&m->round, acquire, system_scope);  // read after posting: a round may have answered already
      for (unsigned attempt = 0; P::load(&m->round, acquire, system_scope) == r0; ++attempt) {
        if (P::load(&m->stopped, relaxed, system_scope) != 0) return outcome::stopped;
        if (P::clock_ns() > deadline) return outcome::timeout;
        P::backoff(attempt);
      }
    } else {
      for (unsigned attempt = 0; P::load(&m->answered, acquire, system_scope) < ticket; ++attempt) {
        if (P::load(&m->stopped, relaxed, system_scope) != 0) return outcome::stopped;
        if (P::clock_ns() > deadline) return outcome::timeout;
        P::backoff(attempt);
      }
    }
    if (P::load(&m->refused, relaxed, system_scope) >= ticket) return outcome::refused;
    return outcome::retry;
  }
};

}  // namespace toga
