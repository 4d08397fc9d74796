//! @file toga/tbuddy.hpp
//! TBuddy: the concurrent binary buddy allocator for blocks of 4 KiB .. the whole heap
//! (Gelado & Garland, PPoPP'19, §4.1; design.md §10).
//!
//! A static, implicitly indexed tree (root 1, children 2i and 2i+1) with one state word and one
//! lock word per node, and one bulk semaphore per order k whose units are the AVAILABLE nodes of
//! height k (B = 2, N = 1). States: BUSY (0: covered or unusable), AVAILABLE (free block),
//! PARTIAL (split, something free below), ALLOCATED (handed out whole, or owned by a thread in
//! the middle of a split or merge) [DECISION design.md §10.1: the 4th state lets free find the order
//! from the address alone]. BUSY = 0 makes initialisation one memset plus the root.
//!
//! Locking [design.md §10.2, T4]: writing state[v] requires lock(parent(v)) (the root is its own parent);
//! locks are taken deeper first and at most two are held, so there is no deadlock.
//! alloc(n): climb from order n until a semaphore gives a unit (GROW at a level promises the
//! unit a split from above will deliver), claim an AVAILABLE node by a scattered depth-first
//! search, split down to order n (each split publishes the right half and pays the promise one
//! level down). free: find the ALLOCATED ancestor of the block's first leaf, then merge with the
//! buddy as long as a unit of the buddy's level can be taken (try_wait) and the buddy is
//! AVAILABLE, cascading upward [DECISION design.md §10.3]; signals happen before lock(parent) is
//! released [DECISION design.md §10.3]. Out of memory: only the root level can fail; the climb
//! withdraws every promise it made, so waiters find out too.
//!
//! Groups (E7, design.md §10.4): lanes of one warp that ask for blocks of the same order are served
//! together by alloc_group: the leader takes all their units with one CAS when the order has them
//! (each lane then searches and claims its own node), or else takes ONE block of order
//! n + ceil(log2 g) through the ordinary path and carves it into the group's g blocks (a run:
//! lane r gets the r-th block), publishing the rest of it in buddy form, one AVAILABLE node per
//! level, each with its unit. Lanes of one warp that free blocks tiling a whole aligned block V
//! (free_group) free V once: one merge cascade instead of g. The merge test looks at the buddy's
//! state before it touches the semaphore: under lock(parent), a buddy that is not AVAILABLE
//! costs no RMW on the level's word (before issue 11 every free took a unit and gave it back).
//!
//! Units: orders count 4 KiB pages as powers of two; offsets are bytes from the heap base.
//! Thread-safety: alloc and free may run concurrently from any thread; alloc_group and
//! free_group are called by every lane of their group.
#pragma once

#include <cstdint>

#include "toga/bulk_semaphore.hpp"
#include "toga/bits.hpp"
#include "toga/config.hpp"
#include "toga/geometry.hpp"
#include "toga/ghost.hpp"
#include "toga/group.hpp"
#include "toga/platform.hpp"

namespace toga {

//! Node states (2 bits of the state word).
enum : std::uint32_t { node_busy = 0, node_available = 1, node_partial = 2, node_allocated = 3 };
//! Tag bit on an ALLOCATED node that UAlloc holds as a chunk (checked frees tell chunks from
//! user blocks by it); the low two bits stay ALLOCATED.
inline constexpr std::uint32_t node_chunk_tag = 4;
//! Tag bit on an ALLOCATED node that UAlloc holds as a superbin (E6, design.md §11): frees of
//! offsets inside it are routed to the superbin's slots. Cleared with the state when the block
//! goes back (free) and when the node is claimed again (claim and split write whole states).
inline constexpr std::uint32_t node_superbin_tag = 8;
//! Tag bit on an ALLOCATED node of the granule order of a growable heap (issue 14): no memory is
//! behind the granule yet (or any more). `adopt` clears it and frees the granule into the tree;
//! a quiescent trim (`trim_prepare`, `withdraw_granules`, `trim_finish`) sets it again.
inline constexpr std::uint32_t node_unmapped_tag = 16;
//! Tag bit on an ALLOCATED node of the pre-split reserve (design.md §10.5): a free block of the
//! reserve order that no climb has taken yet (byte_limit::presplit_*). Cleared when a climb takes
//! the node (or a drain frees it).
inline constexpr std::uint32_t node_presplit_tag = 32;
inline constexpr std::uint32_t node_state_mask = 3;

//! Bytes of TBuddy blocks handed out (UAlloc chunks and blocks above 1 KiB), with their
//! high-water mark and an optional byte limit below the heap size
//! (toga::cuda::heap_options::limit_bytes; init_after_zero). One global word, updated once per
//! TBuddy block (not per small allocation). 32 B.
struct byte_limit {
  std::uint64_t limit;     //!< 0: no limit
  std::uint64_t reserved;  //!< bytes of TBuddy blocks handed out now
  std::uint64_t reserved_high;  //!< highest `reserved` seen by a successful allocation since initialisation or the last
                                //!< high-water reset (concurrent requests' charges may count in it; never above the heap)
  //! UAlloc's reclaim gate (ualloc::reclaim): bit 0 a reclaim is running, bit 1 the last one gave
  //! something back, bits 2.. its generation. Here because this block is the heap's one global.
  std::uint64_t reclaim_gate;
  //! Fail fast in TBuddy (design.md §13.1): counts the operations that made a
  //! node AVAILABLE (frees, so also adopted granules and returned chunks and superbins; splits and
  //! carved runs, which publish siblings; quiescent merges and recounts), each bumped by a release
  //! RMW after the operation's last store.
  std::uint64_t free_generation;
  //! Per order k: free_generation + 1 as read (acquire) before the last climb for a block of
  //! order k that found the tree empty (0: none). While free_generation is unchanged, a request
  //! of order k returns no_block at once: no block of order k can have appeared without a free.
  std::uint64_t failed_at[32];
  //! Fail fast in UAlloc's reclaim: `reclaim_changes` counts operations that may have left
  //! something for reclaim() to give back (an empty bin in a pin slot or the inbox, a deferred
  //! bin, a chunk entirely free), each bumped by a release RMW after the operation's last store;
  //! `reclaim_clean` is that count + 1 as read (acquire) before the last walk that gave nothing
  //! back and skipped nothing (0: none). While they agree, reclaim() returns false at once.
  std::uint64_t reclaim_changes;
  std::uint64_t reclaim_clean;
  //! The shared reclaim walk (ualloc::reclaim, design.md §9.4): the walk of generation g is
  //! split into items (one arena of one geometry each) that every lane arriving while it runs
  //! claims and walks. `reclaim_cursor` = (g + 1) << 32 | next item (stored by the lane that
  //! opened the gate, after it reset the others); `reclaim_done` counts items walked;
  //! `reclaim_flags` ORs what they found (1: gave something back, 2: skipped something);
  //! `reclaim_changes_seen` is reclaim_changes as the opener read it (acquire) before the walk.
  std::uint64_t reclaim_cursor;
  std::uint64_t reclaim_done;
  std::uint64_t reclaim_flags;
  std::uint64_t reclaim_changes_seen;
  //! The pre-split reserve (design.md §10.5), in up to presplit_tiers tiers (UAlloc's chunks,
  //! the superbins): at initialisation tier t's `presplit_count[t]` blocks of height
  //! `presplit_order[t]`, nodes presplit_first[t] .. + count - 1 (the tiers one after the other
  //! from the heap's start), are ALLOCATED | node_presplit_tag and the rest of the tree is in buddy
  //! form, so that the first kernel's climbs for chunks and superbins take a block with one
  //! fetch_add on `presplit_next[t]` instead of splitting the tree from the root one level at a
  //! time. `presplit_settled[t]` counts the taken blocks that are settled (handed to the climb
  //! that took them, or freed back into the tree by a drain): a climb that finds the tree empty
  //! while some tier is unsettled drains every tier and climbs once more.
  std::uint64_t presplit_next[2];
  std::uint64_t presplit_settled[2];
  std::uint64_t presplit_count[2];  //!< 0: no such tier
  std::uint64_t presplit_order[2];
  std::uint64_t presplit_first[2];
};
//! Tiers of the pre-split reserve (byte_limit::presplit_*).
inline constexpr unsigned presplit_tiers = 2;
//! What tbuddy::init_after_zero pre-splits: tier t is count[t] blocks of 4 KiB x 2^order[t], the
//! tiers placed one after the other from the heap's start (each tier's start must be a multiple
//! of its block size: larger blocks first, or counts that keep the alignment), at most half the heap.
struct presplit_plan {
  unsigned order[presplit_tiers] = {0, 0};
  std::uint64_t count[presplit_tiers] = {0, 0};
};
static_assert(sizeof(byte_limit::failed_at) / sizeof(std::uint64_t) >= 26, "byte_limit::failed_at covers every order of the largest tree");

//! Deliberate bugs for the planted-bug tests (never use outside tests).
enum class tbuddy_bug : std::uint8_t {
  none,
  merge_without_unit,        //!< merge with an AVAILABLE buddy without taking its unit (try_wait)
  claim_without_lock,        //!< claim an AVAILABLE node without lock(parent): two threads can win it
  oom_keeps_promises,        //!< out of memory does not withdraw the promises of the climb
  run_leftover_unsignalled,  //!< a carved run publishes its leftover nodes without signalling their units
  run_boundary_off_by_one,   //!< a carved run publishes its leftover from block g-1 on: the last lane's block is AVAILABLE too
  tile_free_keeps_leaves,    //!< a group free of a whole tile frees V but leaves the lanes' nodes ALLOCATED below it
  // growable heaps (issue 14)
  adopt_without_merge,       //!< adopt publishes the granule AVAILABLE without merging it with a free buddy
  adopt_uncharges_limit,     //!< adopt frees the granule through the charging path: the byte count drops below zero
  withdraw_used_granule,     //!< trim withdraws a granule that is a chunk or a superbin (UAlloc's, with live slots or not)
  // failing fast (design.md §13.1)
  free_skips_generation,     //!< a TBuddy free does not bump free_generation: a failure recorded before it stays current
  failure_read_late,         //!< a failed climb reads free_generation after the climb, not before: a free during the climb is lost
  failure_covers_smaller,    //!< a failed climb of order k records a failure for every order below k too
  // the pre-split reserve (design.md §10.5)
  presplit_no_drain,         //!< a climb that finds the tree empty fails without draining the reserve: a large block fails on an empty heap
  presplit_take_racy,        //!< a climb takes a reserve block by a load and a store, not one RMW: two climbs can take the same block
  presplit_drain_charged,    //!< a drain frees the reserve's blocks through the charging path: the byte count drops below what is handed out
  presplit_drain_unseen,     //!< a climb that fails after another climb drained the reserve behind it (at levels it had passed) does not climb again
  // a climb stops at a recorded failure (design.md §13.1)
  climb_stop_keeps_promises,      //!< a climb that stops at a recorded failure does not withdraw its promises
  climb_stop_ignores_generation,  //!< a climb stops at any failure recorded for its order, also one a free has since made stale
  withdraw_splits_run,            //!< trim withdraws a wholly free granule of a run whose other granules hold blocks (the
                                  //!< host then unmaps the whole run, one physical handle, under live blocks)
  adopt_run_keeps_tags,           //!< adopting a run as one block leaves its granules tagged unmapped: frees of blocks in
                                  //!< them are dropped as frees of unmapped memory
  // issue 34's yardstick (simulator.md §18.6)
  group_run_floor_log2,           //!< a group's carved run has 2^floor(log2 g) blocks, not 2^ceil: lanes past it get blocks outside the run
  group_charges_whole_run,        //!< a group that carves a run charges the byte limit for the whole run (2^j blocks), not its g blocks
  group_failure_keeps_charge,     //!< a group request that gets no block leaves its charge on the byte limit
  // failing fast (design.md §13.1), 2026-12-02
  failure_record_overwritten,     //!< a failed climb stores its record instead of fetch_max: a climb that began long ago
                                  //!< replaces a current record with its stale one
  // refused waits (design.md §13.1), 2026-12-02
  climb_refusal_keeps_promises,   //!< a climb refused at level k > order does not withdraw the units it promised below k
  climb_refusal_ignores_generation, //!< a wait is refused at any failure ever recorded for the order, also a stale one
};

inline constexpr std::uint64_t no_block = ~std::uint64_t{0};

template <class P, tbuddy_bug Bug = tbuddy_bug::none>
  requires Platform<P>
struct tbuddy {
  using sem_t = tbuddy_semaphore<P>;

  std::uint32_t* state;  //!< [2^levels], index 0 unused
  std::uint32_t* lock;   //!< [2^levels]
  sem_t* sem;            //!< [levels]
  byte_limit* limit;     //!< block accounting and the byte limit (nullptr: none kept)
  unsigned levels;       //!< heap = 4 KiB x 2^(levels-1)
  //! Growable heaps (issue 14): granule order + 1 (granules of 4 KiB x 2^order bytes), 0 for a
  //! heap whose memory is all there from the start. (In the padding after `levels`: the views
  //! that kernels copy keep their size; 8 B more cost T5's churn at 16 B a third on an H200.)
  unsigned grow_granule = 0;

  TOGA_HOST_DEVICE unsigned top() const { return levels - 1; }
  TOGA_HOST_DEVICE std::uint64_t heap_bytes() const { return geom::page_bytes << top(); }
  TOGA_HOST_DEVICE static constexpr std::uint64_t node_count(unsigned levels) { return std::uint64_t{1} << levels; }
  TOGA_HOST_DEVICE unsigned depth(std::uint64_t v) const { return 63u - bits::clz(v); }
  TOGA_HOST_DEVICE unsigned height(std::uint64_t v) const { return top() - depth(v); }
  TOGA_HOST_DEVICE std::uint64_t offset_of(std::uint64_t v) const {
    const unsigned d = depth(v);
    return (v - (std::uint64_t{1} << d)) * (heap_bytes() >> d);
  }
  TOGA_HOST_DEVICE std::uint64_t leaf_of(std::uint64_t off) const {
    return (std::uint64_t{1} << top()) + (off >> geom::page_shift);
  }

  //! Sequential initialisation: the arrays must already be zero (all BUSY, unlocked); makes the
  //! root AVAILABLE with one unit at the top level. With a pre-split reserve (design.md §10.5;
  //! needs `limit`): the plan's blocks are ALLOCATED | node_presplit_tag (the nodes above them BUSY
  //! unless something free lies below), and the rest of the heap, from the reserve's end, is in
  //! buddy form: its largest aligned blocks AVAILABLE and counted, their ancestors PARTIAL. A plan
  //! that is empty, misaligned or larger than half the heap gives no reserve.
  TOGA_HOST_DEVICE void init_after_zero(const presplit_plan& plan = {}) {
    for (unsigned k = 0; k < levels; ++k) sem[k].init(0);
    const std::uint64_t heap_pages = std::uint64_t{1} << top();
    std::uint64_t pages = 0;  // the reserve's end
    bool ok = limit != nullptr;
    for (unsigned t = 0; t < presplit_tiers && ok; ++t) {
      if (plan.count[t] == 0) continue;
      const std::uint64_t bp = std::uint64_t{1} << plan.order[t];
      ok = plan.order[t] < top() && pages % bp == 0 && plan.count[t] <= heap_pages / 2 / bp && pages + plan.count[t] * bp <= heap_pages / 2;
      if (ok) pages += plan.count[t] * bp;
    }
    if (!ok || pages == 0) {
      state[1] = node_available;
      sem[top()].init(1);
      return;
    }
    pages = 0;
    for (unsigned t = 0; t < presplit_tiers; ++t) {
      limit->presplit_next[t] = limit->presplit_settled[t] = 0;
      limit->presplit_count[t] = plan.count[t];
      limit->presplit_order[t] = plan.order[t];
      limit->presplit_first[t] = 0;
      if (plan.count[t] == 0) continue;
      const std::uint64_t first = (std::uint64_t{1} << (top() - plan.order[t])) + (pages >> plan.order[t]);
      for (std::uint64_t i = 0; i < plan.count[t]; ++i) state[first + i] = node_allocated | node_presplit_tag;
      limit->presplit_first[t] = first;
      pages += plan.count[t] << plan.order[t];
    }
    std::uint32_t avail[64] = {};
    for (std::uint64_t p = pages; p < heap_pages;) {  // the largest aligned block at p, each time
      const unsigned h = static_cast<unsigned>(bits::ctz(p));
      std::uint64_t v = (std::uint64_t{1} << (top() - h)) + (p >> h);
      state[v] = node_available;
      ++avail[h];
      while (v > 1 && state[v >> 1] != node_partial) state[v >>= 1] = node_partial;
      p += std::uint64_t{1} << h;
    }
    for (unsigned k = 0; k < levels; ++k) sem[k].init(avail[k]);
  }

  //! Sequential initialisation of a growable heap (issue 14; the arrays must already be zero):
  //! every node of height `granule_order` is an ALLOCATED frontier node tagged unmapped, the
  //! nodes above them BUSY, every semaphore 0; nothing can be allocated until `adopt`.
  TOGA_HOST_DEVICE void init_unmapped(unsigned granule_order) {
    for (unsigned k = 0; k < levels; ++k) sem[k].init(0);
    const std::uint64_t first = std::uint64_t{1} << (top() - granule_order);
    for (std::uint64_t v = first; v < 2 * first; ++v) state[v] = node_allocated | node_unmapped_tag;
    // their ancestors are split with no free block below: BUSY (init left the root AVAILABLE, which
    // the heap walk's T1 read as a block covering the granules until the first adoption)
    for (std::uint64_t v = 1; v < first; ++v) state[v] = node_busy;
  }

  //! Adopts the granule of 4 KiB x 2^granule_order bytes at `off` (memory is now behind it):
  //! clears its unmapped tag and frees it into the tree by the ordinary free-and-merge path
  //! (promise, merges, delivery), without charging or uncharging the byte count. Safe while other
  //! threads allocate and free. Returns false (changing nothing) if the granule is not unmapped.
  TOGA_DEVICE bool adopt(std::uint64_t off, unsigned granule_order) const TOGA_NOEXCEPT(P) {
    const std::uint64_t v = leaf_of(off) >> granule_order;
    const std::uint64_t p = v == 1 ? 1 : v >> 1;
    lock_node(p);
    if (load_state(v) != (node_allocated | node_unmapped_tag)) {
      unlock_node(p);
      return false;
    }
    set_state(v, node_allocated);  // owned by us now, like a block being freed
    unlock_node(p);
    if constexpr (Bug == tbuddy_bug::adopt_without_merge) {
      lock_node(p);
      set_state(v, node_available);
      sem[height(v)].signal(1, 0);
      if (v == 1) unlock_node(1);
      else propagate_up(p);
      return true;
    }
    free_node(v, Bug == tbuddy_bug::adopt_uncharges_limit);
    return true;
  }
  //! Adopts the run of 2^k granules of 4 KiB x 2^granule_order bytes at `off` (aligned to the run;
  //! one physical handle, design.md §12.8) as one block: under the lock of the run node's parent,
  //! checks that every granule of it is unmapped and every node between them and the run node is
  //! BUSY (as init_unmapped and a trim that withdrew the whole run leave them), makes the granules
  //! covered (BUSY, tag cleared) and the run node ALLOCATED, and frees that node by the ordinary
  //! free-and-merge path, uncharged (one free instead of 2^k). Safe while other threads allocate
  //! and free: nobody enters a BUSY subtree, and a buddy's merge or propagation reads the run node
  //! (BUSY or ALLOCATED: no merge) under the same lock. Returns false (changing nothing) if the
  //! run is not wholly unmapped. k = 0: adopt.
  TOGA_DEVICE bool adopt_run(std::uint64_t off, unsigned granule_order, unsigned k) const TOGA_NOEXCEPT(P) {
    if (k == 0) return adopt(off, granule_order);
    const std::uint64_t v = leaf_of(off) >> (granule_order + k);
    const std::uint64_t p = v == 1 ? 1 : v >> 1;
    lock_node(p);
    bool ok = load_state(v) == node_busy;
    for (unsigned d = 1; d <= k && ok; ++d) {  // the nodes d levels below v
      const std::uint64_t first = v << d, n = std::uint64_t{1} << d;
      for (std::uint64_t x = first; x < first + n && ok; ++x)
        ok = load_state(x) == (d == k ? (node_allocated | node_unmapped_tag) : node_busy);
    }
    if (!ok) {
      unlock_node(p);
      return false;
    }
    if constexpr (Bug != tbuddy_bug::adopt_run_keeps_tags)
      for (std::uint64_t x = v << k; x < (v + 1) << k; ++x) set_state(x, node_busy);  // covered by the run's block
    set_state(v, node_allocated);  // owned by us now, like a block being freed
    unlock_node(p);
    free_node(v, false);
    return true;
  }
  //! Whether the granule of `granule_order` holding heap offset `off` is unmapped (racy: exact
  //! for a granule nobody adopts or withdraws meanwhile).
  TOGA_DEVICE bool unmapped(std::uint64_t off, unsigned granule_order) const TOGA_NOEXCEPT(P) {
    return (load_state(leaf_of(off) >> granule_order) & node_unmapped_tag) != 0;
  }

  // A trim (issue 14), quiescent only (nothing else may run in the heap): trim_prepare (phases 0
  // and 1), withdraw_granules (phase 2), trim_finish (phase 3 and the recount), in that order
  // (allocator::trim_granules). It merges every pair of AVAILABLE buddies, then withdraws granules
  // (4 KiB x 2^granule_order) that are wholly free, from the highest address down, while more
  // than `keep` granules are mapped: each becomes ALLOCATED | unmapped again, the free blocks
  // around it are split off in buddy form, and every semaphore is recounted (C = the AVAILABLE
  // nodes of its level, E = R = 0). A granule that holds anything (a chunk, a superbin, a block)
  // is not wholly free and stays: reclaim first. Relaxed Platform operations throughout (the
  // caller's barrier publishes them). Phases 1, 3 and the recount touch the nodes of one height
  // independently, so a backend may run them one thread per node, a height at a time (the CUDA
  // heap); phase 2 runs on one thread.
  //! Phases 0 and 1 on one thread.
  TOGA_DEVICE void trim_prepare() const TOGA_NOEXCEPT(P) {
    zero_semaphores_quiescent();
    for (unsigned h = 1; h < levels; ++h) {  // bottom-up
      const std::uint64_t first = std::uint64_t{1} << (top() - h);
      for (std::uint64_t v = first; v < 2 * first; ++v) merge_free_children(v);
    }
  }
  //! Phase 3 and the recount on one thread.
  TOGA_DEVICE void trim_finish(unsigned granule_order) const TOGA_NOEXCEPT(P) {
    for (std::uint64_t v = std::uint64_t{1} << (top() - granule_order); v-- > 1;) derive_split(v);  // bottom-up
    recount_semaphores();
  }
  //! Phase 0: every semaphore 0 (C never exceeds what exists while the tree changes).
  TOGA_DEVICE void zero_semaphores_quiescent() const TOGA_NOEXCEPT(P) {
    for (unsigned h = 0; h < levels; ++h) sem[h].store_quiescent(0);
    // the merges of phase 1 make larger blocks without a free: every recorded failure goes
    if (limit) P::fetch_add(&limit->free_generation, std::uint64_t{1}, relaxed, device_scope);
  }
  //! Phase 1, node v of height >= 1 (heights bottom-up): both children AVAILABLE -> v AVAILABLE.
  TOGA_DEVICE void merge_free_children(std::uint64_t v) const TOGA_NOEXCEPT(P) {
    if (load_state(2 * v) == node_available && load_state(2 * v + 1) == node_available) {
      set_state(2 * v, node_busy);
      set_state(2 * v + 1, node_busy);
      set_state(v, node_available);
    }
  }
  //! Phase 2 (one thread): withdraws wholly free runs of granules from the highest down while
  //! more than `keep` granules are mapped; on_withdrawn(offset) for each granule (the backend
  //! unmaps them afterwards). `run_log2[i]`: log2 of the granules of the run (one physical handle,
  //! aligned to its size) holding granule i; a run is withdrawn whole, and only when every granule
  //! of it is wholly free (design.md §12.8); nullptr: runs of one granule. Returns the granules
  //! still mapped.
  template <class F>
  TOGA_DEVICE std::uint64_t withdraw_granules(unsigned granule_order, std::uint64_t keep, const std::uint8_t* run_log2,
                                              F&& on_withdrawn) const TOGA_NOEXCEPT(P) {
    const std::uint64_t first_g = std::uint64_t{1} << (top() - granule_order);
    std::uint64_t mapped = 0;
    for (std::uint64_t g = first_g; g < 2 * first_g; ++g)
      if (!(load_state(g) & node_unmapped_tag)) ++mapped;
    for (std::uint64_t g = 2 * first_g; g-- > first_g && mapped > keep;) {
      if (load_state(g) & node_unmapped_tag) continue;
      const unsigned k = run_log2 && Bug != tbuddy_bug::withdraw_splits_run ? run_log2[g - first_g] : 0u;
      if (k != 0) {  // a run of 2^k granules, met at its highest: withdrawn whole or not at all
        const std::uint64_t head = g & ~((std::uint64_t{1} << k) - 1);
        bool all_free = true;
        for (std::uint64_t x = head; x <= g && all_free; ++x) all_free = wholly_free_granule(x);
        if (all_free)
          for (std::uint64_t x = g + 1; x-- > head;) {
            withdraw_granule(x);
            --mapped;
            on_withdrawn(offset_of(x));
          }
        g = head;  // (the loop steps below the run)
        continue;
      }
      if constexpr (Bug == tbuddy_bug::withdraw_used_granule) {
        // the planted bug: a granule inside a chunk or a superbin counts as free (they are
        // UAlloc's caches, "so nobody uses them"), live slots or not
        bool in_cache = false;
        for (std::uint64_t u = g; u != 0 && !in_cache; u >>= 1) {
          const std::uint32_t su = load_state(u);
          in_cache = (su & node_state_mask) == node_allocated && (su & (node_chunk_tag | node_superbin_tag));
        }
        if (in_cache) {
          set_state(g, node_allocated | node_unmapped_tag);
          --mapped;
          on_withdrawn(offset_of(g));
          continue;
        }
      }
      if (!wholly_free_granule(g)) continue;
      withdraw_granule(g);
      --mapped;
      on_withdrawn(offset_of(g));
    }
    return mapped;
  }
  //! Phase 2's test: granule node g is mapped and covered by an AVAILABLE node (itself or an ancestor).
  TOGA_DEVICE bool wholly_free_granule(std::uint64_t g) const TOGA_NOEXCEPT(P) {
    if (load_state(g) & node_unmapped_tag) return false;
    std::uint64_t a = g;
    while (a != 0 && load_state(a) != node_available) {
      if (a != g && load_state(a) != node_busy && load_state(a) != node_partial) return false;  // under an ALLOCATED block
      a >>= 1;
    }
    return a != 0;
  }
  //! Phase 2's withdrawal of a wholly free granule node g: the AVAILABLE node covering it is split
  //! down to g in buddy form (every node on the path below it split, its other child AVAILABLE),
  //! and g becomes ALLOCATED | unmapped. Other granules under that node stay wholly free.
  TOGA_DEVICE void withdraw_granule(std::uint64_t g) const TOGA_NOEXCEPT(P) {
    std::uint64_t a = g;
    while (load_state(a) != node_available) a >>= 1;
    for (unsigned d = depth(g) - depth(a); d > 0; --d) {
      const std::uint64_t x = g >> d, on = g >> (d - 1);
      set_state(x, node_partial);  // (derived again below)
      set_state(on ^ 1, node_available);
      set_state(on, node_partial);
    }
    set_state(g, node_allocated | node_unmapped_tag);
  }
  //! Phase 3, node v above the granules (heights bottom-up): a split node's state derived again
  //! from its children. (A covered node is BUSY with BUSY children, which derive BUSY: the walk
  //! needs no test of its ancestors.)
  TOGA_DEVICE void derive_split(std::uint64_t v) const TOGA_NOEXCEPT(P) {
    const std::uint32_t sv = load_state(v) & node_state_mask;
    if (sv == node_available || sv == node_allocated) return;
    set_state(v, derive(load_state(2 * v) & node_state_mask, load_state(2 * v + 1) & node_state_mask));
  }
  //! Quiescent (one thread): sets every level's semaphore to C = its AVAILABLE nodes, E = R = 0.
  //! (A covered node is BUSY, invariant T1 of design.md §2.3, so every AVAILABLE node counts.)
  TOGA_DEVICE void recount_semaphores() const TOGA_NOEXCEPT(P) {
    for (unsigned h = 0; h < levels; ++h) {
      const std::uint64_t first = std::uint64_t{1} << (top() - h);
      std::uint64_t n = 0;
      for (std::uint64_t v = first; v < 2 * first; ++v) n += load_state(v) == node_available;
      sem[h].store_quiescent(n);
    }
  }

  //! A block of 4 KiB x 2^order, aligned to its size; its offset, or no_block when the heap
  //! has no such block (never blocks forever).
  //! Fails fast (two loads) while a failure of this order is recorded and no node was published
  //! since (design.md §13.1).
  TOGA_DEVICE std::uint64_t alloc(unsigned order) const TOGA_NOEXCEPT(P) {
    if (order > top()) return no_block;
    if (known_exhausted(order)) return no_block;
    // [HB] acquire: a free whose bump we see is visible to the climb below (its release)
    const std::uint64_t gen = limit ? P::load(&limit->free_generation, acquire, device_scope) : 0;
    std::uint64_t charged = 0;  // bytes handed out, this block included, when we charged it
    if (limit && !charge(geom::page_bytes << order, charged)) return no_block;
    const std::uint64_t off = alloc_block(order, limit != nullptr, gen);  // (a failure is recorded in there)
    if (off == no_block) {
      if (limit) uncharge(geom::page_bytes << order);
      return no_block;
    }
    if (limit) note_high_water(charged);
    return off;
  }

  //! Collective alloc (E7): every lane of `g` asks for one block of 4 KiB x 2^order (the same
  //! order in every lane). Returns this lane's block, or no_block in EVERY lane when the group
  //! path could not serve the group (the order has too few units and no block of
  //! order + ceil(log2 g) could be had, or the byte limit): the lanes then fall back to alloc,
  //! which is exact at exhaustion. Blocks of a carved run are contiguous: lane r gets the r-th.
  TOGA_DEVICE std::uint64_t alloc_group(unsigned order, const coalesced_group<P>& g) const TOGA_NOEXCEPT(P) {
    const unsigned j = g.size <= 1 ? 0u
                       : Bug == tbuddy_bug::group_run_floor_log2 ? 63u - bits::clz(std::uint64_t{g.size})
                                                                 : 64u - bits::clz(std::uint64_t{g.size - 1u});  // ceil(log2 g)
    std::uint64_t base = no_block;
    std::uint32_t how = 0;  // 0: not served, 1: units taken (search), 2: a run carved from `base`
    if (g.is_leader() && order + j <= top() && !known_exhausted(order)) {
      std::uint64_t charged = 0;
      const std::uint64_t bytes = (geom::page_bytes << order) * (Bug == tbuddy_bug::group_charges_whole_run ? (1u << j) : g.size);
      if (!limit || charge(bytes, charged)) {
        if (sem[order].try_wait(g.size)) {
          how = 1;  // one CAS for the whole group [E7]
        } else {
          // The run's leftover, leaves g .. 2^j - 1, is one AVAILABLE node at each level k with
          // bit k of 2^j - g set: promised now, so that a request meanwhile waits for it instead
          // of failing (no spurious out-of-memory, as the climb's promises), and delivered by
          // carve_run (or withdrawn).
          const unsigned left = (1u << j) - g.size;
          for (unsigned k = 0; k < j; ++k)
            if ((left >> k) & 1u) sem[order + k].promise(1);
          base = alloc_block(order + j);
          if (base != no_block) {
            how = 2;
          } else {
            settle_levels(order, left, 0);  // withdraw
          }
        }
        if (how == 0 && limit && Bug != tbuddy_bug::group_failure_keeps_charge) uncharge(bytes);
        if (how != 0 && limit) note_high_water(charged);
      }
    }
    how = g.broadcast(how);
    if (how == 0) return no_block;
    if (how == 1) return offset_of(search_and_claim(order));
    base = g.broadcast(base);
    if (j == 0) return base;  // a group of one: the block is the lane's
    carve_run(base, order, j, g);
    return base + (std::uint64_t{g.rank} << (order + geom::page_shift));
  }

  //! Collective free (E7) of the lanes' blocks, each the ALLOCATED node `v` (untagged, found by
  //! allocated_node) of the same height in every lane: when the group's blocks tile one aligned
  //! block exactly (g = 2^j distinct blocks under one node V), V is freed once and true is
  //! returned in every lane; otherwise nothing is done and false is returned in every lane.
  TOGA_DEVICE bool free_group(std::uint64_t v, const coalesced_group<P>& g) const TOGA_NOEXCEPT(P) {
    if (g.size < 2 || (g.size & (g.size - 1)) != 0) return false;
    const unsigned j = bits::ctz(g.size);
    const unsigned h = height(v);
    if (h + j > top()) return false;
    const std::uint64_t V = v >> j;
    if (P::match_any(g.mask, V) != g.mask) return false;  // (the same answer in every lane)
    const std::uint32_t idx = static_cast<std::uint32_t>(v - (V << j));
    const std::uint32_t full = g.size == 32 ? ~0u : (1u << g.size) - 1u;
    if (P::reduce_or(g.mask, 1u << idx) != full) return false;
    // The group holds every block below V, so nothing below V and nothing of V itself changes
    // but by us. The lanes of even index clear their pair (under the pair's parent lock, so that
    // whoever locks it later sees BUSY), then the leader owns V and frees it.
    if constexpr (Bug != tbuddy_bug::tile_free_keeps_leaves) {
      if ((idx & 1u) == 0) {
        const std::uint64_t p = v >> 1;
        lock_node(p);
        set_state(v, node_busy);
        set_state(v ^ 1u, node_busy);
        unlock_node(p);
      }
    }
    g.sync();
    if (g.is_leader()) {
      set_allocated(V, 0);  // BUSY -> ALLOCATED: derive() sees no change above
      free_node(V);
    }
    return true;
  }

 private:
  // The climb, search and split of alloc, without the byte limit. `records` (alloc's requests, on
  // a tree with a byte_limit block; false for a group's run): `gen` is free_generation as read
  // (acquire) before the request began; a climb that finds the tree empty then records the failure
  // (record_exhausted) BEFORE it withdraws its promises, so that the waiters the withdrawal sends
  // through a new decision find the record and are refused (below) instead of promising a climb of
  // their own; and a wait that would promise is refused while a failure of `order` is recorded
  // and current (design.md §13.1, "Refused waits").
  TOGA_DEVICE std::uint64_t alloc_block(unsigned order, bool records = false, std::uint64_t gen = 0) const TOGA_NOEXCEPT(P) {
    TOGA_PROFILE_COUNT(prof_tbuddy_alloc);
    TOGA_PROFILE_START;
    unsigned k = order;
    std::uint64_t v = 0;  // a block of the pre-split reserve, when the climb took one
    // Whether the reserve had unsettled blocks when the climb began: a drain by another climb may
    // then publish them at levels this climb has passed, and its failure must not count.
    const bool drain_pending = Bug != tbuddy_bug::presplit_drain_unseen && presplit_unsettled();
    bool drained = false;
    for (;;) {
      // The pre-split reserve first (design.md §10.5): one fetch_add instead of a climb, and no
      // wait for the promise of a climb in flight (what serialised a fresh heap's first kernel).
      if (const unsigned t = presplit_tier(k); t < presplit_tiers && (v = presplit_take(t)) != 0) break;
      if (k == top()) {
        // Nobody can produce a root, but frees in flight may have promised one (a merge cascade
        // holds its memory until it publishes the merged block): wait(1, 1) takes a unit, waits
        // for such a promise, or returns GROW (promising nothing) when none is coming: OOM.
        if (sem[k].wait(1, 1) == sem_result::ok) break;
        TOGA_PROFILE_COUNT(prof_tbuddy_top_fail);
        // Blocks of the reserve that no climb took are free memory: free them into the tree
        // (merging), then climb once more. Once is enough: the drain returns when every block
        // of the reserve is settled (also those another climb drained behind us: drain_pending),
        // so a second failure is exhaustion.
        if (Bug != tbuddy_bug::presplit_no_drain && !drained && (drain_pending || presplit_unsettled())) {
          if constexpr (Bug != tbuddy_bug::oom_keeps_promises) withdraw_climb(order, top());
          TOGA_PROFILE_COUNT(prof_tbuddy_drain);
          presplit_drain();
          drained = true;
          k = order;
          // the climb again is a climb of its own: its count is read after the drain (what the
          // drains published is then no reason for its record to be stale)
          if (records) gen = P::load(&limit->free_generation, acquire, device_scope);
          continue;
        }
        // Out of memory: the record first, then the withdrawal (design.md §13.1, "Refused waits")
        if (records) {
          record_exhausted(order, Bug == tbuddy_bug::failure_read_late ? P::load(&limit->free_generation, acquire, device_scope) : gen);
          TOGA_PROFILE_COUNT_IF(P::load(&limit->free_generation, relaxed, device_scope) != gen, prof_tbuddy_stale_fail);
        }
        if constexpr (Bug != tbuddy_bug::oom_keeps_promises) withdraw_climb(order, top());
        return no_block;
      }
      // A failure recorded for this order, with nothing published since (known_exhausted):
      // this climb would find what that one found, so it stops here and withdraws its
      // promises, as a request arriving now would fail at once (design.md §13.1). Without it,
      // every climber of a full heap climbed to the root, one withdrawal at a time, each
      // sending the waiters of every level below through a new decision: seconds per fill
      // on a growable heap at its edge (H200, 2026-11-28).
      if (k > order && stop_climb(order)) {
        TOGA_PROFILE_COUNT(prof_tbuddy_gave_up);
        if constexpr (Bug != tbuddy_bug::climb_stop_keeps_promises) withdraw_climb(order, k);
        return no_block;
      }
      // Where the wait would promise a unit (a climb of our own), it first asks whether a failure
      // of `order` is recorded and current; then it promises nothing and the request fails, as
      // one arriving now would (alloc's first test). Without it, every waiter that a failing
      // climb's withdrawal released promised a unit, other waiters reserved on that promise, and
      // its own withdrawal released them again: a chain of decisions on one word per level
      // (T14 (b)'s exhausting fill, design.md §13.1). No confirming CAS: the refusal is that
      // first test made later, linearised at its load of the record, whatever the word holds.
      // (One instantiation of the CAS loop for both callers: a group's run never refuses.)
      const sem_result r = sem[k].wait_slow(
          1, 2,
          [this, records, order] {
            if (!records) return false;
            if constexpr (Bug == tbuddy_bug::climb_refusal_ignores_generation) return P::load(&limit->failed_at[order], relaxed, device_scope) != 0;
            return known_exhausted(order);
          },
          false);
      if (r == sem_result::ok) break;
      if (r == sem_result::refused) {
        TOGA_PROFILE_COUNT(prof_tbuddy_refused);
        if constexpr (Bug != tbuddy_bug::climb_refusal_keeps_promises) withdraw_climb(order, k);
        return no_block;
      }
      TOGA_PROFILE_COUNT(prof_tbuddy_climb);
      ++k;  // GROW at level k: we promised one unit there, delivered by a split from above
    }
    TOGA_PROFILE_PHASE(prof_tbuddy_t_stage1);
    if (v == 0) {
      v = search_and_claim(k);
    } else if (k == order) {
      set_allocated(v, 0);  // handed out whole: a plain ALLOCATED block (splits and tags rewrite it)
    }
    TOGA_PROFILE_PHASE(prof_tbuddy_t_search);
    for (unsigned j = k; j > order; --j) v = split(v, j);
    if (k > order) note_publication();  // the siblings the splits published
    TOGA_PROFILE_PHASE(prof_tbuddy_t_split);
    return offset_of(v);
  }

  // A climb for `order` that got GROW at every level below `k` and produces nothing: withdraws
  // the unit it promised at each, so that their waiters decide again (out of memory reaches them).
  TOGA_DEVICE void withdraw_climb(unsigned order, unsigned k) const TOGA_NOEXCEPT(P) {
    for (unsigned j = order; j < k; ++j) sem[j].signal(0, 1);
  }

  // The pre-split reserve (design.md §10.5): the tier of blocks of `order`, or presplit_tiers when
  // the heap has none.
  TOGA_DEVICE unsigned presplit_tier(unsigned order) const TOGA_NOEXCEPT(P) {
    if (limit == nullptr) return presplit_tiers;
    for (unsigned t = 0; t < presplit_tiers; ++t)
      if (P::load(&limit->presplit_count[t], relaxed, device_scope) != 0 && P::load(&limit->presplit_order[t], relaxed, device_scope) == order) return t;
    return presplit_tiers;
  }
  // Takes the next block of tier t (the node, ALLOCATED | node_presplit_tag: ours now), or 0 when
  // every block was taken. The block is settled at once: it is the caller's.
  TOGA_DEVICE std::uint64_t presplit_take(unsigned t) const TOGA_NOEXCEPT(P) {
    const std::uint64_t n = P::load(&limit->presplit_count[t], relaxed, device_scope);
    std::uint64_t i = P::load(&limit->presplit_next[t], relaxed, device_scope);
    if (i >= n) return 0;
    if constexpr (Bug == tbuddy_bug::presplit_take_racy) {
      P::store(&limit->presplit_next[t], i + 1, relaxed, device_scope);  // a second taker may have read i too
    } else {
      i = P::fetch_add(&limit->presplit_next[t], std::uint64_t{1}, relaxed, device_scope);
      if (i >= n) return 0;
    }
    P::fetch_add(&limit->presplit_settled[t], std::uint64_t{1}, relaxed, device_scope);
    return P::load(&limit->presplit_first[t], relaxed, device_scope) + i;
  }
  // Whether some block of the reserve is not settled (untaken, or being drained).
  TOGA_DEVICE bool presplit_unsettled() const TOGA_NOEXCEPT(P) {
    if (limit == nullptr) return false;
    for (unsigned t = 0; t < presplit_tiers; ++t)
      if (P::load(&limit->presplit_settled[t], acquire, device_scope) < P::load(&limit->presplit_count[t], relaxed, device_scope)) return true;
    return false;
  }
  // Frees every block of the reserve that no climb has taken into the tree (free_node merges and
  // publishes each), then waits until every block is settled: the drains of other climbs run free
  // nodes too, and a retry before they end could fail while their memory is in flight. Bounded:
  // the reserve has a fixed number of blocks, each settled once, by code that waits for nothing
  // but node locks.
  TOGA_DEVICE void presplit_drain() const TOGA_NOEXCEPT(P) {
    for (unsigned t = 0; t < presplit_tiers; ++t) {
      const std::uint64_t n = P::load(&limit->presplit_count[t], relaxed, device_scope);
      const std::uint64_t first = P::load(&limit->presplit_first[t], relaxed, device_scope);
      for (;;) {
        const std::uint64_t i = P::fetch_add(&limit->presplit_next[t], std::uint64_t{1}, relaxed, device_scope);
        if (i >= n) break;
        free_node(first + i, Bug == tbuddy_bug::presplit_drain_charged);  // never charged (the byte count holds blocks handed out)
        // [HB] release: a drain that sees the count (acquire) sees this block in the tree
        P::fetch_add(&limit->presplit_settled[t], std::uint64_t{1}, release, device_scope);
      }
    }
    for (unsigned t = 0; t < presplit_tiers; ++t) {
      const std::uint64_t n = P::load(&limit->presplit_count[t], relaxed, device_scope);
      for (unsigned attempt = 0; P::load(&limit->presplit_settled[t], acquire, device_scope) < n; ++attempt) P::backoff(attempt);
    }
  }

  // Carves the owned block at `base` (ALLOCATED, height order + j, every node below it BUSY) into
  // a run for the group: lane r's block is leaf r of the run (height `order`); the rest, leaves
  // g.size .. 2^j - 1, is published in buddy form: walking from V towards leaf g.size, every
  // child that lies wholly in the rest becomes AVAILABLE (one node per level at most, so no two
  // AVAILABLE buddies), the child holding the boundary PARTIAL. Every state write holds the lock
  // of the node's parent (the tree's rule [design.md §10.2, T4]; what makes later lockers see the writes),
  // the lanes writing their pairs in parallel; V itself is written last under lock(parent(V)) and
  // propagated, then the leftover units are signalled (after the path is visible, as in split).
  TOGA_DEVICE void carve_run(std::uint64_t base, unsigned order, unsigned j, const coalesced_group<P>& g) const TOGA_NOEXCEPT(P) {
    const std::uint64_t V = leaf_of(base) >> (order + j);
    const unsigned c = Bug == tbuddy_bug::run_boundary_off_by_one ? g.size - 1 : g.size;  // leaves [c, 2^j) are left over
    // lanes 0, 2, 4, ...: this lane's leaf and its right neighbour when that is a lane's too
    if ((g.rank & 1u) == 0 && j > 0) {
      const std::uint64_t leaf = (V << j) + g.rank;
      lock_node(leaf >> 1);
      set_state(leaf, node_allocated);
      if (g.rank + 1 < g.size) set_state(leaf + 1, node_allocated);
      unlock_node(leaf >> 1);
    }
    g.sync();
    if (!g.is_leader()) return;
    // the leftover [c, 2^j) is one AVAILABLE node at each level order + k with bit k of 2^j - c set
    const unsigned published = (1u << j) - c;
    if (published != 0) {
      std::uint64_t x = V;
      unsigned lo = 0;  // x covers leaves [lo, lo + 2^(h - order)) of the run
      for (unsigned h = order + j; h > order; --h) {
        const unsigned half = 1u << (h - order - 1);
        lock_node(x);
        if (c <= lo + half) {  // the right child is wholly left over
          set_state(2 * x + 1, node_available);
          if (c == lo + half) {  // the left child is wholly the lanes'
            unlock_node(x);
            break;
          }
          set_state(2 * x, node_partial);
          unlock_node(x);
          x = 2 * x;
        } else {  // the left child is wholly the lanes'; the boundary is in the right one
          set_state(2 * x + 1, node_partial);
          unlock_node(x);
          x = 2 * x + 1;
          lo += half;
        }
      }
    }
    // V: PARTIAL when something below it is AVAILABLE, else BUSY (all of it handed out)
    const std::uint32_t vs = published ? node_partial : node_busy;
    if (V == 1) {
      lock_node(1);
      set_state(1, vs);
      unlock_node(1);
    } else {
      const std::uint64_t p = V >> 1;
      lock_node(p);
      set_state(V, vs);
      propagate_up(p);
    }
    // deliver what alloc_group promised (2^j - g; the planted off-by-one delivers 2^j - g + 1)
    if constexpr (Bug != tbuddy_bug::run_leftover_unsignalled) settle_levels(order, published, 1);
    if (published != 0) note_publication();
  }

 public:
  //! Whether a failure of `order` is recorded and no node was published since (by a free, a split
  //! or a carved run): then the tree has no block of that order and alloc returns no_block at
  //! once. Two relaxed loads; false for trees without a byte_limit block.
  TOGA_DEVICE bool known_exhausted(unsigned order) const TOGA_NOEXCEPT(P) {
    if (!limit) return false;
    const std::uint64_t at = P::load(&limit->failed_at[order], relaxed, device_scope);
    return at != 0 && at == P::load(&limit->free_generation, relaxed, device_scope) + 1;
  }

  //! Whether a climb for `order` stops at a recorded failure (known_exhausted; the planted bug
  //! climb_stop_ignores_generation stops at any failure ever recorded for the order).
  TOGA_DEVICE bool stop_climb(unsigned order) const TOGA_NOEXCEPT(P) {
    if constexpr (Bug == tbuddy_bug::climb_stop_ignores_generation)
      return limit != nullptr && P::load(&limit->failed_at[order], relaxed, device_scope) != 0;
    return known_exhausted(order);
  }

  //! Frees the block at `off` (handed out by alloc). Merges with free buddies upward.
  TOGA_DEVICE void free(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    std::uint64_t v = leaf_of(off);
    while ((load_state(v) & node_state_mask) != node_allocated) {
      if (v == 1) P::fail("tbuddy::free: no allocated block at this address");
      v >>= 1;
    }
    free_node(v);
  }
  //! Frees the ALLOCATED node v (found by allocated_node). Merges with free buddies upward.
  //! `charged`: the block was counted in the byte limit (false: an adopted granule).
  TOGA_DEVICE void free_node(std::uint64_t v, bool charged = true) const TOGA_NOEXCEPT(P) {
    unsigned n = height(v);
    TOGA_PROFILE_COUNT(prof_tbuddy_free);
    if (limit && charged) uncharge(geom::page_bytes << n);
    if (v == 1) {
      lock_node(1);
      set_state(1, node_available);
      sem[top()].signal(1, 0);
      unlock_node(1);
      if constexpr (Bug != tbuddy_bug::free_skips_generation) note_publication();
      return;
    }
    // The block we hold is announced as a promise at the level we hold it at, moved up with each
    // merge and delivered where the cascade stops: allocators that climb meanwhile wait for it
    // instead of failing while the memory is in our hands (no spurious out-of-memory).
    sem[n].promise(1);
    std::uint64_t p = v >> 1;
    lock_node(p);
    for (;;) {
      const std::uint64_t y = v ^ 1;
      bool merged = false;
      if constexpr (Bug == tbuddy_bug::merge_without_unit) {
        if (load_state(y) == node_available) {
          set_state(y, node_busy);
          merged = true;
        }
      } else if (load_state(y) == node_available) {
        if (sem[n].try_wait(1)) {
          // y cannot change while we hold lock(p); with its unit taken it is ours. (A failed
          // try_wait: every unit of the level is held by a searcher, one of which will claim y.)
          // [E7: testing y first spares the level's word two RMWs when y is not free.]
          set_state(y, node_busy);
          merged = true;
        } else {
          ghost_add<P>(ghost_kind::merge_skipped, sem, 1);  // a pair that may stay unmerged (T6)
        }
      }
      if (merged) {
        TOGA_PROFILE_COUNT(prof_tbuddy_merge);
        set_state(v, node_busy);  // v and y are covered; we own p (order n + 1)
        sem[n + 1].promise(1);    // move our promise up (announce first, then withdraw below)
        sem[n].signal(0, 1);
        if (p == 1) {
          set_state(1, node_available);
          sem[n + 1].signal(1, 1);
          unlock_node(1);
          if constexpr (Bug != tbuddy_bug::free_skips_generation) note_publication();
          return;
        }
        const std::uint64_t g = p >> 1;
        lock_node(g);
        unlock_node(p);
        v = p;
        p = g;
        ++n;
        continue;  // state[v] stays PARTIAL (stale) until written below, under lock(g)
      }
      set_state(v, node_available);
      sem[n].signal(1, 1);  // deliver the promise, while lock(p) is held (design.md §10.3)
      propagate_up(p);
      if constexpr (Bug != tbuddy_bug::free_skips_generation) note_publication();
      return;
    }
  }

  //! The node of the ALLOCATED block containing leaf `off` (walking up), or 0 if none; racy,
  //! exact while the block is live. Used by checked frees and the heap walk.
  TOGA_DEVICE std::uint64_t allocated_node(std::uint64_t off) const TOGA_NOEXCEPT(P) {
    for (std::uint64_t v = leaf_of(off); v != 0; v >>= 1)
      if ((load_state(v) & node_state_mask) == node_allocated) return v;
    return 0;
  }
  //! Tags the owned block at `off` of the given order as a UAlloc chunk.
  TOGA_DEVICE void tag_chunk(std::uint64_t off, unsigned order) const TOGA_NOEXCEPT(P) { tag_block(off, order, node_chunk_tag); }
  //! Tags the owned block at `off` of the given order (node_chunk_tag or node_superbin_tag).
  TOGA_DEVICE void tag_block(std::uint64_t off, unsigned order, std::uint32_t tag) const TOGA_NOEXCEPT(P) {
    set_allocated(leaf_of(off) >> order, tag);
  }

  //! Racy state read (masking nothing: states and locks are separate words).
  TOGA_DEVICE std::uint32_t load_state(std::uint64_t v) const TOGA_NOEXCEPT(P) {
    return P::load(&state[v], relaxed, device_scope);
  }

 private:
  // After the last store of an operation that made a node AVAILABLE (a free's delivery, the
  // siblings a split or a carved run publishes): [HB] release, so that a climb which reads this
  // count (acquire) before it starts sees the node.
  TOGA_DEVICE void note_publication() const TOGA_NOEXCEPT(P) {
    if (limit) P::fetch_add(&limit->free_generation, std::uint64_t{1}, release, device_scope);
  }
  // A climb for `order` found the tree empty; `gen` is free_generation as read before it began.
  // Larger orders are exhausted too (a larger block would have served); smaller ones are not.
  // A record only moves forward (fetch_max, after a load that skips the RMW where the record is
  // already as new): a climb that began long ago (a lane that waited on a promise, then climbed)
  // must not replace a current record with its stale one, or every climber after it climbs to
  // the root again (design.md §13.1).
  TOGA_DEVICE void record_exhausted(unsigned order, std::uint64_t gen) const TOGA_NOEXCEPT(P) {
    const unsigned from = Bug == tbuddy_bug::failure_covers_smaller ? 0u : order;
    for (unsigned k = from; k <= top(); ++k) {
      if constexpr (Bug == tbuddy_bug::failure_record_overwritten) {
        P::store(&limit->failed_at[k], gen + 1, relaxed, device_scope);
      } else {
        if (P::load(&limit->failed_at[k], relaxed, device_scope) < gen + 1) P::fetch_max(&limit->failed_at[k], gen + 1, relaxed, device_scope);
      }
    }
  }
  // Counts a block of `bytes` as handed out; false (counting nothing) when the byte limit
  // would be exceeded. Relaxed: statistics and a limit order nothing else.
  TOGA_DEVICE bool charge(std::uint64_t bytes, std::uint64_t& total) const TOGA_NOEXCEPT(P) {
    const std::uint64_t lim = P::load(&limit->limit, relaxed, device_scope);
    const std::uint64_t before = P::fetch_add(&limit->reserved, bytes, relaxed, device_scope);
    if (lim != 0 && before + bytes > lim) {
      P::fetch_sub(&limit->reserved, bytes, relaxed, device_scope);
      return false;
    }
    total = before + bytes;
    return true;
  }
  TOGA_DEVICE void uncharge(std::uint64_t bytes) const TOGA_NOEXCEPT(P) {
    P::fetch_sub(&limit->reserved, bytes, relaxed, device_scope);
  }
  // The high-water mark, after a success only (a request that fails charged its bytes for a
  // moment); concurrent requests' charges may be in `charged`, so it is clipped to the heap size.
  TOGA_DEVICE void note_high_water(std::uint64_t charged) const TOGA_NOEXCEPT(P) {
    P::fetch_max(&limit->reserved_high, charged < heap_bytes() ? charged : heap_bytes(), relaxed, device_scope);
  }
  // signal(n, 1) at level order + k for every bit k of `levels`: delivers (n = 1) or withdraws
  // (n = 0) the one-unit promises a run's leftover made there.
  TOGA_DEVICE void settle_levels(unsigned order, unsigned levels, unsigned n) const TOGA_NOEXCEPT(P) {
    for (unsigned k = 0; levels >> k; ++k)
      if ((levels >> k) & 1u) sem[order + k].signal(n, 1);
  }
  TOGA_DEVICE void set_state(std::uint64_t v, std::uint32_t s) const TOGA_NOEXCEPT(P) {
    P::store(&state[v], s, relaxed, device_scope);
  }
  // Writes ALLOCATED | tag to the owned node v, under lock(parent(v)) (the root is its own parent).
  TOGA_DEVICE void set_allocated(std::uint64_t v, std::uint32_t tag) const TOGA_NOEXCEPT(P) {
    const std::uint64_t p = v == 1 ? 1 : v >> 1;
    lock_node(p);
    set_state(v, node_allocated | tag);
    unlock_node(p);
  }
  TOGA_DEVICE void lock_node(std::uint64_t v) const TOGA_NOEXCEPT(P) {
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t expected = 0;
      if (P::compare_exchange(&lock[v], expected, 1u, acquire, device_scope)) return;
      TOGA_PROFILE_COUNT(prof_tbuddy_lock_spin);
      P::backoff(attempt);
    }
  }
  TOGA_DEVICE void unlock_node(std::uint64_t v) const TOGA_NOEXCEPT(P) { P::store(&lock[v], 0u, release, device_scope); }

  TOGA_HOST_DEVICE static std::uint32_t derive(std::uint32_t a, std::uint32_t b) {
    return (a == node_available || a == node_partial || b == node_available || b == node_partial) ? node_partial : node_busy;
  }
  // Caller holds lock(p); p is split. Recomputes p and its ancestors; releases every lock.
  TOGA_DEVICE void propagate_up(std::uint64_t p) const TOGA_NOEXCEPT(P) {
    for (;;) {
      const std::uint32_t n = derive(load_state(2 * p), load_state(2 * p + 1));
      if (n == load_state(p)) {
        unlock_node(p);
        return;
      }
      if (p == 1) {
        set_state(1, n);
        unlock_node(1);
        return;
      }
      const std::uint64_t g = p >> 1;
      TOGA_PROFILE_COUNT(prof_tbuddy_propagate);
      lock_node(g);
      set_state(p, n);
      unlock_node(p);
      p = g;
    }
  }
  TOGA_DEVICE bool try_claim(std::uint64_t c) const TOGA_NOEXCEPT(P) {
    const std::uint64_t p = c == 1 ? 1 : c >> 1;
    if constexpr (Bug == tbuddy_bug::claim_without_lock) {
      if (load_state(c) != node_available) return false;
      set_state(c, node_allocated);  // no lock: a second claimer may have passed the same check
      lock_node(p);
      if (c == 1) unlock_node(1);
      else propagate_up(p);
      return true;
    }
    lock_node(p);
    if (load_state(c) != node_available) {
      TOGA_PROFILE_COUNT(prof_tbuddy_claim_lost);
      unlock_node(p);
      return false;
    }
    set_state(c, node_allocated);
    if (c == 1) unlock_node(1);
    else propagate_up(p);
    return true;
  }
  // Stage 2: we hold a unit of level k, so an AVAILABLE node of height k exists or will appear.
  // Depth-first from the root, child order scattered by the thread (ScatterAlloc's idea, P §4.1).
  TOGA_DEVICE std::uint64_t search_and_claim(unsigned k) const TOGA_NOEXCEPT(P) {
    const std::uint64_t salt = scatter_salt();
    for (unsigned attempt = 0;; ++attempt) {
      std::uint64_t v = 1;
      for (;;) {
        const unsigned h = height(v);
        const std::uint32_t s = load_state(v);
        TOGA_PROFILE_COUNT(prof_tbuddy_visit);
        bool descend = false;
        if (h == k) {
          if (s == node_available && try_claim(v)) return v;
        } else if (s == node_partial) {
          descend = true;
        }
        if (descend) {
          v = 2 * v + first_child_bit(salt, depth(v));
          continue;
        }
        // next in DFS order: the second child of the nearest ancestor whose first we came from
        bool moved = false;
        while (v != 1) {
          const std::uint64_t parent = v >> 1;
          if ((v & 1) == first_child_bit(salt, depth(parent))) {
            v ^= 1;
            moved = true;
            break;
          }
          v = parent;
        }
        if (!moved) break;  // searched everything: restart after a backoff
      }
      TOGA_PROFILE_COUNT(prof_tbuddy_restart);
      P::backoff(attempt);
    }
  }
  TOGA_DEVICE static std::uint64_t scatter_salt() TOGA_NOEXCEPT(P) {
    std::uint64_t x = (std::uint64_t{P::block_id()} << 32) ^ (std::uint64_t{P::thread_id()} * 0x9e3779b97f4a7c15ull);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
  }
  TOGA_DEVICE static std::uint64_t first_child_bit(std::uint64_t salt, unsigned d) { return (salt >> (d & 63)) & 1u; }

  // Split v (owned, ALLOCATED, height h >= 1): keep the left half, publish the right half and
  // pay the promise at level h-1 (made when the climb got GROW there).
  TOGA_DEVICE std::uint64_t split(std::uint64_t v, unsigned h) const TOGA_NOEXCEPT(P) {
    TOGA_PROFILE_COUNT(prof_tbuddy_split);
    lock_node(v);
    set_state(2 * v, node_allocated);
    set_state(2 * v + 1, node_available);
    if (v == 1) {
      set_state(1, node_partial);
      unlock_node(1);
    } else {
      const std::uint64_t p = v >> 1;
      lock_node(p);
      set_state(v, node_partial);
      unlock_node(v);
      propagate_up(p);
    }
    sem[h - 1].signal(1, 1);  // after the path is PARTIAL, so that searchers find it
    return 2 * v;
  }
};

}  // namespace toga
