//! @file toga/ualloc.hpp
//! UAlloc: the fine-grained allocator for 16 B .. 1 KiB (Gelado & Garland, PPoPP'19, §4.2;
//! allocator-spec §5).
//!
//! One arena per SM. Each arena has a list of chunks (512 KiB from TBuddy) with a bulk semaphore
//! counting free bins, and per size class a list of bins with free slots, guarded by a writer
//! mutex and an RCU domain, with a bulk semaphore counting free slots.
//!  - allocate: stage 1 on the class's slot semaphore; GROW makes a new bin (from the arena's
//!    chunks, or a new chunk) and keeps slot 0; OK walks the bin list inside a read-side section
//!    and takes a reservation from the first bin whose free count is positive, then claims a
//!    zero bit of its bitmap (scan start scattered by thread). A bin whose free count it took
//!    to 0 is unlinked (reconcile).
//!  - deallocate: the bin and slot come from the address alone (geometry.hpp). Inside a
//!    read-side section: clear the bit, raise the free count, re-link the bin if it was empty,
//!    signal one slot; a bin that became entirely free is retired (try_wait on its capacity, CAS
//!    free -> DEAD, unlink) and, after leaving the read-side section, deferred to RCU; the
//!    callback returns the bin to its chunk, and a chunk whose bins are all free goes back to
//!    TBuddy (symmetric rule, spec §5.9).
//!  [DEVIATION from spec §5.8/§5.9: the spec calls rcu_defer inside the free path's read-side
//!  section; a barrier started there waits for its own reader forever. The CAS to DEAD makes
//!  the caller the bin's only retirer, so it may leave the section first and defer after.]
//!
//! All shared fields (headers inside the heap, arena metadata) are touched only through Platform
//! atomics. Offsets are bytes from the heap base; 0 means "none" (no bin or chunk starts there).
#pragma once

#include <cstdint>

#include "toga/bulk_semaphore.hpp"
#include "toga/bits.hpp"
#include "toga/config.hpp"
#include "toga/geometry.hpp"
#include "toga/group.hpp"
#include "toga/platform.hpp"
#include "toga/rcu.hpp"
#include "toga/tbuddy.hpp"

namespace toga {

//! Deliberate bugs for the planted-bug tests (never use outside tests).
enum class ualloc_bug : std::uint8_t {
  none,
  free_outside_read_section,  //!< deallocate touches the bin without an RCU read-side section
  retire_without_try_wait,    //!< a bin is retired without taking its units from the semaphore
  chunk_returned_with_live_bins,  //!< a chunk goes back to TBuddy while some of its bins are in use
  no_unlink_on_exhaustion,    //!< a bin whose last slot was taken stays listed
  no_relink_on_refill,        //!< a free that refills an exhausted bin does not re-link it
};

//! Header of a regular bin: the first 128 B of the bin (P Fig. 3).
struct bin_header {
  std::uint64_t bitmap[geom::bitmap_words];  //!< 1 = slot in use or beyond capacity
  std::uint32_t free;      //!< slots not reserved; bin_dead once retired
  std::uint32_t capacity;
  std::uint32_t class_id;
  std::uint32_t arena;
  std::uint32_t listed;
  std::uint32_t pad0;
  std::uint64_t next, prev;  //!< bin list links (readers follow next only)
  std::uint64_t rcu_next;    //!< deferred-reclamation link
  std::uint64_t pad1[2];
};
static_assert(sizeof(bin_header) == geom::bin_header_bytes);
inline constexpr std::uint32_t bin_dead = 0x80000000u;  //!< negative as int32: never positive

//! Header of a chunk: the first 128 B of its bin 0.
struct chunk_header {
  std::uint64_t bin_bitmap[geom::bins_per_chunk / 64];  //!< 1 = bin in use (header bins always)
  std::uint32_t free_bins;
  std::uint32_t arena;
  std::uint32_t listed;
  std::uint32_t pad0;
  std::uint64_t next, prev;  //!< arena chunk-list links: offset + 1, or 0
  std::uint64_t pad1[10];
};
static_assert(sizeof(chunk_header) == geom::bin_header_bytes);

//! Per (arena, class): the bin list and its synchronisation.
template <class P>
struct class_list {
  std::uint64_t head;
  std::uint32_t list_mtx;
  std::uint32_t pad;
  arena_semaphore<P> slot_sem;
  rcu_domain<P> rcu;
};

//! Statistics kept per arena (summed by the host). Signed quantities are two's complement in
//! 64-bit words: a block freed on another SM makes one arena's count negative, the sum is exact.
//! Updated with relaxed RMWs whose results are unused (fire-and-forget reductions on CUDA), one
//! per warp group; the peak with fetch_max (no CAS loop: fast-path.md E8).
struct arena_stats {
  std::uint64_t used_bytes;      //!< rounded bytes of live UAlloc and TBuddy blocks (signed)
  std::uint64_t peak_used_bytes; //!< highest positive used_bytes this arena saw
  std::uint64_t allocations;
  std::uint64_t deallocations;
  std::uint64_t failed;          //!< allocations that returned nullptr: heap exhausted
  std::uint64_t failed_limit;    //!< ... because the byte limit would have been exceeded
  std::uint64_t failed_too_large;//!< ... because the request exceeds the heap
  std::uint64_t bins[geom::num_classes];  //!< bins in use per class (signed)
  std::uint64_t chunks;          //!< chunks held (signed)
};

template <class P>
struct arena {
  std::uint32_t chunk_mtx;
  std::uint32_t pad;
  std::uint64_t chunk_head;  //!< first listed chunk's offset + 1, or 0
  arena_semaphore<P> chunk_sem;  //!< units: free usable bins of listed chunks
  class_list<P> lists[geom::num_classes];
  arena_stats stats;
};

//! UAlloc over a heap whose chunks come from `buddy`.
template <class P, ualloc_bug Bug = ualloc_bug::none, tbuddy_bug TB = tbuddy_bug::none>
  requires Platform<P>
struct ualloc {
  char* base;
  tbuddy<P, TB> buddy;
  arena<P>* arenas;
  unsigned num_arenas;

  TOGA_DEVICE bin_header* bin_at(std::uint64_t off) const { return reinterpret_cast<bin_header*>(base + off); }
  TOGA_DEVICE chunk_header* chunk_at(std::uint64_t off) const { return reinterpret_cast<chunk_header*>(base + off); }

  //! One slot of class c; its offset, or no_block when the heap is exhausted.
  TOGA_DEVICE std::uint64_t allocate(unsigned c) const TOGA_NOEXCEPT(P) { return allocate_in(P::sm_id() % num_arenas, c); }
  //! The same in arena a.
  TOGA_DEVICE std::uint64_t allocate_in(unsigned a, unsigned c) const TOGA_NOEXCEPT(P) {
    class_list<P>& L = arenas[a].lists[c];
    const std::uint32_t cap = geom::capacity(c);
    if (L.slot_sem.wait(1, cap) == sem_result::grow) {
      const std::uint64_t bin = new_bin(a);
      if (bin == 0) {
        L.slot_sem.signal(0, cap - 1);  // withdraw: out of memory reaches every waiter
        return no_block;
      }
      init_bin(bin, c, a, 1);
      lock(&L.list_mtx);
      link_bin(L, bin);
      unlock(&L.list_mtx);
      L.slot_sem.signal(cap - 1, cap - 1);  // publish, then signal (a waiter that comes early looks again)
      P::fetch_add(&arenas[a].stats.bins[c], std::uint64_t{1}, relaxed, device_scope);
      return slot_offset_of(bin, c, 0);
    }
    return stage2(L, c);
  }

  // Stage 2: we own a unit, so a listed bin has a free count reserved for us (publishers link
  // before they signal); a bin between an unlink and a re-link makes us look again.
  TOGA_DEVICE std::uint64_t stage2(class_list<P>& L, unsigned c) const TOGA_NOEXCEPT(P) {
    const std::uint32_t e = L.rcu.read_lock();
    std::uint64_t bin = 0;
    std::uint32_t old = 0;
    for (unsigned attempt = 0; bin == 0; ++attempt) {
      for (std::uint64_t b = P::load(&L.head, acquire, device_scope); b != 0;
           b = P::load(&bin_at(b)->next, acquire, device_scope)) {
        old = try_dec_positive(&bin_at(b)->free);
        if (static_cast<std::int32_t>(old) > 0) {
          bin = b;
          break;
        }
      }
      if (bin == 0) P::backoff(attempt);
    }
    L.rcu.read_unlock(e);  // free < capacity now: the bin cannot be retired under us
    const unsigned i = claim_zero_bit(bin_at(bin));
    if (old == 1 && Bug != ualloc_bug::no_unlink_on_exhaustion) reconcile(L, bin);
    return slot_offset_of(bin, c, i);
  }

  //! Collective allocate (P §2.2, spec §2.6): every lane of `g` (lanes of one warp asking for
  //! class c) gets one slot. One semaphore CAS for the group; on GROW(m) the lanes of rank < m
  //! each make a bin whose first slots are already taken for the ranks it serves (rank r is
  //! served by bin r / capacity, slot r % capacity). Returns this lane's offset or no_block.
  //! `a` is the arena whose class list keyed the group (the same for every lane).
  TOGA_DEVICE std::uint64_t allocate_group(unsigned a, unsigned c, const coalesced_group<P>& g) const TOGA_NOEXCEPT(P) {
    if (g.size == 1) return allocate_in(a, c);
    class_list<P>& L = arenas[a].lists[c];
    const std::uint32_t cap = geom::capacity(c);
    const collective_wait_result w = L.slot_sem.wait_collective(g, 1, cap);
    if (w.result == sem_result::ok) return stage2(L, c);
    std::uint64_t bin = 0;
    if (g.rank < w.batches) {
      const std::uint64_t left = arena_semaphore<P>::batch_leftover(g.rank, g.size, 1, cap);
      bin = new_bin(a);
      if (bin == 0) {
        L.slot_sem.signal(0, left);
      } else {
        init_bin(bin, c, a, static_cast<unsigned>(cap - left));
        if (left > 0) {  // a bin the group fills completely stays unlisted (U2) until a free re-links it
          lock(&L.list_mtx);
          link_bin(L, bin);
          unlock(&L.list_mtx);
        }
        L.slot_sem.signal(left, left);
        P::fetch_add(&arenas[a].stats.bins[c], std::uint64_t{1}, relaxed, device_scope);
      }
    }
    const std::uint64_t mine = g.from_rank(bin, g.rank / cap);
    return mine == 0 ? no_block : slot_offset_of(mine, c, g.rank % cap);
  }

  //! Frees the slot at heap offset `off` (not 4 KiB aligned). Returns false, changing nothing,
  //! when the slot is not allocated (a double free).
  TOGA_DEVICE bool deallocate(std::uint64_t off, unsigned& class_out) const TOGA_NOEXCEPT(P) {
    const std::uint64_t chunk = off & ~(geom::chunk_bytes - 1);
    const std::uint64_t in = off - chunk;
    const std::uint64_t bin = chunk + std::uint64_t{geom::owner_bin(in)} * geom::page_bytes;
    bin_header* h = bin_at(bin);
    const unsigned c = P::load(&h->class_id, relaxed, device_scope);  // valid: the slot is live
    const unsigned a = P::load(&h->arena, relaxed, device_scope);
    class_out = c;
    class_list<P>& L = arenas[a].lists[c];
    const unsigned slot = geom::owner_slot(in, c);
    const std::uint32_t cap = geom::capacity(c);
    std::uint32_t e = 0;
    if constexpr (Bug != ualloc_bug::free_outside_read_section) e = L.rcu.read_lock();
    const std::uint64_t bit = std::uint64_t{1} << (slot % 64);
    const std::uint64_t was = P::fetch_and(&h->bitmap[slot / 64], ~bit, release, device_scope);
    if (!(was & bit)) {  // not allocated: a double free (or a pointer toga did not hand out)
      if constexpr (Bug != ualloc_bug::free_outside_read_section) L.rcu.read_unlock(e);
      return false;
    }
    const std::uint32_t before = P::fetch_add(&h->free, 1u, acq_rel, device_scope);
    if (before == 0 && Bug != ualloc_bug::no_relink_on_refill) reconcile(L, bin);  // it was exhausted: re-link
    L.slot_sem.signal(1, 0);
    // Retire an empty bin. Not only the free that raised the count to capacity tries: its
    // try_wait(cap) fails while other frees of the bin have not signalled yet, so every free that
    // sees an empty bin after its own signal tries (one CAS wins; the others give units back).
    bool retire = false;
    if (before + 1 == cap || P::load(&h->free, relaxed, device_scope) == cap) retire = try_retire(L, bin, cap);
    if constexpr (Bug != ualloc_bug::free_outside_read_section) L.rcu.read_unlock(e);
    if (retire) retire_bin(L, bin);
    return true;
  }

  //! Under memory pressure, before an allocation returns nullptr: retires the empty bins that
  //! stay listed (their last free's try_wait lost a race) and runs every pending RCU callback in
  //! every arena, so that bins go back to their chunks and free chunks back to TBuddy. Never call
  //! it inside a read-side section. Returns whether anything was reclaimed.
  TOGA_DEVICE TOGA_NOINLINE bool reclaim() const TOGA_NOEXCEPT(P) {
    bool any = false;
    for (unsigned a = 0; a < num_arenas; ++a)
      for (unsigned c = 0; c < geom::num_classes; ++c) {
        class_list<P>& L = arenas[a].lists[c];
        if (P::load(&L.head, relaxed, device_scope) == 0 && P::load(&L.rcu.cb_head_word(), relaxed, device_scope) == 0) continue;
        const std::uint32_t cap = geom::capacity(c);
        constexpr unsigned batch = 8;
        std::uint64_t empty[batch];
        unsigned n = 0;
        const std::uint32_t e = L.rcu.read_lock();
        for (std::uint64_t b = P::load(&L.head, acquire, device_scope); b != 0 && n < batch;
             b = P::load(&bin_at(b)->next, acquire, device_scope))
          if (P::load(&bin_at(b)->free, relaxed, device_scope) == cap && try_retire(L, b, cap)) empty[n++] = b;
        L.rcu.read_unlock(e);
        for (unsigned i = 0; i < n; ++i) retire_bin(L, empty[i]);
        any |= n > 0;
        any |= L.rcu.flush([this](std::uint64_t b) { return &bin_at(b)->rcu_next; },
                           [this](std::uint64_t b) { release_bin(b); }) > 0;
      }
    return any;
  }

  //! Heap offset of slot i of class c in the bin at heap offset `bin`.
  TOGA_DEVICE static std::uint64_t slot_offset_of(std::uint64_t bin, unsigned c, unsigned i) {
    const std::uint64_t chunk = bin & ~(geom::chunk_bytes - 1);
    return chunk + geom::slot_offset(static_cast<unsigned>((bin - chunk) / geom::page_bytes), c, i);
  }

 private:
  TOGA_DEVICE void retire_bin(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    L.rcu.retire(bin, [this](std::uint64_t b) { return &bin_at(b)->rcu_next; }, [this](std::uint64_t b) { release_bin(b); });
  }
  TOGA_DEVICE static void lock(std::uint32_t* m) TOGA_NOEXCEPT(P) {
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t expected = 0;
      if (P::compare_exchange(m, expected, 1u, acquire, device_scope)) return;
      P::backoff(attempt);
    }
  }
  TOGA_DEVICE static void unlock(std::uint32_t* m) TOGA_NOEXCEPT(P) { P::store(m, 0u, release, device_scope); }

  TOGA_DEVICE static std::uint32_t try_dec_positive(std::uint32_t* f) TOGA_NOEXCEPT(P) {
    std::uint32_t cur = P::load(f, relaxed, device_scope);
    for (unsigned lost = 0;; ++lost) {
      if (static_cast<std::int32_t>(cur) <= 0) return cur;
      if (P::compare_exchange(f, cur, cur - 1, acquire, device_scope)) return cur;
      P::backoff(lost);  // no lock-step retries by the many lanes that share a bin
      cur = P::load(f, relaxed, device_scope);
    }
  }
  // A reservation guarantees a zero bit below capacity exists (U1); find and set one.
  TOGA_DEVICE static unsigned claim_zero_bit(bin_header* h) TOGA_NOEXCEPT(P) {
    const unsigned start = (P::thread_id() * 7u + P::block_id()) % geom::bitmap_words;
    // Each lane looks for a zero bit from its own position in the word, not from bit 0: lanes
    // that share a bin would otherwise all fetch_or the same lowest free bit, and all but one
    // retry, so filling a 16 B bin (248 slots) cost thousands of atomics instead of ~248.
    const unsigned rot = (P::thread_id() * 37u + P::block_id() * 11u) & 63u;
    for (unsigned attempt = 0;; ++attempt) {
      for (unsigned k = 0; k < geom::bitmap_words; ++k) {
        const unsigned w = (start + k) % geom::bitmap_words;
        std::uint64_t cur = P::load(&h->bitmap[w], relaxed, device_scope);
        while (~cur != 0) {
          const std::uint64_t zeros = ~cur;
          const std::uint64_t ahead = zeros & (~std::uint64_t{0} << rot);
          const unsigned b = bits::ctz(ahead != 0 ? ahead : zeros);
          const std::uint64_t bit = std::uint64_t{1} << b;
          const std::uint64_t was = P::fetch_or(&h->bitmap[w], bit, acq_rel, device_scope);
          if (!(was & bit)) return w * 64 + b;
          cur = was | bit;
        }
      }
      P::backoff(attempt);
    }
  }
  // A fresh bin: bits >= capacity set, `taken` slots (0..taken-1) in use.
  TOGA_DEVICE void init_bin(std::uint64_t bin, unsigned c, unsigned a, unsigned taken) const TOGA_NOEXCEPT(P) {
    bin_header* h = bin_at(bin);
    const unsigned cap = geom::capacity(c);
    for (unsigned w = 0; w < geom::bitmap_words; ++w) {
      std::uint64_t bits = 0;
      for (unsigned b = 0; b < 64; ++b) {
        const unsigned i = w * 64 + b;
        if (i >= cap || i < taken) bits |= std::uint64_t{1} << b;
      }
      P::store(&h->bitmap[w], bits, relaxed, device_scope);
    }
    P::store(&h->free, cap - taken, relaxed, device_scope);
    P::store(&h->capacity, cap, relaxed, device_scope);
    P::store(&h->class_id, c, relaxed, device_scope);
    P::store(&h->arena, a, relaxed, device_scope);
    P::store(&h->listed, 0u, relaxed, device_scope);
    P::store(&h->next, std::uint64_t{0}, relaxed, device_scope);
    P::store(&h->prev, std::uint64_t{0}, relaxed, device_scope);
  }
  // Under list_mtx. Readers may stand on the bin: only the links of others change on unlink.
  TOGA_DEVICE void link_bin(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    bin_header* h = bin_at(bin);
    const std::uint64_t head = P::load(&L.head, relaxed, device_scope);
    P::store(&h->next, head, relaxed, device_scope);
    P::store(&h->prev, std::uint64_t{0}, relaxed, device_scope);
    if (head) P::store(&bin_at(head)->prev, bin, relaxed, device_scope);
    P::store(&h->listed, 1u, relaxed, device_scope);
    P::store(&L.head, bin, release, device_scope);  // publish after initialising
  }
  TOGA_DEVICE void unlink_bin(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    bin_header* h = bin_at(bin);
    const std::uint64_t next = P::load(&h->next, relaxed, device_scope);
    const std::uint64_t prev = P::load(&h->prev, relaxed, device_scope);
    if (prev) P::store(&bin_at(prev)->next, next, release, device_scope);
    else P::store(&L.head, next, release, device_scope);
    if (next) P::store(&bin_at(next)->prev, prev, relaxed, device_scope);
    P::store(&h->listed, 0u, relaxed, device_scope);  // h->next stays: readers on it go on
  }
  // Converges `listed` with `free` whichever zero crossing came first (spec §5.6).
  TOGA_DEVICE void reconcile(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    bin_header* h = bin_at(bin);
    lock(&L.list_mtx);
    const std::uint32_t f = P::load(&h->free, relaxed, device_scope);
    const std::uint32_t listed = P::load(&h->listed, relaxed, device_scope);
    if (f == 0 && listed) unlink_bin(L, bin);
    else if (static_cast<std::int32_t>(f) > 0 && !listed) link_bin(L, bin);
    unlock(&L.list_mtx);
  }
  // Inside L's read-side section. True when the caller now owns the bin's retirement.
  TOGA_DEVICE bool try_retire(class_list<P>& L, std::uint64_t bin, std::uint32_t cap) const TOGA_NOEXCEPT(P) {
    if constexpr (Bug != ualloc_bug::retire_without_try_wait)
      if (!L.slot_sem.try_wait(cap)) return false;  // the units are promised to waiters: keep it
    std::uint32_t expected = cap;
    if (!P::compare_exchange(&bin_at(bin)->free, expected, bin_dead, acq_rel, device_scope)) {
      if constexpr (Bug != ualloc_bug::retire_without_try_wait) L.slot_sem.signal(cap, 0);
      return false;  // somebody allocated meanwhile
    }
    lock(&L.list_mtx);
    if (P::load(&bin_at(bin)->listed, relaxed, device_scope)) unlink_bin(L, bin);
    unlock(&L.list_mtx);
    return true;
  }
  // RCU callback: the bin goes back to its chunk; an entirely free chunk goes back to TBuddy.
  TOGA_DEVICE void release_bin(std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    const unsigned a = P::load(&bin_at(bin)->arena, relaxed, device_scope);
    const unsigned c = P::load(&bin_at(bin)->class_id, relaxed, device_scope);
    P::fetch_sub(&arenas[a].stats.bins[c], std::uint64_t{1}, relaxed, device_scope);
    arena<P>& A = arenas[a];
    const std::uint64_t chunk = bin & ~(geom::chunk_bytes - 1);
    chunk_header* ch = chunk_at(chunk);
    const unsigned b = static_cast<unsigned>((bin - chunk) / geom::page_bytes);
    lock(&A.chunk_mtx);
    P::fetch_and(&ch->bin_bitmap[b / 64], ~(std::uint64_t{1} << (b % 64)), relaxed, device_scope);
    const std::uint32_t fb = P::fetch_add(&ch->free_bins, 1u, relaxed, device_scope) + 1;
    const bool all_free = Bug == ualloc_bug::chunk_returned_with_live_bins ? true : fb == geom::usable_bins;
    if (all_free && A.chunk_sem.try_wait(fb - 1)) {  // the other free bins were signalled earlier
      if (P::load(&ch->listed, relaxed, device_scope)) unlink_chunk(A, chunk);
      unlock(&A.chunk_mtx);
      P::fetch_sub(&A.stats.chunks, std::uint64_t{1}, relaxed, device_scope);
      buddy.free(chunk);
      return;
    }
    if (!P::load(&ch->listed, relaxed, device_scope)) link_chunk(A, chunk);
    A.chunk_sem.signal(1, 0);  // under the mutex: try_wait above never sees a half-signalled chunk
    unlock(&A.chunk_mtx);
  }
  // Chunk links hold offset + 1 (a chunk may start at offset 0; 0 means "none").
  TOGA_DEVICE static std::uint64_t enc(std::uint64_t chunk) { return chunk + 1; }
  TOGA_DEVICE static std::uint64_t dec(std::uint64_t link) { return link - 1; }
  TOGA_DEVICE void link_chunk(arena<P>& A, std::uint64_t chunk) const TOGA_NOEXCEPT(P) {
    chunk_header* ch = chunk_at(chunk);
    const std::uint64_t head = P::load(&A.chunk_head, relaxed, device_scope);
    P::store(&ch->next, head, relaxed, device_scope);
    P::store(&ch->prev, std::uint64_t{0}, relaxed, device_scope);
    if (head) P::store(&chunk_at(dec(head))->prev, enc(chunk), relaxed, device_scope);
    P::store(&ch->listed, 1u, relaxed, device_scope);
    P::store(&A.chunk_head, enc(chunk), relaxed, device_scope);
  }
  TOGA_DEVICE void unlink_chunk(arena<P>& A, std::uint64_t chunk) const TOGA_NOEXCEPT(P) {
    chunk_header* ch = chunk_at(chunk);
    const std::uint64_t next = P::load(&ch->next, relaxed, device_scope);
    const std::uint64_t prev = P::load(&ch->prev, relaxed, device_scope);
    if (prev) P::store(&chunk_at(dec(prev))->next, next, relaxed, device_scope);
    else P::store(&A.chunk_head, next, relaxed, device_scope);
    if (next) P::store(&chunk_at(dec(next))->prev, prev, relaxed, device_scope);
    P::store(&ch->listed, 0u, relaxed, device_scope);
  }
  // A free bin of arena a (heap offset), or 0 when no chunk can be had (spec §5.7).
  TOGA_DEVICE std::uint64_t new_bin(unsigned a) const TOGA_NOEXCEPT(P) {
    arena<P>& A = arenas[a];
    if (A.chunk_sem.wait(1, geom::usable_bins) == sem_result::grow) {
      std::uint64_t chunk = buddy.alloc(geom::chunk_order);
      if (chunk == no_block && reclaim()) chunk = buddy.alloc(geom::chunk_order);
      if (chunk == no_block) {
        A.chunk_sem.signal(0, geom::usable_bins - 1);
        return 0;
      }
      buddy.tag_chunk(chunk, geom::chunk_order);
      chunk_header* ch = chunk_at(chunk);
      for (unsigned w = 0; w < geom::bins_per_chunk / 64; ++w) {
        std::uint64_t bits = 0;
        for (unsigned b = 0; b < 64; ++b)
          if (w * 64 + b <= geom::header_bins) bits |= std::uint64_t{1} << b;  // header bins + the first usable
        P::store(&ch->bin_bitmap[w], bits, relaxed, device_scope);
      }
      P::store(&ch->free_bins, geom::usable_bins - 1, relaxed, device_scope);
      P::store(&ch->arena, a, relaxed, device_scope);
      P::fetch_add(&A.stats.chunks, std::uint64_t{1}, relaxed, device_scope);
      lock(&A.chunk_mtx);
      link_chunk(A, chunk);
      unlock(&A.chunk_mtx);
      A.chunk_sem.signal(geom::usable_bins - 1, geom::usable_bins - 1);
      return chunk + std::uint64_t{geom::header_bins} * geom::page_bytes;
    }
    lock(&A.chunk_mtx);
    std::uint64_t link = P::load(&A.chunk_head, relaxed, device_scope);
    while (link != 0 && P::load(&chunk_at(dec(link))->free_bins, relaxed, device_scope) == 0)
      link = P::load(&chunk_at(dec(link))->next, relaxed, device_scope);
    if (link == 0) P::fail("ualloc::new_bin: a chunk-semaphore unit without a listed chunk with free bins (U3)");
    const std::uint64_t chunk = dec(link);
    chunk_header* ch = chunk_at(chunk);
    unsigned b = 0;
    for (unsigned w = 0; w < geom::bins_per_chunk / 64; ++w) {
      const std::uint64_t bits = P::load(&ch->bin_bitmap[w], relaxed, device_scope);
      if (~bits != 0) {
        b = w * 64 + bits::cto(bits);
        P::fetch_or(&ch->bin_bitmap[w], std::uint64_t{1} << (b % 64), relaxed, device_scope);
        break;
      }
    }
    if (P::fetch_sub(&ch->free_bins, 1u, relaxed, device_scope) == 1) unlink_chunk(A, chunk);
    unlock(&A.chunk_mtx);
    return chunk + std::uint64_t{b} * geom::page_bytes;
  }
};

}  // namespace toga
