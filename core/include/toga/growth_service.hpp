//! @file toga/growth_service.hpp
//! Growth while a kernel runs (issue 30; design.md §12.6, docs/usage.md §9.1): the protocol
//! between the requests that wait for memory and a *growth service*, a host thread that maps
//! granules with the VMM API (or memfd on the CPU) while the kernel keeps running.
//!
//! Without the service a growable heap's request that finds no memory returns nullptr and
//! records its demand; the host grows between launches (grow_if_needed) and the kernel author
//! relaunches. With it, such a request *waits*: it posts its demand (in device memory, relayed to the `growth_mailbox`:
//! host visible memory, mapped pinned memory on a GPU), the service maps granules for it and
//! publishes their offsets in the mailbox, and one waiting thread adopts them into the buddy tree
//! (allocator::adopt_granule; no kernel launch, which could never start while every SM is busy
//! waiting); then the waiters retry. The wait is bounded (heap_options::growth_wait_us): on
//! timeout the request returns nullptr, as without the service.
//!
//! The protocol, word by word (every word 64-bit). Two records: the *mailbox* (host visible
//! memory, system scope: mapped pinned memory on a GPU) holds what the service and the device
//! tell each other; the *relay* (`growth_relay`, device memory: the heap's growth_state) holds
//! what the waiting requests share among themselves, so that thousands of waiting warps touch
//! only device memory and one of them at a time (the *courier*) talks to the host. (The first
//! version had every waiting warp post with system-scope atomics on the mailbox and poll it:
//! the PCIe traffic made each round cost about 10 ms of the kernel, docs/benchmarks.md.)
//!  * Posting (device, `post`, relay only): the leader of a failed group adds its requests, bytes
//!    (at their served size), its block's order tagged with the service's round as last relayed
//!    (fetch_max: the word grows with the round; a round uses the order if the word changed since
//!    the last round) and, once per arena and round, a chunk (512 KiB) for arenas whose small
//!    classes need one; posted_requests last, with release. The group's ticket is
//!    posted_requests after its addition.
//!  * Relaying (device, `relay`): a waiter that takes the relay's courier lock (a try-lock) copies
//!    the relay's posted words into the mailbox when posted_requests changed since it last did
//!    (bytes, order, chunks, then posted_requests with release), then reads the mailbox's
//!    `answered` (acquire) and the service's other words and mirrors them into the relay
//!    (refused, round, stopped, published with release, answered last with release), and
//!    releases the lock; if the service published granules nobody adopted, it tries to adopt them
//!    (so a ring full of granules whose waiters gave up cannot stop the service).
//!  * A round (service, `service_round`): reads the mailbox's posted_requests P (acquire); if it is
//!    above `answered` and the ring has room (else it answers later, consuming nothing), maps
//!    granules for what was posted since the last round (the backend's
//!    plan: growth_controller::plan, at most the ring's free entries), writes each run's entry
//!    (`ring_entry`: a run of 2^k granules, one physical handle, design.md §12.8) in the ring
//!    *after* mapping it, then `published` (release); a round whose mapping failed
//!    before it mapped anything (the driver or the budget refused) stores P in `refused` (a plan
//!    with nothing left to map is no refusal: granules an earlier round published may serve the
//!    waiters, who give up as exhausted once every granule is adopted); then `round` and finally
//!    `answered` = P (release). A courier that sees `answered` >= a ticket therefore sees every
//!    granule that round published and whether it refused, and so does a waiter that sees the
//!    relay's mirror of `answered` >= its ticket.
//!  * Waiting (device, `await`): the group's leader spins (relaying when the courier lock is free;
//!    backing off after each look) until the relay's `answered` >= its ticket, adopts, and the lanes retry,
//!    posting again if they fail. No wake-up is lost: the ticket is compared with a monotonic
//!    count, never with a "changed since" value read after posting. A waiter gives up with
//!    nullptr when a refusal at or after its ticket was seen and no granule was adopted since its
//!    failed attempt (allocator::wait_for_growth), when the service has stopped, when every
//!    granule is mapped, or at the deadline.
//!  * Adopting (device, `adopt_published`): one thread at a time (the relay's try-lock
//!    `adopt_lock`) adopts the ring entries from `adopted` up to what its caller saw published,
//!    in order, storing the relay's `adopted` (release) after each and the mailbox's `adopted`
//!    (release, the service's room) at the end; the others wait for `adopted` to reach what they
//!    saw published. The service writes ring entry p only while p < adopted + ring, so an entry
//!    is never overwritten before it was adopted. Adopting a granule twice is an invariant
//!    violation (TOGA_REQUIRE).
//!
//! No mailbox word is written by both sides: the device writes posted_* and adopted (one writer
//! at a time: the courier, the adopter), the host the rest; so no word needs an atomic
//! read-modify-write from both sides (on a PCIe system the GPU's atomics on mapped memory are
//! atomic between GPU threads only), and the device does no read-modify-write on host memory.
//!
//! Units: bytes; times in nanoseconds (P::clock_ns). Thread-safety: device functions from any
//! number of threads; `service_round` from one host thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

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
  relay_mirror_relaxed,     //!< the courier reads `answered` and mirrors `published` without acquire/release: an
                            //!< adopter can read a ring entry older than the offset the service wrote
  relay_only_with_news,     //!< the courier relays only when there is new demand to forward: the service's answer to
                            //!< the last demand is never mirrored (a lost wake-up of the relay)
  adoption_overlap_ignored, //!< a request whose failed attempt an adoption overlapped posts and, with every granule
                            //!< mapped, gives up as exhausted (allocator::wait_for_growth's `gen`)
  refusal_ignores_adoptions,//!< a refused waiter gives up without adopting what was published and trying it (the
                            //!< refusal may be a later round's, and earlier rounds' granules may serve it)
  run_adopts_head_only,     //!< adopting a ring entry adopts the run's first granule only (allocator::adopt_entry):
                            //!< the rest stays mapped and never serves a request
  give_up_without_walk,     //!< a request that gives up on growth (refused, timed out, range full, byte limit) returns
                            //!< nullptr without the reclaim walk its failed attempt left to growth (design.md §12.9)
  give_up_without_fallbacks,//!< a request whose attempts skipped the superbin classes' fallbacks while growth came first
                            //!< gives up without trying them (design.md §12.10)
};

//! The words the device and the growth service tell each other (see the file comment). Host
//! visible memory; zero it before use. 64 B aligned; 640 B.
struct alignas(64) growth_mailbox {
  static constexpr unsigned ring = 64;  //!< published runs of granules not yet adopted, at most
  // ---- written by the device (the courier; `adopted` by the adopter) ----
  std::uint64_t posted_requests;  //!< failed requests posted for the service (monotonic; the relay's, as last relayed)
  std::uint64_t posted_bytes;     //!< their bytes, each at its served size (monotonic)
  std::uint64_t posted_order;     //!< (round << 8) | the largest order of 4 KiB pages posted in that round
  std::uint64_t posted_chunks;    //!< arenas that needed a chunk of their own, once per round (monotonic)
  std::uint64_t adopted;          //!< ring entries adopted
  std::uint64_t pad0[3];
  // ---- written by the service (host) ----
  std::uint64_t round;      //!< rounds finished
  std::uint64_t answered;   //!< posted_requests as read by the last finished round
  std::uint64_t refused;    //!< posted_requests as read by the last round that mapped nothing (0: none)
  std::uint64_t published;  //!< ring entries written
  std::uint64_t stopped;    //!< 1 once the service stopped: waiters give up at once
  std::uint64_t pad1[3];
  std::uint64_t run[ring];  //!< published runs of granules (ring_entry: offset | log2 of the granules), entry p at p % ring
};

//! A ring entry (growth_mailbox::run): a run of 2^`log2_granules` granules (one physical handle,
//! design.md §12.8) at heap offset `off`, a multiple of 4 KiB and of the run's size; the low 6
//! bits carry log2_granules (< 64).
TOGA_HOST_DEVICE inline constexpr std::uint64_t ring_entry(std::uint64_t off, unsigned log2_granules) noexcept { return off | log2_granules; }
//! The heap offset of the run in ring entry `e`.
TOGA_HOST_DEVICE inline constexpr std::uint64_t ring_entry_offset(std::uint64_t e) noexcept { return e & ~std::uint64_t{63}; }
//! log2 of the granules of the run in ring entry `e`.
TOGA_HOST_DEVICE inline constexpr unsigned ring_entry_log2(std::uint64_t e) noexcept { return static_cast<unsigned>(e & 63); }

//! The waiting requests' own words (see the file comment): device memory (a growable heap's
//! growth_state), device scope. Zero it with the heap's metadata. 1,216 B.
struct growth_relay {
  static constexpr unsigned arena_words = 128;  //!< arenas beyond 128 share words (chunk demand counted less)
  // ---- posted by the waiters ----
  std::uint64_t posted_requests;  //!< failed requests posted (monotonic; tickets are its values)
  std::uint64_t posted_bytes;     //!< their bytes, each at its served size (monotonic)
  std::uint64_t posted_order;     //!< (round << 8) | the largest order of 4 KiB pages posted in that round
  std::uint64_t posted_chunks;    //!< arenas that needed a chunk of their own, once per round (monotonic)
  std::uint64_t forwarded;        //!< posted_requests as the courier last copied it into the mailbox
  std::uint64_t courier;          //!< 1 while a waiter relays (try-lock)
  std::uint64_t adopt_lock;       //!< 1 while a thread adopts published granules (try-lock)
  std::uint64_t adopted;          //!< ring entries adopted (written by the adopt_lock holder only)
  // ---- statistics (read at quiescence) ----
  std::uint64_t waits;      //!< requests that waited for the service
  std::uint64_t exhausted;  //!< ... and gave up because growth could not serve it any more (limit, range)
  std::uint64_t timeouts;   //!< ... and gave up at the deadline (nullptr)
  std::uint64_t refusals;   //!< ... and gave up because the service could map nothing (nullptr)
  std::uint64_t pad0[4];
  // ---- the service's words as the courier last read them (mirrors) ----
  std::uint64_t round, answered, refused, published, stopped;
  std::uint64_t pad1[3];
  std::uint64_t arena_round[arena_words];  //!< per arena: 1 + the round its chunk demand was posted in
};

static_assert(sizeof(growth_mailbox) == 640, "growth_mailbox: the size its comment gives");
static_assert(sizeof(growth_relay) == 1216, "growth_relay: the size its comment gives");

//! What one service round saw and did (host statistics).
struct service_round_result {
  bool answered = false;       //!< there was demand and the round answered it
  std::uint64_t requests = 0;  //!< requests posted since the last round
  std::uint64_t bytes = 0;     //!< their bytes
  unsigned order = 0;          //!< largest order posted in the round
  std::uint64_t chunks = 0;    //!< arenas that needed a chunk
  std::uint64_t mapped = 0;    //!< runs of granules mapped and published
};

//! The service's own memory of what it has consumed (host side, one per mailbox).
struct service_cursor {
  std::uint64_t bytes = 0, chunks = 0, order_word = 0;
};

//! A service map callback's failure.
inline constexpr std::uint64_t no_offset = ~std::uint64_t{0};

//! One round of the service (see the file comment). `plan(requests, bytes, order, chunks, room)`
//! returns the runs of granules to map (any range of the backend's run descriptors), at most
//! `room`; `map(run)` maps the run (or another in its place: the host tier's) and returns its ring
//! entry (ring_entry: the heap offset of the run it mapped and log2 of its granules), or
//! `no_offset` when it could not (that ends the round's mapping; it is the backend's to roll back
//! and count); `offset(run)` is the planned run's ring entry (used by a planted bug only). P
//! supplies the atomics (the host's, or the simulator's).
template <class P, service_bug Bug = service_bug::none, class Plan, class Map, class Offset>
service_round_result service_round(growth_mailbox* m, service_cursor& cur, Plan&& plan, Map&& map, Offset&& offset) {
  service_round_result r;
  const std::uint64_t posted = P::load(&m->posted_requests, acquire, system_scope);
  const std::uint64_t answered = P::load(&m->answered, relaxed, system_scope);
  if (posted == answered) return r;
  std::uint64_t published = P::load(&m->published, relaxed, system_scope);
  const std::uint64_t adopted = P::load(&m->adopted, acquire, system_scope);
  const std::uint64_t room = growth_mailbox::ring - (published - adopted);
  // the ring is full (nobody adopted the last granules yet): answer later, consuming nothing
  // (the demand read here would otherwise be lost to the next round)
  if (room == 0) return r;
  const std::uint64_t round = P::load(&m->round, relaxed, system_scope);
  const std::uint64_t bytes = P::load(&m->posted_bytes, relaxed, system_scope);
  const std::uint64_t chunks = P::load(&m->posted_chunks, relaxed, system_scope);
  const std::uint64_t ow = P::load(&m->posted_order, relaxed, system_scope);
  r.requests = posted - answered;
  r.bytes = bytes - cur.bytes;
  r.chunks = chunks - cur.chunks;
  // the order word changed since the last round consumed it (it only grows: fetch_max of
  // (round << 8) | order): an order posted since; its round tag may lag this round's by the
  // relay's mirror, so the tag alone does not decide (it only makes the word grow)
  r.order = ow != cur.order_word ? static_cast<unsigned>(ow & 0xff) : 0u;
  cur.bytes = bytes;
  cur.chunks = chunks;
  cur.order_word = ow;
  bool attempted = false;  // a plan with nothing to map (every granule mapped) refuses nothing:
                           // the waiters adopt what was published and give up once all is adopted
  for (const auto& i : plan(r.requests, r.bytes, r.order, r.chunks, room)) {
    if (r.mapped == room) break;
    attempted = true;
    if constexpr (Bug == service_bug::published_before_mapped) {
      P::store(&m->run[published % growth_mailbox::ring], offset(i), relaxed, system_scope);
      P::store(&m->published, ++published, release, system_scope);
      ++r.mapped;
      if (map(i) == no_offset) break;
    } else {
      const std::uint64_t off = map(i);
      if (off == no_offset) break;
      P::store(&m->run[published % growth_mailbox::ring], off, relaxed, system_scope);
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
  //! x 2^order; `chunk_arena` >= 0: the arena needs a chunk of its own. One thread per group;
  //! device memory only. Returns the group's ticket: posted_requests after its own addition.
  static TOGA_DEVICE std::uint64_t post(growth_relay* r, unsigned n, std::uint64_t bytes, unsigned order, int chunk_arena) TOGA_NOEXCEPT(P) {
    const std::uint64_t round = P::load(&r->round, relaxed, device_scope);
    P::fetch_add(&r->posted_bytes, bytes, relaxed, device_scope);
    P::fetch_max(&r->posted_order, (round << 8) | order, relaxed, device_scope);
    if (chunk_arena >= 0) {
      std::uint64_t* w = &r->arena_round[static_cast<unsigned>(chunk_arena) % growth_relay::arena_words];
      if (P::fetch_max(w, round + 1, relaxed, device_scope) < round + 1) P::fetch_add(&r->posted_chunks, std::uint64_t{1}, relaxed, device_scope);
    }
    // last: a courier that reads it sees the rest
    return P::fetch_add(&r->posted_requests, std::uint64_t{n}, release, device_scope) + n;
  }

  //! A try-lock on `w` (0 free, 1 held): a load first, then one CAS (acquire) only if it looked free.
  static TOGA_DEVICE bool try_lock(std::uint64_t* w) TOGA_NOEXCEPT(P) {
    std::uint64_t expected = 0;
    return P::load(w, relaxed, device_scope) == 0 && P::compare_exchange(w, expected, std::uint64_t{1}, acquire, device_scope);
  }
  static TOGA_DEVICE void unlock(std::uint64_t* w) TOGA_NOEXCEPT(P) { P::store(w, std::uint64_t{0}, release, device_scope); }

  //! One attempt to adopt the ring entries from `adopted` up to `upto` (which the caller saw
  //! published, with acquire): false if another thread holds the adopt lock. `adopt(entry)` adopts
  //! the run of granules of a ring entry (allocator::adopt_entry) and returns false if a granule
  //! of it was adopted already, a violated invariant.
  template <class Adopt>
  static TOGA_DEVICE bool try_adopt(growth_relay* r, growth_mailbox* m, std::uint64_t upto, Adopt&& adopt) TOGA_NOEXCEPT(P) {
    bool locked;
    if constexpr (Bug == service_bug::adopt_lock_not_atomic) {
      locked = P::load(&r->adopt_lock, relaxed, device_scope) == 0;
      if (locked) P::store(&r->adopt_lock, std::uint64_t{1}, relaxed, device_scope);
      P::fence(acquire, device_scope);
    } else {
      locked = try_lock(&r->adopt_lock);
    }
    if (!locked) return false;
    std::uint64_t a = P::load(&r->adopted, relaxed, device_scope);
    const std::uint64_t a0 = a;
    for (; a < upto; ++a) {
      const std::uint64_t e = P::load(&m->run[a % growth_mailbox::ring], relaxed, system_scope);
      TOGA_REQUIRE(P, adopt(e), "growth service: a published granule was adopted twice");
      P::store(&r->adopted, a + 1, release, device_scope);
    }
    if (a != a0) P::store(&m->adopted, a, release, system_scope);  // the service's room: after the entries were read
    unlock(&r->adopt_lock);
    return true;
  }

  //! Adopts every granule published up to `want` (one thread at a time) and waits until they are
  //! all adopted, or the deadline passes (false). `want`: the relay's `published` (waiters) or the
  //! mailbox's (at quiescence), read with acquire.
  template <class Adopt>
  static TOGA_DEVICE bool adopt_published(growth_relay* r, growth_mailbox* m, std::uint64_t want, Adopt&& adopt,
                                          std::uint64_t deadline) TOGA_NOEXCEPT(P) {
    for (unsigned attempt = 0;; ++attempt) {
      if (P::load(&r->adopted, acquire, device_scope) >= want) return true;
      if (try_adopt(r, m, want, adopt)) continue;
      if (P::clock_ns() > deadline) return false;
      P::backoff(attempt);
    }
  }

  //! The courier (see the file comment): if no other waiter relays, copies what was posted into
  //! the mailbox and the service's words into the relay, then adopts what the service published
  //! and nobody adopted. Returns whether it relayed.
  template <class Adopt>
  static TOGA_DEVICE bool relay(growth_relay* r, growth_mailbox* m, Adopt&& adopt) TOGA_NOEXCEPT(P) {
    if (!try_lock(&r->courier)) return false;
    const std::uint64_t posted = P::load(&r->posted_requests, acquire, device_scope);
    const bool news = posted != P::load(&r->forwarded, relaxed, device_scope);
    if constexpr (Bug == service_bug::relay_only_with_news) {
      if (!news) {
        unlock(&r->courier);
        return false;
      }
    }
    if (news) {
      P::store(&m->posted_bytes, P::load(&r->posted_bytes, relaxed, device_scope), relaxed, system_scope);
      P::store(&m->posted_order, P::load(&r->posted_order, relaxed, device_scope), relaxed, system_scope);
      P::store(&m->posted_chunks, P::load(&r->posted_chunks, relaxed, device_scope), relaxed, system_scope);
      P::store(&m->posted_requests, posted, release, system_scope);  // last: the round that reads it sees the rest
      P::store(&r->forwarded, posted, relaxed, device_scope);
    }
    // the mirror's orders (planted bug relay_mirror_relaxed: relaxed on both hops)
    constexpr bool weak = Bug == service_bug::relay_mirror_relaxed;
    constexpr std::conditional_t<weak, order_tag<memory_order::relaxed>, order_tag<memory_order::acquire>> acq{};
    constexpr std::conditional_t<weak, order_tag<memory_order::relaxed>, order_tag<memory_order::release>> rel{};
    const std::uint64_t answered = P::load(&m->answered, acq, system_scope);
    P::store(&r->refused, P::load(&m->refused, relaxed, system_scope), relaxed, device_scope);
    P::store(&r->round, P::load(&m->round, relaxed, system_scope), relaxed, device_scope);
    P::store(&r->stopped, P::load(&m->stopped, relaxed, system_scope), relaxed, device_scope);
    const std::uint64_t published = P::load(&m->published, acq, system_scope);
    P::store(&r->published, published, rel, device_scope);
    P::store(&r->answered, answered, rel, device_scope);
    unlock(&r->courier);
    // granules published and not adopted (their waiters may have given up): adopt them now
    if (P::load(&r->adopted, relaxed, device_scope) < published) (void)try_adopt(r, m, published, adopt);
    return true;
  }

  //! Why a wait ended.
  enum class outcome : std::uint32_t { retry, refused, timeout, stopped };

  //! After a failed attempt posted `ticket` (post's result): waits (relaying when it can) until
  //! the service answered it. `retry`: adopt what it published (adopt_published up to the relay's
  //! `published`) and try the request again (if it fails, post and wait again); `refused` (a
  //! refusal at or after the ticket, possibly a later round's): the caller adopts what was
  //! published and tries again if anything was adopted since its failed attempt, else gives up
  //! with nullptr; `timeout`, `stopped`: nullptr.
  template <class Adopt>
  static TOGA_DEVICE outcome await(growth_relay* r, growth_mailbox* m, std::uint64_t deadline, std::uint64_t ticket,
                                   Adopt&& adopt) TOGA_NOEXCEPT(P) {
    if constexpr (Bug == service_bug::lost_wakeup) {
      const std::uint64_t r0 = P::load(&r->round, acquire, device_scope);  // read after posting: a round may have answered already
      for (unsigned attempt = 0; P::load(&r->round, acquire, device_scope) == r0; ++attempt) {
        if (P::load(&r->stopped, relaxed, device_scope) != 0) return outcome::stopped;
        if (P::clock_ns() > deadline) return outcome::timeout;
        (void)relay(r, m, adopt);
        P::backoff(attempt);
      }
    } else {
      for (unsigned attempt = 0; P::load(&r->answered, acquire, device_scope) < ticket; ++attempt) {
        if (P::load(&r->stopped, relaxed, device_scope) != 0) return outcome::stopped;
        if (P::clock_ns() > deadline) return outcome::timeout;
        (void)relay(r, m, adopt);
        P::backoff(attempt);
      }
    }
    if (P::load(&r->refused, relaxed, device_scope) >= ticket) return outcome::refused;
    return outcome::retry;
  }
};

//! A growable heap's state (issue 14): what is mapped, and the demand that growth would serve.
//! Counters are relaxed and read at quiescence, except `adopted` and `mapped_granules`, which
//! adopt_granule adds with release (in that order) and the growth service's waiters read with
//! acquire while kernels run (allocator::allocate_waiting).
struct growth_state {
  std::uint64_t mapped_granules;  //!< granules adopted and not withdrawn
  std::uint64_t adopted;          //!< adoptions so far
  std::uint64_t withdrawn;        //!< granules withdrawn by trims so far
  //! Granules growth may ever map (init_growable: all of them; a backend whose max_bytes is below
  //! the power-of-two range sets fewer): a failure while all of them are mapped is exhaustion.
  std::uint64_t max_granules;
  //! The growth service's mailbox (toga/growth_service.hpp; a growth_mailbox* as an integer, 0:
  //! none): a failed request that growth could serve waits for the service instead of recording
  //! demand. Set by the backend after init_growable, cleared before the mailbox goes away.
  std::uint64_t service;
  std::uint64_t service_wait_ns;  //!< how long such a request waits at most (nanoseconds)
  //! The waiting requests' words (toga/growth_service.hpp): posted demand, the courier's and the
  //! adopters' locks, mirrors of the service's words, the waits' statistics.
  growth_relay relay;
  std::uint64_t demand_requests;  //!< failed requests that growth could serve (unmapped granules remained)
  std::uint64_t demand_bytes;     //!< their bytes, each at its served size (size class or TBuddy block)
  std::uint64_t demand_max_order; //!< the largest order of 4 KiB pages among them
  //! Arenas whose small requests (<= 1 KiB) failed for want of a chunk: each needs a chunk of its
  //! own (512 KiB) whatever its requests add up to, so the growth policy maps one per such arena.
  std::uint64_t demand_chunks;
  static constexpr unsigned arena_bit_words = 16;  //!< arenas beyond 1,024 share bits (a ≤ count)
  std::uint64_t demand_arena_bits[arena_bit_words];  //!< which arenas demand_chunks counted
  //! Words from demand_requests to the end: what the backend clears after a growth.
  static constexpr unsigned demand_words = 4 + arena_bit_words;
};
static_assert(sizeof(growth_state) == offsetof(growth_state, demand_requests) + growth_state::demand_words * sizeof(std::uint64_t),
              "growth_state: the demand words run from demand_requests to the end");

}  // namespace toga
