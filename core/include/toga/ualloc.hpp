//! @file toga/ualloc.hpp
//! UAlloc: the fine-grained allocator for 16 B .. 1 KiB (Gelado & Garland, PPoPP'19, §4.2;
//! design.md §7-§9, with the fast-path elements E1-E5, E8, E9, E11, E12 of design.md §2.1), and the
//! same machinery over superbins for 64 B .. 64 KiB (E6; `ualloc<..., superbin_geometry>`: a bin
//! is one TBuddy block of 2^sb_shift bytes, its header in a side table; design.md §11).
//!
//! One arena per SM. Each arena has a list of chunks (512 KiB from TBuddy) with a bulk semaphore
//! counting free bins, and per size class up to 32 *pinned* bins (pin slots, lock-free) plus an
//! inbox (a lock-free stack) of bins that frees refilled, guarded by an RCU domain, with a bulk
//! semaphore counting free slots. A warp starts at pin slot `warp_slot() % pins` (its slot among
//! the SM's resident warps), so that the warps of an SM that allocate at once reserve in many
//! bins, not one, and each slot's bin serves about the same number of warps per launch.
//!
//! Allocation is per group (E1): the lanes of a warp that ask for one class in one arena at the
//! same time (a group of one is legal). The group leader does the shared-word work; results reach
//! the lanes by shuffles. The fast path, per group, in order (the cost model of design.md §2.1):
//!   1. `slot_sem.try_take(T)`: one speculative fetch_sub of the group's T units (E2);
//!   2. `rcu.read_lock()`: an acquire fetch_add on the reader counter and an acquire re-load of
//!      the epoch, no fence (E4; design.md §5.2);
//!   3. load its pin slot (acquire) and reserve T slots with one fetch_sub on the bin's free
//!      count, keeping clamp(old, 0, T) and undoing the rest (E3);
//!   4. claim T bits of one bitmap word with one fetch_or (acquire), starting at the reservation's
//!      ordinal (exact in a fresh bin), and hand them to the lanes in rank order (superbins: the
//!      lanes load a window of the bitmap meanwhile, and bits the word cannot make up are claimed
//!      in a word of the window that showed room, design.md §8.3);
//!   5. `rcu.read_unlock()` (release).
//! Everything else (a failed take, a short reservation, lost bits, an exhausted pin, GROW, the
//! out-of-memory fallback) runs in one non-inlined slow path that the whole group enters (E10).
//! Free is per group too (E9): lanes freeing slots of one bin clear their bits with one release
//! fetch_and per bitmap word, and the leader raises the free count, signals and tests retirement
//! once, inside one read-side section.
//!
//! Bins: a bin's free count may go transiently negative (a clamped reservation not yet undone);
//! a retired bin's count is bin_dead = -2^30, far from wrap-around, so transient decrements of a
//! retired bin stay negative. A bin is *findable* when it is pinned or queued in the inbox (a
//! lock-free stack per class list); both change without a lock (CAS), readers only load. An
//! exhausted pinned bin simply stays pinned until a new bin or a taker displaces it. The RMW that
//! takes a count from <= 0 to > 0 (a free or an undo) makes the bin findable if it is not
//! (`make_findable`: an empty pin slot, else the inbox). A group whose slot scan finds no free
//! slot *takes* the inbox (exchange) and moves its bins into empty or exhausted slots, pushing
//! the rest back in one CAS. Every writer that takes a bin out of a slot or lets go of an inbox
//! bin re-reads its count with an acq_rel RMW afterwards and keeps it findable if it has free
//! slots; `make_findable` re-reads with an acq_rel RMW before it looks: of two such RMWs on one
//! count, the later one sees the other side's change, so no bin with free slots is lost.
//! Invariants (ghost-checked in the simulator):
//!   U1' popcount(bitmap & valid) + free + transit == capacity for a live bin, where transit =
//!       slots reserved and not yet claimed + excess not yet undone + bits freed not yet counted;
//!   U2' at quiescence free > 0 => pinned or queued; a DEAD bin is neither (a bin may sit in two
//!       slots, or in a slot and the inbox: harmless, counted once).
//! Hysteresis (E11): empty bins of classes with >= 32 slots stay findable and a pinned bin is
//! never retired by a free; an arena keeps one entirely free chunk. Bins of the classes with fewer
//! slots (128 B - 1 KiB) that a group frees whole are retired at once, without ever publishing
//! their slots (they were full, so unfindable or an exhausted pin). `reclaim()` (run before an
//! allocation returns nullptr, and by the host's trim) retires every empty bin and returns cached
//! chunks, so after a trim the heap is as new (T7).
//!
//! All shared fields (headers inside the heap, arena metadata) are touched only through Platform
//! atomics. Offsets are bytes from the heap base; 0 means "none" (no bin starts there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "toga/bits.hpp"
#include "toga/bulk_semaphore.hpp"
#include "toga/config.hpp"
#include "toga/fault.hpp"
#include "toga/geometry.hpp"
#include "toga/ghost.hpp"
#include "toga/group.hpp"
#include "toga/growth_service.hpp"
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
  no_unlink_on_exhaustion,    //!< a taker drops an exhausted inbox bin without re-reading its count afterwards
  no_relink_on_refill,        //!< a free that refills an exhausted bin does not re-link it
  // fast path (design.md §20.3)
  claim_without_reservation,  //!< the fast path claims bits without reserving them in the free count
  two_lanes_one_bit,          //!< lanes take claimed bits off by one: two lanes get the same slot
  pin_swap_drops_bin,         //!< a bin displaced from a pin slot is dropped even if it has free slots
  retire_keeps_pin,           //!< retiring a pinned bin leaves it pinned
  dead_near_wrap,             //!< a retired bin's count is INT32_MIN: a transient decrement wraps positive
  pin_before_init,            //!< a GROW pins its bin before writing the header
  or_drops_lane,              //!< the free path's OR reduction drops the highest lane of a word group
  free_signals_short,         //!< a group free signals k - 1 units
  undo_whole_reservation,     //!< a short reservation undoes all it asked for, not only the excess
  // memory order and warp ordering of the slot hand-over (weak memory: H1 data race on the block)
  relaxed_slot_free,          //!< the free's fetch_and on the bitmap is relaxed, not release
  relaxed_slot_claim,         //!< the claim's fetch_or on the bitmap is relaxed, not acquire
  free_without_warp_barrier,  //!< a group free has no __syncwarp at all, before or after its bitmap RMWs
  // superbins (E6, design.md §11)
  superbin_tag_not_set,       //!< a GROW makes a superbin without tagging its TBuddy node: frees of its slots go to TBuddy
  superbin_slot_past_end,     //!< a superbin counts one slot more than it holds: the last one lies past its end
  superbin_returned_live,     //!< reclaim returns a superbin to TBuddy when it is not entirely free
  superbin_free_to_tbuddy,    //!< a free of a 4 KiB-aligned superbin slot is routed to TBuddy (the tag is not looked at)
  reclaim_gate_left_closed,   //!< a reclaim ends without opening the gate: the next lane that needs one waits forever
  fallback_ignores_alignment, //!< a 64 B .. 1 KiB request that asked for more alignment than UAlloc's slot gives falls back to a UAlloc slot
  superbin_arena_ignores_sharing, //!< allocate_super picks the superbin arena by sm_id % (chunk arenas), not % sb_arenas
  reclaim_peer_arenas_ignored,    //!< reclaim walks the other geometry's arenas with this geometry's count (not peer_arenas)
  steal_searches_own_arena,       //!< a superbin group takes another arena's units but searches its own arena's bins for them
  resident_views_unpublished,     //!< init_after_zero leaves the views' resident copies unwritten (out-of-line members run on zeros)
  find_without_warp_barrier,      //!< find_reservation's leader uses a bin another lane acquired from a pin, without the __syncwarp
  // growable heaps (issue 14)
  free_into_unmapped,             //!< a free does not look at the granule's unmapped tag: it touches memory that is not there
  trim_without_reclaim,           //!< a trim withdraws granules without reclaiming UAlloc's empty bins, chunks and superbins first
  // failing fast (design.md §13)
  empty_bin_unnoted,              //!< a free that empties a bin does not count a reclaim change: a clean record outlives it
  clean_read_late,                //!< a walk reads the change count after walking, not before: a change during the walk is lost
  // 64 B and 128 B in superbins (design.md §11.6)
  superbin_route_coarse,          //!< a free looks at the superbin tag only on 256 B boundaries (as before 64 B joined): a 64 B or 128 B slot off them is freed as a chunk slot
  // the shared reclaim walk (design.md §9.4)
  walk_claim_any_tag,             //!< a lane walks the item its claim got even when the cursor still has the last walk's tag (not yet reset)
  walk_ends_early,                //!< the lane that counts the next-to-last item ends the walk: the gate opens while the last one is walked
  walk_flags_after_count,         //!< a lane counts its item before it adds what the item found: the walk's result can miss it
  grow_bins_without_warp_barrier, //!< a chunk-class GROW's producers init and pin the leader's bins without the __syncwarp after the broadcast
  find_before_section_barrier,    //!< a group's stage 2 after the CAS loop or a steal: members read pin slots without the __syncwarp after the leader's read_lock
  // issue 34's yardstick: windows that the scenarios' default shapes do not reach (simulator.md §18.6)
  leave_findable_skips_last_slot, //!< a retired bin leaves every pin slot but the last: the last slot keeps it after it is reused
  claim_hint_wraps_late,          //!< claim_bits wraps its hint to 0 only past the capacity: a hint equal to it reads the word after the class's
  reclaim_inbox_drops_partial,    //!< reclaim's inbox pass drops bins with free slots (neither pinned nor queued) instead of making them findable
  grow_batches_floor,             //!< a GROW for a group larger than a bin makes floor(t / cap) bins, not the ceiling
  set_slot_dead_check_relaxed,    //!< set_slot checks for a retirement that raced with its CAS by a relaxed load, not the acq_rel re-read
  alignment_limit_doubled,        //!< allocate(bytes, alignment) lets UAlloc's slots (128 B aligned) serve alignments up to 256 B
  push_back_marks_before_link,    //!< take_inbox marks a pushed-back bin queued before reading its link (a taker may relink it meanwhile)
  free_or_over_group,             //!< a group free ORs the lanes' bits over the whole group, not per word: a word leader clears other words' positions
  hold_queued_no_wait,            //!< a taker holds a bin another pusher or taker still holds (state 2) instead of waiting it out
  chunk_signal_after_unlock,      //!< release_bin signals the chunk's freed bin after releasing the chunk mutex
  super_fallback_bound_doubled,   //!< a superbin request that gets no superbin falls back to UAlloc's classes up to 2 KiB (there are none above 1 KiB)
  findable_unnoted,               //!< make_findable does not count a reclaim change: a refilled bin that empties later may outlive a clean record
  grow_pins_from_two_left,        //!< a GROW pins its new bin only when at least two slots are left: a bin with one free slot stays unfindable
  undo_crossing_from_zero_missed, //!< an undo of a reservation makes the bin findable only from a negative count, not from exactly 0
  retire_takes_one_unit_short,    //!< a retirement takes cap - 1 of the bin's units from the semaphore: one unit is left for slots that are gone
  claim_stays_on_full_word,       //!< claim_bits moves its hint to the last bit of a full word instead of the next word
  free_cold_no_reread,            //!< a free of a class whose empty bins are retired retires only when its own count made the bin empty (no re-read)
  init_bin_keeps_queued,          //!< init_bin leaves the inbox state of the bin's previous life (3, retired): the new bin can never be queued
  retire_queued_deferred_twice,   //!< a retirer that finds the bin queued (state 1) defers it itself as well as leaving it to the taker
  steal_locks_old_arena,          //!< a group that stole units enters the read-side section of its own arena's list, not the one it searches
  overproduced_bin_unnoted,       //!< a GROW that pins an over-produced (empty) bin does not count a reclaim change
  more_claims_from_zero,          //!< the fast path's second claim (bits of its guess were taken) asks for t more bits, not t minus those it got
  placement_race_pushed_back,     //!< a taker whose pin CAS failed while somebody queued the bin keeps it for its push-back too (queued twice)
  slow_take_not_flushed,          //!< the slow path drops take_inbox's "deferred" result: bins retired while queued wait in RCU for another flush
  inbox_skip_unrecorded,          //!< reclaim's inbox pass does not count an empty bin it could not retire as skipped: the walk may record the heap clean
  chunk_skip_unrecorded,          //!< reclaim's chunk pass does not count a free chunk whose units are held as skipped: the walk may record the heap clean
  owned_scan_ends_true,           //!< owned()'s batched scan answers yes when no slot holds the bin: a refilled bin is never made findable
  open_slots_lost_no_enqueue,     //!< make_findable's pin_insert_open drops the bin when every slot owned() saw open was taken meanwhile (no inbox)
  steal_grew_per_lane,            //!< steal_units: each lane reads the arena's `grew` flag itself, so lanes that disagree leave the collective steal apart
  undo_to_empty_unnoted,          //!< an undone reservation that leaves its bin with every slot free counts no reclaim change: a clean record outlives the empty bin
  free_barrier_per_word,          //!< the group free's barrier before 68c8d1d: a __syncwarp over one bitmap word's lanes (none in a checked build): members of other words are not ordered before the leader's read-side section, so a retired bin's reuse may race with them
  free_no_barrier_after_rmw,      //!< the group free has no __syncwarp after its bitmap RMWs: the other words' fetch_and reach the leader's count by value only (equivalent in the simulator, whose RMWs read the newest value)
  free_hint_trusted,              //!< the fast path takes the bits at the free hint as its own without looking at what its fetch_or found: another group's claim of the same run is handed out twice
  fresh_extra_signalled_as_promised,  //!< a GROW's extra bin of a fresh chunk settles a promise (E -= cap) that was never made for it: another producer's promise is taken away from its waiters
  fresh_extra_unqueued,           //!< a GROW's extra bin that finds no empty pin slot is not queued: its units are signalled for a bin nobody can find
  scan_claim_trusted,             //!< the fast path takes the zero bits a lane saw in its scan as its own without looking at what its fetch_or found: two groups that saw one word free get the same slots
  inline_super_skips_fallbacks,   //!< allocate(bytes)'s inline superbin path returns nullptr when its group found no superbin, without the fallbacks (UAlloc's class, a TBuddy block) that the out-of-line path tries
  ahead_extra_unpinned,           //!< a superbin made ahead of demand is initialised and signalled but neither pinned nor queued: its units are for a bin nobody can find
  ahead_failed_take_signalled,    //!< a lane whose superbin ahead of demand could not be had (TBuddy empty) signals its units anyway
  refuse_despite_promises,        //!< the refusal of a GROW known to fail is asked before the CAS loop, not where it would promise: a request that promised units cover gets nullptr
  refuse_keeps_promise,           //!< a GROW refused after its promise was made keeps the promise: waiters wait for units nobody makes (E never returns to 0)
  refuse_ignores_chunk_bins,      //!< a chunk-class GROW is refused from TBuddy's record alone, while the arena's chunks still have free bins
  at_once_ignores_promises,       //!< refused_at_once judges C alone (not C + E - R): a group is sent to the scan while promised units would serve it
  at_once_unconfirmed,            //!< refused_at_once's refusal is not confirmed on the unchanged word: a promise made after the snapshot is missed
  cas_refusal_unconfirmed,        //!< the CAS loop's refusal is not confirmed on the unchanged word: a promise made after the snapshot is missed
  // the walk's batched loads (reclaim_arena)
  walk_batch_retries_twice,       //!< a bin in two pin slots of one batch of the walk is tried twice: the second try takes cap units of a retired bin's class before its CAS fails
  walk_pins_unacquired,           //!< the walk's batched pin loads have no acquire fence before it reads the bins' counts and retires them
  // the walk's per-class filter on the arena's bin counts (reclaim_arena)
  walk_filter_counted_late,       //!< GROW counts its bins in stats.bins after pinning them (the order before the filter): a walk that skips a class it read as 0 misses a bin emptied meanwhile and records the heap clean
  walk_filter_skips_chunks,       //!< an arena whose every class count reads 0 is skipped whole, its cached free chunks too
  fallback_group_overtakes,       //!< the fallback's take in another arena: every failed lane counts itself served when the leader took any units
  fallback_group_rank_off_by_one, //!< the fallback's take in another arena: one lane more than the units taken runs stage 2 there
  fallback_skips_own_arena,       //!< the fallback scans only the other arenas: a group larger than its own arena's units fails every lane while they stay
  fallback_never_borrows,         //!< chunk classes: the fallback takes no other arena's free chunk bins: lanes fail while bins of other arenas' chunks are free
  borrowed_bin_to_bin_arena,      //!< release_bin returns a bin to its class list's arena's chunk list, not its chunk's arena's
  borrowed_chunk_cached,          //!< a chunk emptied by a borrowed bin's release stays cached in its arena (a walk may miss it)
};

//! Header of a bin with W bitmap words: a regular bin's is its first 128 B (P Fig. 3, W = 8); a
//! superbin's lies in the side table (W = 128: up to 8,192 slots). The fields come first, the
//! bitmap last, so that a superbin's side-table entry holds only the words its class can use
//! (geom::sb_header_stride): the words at and above (capacity + 63) / 64 are never touched.
template <unsigned W>
struct bin_header_w {
  std::uint32_t free;      //!< slots not reserved (int32; transiently negative); bin_dead once retired
  std::uint32_t capacity;
  std::uint32_t class_id;
  std::uint32_t arena;
  std::uint32_t home;      //!< pin slot + 1 where it was last pinned (a hint: pins[home - 1] == bin proves it)
  std::uint32_t queued;    //!< inbox state: 0 not queued, 2 held by a pusher or taker, 1 queued, 3 retired
  std::uint32_t free_hint; //!< first slot of the last group free's run (no_free_hint: none since init_bin); a guess for the fast path's claim
  std::uint32_t pad3;
  std::uint64_t pad2;
  std::uint64_t rcu_next;    //!< deferred-reclamation link
  std::uint64_t inbox_next;  //!< inbox link
  std::uint64_t pad1;
  std::uint64_t bitmap[W];  //!< 1 = slot in use or beyond capacity
};
using bin_header = bin_header_w<geom::bitmap_words>;
using superbin_header = bin_header_w<geom::sb_bitmap_words>;
static_assert(sizeof(bin_header) == geom::bin_header_bytes && offsetof(superbin_header, bitmap) == geom::sb_header_fixed_bytes &&
              sizeof(superbin_header) == geom::sb_header_stride(geom::sb_max_shift));

//! UAlloc's two geometries. Chunks: 4 KiB bins of 16 B .. 1 KiB slots inside 512 KiB chunks
//! (design.md §7.2). Superbins (E6, design.md §11): one TBuddy block per bin, 64 B .. 64 KiB slots,
//! headers in a side table. The same machinery (slot semaphore, pins, inbox, RCU, group
//! reservation, word claims, aggregated free, hysteresis, fallback) runs on both.
struct chunk_geometry {
  static constexpr bool superbins = false;
  static constexpr unsigned num_classes = geom::num_classes;
  static constexpr unsigned bitmap_words = geom::bitmap_words;
  using header = bin_header;
};
struct superbin_geometry {
  static constexpr bool superbins = true;
  static constexpr unsigned num_classes = geom::sb_max_classes;
  static constexpr unsigned bitmap_words = geom::sb_bitmap_words;
  using header = superbin_header;
};
//! Free count of a retired bin: -2^30 as int32, far from both wrap-arounds, so that the transient
//! fetch_sub of a reader that still holds the bin (at most one per lane in flight) stays negative.
inline constexpr std::uint32_t bin_dead = 0xc0000000u;
//! bin_header_w::free_hint of a bin no group has freed into since init_bin.
inline constexpr std::uint32_t no_free_hint = 0xffffffffu;

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

//! UAlloc's per-SM semaphores (slots of a class, bins of an arena): the fast path (E2).
template <class P>
using slot_semaphore = fast_arena_semaphore<P>;

//! Pin slots per (arena, class), at most: the warps of an SM that allocate one class at once
//! spread over this many bins (a 16 B bin serves 8 warps of 32 lanes, a 64 B bin 2). The number
//! used is a property of the heap (heap_layout::pins): the GPU heap uses all 32, the simulator's
//! small heaps fewer.
inline constexpr unsigned max_pin_slots = 32;

//! Per (arena, class): the pinned bins, the bin list and their synchronisation. 384 B: the
//! semaphore (written by every allocating warp), the pin slots (read by every warp) and the RCU
//! reader counters (written by every warp) sit in different 64 B sectors.
template <class P>
struct class_list {
  slot_semaphore<P> slot_sem;  //!< units: free slots of findable (pinned or queued) bins
  std::uint64_t inbox;         //!< lock-free stack of bins with free slots waiting for a pin slot
  //! Superbin classes: nonzero once a group of this arena went to GROW for the class (set by its
  //! leader, never cleared but by the heap's initialisation): until then the arena does not steal
  //! (design.md §11.8, the first superbin). A hint; relaxed.
  std::uint64_t grew;
  std::uint64_t pad1[5];
  std::uint64_t pins[max_pin_slots];  //!< bins served first (0: none); changed by CAS
  rcu_domain<P> rcu;
  std::uint64_t pad2[4];
};

//! Per-class entries of arena_stats::bins: UAlloc's classes or the superbin classes, whichever are more.
inline constexpr unsigned stats_classes = geom::num_classes > geom::sb_max_classes ? geom::num_classes : geom::sb_max_classes;

//! Statistics kept per arena (summed by the host). Signed quantities are two's complement in
//! 64-bit words: a block freed on another SM makes one arena's count negative, the sum is exact.
//! Updated with relaxed RMWs whose results are unused (fire-and-forget reductions on CUDA), one
//! per warp group; the peak with fetch_max (no CAS loop: E8, design.md §14.1).
struct arena_stats {
  std::uint64_t used_bytes;      //!< rounded bytes of live UAlloc and TBuddy blocks (signed)
  std::uint64_t peak_used_bytes; //!< highest positive used_bytes this arena saw
  std::uint64_t allocations;
  std::uint64_t deallocations;
  std::uint64_t failed;          //!< allocations that returned nullptr: heap exhausted
  std::uint64_t failed_limit;    //!< ... because the byte limit would have been exceeded
  std::uint64_t failed_too_large;//!< ... because the request exceeds the heap
  std::uint64_t grows;           //!< bins made (GROW), including over-production (E2, design.md §3.4)
  //! bins per class not yet released: UAlloc's 7 classes in a chunk arena, up to 11 superbin
  //! classes (64 B .. 64 KiB) in a superbin arena. More than a statistic since 2026-12-01: a
  //! reclaim walk skips a class whose count reads 0 (ualloc::reclaim_arena), so GROW counts a bin
  //! before the bin can be found and release_bin uncounts it after it left its list; the count
  //! never goes below 0, and the host must never reset or rebase it (as reset_high_water does
  //! used_bytes) while bins are held. (Until 2026-11-25 the array had 7 entries and the 32 and 64
  //! KiB superbin classes counted into `chunks` and the padding: undefined behaviour, found by
  //! g++'s -Waggressive-loop-optimizations in collect_statistics.)
  std::uint64_t bins[stats_classes];
  std::uint64_t chunks;          //!< chunks held (signed)
  std::uint64_t pad[32 - 9 - stats_classes];
};
static_assert(sizeof(arena_stats) == 256);

//! Per SM and geometry: the chunk list (chunk geometry only) and the class lists.
template <class P, class G = chunk_geometry>
struct arena {
  std::uint32_t chunk_mtx;
  std::uint32_t pad0;
  std::uint64_t chunk_head;  //!< first listed chunk's offset + 1, or 0
  slot_semaphore<P> chunk_sem;  //!< units: free usable bins of listed chunks
  std::uint64_t pad1[13];
  class_list<P> lists[G::num_classes];
  arena_stats stats;
};

//! What the fast path hands to the slow path (E10, design.md §8.8): the group's progress.
struct alloc_progress {
  std::uint64_t bin;       //!< bin the leader holds a reservation in (0: none)
  std::uint32_t reserved;  //!< units reserved in `bin`, not yet claimed (leader's view)
  std::uint32_t units;     //!< semaphore units held, not yet reserved in any bin
  std::uint32_t served;    //!< lanes of rank < served have their slot
  std::uint32_t token;     //!< RCU token of the leader's read-side section
  std::uint32_t hint;      //!< bitmap bit where the next claim starts looking
  std::uint32_t stage;     //!< 0: nothing taken yet; 1: units held (inside the read-side section)
  std::uint32_t deferred;  //!< the leader deferred retired bins to RCU: flush after the section
};

//! UAlloc over a heap whose chunks come from `buddy`.
//! UAlloc over a heap whose chunks (or superbins, G = superbin_geometry) come from `buddy`.
//! Bins are named by heap offsets: a regular bin by its own offset, a superbin by its block's
//! offset + 4 KiB (never 0, low 12 bits clear, like a bin's).
template <class P, ualloc_bug Bug = ualloc_bug::none, tbuddy_bug TB = tbuddy_bug::none, class G = chunk_geometry>
  requires Platform<P>
struct ualloc {
  using header_t = typename G::header;
  char* base;
  tbuddy<P, TB> buddy;
  arena<P, G>* arenas;
  unsigned num_arenas;
  unsigned num_pins;  //!< pin slots used per (arena, class), 1 .. max_pin_slots (heap_layout::pins)
  char* table = nullptr;  //!< superbins: the header side table, one entry (geom::sb_header_stride(sb_shift) B) per 2^sb_shift bytes of heap
  unsigned sb_shift = 0;  //!< superbins: log2 of a superbin's bytes
  unsigned peer_arenas = 0;  //!< arenas of the other geometry (`peer`): the superbin arenas may be fewer (heap_layout::sb_arenas)
  //! The other geometry's arenas (arena<P, other>*; nullptr: none): reclaim() gives back what
  //! both hold, so that memory cached by one geometry (empty bins, chunks, superbins) serves the
  //! other before a nullptr (E12).
  void* peer = nullptr;
  using other_geometry = std::conditional_t<G::superbins, chunk_geometry, superbin_geometry>;

  //! Runs f(view) on a copy of this view made here: the way from inlined code into an
  //! out-of-line member (allocate_slow, free_cold), so that no kernel parameter's address is
  //! taken (nvcc would copy the whole parameter to local memory at kernel entry, in every thread:
  //! design.md §8.8). The copy is local memory made only on these paths; the allocator's
  //! global-memory copy (allocator::resident) is not used here because the slow paths reread the
  //! view after every acquire, which on the GPU invalidates L1's global lines, not local ones.
  //! (TOGA_RESIDENT_VIEW = 0: on this view, except where `Always`: the free path, which copies in
  //! every build, design.md §8.8.)
  template <bool Always = false, class F>
  TOGA_DEVICE TOGA_FORCEINLINE auto out_of_line(F&& f) const TOGA_NOEXCEPT(P) {
    if constexpr (TOGA_RESIDENT_VIEW != 0 || Always) {
      const ualloc copy = *this;
      return f(copy);
    } else {
      return f(*this);
    }
  }

  //! Classes with at least this many slots per bin keep their empty bins (E11). (31, to take in the
  //! 128 B class, was measured and changed nothing: design.md §11.9, §22.)
  static constexpr std::uint32_t hysteresis_min_capacity = 32;
  //! The fast path's scan of the pinned superbin's bitmap by the whole group (TOGA_SCAN_CLAIM,
  //! design.md §8.3).
  static constexpr bool scan_claim = G::superbins && TOGA_SCAN_CLAIM != 0;
  static constexpr std::uint32_t dead = Bug == ualloc_bug::dead_near_wrap ? 0x80000000u : bin_dead;
  // [HB] the slot hand-over: a free's fetch_and releases, a claim's fetch_or acquires (planted
  // bugs relax them)
  static constexpr order_tag<Bug == ualloc_bug::relaxed_slot_claim ? memory_order::relaxed : memory_order::acquire> claim_order{};
  static constexpr order_tag<Bug == ualloc_bug::relaxed_slot_free ? memory_order::relaxed : memory_order::release> free_order{};

  static_assert(sizeof(class_list<P>) == 384 && sizeof(arena<P, G>) == 128 + 384 * G::num_classes + 256,
                "class lists and arenas are laid out in 128 B lines");

  //! The header of bin `off` (a bin's own first 128 B, or a superbin's side-table entry).
  TOGA_HOST_DEVICE header_t* bin_at(std::uint64_t off) const {
    if constexpr (G::superbins) return reinterpret_cast<header_t*>(table + ((off - geom::page_bytes) >> sb_shift) * geom::sb_header_stride(sb_shift));
    else return reinterpret_cast<header_t*>(base + off);
  }
  //! Slots of class c per bin.
  TOGA_HOST_DEVICE std::uint32_t capacity(unsigned c) const {
    if constexpr (G::superbins) return (1u << (sb_shift - geom::sb_min_class_shift - c)) + (Bug == ualloc_bug::superbin_slot_past_end ? 1u : 0u);
    else return geom::capacity(c);
  }
  //! Heap offset of slot i of class c in bin `bin`.
  TOGA_HOST_DEVICE std::uint64_t slot_at(std::uint64_t bin, unsigned c, unsigned i) const {
    if constexpr (G::superbins) return bin - geom::page_bytes + (std::uint64_t{i} << (geom::sb_min_class_shift + c));
    else return slot_offset_of(bin, c, i);
  }
  //! Superbins: the bin name of the superbin at heap offset `sb` (2^sb_shift aligned), and back.
  TOGA_HOST_DEVICE static std::uint64_t superbin_id(std::uint64_t sb) { return sb + geom::page_bytes; }
  TOGA_HOST_DEVICE static std::uint64_t superbin_offset(std::uint64_t id) { return id - geom::page_bytes; }
  TOGA_DEVICE chunk_header* chunk_at(std::uint64_t off) const { return reinterpret_cast<chunk_header*>(base + off); }

  //! One slot of class c for the calling lane alone; its offset, or no_block when the heap is
  //! exhausted.
  TOGA_DEVICE std::uint64_t allocate(unsigned c) const TOGA_NOEXCEPT(P) {
    return allocate_group(P::sm_id() % num_arenas, c, coalesced_group<P>::self());
  }

  //! allocate_group for a caller whose request the fast path rarely serves (a superbin class's
  //! fallback to UAlloc's class): a group that stage 1's CAS loop would refuse at once
  //! (refused_at_once: the leader's relaxed snapshot of the class's semaphore word, the records,
  //! then the word confirmed unchanged) goes straight to the other arenas' units, without the fast
  //! path's take and undo and without allocate_slow's frame (design.md §13.6); any other group runs
  //! allocate_group. Collective over `g` (converged lanes of one warp; the leader decides, the group
  //! agrees); returns this lane's offset or no_block. Chunk-class instances only (a superbin
  //! instance's stage 1 steals first, which this path would skip).
  TOGA_DEVICE std::uint64_t allocate_group_or_scan(unsigned a, unsigned c, const coalesced_group<P>& g) const TOGA_NOEXCEPT(P) {
    static_assert(!G::superbins, "allocate_group_or_scan: chunk-class instances only (a superbin stage 1 steals first)");
    if (refused_at_once(a, c, g)) return fallback_if_failed(a, c, g, no_block);
    return allocate_group(a, c, g);
  }
  //! Group allocation (E1): every lane of `g` (lanes of one warp asking for class c in arena a)
  //! gets one slot; returns this lane's offset, or no_block when the heap is exhausted. The fast
  //! path is inline; everything else is `allocate_slow`, entered by the whole group.
  TOGA_DEVICE TOGA_FORCEINLINE std::uint64_t allocate_group(unsigned a, unsigned c, const coalesced_group<P>& g) const
      TOGA_NOEXCEPT(P) {
    class_list<P>& L = arenas[a].lists[c];
    const std::uint32_t t = g.size;
    alloc_progress pr{0, 0, 0, 0, 0, 0, 0, 0};
    std::uint64_t claimed = 0;  // bits of word pr.hint / 64 this group claimed (leader)
    if (g.is_leader()) TOGA_PROFILE_COUNT(prof_ua_group);
    std::uint64_t bin = 0;       // (leader) the pinned bin, 0: none or no units
    std::int32_t o = 0;          // (leader) the bin's free count before our reservation
    std::uint32_t fh = no_free_hint;
    bool from_free = false;      // (leader) the claim starts at the free hint
    if (g.is_leader() && L.slot_sem.try_take(t)) {          // (1) speculative take [E2]; acquire
      pr.stage = 1;
      pr.units = t;
      pr.token = L.rcu.read_lock();                          // (2) one fence [E4]
      P::inject(fault_site::stall_read_section);             // (units held, the pin not yet read)
      // [HB] acquire: pairs with the release store that pinned the bin (after its header was written)
      bin = slot_bin(P::load(&L.pins[pin_slot()], acquire, device_scope));
      if (bin != 0) {
        header_t* h = bin_at(bin);
        P::inject(fault_site::stall_read_to_rmw);  // (the pin may change before our reservation)
        // where the last group free's run began (a guess only: the claim below decides; loaded
        // beside the reservation's RMW, not after it)
        if constexpr (G::superbins) fh = P::load(&h->free_hint, relaxed, device_scope);
        // (3) reserve t slots: relaxed (an RMW reads the latest count; the bitmap claim synchronises)
        std::uint32_t old = t;
        if constexpr (Bug != ualloc_bug::claim_without_reservation) {
          old = P::fetch_sub(&h->free, t, relaxed, device_scope);
          ghost_add<P>(ghost_kind::bin_transit, h, t);
        }
        o = static_cast<std::int32_t>(old);
      }
    }
    // (3') superbins (TOGA_SCAN_CLAIM): while the leader's reservation is in flight every lane loads
    // one bitmap word of the pinned superbin, a window of up to g.size words (relaxed: a guess;
    // the claim decides, and the superbin cannot be reused while the leader's section lasts)
    [[maybe_unused]] std::uint64_t seen = ~std::uint64_t{0};
    [[maybe_unused]] unsigned window = 0, w_first = 0, words = 0;
    if constexpr (scan_claim) {
      const std::uint64_t sbin = g.broadcast(bin);
      if (sbin != 0) {
        words = (capacity(c) + 63) / 64;
        window = words < g.size ? words : g.size;
        // groups of other warps look at other windows of a large bitmap (256 B: 128 words)
        w_first = words > g.size ? ((P::block_id() * 8u + P::warp_id()) * g.size) % words : 0u;
        if (g.rank < window) seen = P::load(&bin_at(sbin)->bitmap[(w_first + g.rank) % words], relaxed, device_scope);
      }
    }
    // (leader) what the scan is asked for: the slots its claims in the first word left unserved
    // (0: none), that word, and the window rank to look from
    [[maybe_unused]] std::uint32_t scan_ask = 0;
    unsigned w1 = 0;  // (leader) the word of the first claims
    if (g.is_leader() && bin != 0) {
      header_t* h = bin_at(bin);
      if (o >= static_cast<std::int32_t>(t)) {
        pr.bin = bin;
        pr.units = 0;
        pr.reserved = t;
        // (4) the first bit to claim: in a superbin that holds a free hint and is not entirely
        // free, where the last group free's run began (the reservation's ordinal is exact only
        // while no slot has come back: in a bin that slots leave and return to, it points at
        // bits still in use); else the reservation's ordinal, exact in a fresh or entirely free
        // bin (design.md §8.3)
        const std::uint32_t cap = capacity(c);
        from_free = static_cast<std::uint32_t>(o) < cap && fh < cap;
        // one group per hint: the groups after us guess by their ordinals until a free stores
        // the next (measured: a hint left in place sent every later group of a warm pass to the
        // same run, and 256 B allocation took 2.9x as long)
        if (from_free) P::store(&h->free_hint, no_free_hint, relaxed, device_scope);
        pr.hint = from_free ? fh : cap - static_cast<std::uint32_t>(o);
        const unsigned w = pr.hint / 64, b0 = pr.hint % 64;
        w1 = w;
        const std::uint64_t want = (t >= 64 - b0 ? ~std::uint64_t{0} : ((std::uint64_t{1} << t) - 1)) << b0;
        // [HB] acquire: pairs with the release fetch_and of the slot's last free
        std::uint64_t was = P::fetch_or(&h->bitmap[w], want, claim_order, device_scope);
        claimed = want & ~was;
        if constexpr (Bug == ualloc_bug::free_hint_trusted)
          if (from_free) claimed = want;  // (planted: "the hint names a freed run, so its bits are ours")
        if constexpr (Bug != ualloc_bug::claim_without_reservation) ghost_add<P>(ghost_kind::bin_transit, h, -static_cast<std::int64_t>(bits::popc(claimed)));
        const unsigned have = bits::popc(claimed);
        // bits of the guess were taken (a used bin): the word's other zero bits, as seen, when
        // they are enough (or when there is no scan); else the lanes' scan (3') below (a pinned
        // superbin gave every lane a window: window > 0 here)
        if (have < t && ~(was | want) != 0 && (!scan_claim || bits::popc(~(was | want)) >= t - have)) {
          const unsigned base = Bug == ualloc_bug::more_claims_from_zero ? 0u : have;
          const std::uint64_t more = bits::lowest(~(was | want), t - base);
          was = P::fetch_or(&h->bitmap[w], more, claim_order, device_scope);
          if constexpr (Bug != ualloc_bug::claim_without_reservation) ghost_add<P>(ghost_kind::bin_transit, h, -static_cast<std::int64_t>(bits::popc(more & ~was)));
          claimed |= more & ~was;
        } else if (scan_claim && have < t) {
          // (missing slots | the word << 8 | the window rank to look from << 24)
          scan_ask = (t - have) | (w << 8) | (((pr.hint / t) % window) << 24);
        }
        const unsigned got = bits::popc(claimed);
        pr.reserved -= got;
        pr.hint = w * 64;  // (a word with claims of ours; the slow path looks from here)
        // (a pinned bin whose last units we reserved stays pinned: takers replace exhausted bins)
      } else {
        pr.stage = 3;  // short reservation: the slow path keeps what it got and undoes the rest
        pr.bin = bin;
        pr.reserved = static_cast<std::uint32_t>(o);  // the old count (may be <= 0)
      }
    }
    // (4') superbins: a claim that lost bits its word cannot make up goes to the first word of the
    // lanes' window, from the ordinal's rank on, that showed the missing number of zero bits; the
    // leader claims the lowest of them (one fetch_or; the same word's zeros come first, above)
    [[maybe_unused]] std::uint64_t claimed2 = 0;
    [[maybe_unused]] unsigned w2 = 0;
    if constexpr (scan_claim) {
      if (window > 0) {  // (uniform: every lane got the same superbin)
        scan_ask = g.broadcast(scan_ask);
        if (scan_ask != 0) {
          const std::uint32_t missing = scan_ask & 0xffu, skip = (scan_ask >> 8) & 0xffffu, from = scan_ask >> 24;
          const unsigned mine_w = (w_first + g.rank) % words;
          const bool enough = g.rank < window && mine_w != skip && bits::popc(~seen) >= missing;
          const std::uint32_t cand = g.ballot(enough);
          const std::uint32_t later = g.ballot(enough && g.rank >= from);
          const std::uint32_t pick = later != 0 ? later : cand;
          const unsigned lane = pick != 0 ? bits::ctz(static_cast<std::uint64_t>(pick)) : g.leader;
          const std::uint64_t picked_seen = P::shfl(g.mask, seen, static_cast<int>(lane));
          w2 = P::shfl(g.mask, mine_w, static_cast<int>(lane));  // (every lane: no broadcast below)
          if (g.is_leader() && pick != 0) {
            header_t* h = bin_at(bin);
            const std::uint64_t want2 = bits::lowest(~picked_seen, missing);  // the zeros the lane saw
            const std::uint64_t was2 = P::fetch_or(&h->bitmap[w2], want2, claim_order, device_scope);
            claimed2 = want2 & ~was2;
            if constexpr (Bug == ualloc_bug::scan_claim_trusted) claimed2 = want2;  // (planted: "a lane saw these bits free, so they are ours")
            if constexpr (Bug != ualloc_bug::claim_without_reservation) ghost_add<P>(ghost_kind::bin_transit, h, -static_cast<std::int64_t>(bits::popc(claimed2)));
            pr.reserved -= bits::popc(claimed2);
            pr.hint = w2 * 64;  // (the slow path looks from here)
          }
        }
      }
    }
    // Broadcast: the bin with the word index in its low bits (bins are 4 KiB aligned), and the
    // claimed bits; lanes of rank < popc(claimed) take the rank-th claimed bit, the next ones the
    // bits of the scan's claim.
    const std::uint64_t bin_w = g.broadcast(pr.bin | w1);
    claimed = g.broadcast(claimed);
    const unsigned got1 = bits::popc(claimed);
    unsigned got = got1;
    const std::uint64_t bin_base = bin_w & ~std::uint64_t{4095};
    std::uint64_t mine = no_block;
    if (g.rank < got1) mine = slot_at(bin_base, c, (bin_w & 4095) * 64 + bits::select(claimed, lane_pick(g.rank)));
    if constexpr (scan_claim) {
      if (window > 0 && scan_ask != 0) {
        claimed2 = g.broadcast(claimed2);
        got += bits::popc(claimed2);
        if (g.rank >= got1 && g.rank < got) mine = slot_at(bin_base, c, w2 * 64 + bits::select(claimed2, lane_pick(g.rank - got1)));
      }
    }
    const std::uint32_t need_slow = g.broadcast(static_cast<std::uint32_t>(got < t || pr.stage >= 2));
    // [HB] only __syncwarp orders memory among lanes (shuffles do not): the members' later reads
    // of the bin header (a free reads class and arena) happen after the leader's acquire of it
    g.sync();
    if (g.is_leader()) {
      if (!need_slow) TOGA_PROFILE_COUNT(prof_ua_fast);
      else if (pr.stage == 0) TOGA_PROFILE_COUNT(prof_ua_take_failed);
      else if (pr.stage == 1 && pr.bin == 0) TOGA_PROFILE_COUNT(prof_ua_no_pin);
      else if (pr.stage == 3) TOGA_PROFILE_COUNT(prof_ua_short);
      else TOGA_PROFILE_COUNT(prof_ua_lost_bits);
    }
    if (!need_slow) {
      if (g.is_leader()) L.rcu.read_unlock(pr.token);  // (5) release [E4]
      return mine;
    }
    pr.served = got;
    return out_of_line([&](const ualloc& u) { return u.allocate_slow(a, c, g, pr, mine); });
  }

  //! Group free (E9): every lane of `g` frees the slot `slot` of the bin at heap offset `bin`
  //! (the same bin for the whole group; class c, arena a from its header). Returns the mask of
  //! lanes whose slot was allocated (the others are double frees, detected exactly in checked
  //! builds and changing nothing; in unchecked builds two lanes of one call freeing the same slot
  //! are undefined).
  template <bool Exact>
  TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t deallocate_group(std::uint64_t bin, unsigned slot, unsigned c, unsigned a,
                                                             const coalesced_group<P>& g) const TOGA_NOEXCEPT(P) {
    header_t* h = bin_at(bin);
    class_list<P>& L = arenas[a].lists[c];
    const unsigned w = slot / 64;
    const std::uint64_t bit = std::uint64_t{1} << (slot % 64);
    std::uint64_t was = 0;  // (set on every path; the initialiser quiets -Wmaybe-uninitialized)
    // [HB] one warp barrier over the whole group before any release: every member's accesses to
    // its slot happen before every release that follows in any member, namely the word leaders'
    // fetch_and (the slot's next owner in this bin acquires it) and the leader's count and
    // read_unlock (the grace period of the bin's retirement acquires that: the slot's next owner
    // after the bin is retired and its memory reused, which reads no bitmap word we wrote). A
    // barrier over each word's lanes alone left the members of the other words unordered with the
    // leader's section (found by random shapes under --memory weak, 2026-11-30: grow-while-alloc,
    // a 16 B slot handed out again after its bin was retired and re-made; design.md §9.2).
    constexpr bool barrier_before = Bug != ualloc_bug::free_without_warp_barrier && Bug != ualloc_bug::free_barrier_per_word;
    constexpr bool barrier_after = barrier_before && Bug != ualloc_bug::free_no_barrier_after_rmw;
    if constexpr (barrier_before) g.sync();
    std::uint32_t run = slot;  // (the leader's) the first slot of its word's freed run: the bin's next free hint
    if (Exact || g.size == 1) {
      // [HB] release: our accesses to the slot happen before its next owner's (acquire fetch_or)
      was = P::fetch_and(&h->bitmap[w], ~bit, free_order, device_scope);
      if (was & bit) ghost_add<P>(ghost_kind::bin_transit, h, 1);
    } else {
      const std::uint32_t wm = P::match_any(g.mask, static_cast<std::uint32_t>(w));
      std::uint32_t lo = static_cast<std::uint32_t>(bit), hi = static_cast<std::uint32_t>(bit >> 32);
      if constexpr (Bug == ualloc_bug::or_drops_lane) {
        if (bits::popc(wm) > 1 && P::lane_id() == 63u - bits::clz(static_cast<std::uint64_t>(wm))) lo = hi = 0;
      }
      const std::uint32_t om = Bug == ualloc_bug::free_or_over_group ? g.mask : wm;
      lo = P::reduce_or(om, lo);
      hi = P::reduce_or(om, hi);
      const std::uint64_t all = (std::uint64_t{hi} << 32) | lo;
      run = w * 64 + bits::ctz(all);
      // (the group's barrier above orders every lane's accesses before the word leader's release
      // RMW, which is cumulative: one release covers the whole word group)
      if constexpr (Bug == ualloc_bug::free_barrier_per_word) P::syncwarp(wm);
      const unsigned wl = bits::ctz(wm);
      if (P::lane_id() == wl) {
        was = P::fetch_and(&h->bitmap[w], ~all, free_order, device_scope);
        ghost_add<P>(ghost_kind::bin_transit, h, bits::popc(was & all));
      }
      was = P::shfl(wm, was, static_cast<int>(wl));
    }
    // [HB] and one after the bitmap RMWs: each word leader's fetch_and (every lane's, in a checked
    // build) happens before the leader's count and read_unlock, so before the init_bin stores of
    // a bin that later reuses the page to the same words (without it they are ordered only by the
    // value k carries through shfl and ballot, which the PTX model does not count; design.md §9.2)
    if constexpr (barrier_after) g.sync();
    const std::uint32_t ok = g.ballot((was & bit) != 0);
    const std::uint32_t k = bits::popc(ok);
    if (g.is_leader() && k > 0) {
      TOGA_PROFILE_COUNT(prof_ua_free_group);
      // The fast path's next guess (design.md §8.3): where our freed slots begin. Stored before
      // the count that makes them reservable, so before the bin can be retired (it cannot while
      // our slots are not counted), and inside what free_count's read-side section orders before
      // a reuse of the bin's memory.
      if constexpr (G::superbins) P::store(&h->free_hint, run, relaxed, device_scope);
      free_count(L, bin, c, k);
    }
    return ok;
  }

  //! Under memory pressure, before an allocation returns nullptr, and for the host's trim: retires
  //! every empty bin (pinned or queued), runs every pending RCU callback, and returns every cached
  //! chunk to TBuddy, in every arena, of both geometries (this one's and the peer's). Never call
  //! it inside a read-side section. Returns whether anything was reclaimed.
  //!
  //! One walk at a time per heap (the gate in byte_limit::reclaim_gate), shared by every lane that
  //! needs one while it runs (design.md §9.4): the walk is split into items, one arena of one
  //! geometry each, which the lane that opened the gate and every lane arriving meanwhile claim
  //! one at a time and walk; each then waits for the walk to end and returns its result. (A full
  //! heap makes every failing lane reclaim: 100,000 of them each walking 132 arenas x 14 classes
  //! made T8's last round at 4 KiB take 25 s on an H100; one lane walking for all of them took
  //! 28-55 ms per walk, the whole tail of an exactly full heap's fill.)
  //!
  //! Fails fast (design.md §13.2): while nothing that could leave something to
  //! give back has happened since a walk that gave nothing back and skipped nothing
  //! (byte_limit::reclaim_changes against reclaim_clean), it returns false after two loads.
  //! `force` (the host's trim) walks regardless.
  //!
  //! Growth first (design.md §12.9): on a growable heap with a growth service that can still map
  //! a granule (some unmapped, the byte limit not refusing a chunk), a failing request leaves the
  //! walk to growth and returns false at once; the request then waits for the service, which maps
  //! ahead of demand. `despite_growth` (a request the service refused or timed out) walks anyway.
  TOGA_DEVICE TOGA_NOINLINE bool reclaim(bool force = false, bool despite_growth = false) const TOGA_NOEXCEPT(P) {
    TOGA_PROFILE_COUNT(prof_ua_reclaim);
    if (buddy.limit == nullptr) {
      bool skipped = false;
      return reclaim_both(skipped);
    }
    if (!force && !despite_growth && growth_comes_first()) return false;
    if (!force && known_clean()) return false;
    byte_limit* const l = buddy.limit;
    std::uint64_t* gate = &l->reclaim_gate;
    std::uint64_t w = P::load(gate, acquire, device_scope);
    if ((w & 1u) == 0) {
      std::uint64_t seen = w;
      if (P::compare_exchange(gate, seen, w | 1u, acquire, device_scope)) {
        TOGA_PROFILE_COUNT(prof_ua_reclaim_walk);
        // [HB] acquire: an operation whose count we see left its changes visible to the walk
        const std::uint64_t changes = Bug == ualloc_bug::clean_read_late ? 0 : P::load(&l->reclaim_changes, acquire, device_scope);
        P::store(&l->reclaim_changes_seen, changes, relaxed, device_scope);
        P::store(&l->reclaim_done, std::uint64_t{0}, relaxed, device_scope);
        P::store(&l->reclaim_flags, std::uint64_t{0}, relaxed, device_scope);
        // [HB] release: a lane whose claim reads this store (or a later RMW of the word) sees the resets
        P::store(&l->reclaim_cursor, std::uint64_t{walk_tag(w)} << 32, release, device_scope);
        w |= 1u;
      } else {
        if ((seen & 1u) == 0) return (seen & 2u) != 0;  // one ended meanwhile: its result
        w = seen;
      }
    }
    // A walk of generation w >> 2 runs (ours or another lane's): walk what is left of it, then
    // wait for it to end.
    walk_shared(walk_tag(w));
    for (unsigned attempt = 0;; ++attempt) {
      const std::uint64_t now = P::load(gate, acquire, device_scope);
      if ((now >> 2) != (w >> 2)) return (now & 2u) != 0;
      P::backoff(attempt);
    }
  }
  //! A growable heap's growth state: it follows the byte limit in heap_globals (allocator.hpp
  //! asserts it). Only where buddy.grow_granule != 0.
  TOGA_DEVICE growth_state* growth() const TOGA_NOEXCEPT(P) {
    return reinterpret_cast<growth_state*>(reinterpret_cast<char*>(buddy.limit) + sizeof(byte_limit));
  }
  //! Whether growth, not a reclaim walk, answers a failing request now: a growable heap whose
  //! growth service is attached, with a granule left unmapped, under no byte limit that refuses
  //! a chunk.
  TOGA_DEVICE bool growth_comes_first() const TOGA_NOEXCEPT(P) {
    if (buddy.grow_granule == 0) return false;
    growth_state* gs = growth();
    if (P::load(&gs->service, relaxed, device_scope) == 0) return false;
    if (P::load(&gs->mapped_granules, relaxed, device_scope) >= P::load(&gs->max_granules, relaxed, device_scope)) return false;
    const std::uint64_t lim = P::load(&buddy.limit->limit, relaxed, device_scope);
    return lim == 0 || P::load(&buddy.limit->reserved, relaxed, device_scope) + geom::chunk_bytes <= lim;
  }
  //! Whether superbins made ahead of demand (design.md §11.11) may take `bytes` more: TBuddy's
  //! handed-out bytes stay at most half of what the heap holds now (its byte limit, else its
  //! mapped granules on a growable heap, else its size) with them. Past that, extras would leave
  //! the promised GROWs to reclaim walks that give the extras back (T8 at 256 B: 4x slower
  //! rounds). A heuristic, not a correctness condition: extras are correct at any fill (three
  //! relaxed loads; true where no byte accounting is kept).
  TOGA_DEVICE bool room_ahead(std::uint64_t bytes) const TOGA_NOEXCEPT(P) {
    if (buddy.limit == nullptr) return true;
    std::uint64_t cap = buddy.heap_bytes();
    const std::uint64_t lim = P::load(&buddy.limit->limit, relaxed, device_scope);
    if (lim != 0 && lim < cap) cap = lim;
    if (buddy.grow_granule != 0) {
      const std::uint64_t mapped = P::load(&growth()->mapped_granules, relaxed, device_scope) << (buddy.grow_granule - 1 + geom::page_shift);
      if (mapped < cap) cap = mapped;
    }
    return P::load(&buddy.limit->reserved, relaxed, device_scope) + bytes <= cap / 2;
  }
  //! Whether the last walk gave nothing back and skipped nothing, and no operation that could
  //! leave something to give back has completed since (two relaxed loads).
  TOGA_DEVICE bool known_clean() const TOGA_NOEXCEPT(P) {
    if (buddy.limit == nullptr) return false;
    const std::uint64_t clean = P::load(&buddy.limit->reclaim_clean, relaxed, device_scope);
    return clean != 0 && clean == P::load(&buddy.limit->reclaim_changes, relaxed, device_scope) + 1;
  }
  //! After the last store of an operation that may have left something for reclaim() to give
  //! back (an empty bin in a pin slot or the inbox, a deferred bin, a cached free chunk): [HB]
  //! release, so that a walk which reads the count (acquire) before it starts sees the change.
  TOGA_DEVICE void note_reclaimable() const TOGA_NOEXCEPT(P) {
    if (buddy.limit != nullptr) P::fetch_add(&buddy.limit->reclaim_changes, std::uint64_t{1}, release, device_scope);
  }
  //! The items of a shared walk: the chunk geometry's arenas, then the superbin geometry's (the
  //! same numbering from either view).
  TOGA_DEVICE unsigned walk_items() const TOGA_NOEXCEPT(P) { return has_peer() ? num_arenas + other_arenas() : num_arenas; }
  //! The tag of walk generation w >> 2 in byte_limit::reclaim_cursor's high word (never 0, the
  //! cursor's value before the first walk).
  TOGA_DEVICE static std::uint32_t walk_tag(std::uint64_t w) { return static_cast<std::uint32_t>((w >> 2) + 1); }
  //! reclaim() without the gate: both geometries. `skipped`: set when the walk saw something to
  //! give back that it could not (units of an empty bin held by waiters, callbacks left to a
  //! pending barrier, a free chunk whose units are held).
  TOGA_DEVICE bool reclaim_both(bool& skipped) const TOGA_NOEXCEPT(P) {
    TOGA_PROFILE_COUNT(prof_ua_reclaim_walk);
    TOGA_PROFILE_START;
    bool any = false;
    for (unsigned i = 0; i < walk_items(); ++i) any |= walk_item(i, skipped);
    TOGA_PROFILE_PHASE(prof_ua_t_reclaim_walk);
    return any;
  }

 private:
  // Whether the heap has the other geometry (superbins) for a walk to visit.
  TOGA_DEVICE bool has_peer() const TOGA_NOEXCEPT(P) { return peer != nullptr && sb_shift != 0; }
  TOGA_DEVICE unsigned other_arenas() const TOGA_NOEXCEPT(P) {
    return Bug == ualloc_bug::reclaim_peer_arenas_ignored ? num_arenas : peer_arenas;
  }
  // Claims the items of the walk tagged `tag` (or of a later one) one at a time and walks each,
  // until none is left; the lane that walks the last one ends the walk (walk_end).
  TOGA_DEVICE void walk_shared(std::uint32_t tag) const TOGA_NOEXCEPT(P) {
    byte_limit* const l = buddy.limit;
    const unsigned total = walk_items();
    for (unsigned attempt = 0;;) {
      // [HB] acquire: the opener's resets (its release store heads the cursor's release sequence)
      const std::uint64_t x = P::fetch_add(&l->reclaim_cursor, std::uint64_t{1}, acquire, device_scope);
      const std::uint32_t hi = static_cast<std::uint32_t>(x >> 32);
      const std::uint32_t i = static_cast<std::uint32_t>(x);
      // An older tag: the opener has not reset the cursor yet (the previous walk's items are all
      // taken, so this claim took nothing); a later tag: a walk begun since ours ended, whose
      // item i is ours to walk now that we took it.
      if (Bug != ualloc_bug::walk_claim_any_tag && static_cast<std::int32_t>(hi - tag) < 0) {
        P::backoff(attempt++);
        continue;
      }
      if (i >= total) return;
      ghost_add<P>(ghost_kind::walk_items, l, 1);
      bool skipped = false;
      const bool gave = walk_item(i, skipped);
      const std::uint64_t f = (gave ? 1u : 0u) | (skipped ? 2u : 0u);
      constexpr bool flags_late = Bug == ualloc_bug::walk_flags_after_count;
      if (!flags_late && f != 0) P::fetch_or(&l->reclaim_flags, f, relaxed, device_scope);
      // [HB] acq_rel: the lane that walks the last item sees every item's flags and changes
      const std::uint64_t d = P::fetch_add(&l->reclaim_done, std::uint64_t{1}, acq_rel, device_scope);
      ghost_add<P>(ghost_kind::walk_items, l, -1);
      if (d + 1 == (Bug == ualloc_bug::walk_ends_early ? total - 1 : total)) walk_end();
      if (flags_late && f != 0) P::fetch_or(&l->reclaim_flags, f, relaxed, device_scope);
    }
  }
  // The last item of a walk is walked: record a clean walk, open the gate with the result.
  TOGA_DEVICE void walk_end() const TOGA_NOEXCEPT(P) {
    byte_limit* const l = buddy.limit;
    const std::uint64_t f = P::load(&l->reclaim_flags, relaxed, device_scope);
    const bool any = (f & 1u) != 0;
    std::uint64_t changes = P::load(&l->reclaim_changes_seen, relaxed, device_scope);
    if constexpr (Bug == ualloc_bug::clean_read_late) changes = P::load(&l->reclaim_changes, acquire, device_scope);
    if (f == 0) P::store(&l->reclaim_clean, changes + 1, relaxed, device_scope);
    const std::uint64_t w = P::load(&l->reclaim_gate, relaxed, device_scope);  // (running: ours to write)
    std::uint64_t next = (((w >> 2) + 1) << 2) | (any ? 2u : 0u);
    if constexpr (Bug == ualloc_bug::reclaim_gate_left_closed) next |= 1u;
    P::store(&l->reclaim_gate, next, release, device_scope);  // [HB] what the walk gave back, before its result
  }
  // Whether list L holds nothing a walk could give back: no inbox, no deferred bin, no bin in a
  // pin slot (relaxed loads: a hint, as every load of a walk; a bin made findable after it looked
  // counts a reclaim change). The walk visits every list of every arena of both geometries, most
  // of them idle: their words are loaded sixteen at a time, all issued before the first is
  // compared (a round trip per sixteen words, not one per word).
  TOGA_DEVICE bool list_idle(class_list<P>& L) const TOGA_NOEXCEPT(P) {
    // the two heads with the first batch of slots: two round trips for 32 slots
    std::uint64_t seen = P::load(&L.inbox, relaxed, device_scope) | P::load(&L.rcu.cb_head_word(), relaxed, device_scope);
    for (unsigned s0 = 0; s0 < num_pins; s0 += walk_batch) {
      std::uint64_t e[walk_batch];
      for (unsigned i = 0; i < walk_batch; ++i) e[i] = s0 + i < num_pins ? P::load(&L.pins[s0 + i], relaxed, device_scope) : 0;
      for (unsigned i = 0; i < walk_batch; ++i) seen |= e[i];
      if (seen != 0) return false;
    }
    return true;
  }
  //! Pin slots a walk loads per round trip (list_idle, reclaim_arena's scan).
  static constexpr unsigned walk_batch = 16;
  // Walks item i of walk_items(): arena i of the chunk geometry, or arena i - (chunk arenas) of
  // the superbin geometry.
  TOGA_DEVICE bool walk_item(unsigned i, bool& skipped) const TOGA_NOEXCEPT(P) {
    const bool has_other = has_peer();
    const unsigned chunk_arenas = G::superbins ? other_arenas() : num_arenas;
    const bool own = !has_other || (G::superbins ? i >= chunk_arenas : i < chunk_arenas);
    if (own) return reclaim_arena(G::superbins && has_other ? i - chunk_arenas : i, skipped);
    const ualloc<P, Bug, TB, other_geometry> other{base, buddy, static_cast<arena<P, other_geometry>*>(peer),
                                                     other_arenas(), num_pins, table, sb_shift, num_arenas, nullptr};
    return other.reclaim_arena(G::superbins ? i : i - chunk_arenas, skipped);
  }

 public:
  //! reclaim() for one arena of this geometry.
  //!
  //! A class whose count of bins (arena_stats::bins) reads 0 is skipped: its list can hold nothing
  //! (every bin is counted before it is pinned or queued, and uncounted only by release_bin, after
  //! it left the list). The counts are loaded together, one round trip for the arena, where each
  //! list's idle test takes two (design.md §9.4). A stale 0 can only be read for a bin counted
  //! after the walk read byte_limit::reclaim_changes (every lane's claim of an item acquires the
  //! opener's release, which follows that read), and a bin counted since then that the walk must
  //! give back is emptied or made ahead after its count, which counts a change: no clean record.
  TOGA_DEVICE TOGA_NOINLINE bool reclaim_arena(unsigned a, bool& skipped) const TOGA_NOEXCEPT(P) {
    bool any = false;
    std::uint64_t held[G::num_classes];
    for (unsigned c = 0; c < G::num_classes; ++c) held[c] = P::load(&arenas[a].stats.bins[c], relaxed, device_scope);
    if constexpr (Bug == ualloc_bug::walk_filter_skips_chunks) {
      std::uint64_t all = 0;
      for (unsigned c = 0; c < G::num_classes; ++c) all |= held[c];
      if (all == 0) return false;
    }
    for (unsigned c = 0; c < G::num_classes; ++c) {
      if (held[c] == 0) continue;
      class_list<P>& L = arenas[a].lists[c];
      if (list_idle(L)) continue;
      const std::uint32_t cap = capacity(c);
      // the inbox: its empty bins are retired, the others go back to slots or the inbox
      if (P::load(&L.inbox, relaxed, device_scope) != 0) {
        const std::uint32_t e = L.rcu.read_lock();
        any |= reclaim_inbox(L, cap, skipped);
        L.rcu.read_unlock(e);
      }
      // then the empty pinned bins, in passes until one retires nothing (bounded, in case
      // concurrent frees keep emptying bins)
      for (unsigned pass = 0; pass < 64; ++pass) {
        constexpr unsigned batch = 8;
        std::uint64_t empty[batch];
        unsigned n = 0;
        const std::uint32_t e = L.rcu.read_lock();
        // sixteen slots at a time: their loads, then their bins' counts, each all issued before
        // the first is looked at (two round trips per sixteen slots, not two per slot; the walk
        // visits every list, and T14 (a)'s last lanes wait for it: benchmarks.md "T14")
        for (unsigned s0 = 0; s0 < num_pins && n < batch; s0 += walk_batch) {
          std::uint64_t b[walk_batch];
          for (unsigned i = 0; i < walk_batch; ++i) b[i] = s0 + i < num_pins ? slot_bin(P::load(&L.pins[s0 + i], relaxed, device_scope)) : 0;
          std::uint64_t seen = 0;
          for (unsigned i = 0; i < walk_batch; ++i) seen |= b[i];
          if (seen == 0) continue;
          // [HB] the slots' loads as acquire loads: the headers of the bins they hold, as pinned
          if constexpr (Bug != ualloc_bug::walk_pins_unacquired) P::fence(acquire, device_scope);
          std::int32_t f[walk_batch];
          for (unsigned i = 0; i < walk_batch; ++i)
            f[i] = b[i] != 0 ? static_cast<std::int32_t>(P::load(&bin_at(b[i])->free, relaxed, device_scope)) : 0;
          for (unsigned i = 0; i < walk_batch && n < batch; ++i) {
            if (b[i] == 0 || !retirable(f[i], cap)) continue;
            // a bin in two slots of the batch: tried once, at its first slot. (When the first
            // count read not retirable and this one does, the bin emptied after the walk began,
            // and the free that emptied it counts a reclaim change: no clean record over it.)
            bool again = false;
            if constexpr (Bug != ualloc_bug::walk_batch_retries_twice)
              for (unsigned j = 0; j < i; ++j) again |= b[j] == b[i];
            if (again) continue;
            const int r = try_retire(L, b[i], cap);
            if (r == 1) empty[n++] = b[i];
            any |= r == 2;
            skipped |= r == 0;  // its units are held (or it was reserved meanwhile)
          }
        }
        L.rcu.read_unlock(e);
        for (unsigned i = 0; i < n; ++i) retire_bin(L, empty[i]);
        any |= n > 0;
        if (n == 0) break;
        skipped |= pass == 63;
      }
      const bool pending = P::load(&L.rcu.cb_head_word(), relaxed, device_scope) != 0;
      const unsigned ran = L.rcu.flush([this](std::uint64_t b) { return &bin_at(b)->rcu_next; }, [this](std::uint64_t b) { release_bin(b); });
      any |= ran > 0;
      skipped |= pending && ran == 0;  // a pending barrier runs them
    }
    if constexpr (!G::superbins) any |= return_cached_chunks(a, skipped);
    return any;
  }

  //! Heap offset of slot i of class c in the bin at heap offset `bin`.
  TOGA_HOST_DEVICE static std::uint64_t slot_offset_of(std::uint64_t bin, unsigned c, unsigned i) {
    const std::uint64_t chunk = bin & ~(geom::chunk_bytes - 1);
    return chunk + geom::slot_offset(static_cast<unsigned>((bin - chunk) / geom::page_bytes), c, i);
  }

 private:
  // The pin slot of the calling warp: its slot among the warps resident on the SM (a hint that
  // may change; design.md §8.2), so that each pin slot serves about the same number of warps in a
  // launch. (Until 2026-11-30 it was (block_id x 8 + warp_id) mod pins: the blocks an SM runs
  // have block ids of every residue, in uneven numbers, so some slots' bins served ten warps of
  // a pass and others five, and the warps past a bin's end entered the slow path.)
  TOGA_DEVICE unsigned pin_slot() const TOGA_NOEXCEPT(P) { return P::warp_slot() % num_pins; }
  // Whether a bin with free count f is entirely free (may be retired). The planted bug takes any
  // superbin with a free slot for an empty one.
  TOGA_DEVICE static bool retirable(std::int32_t f, std::uint32_t cap) {
    if constexpr (G::superbins && Bug == ualloc_bug::superbin_returned_live) return f > 0;
    return f == static_cast<std::int32_t>(cap);
  }
  // Whether a free count is a retired bin's (bin_dead, give or take transient decrements).
  TOGA_DEVICE static bool is_dead(std::int32_t f) { return f < -(std::int32_t{1} << 29); }
  // The claimed bit a lane of rank r takes (the planted bug maps two ranks to one bit).
  TOGA_DEVICE static unsigned lane_pick(unsigned r) {
    if constexpr (Bug == ualloc_bug::two_lanes_one_bit) return r > 1 ? r - 1 : r;
    return r;
  }
  // A relaxed RMW read of a bin's free count: unlike a load it reads the latest value.
  TOGA_DEVICE std::int32_t free_now(std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    return static_cast<std::int32_t>(P::fetch_add(&bin_at(bin)->free, 0u, relaxed, device_scope));
  }
  // The same with acq_rel: pairs a pin change with a zero crossing (see make_findable).
  TOGA_DEVICE std::int32_t free_sync(std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    return static_cast<std::int32_t>(P::fetch_add(&bin_at(bin)->free, 0u, acq_rel, device_scope));
  }

  // ---- slow path of allocation ---------------------------------------------------------------

  // Entered by the whole group when the fast path did not serve every lane: finishes stage 2
  // (claims, reservations in other pinned bins, taking the inbox), or runs stage 1 with the CAS
  // loop and GROW, and the out-of-memory fallback. Returns this lane's offset or no_block.
  TOGA_DEVICE TOGA_NOINLINE std::uint64_t allocate_slow(unsigned a, unsigned c, coalesced_group<P> g, alloc_progress pr,
                                                        std::uint64_t mine) const TOGA_NOEXCEPT(P) {
    const std::uint32_t cap = capacity(c);
    const std::uint32_t t = g.size;
    pr.stage = g.broadcast(pr.stage);
    bool entered = false;  // the leader entered its read-side section here (a steal, the CAS loop), not in the fast path
    if constexpr (G::superbins) {
      // Before a superbin GROW (a TBuddy climb): units of the class that another arena holds idle
      // (design.md §11.8). Taken, they make this group's stage 2 run in that arena's list.
      if (TOGA_SB_STEAL_ROUNDS > 0 && pr.stage == 0 && num_arenas > 1) {
        const unsigned a0 = a;
        const unsigned b = steal_units(a, c, g, t);
        if (b != a) {
          if constexpr (Bug != ualloc_bug::steal_searches_own_arena) a = b;
          pr.stage = 1;
          pr.units = t;
          if (g.is_leader()) pr.token = arenas[Bug == ualloc_bug::steal_locks_old_arena ? a0 : a].lists[c].rcu.read_lock();
          entered = true;
        }
      }
    }
    class_list<P>& L = arenas[a].lists[c];
    if (pr.stage == 0) {
      // Stage 1 by the CAS loop: OK (units for the whole group) or GROW(m).
      std::uint32_t m = 0;
      if (g.is_leader()) {
        const std::uint32_t batches = stage1_batches(t, cap);  // bins a GROW makes (E5)
        TOGA_PROFILE_START;
        // where the CAS loop would promise the batches, it first asks whether they are bound to
        // fail (design.md §13.5): then nothing is promised and the group goes to the fallback
        sem_result r;
        if constexpr (Bug == ualloc_bug::refuse_despite_promises)
          r = grow_known_to_fail(a, batches) ? sem_result::refused : L.slot_sem.wait_slow(t, std::uint64_t{batches} * cap);
        else if constexpr (Bug == ualloc_bug::refuse_keeps_promise) {
          r = L.slot_sem.wait_slow(t, std::uint64_t{batches} * cap);
          if (r == sem_result::grow && grow_known_to_fail(a, batches)) r = sem_result::refused;
        } else {
          r = L.slot_sem.wait_slow(t, std::uint64_t{batches} * cap, [&] { return grow_known_to_fail(a, batches); },
                                   Bug != ualloc_bug::cas_refusal_unconfirmed);
        }
        if (r == sem_result::grow) m = batches;
        else if (r == sem_result::refused) m = refused_grow;
        else pr.token = L.rcu.read_lock();
        TOGA_PROFILE_PHASE(prof_ua_t_stage1);
        pr.units = t;
      }
      m = g.broadcast(m);
      if (m == refused_grow) return fallback_if_failed(a, c, g, no_block);
      if (m > 0) {
        // superbins: this arena has gone to GROW for the class once; from now on it steals first
        // and where its GROWs chain it makes TOGA_SB_GROW_AHEAD superbins more than promised
        // (design.md §11.11: demand that came back comes back again)
        std::uint32_t ahead = 0;
        if constexpr (G::superbins) {
          if (g.is_leader()) {
            if (P::load(&L.grew, relaxed, device_scope) == 0) P::store(&L.grew, std::uint64_t{1}, relaxed, device_scope);
            // a chain of GROWs: the superbin serves 16 groups or more (4 KiB and below), and the
            // arena holds two of the class already (the third GROW of a pass on); each extra
            // also needs room (room_ahead, in grow)
            else if (TOGA_SB_GROW_AHEAD > 0 && cap >= 16 * t && P::load(&arenas[a].stats.bins[c], relaxed, device_scope) >= 2) ahead = TOGA_SB_GROW_AHEAD;
          }
          if (TOGA_SB_GROW_AHEAD > 0) ahead = g.broadcast(ahead);
        }
        TOGA_PROFILE_START;
        mine = grow(a, c, g, m, ahead);
        TOGA_PROFILE_PHASE(prof_ua_t_grow);
        mine = fallback_if_failed(a, c, g, mine);
        TOGA_PROFILE_PHASE(prof_ua_t_fallback);
        return mine;
      }
      pr.stage = 1;
      entered = true;
    }
    // [HB] the members read pin slots in find_reservation and trust the bins they find: only what
    // happens after the leader's read_lock is protected by its section. A member's load without
    // this __syncwarp may read a slot that a retirer emptied before the epoch flip the leader saw,
    // and hand the leader a bin already released and reused by another class: overlapping blocks
    // (G1; found by random shapes under --memory weak, simulator.md §18.3). The fast path's own
    // __syncwarp comes after its read_lock.
    if (entered && t > 1 && Bug != ualloc_bug::find_before_section_barrier) g.sync();
    // Stage 2: the leader holds pr.units semaphore units and pr.reserved units in pr.bin.
    if (g.is_leader()) {
      if (pr.stage == 3) {  // the fast path's short reservation on its pin: keep what it got
        header_t* h = bin_at(pr.bin);
        const std::int32_t o = static_cast<std::int32_t>(pr.reserved);
        const std::uint32_t got = o <= 0 ? 0u : static_cast<std::uint32_t>(o);
        settle_reservation(L, pr.bin, h, t, got, o, cap);
        pr.reserved = got;
        pr.units = t - got;
        pr.hint = cap - static_cast<std::uint32_t>(o > 0 ? o : 0);
        if (got == 0) pr.bin = 0;
      }
    }
    return serve_held(L, c, g, pr, mine);
  }
  // Stage 2 for a group whose leader holds pr.units semaphore units of L and pr.reserved units in
  // pr.bin, inside its read-side section of L, past the members' barrier (allocate_slow; a
  // fallback's take in another arena): reservations and claims until every lane of g has its
  // slot, then the section's end. Collective over g; returns this lane's offset.
  TOGA_DEVICE TOGA_FORCEINLINE std::uint64_t serve_held(class_list<P>& L, unsigned c, const coalesced_group<P>& g, alloc_progress& pr,
                                                        std::uint64_t mine) const TOGA_NOEXCEPT(P) {
    const std::uint32_t cap = capacity(c);
    const std::uint32_t t = g.size;
    while (g.broadcast(pr.served) < t) {
      if (g.broadcast(pr.reserved) == 0) find_reservation(L, c, g, pr);
      std::uint64_t claimed = 0;
      if (g.is_leader()) {
        claimed = claim_bits(bin_at(pr.bin), cap, pr.reserved, pr.hint);
        ghost_add<P>(ghost_kind::bin_transit, bin_at(pr.bin), -static_cast<std::int64_t>(bits::popc(claimed)));
        pr.reserved -= bits::popc(claimed);
      }
      const std::uint64_t bin_w = g.broadcast(pr.bin | (pr.hint / 64));
      claimed = g.broadcast(claimed);
      const std::uint32_t first = g.broadcast(pr.served);
      const unsigned got = bits::popc(claimed);
      if (g.rank >= first && g.rank < first + got)
        mine = slot_at(bin_w & ~std::uint64_t{4095}, c, (bin_w & 4095) * 64 + bits::select(claimed, lane_pick(g.rank - first)));
      pr.served = first + got;
    }
    g.sync();  // [HB] as in allocate_group: members read headers the leader acquired
    if (g.is_leader()) {
      P::inject(fault_site::stall_read_section);
      L.rcu.read_unlock(pr.token);
      if (pr.deferred) flush(L);
    }
    return mine;
  }
  TOGA_DEVICE void flush(class_list<P>& L) const TOGA_NOEXCEPT(P) {
    L.rcu.flush([this](std::uint64_t b) { return &bin_at(b)->rcu_next; }, [this](std::uint64_t b) { release_bin(b); });
  }

  // The group, inside the leader's read-side section; the leader holds pr.units units and no
  // reservation. The lanes look at g.size pin slots at a time (slot and free count: two loads in
  // parallel), and the leader reserves in the first slot's bin that shows free slots; when no
  // slot has any, the leader takes the inbox (bins that frees refilled) and pins its bins into
  // empty or exhausted slots (`take_inbox`). A unit guarantees a findable bin has a free slot for
  // us (publishers make bins findable before they signal), but a bin another taker holds for a
  // moment makes us look again.
  TOGA_DEVICE void find_reservation(class_list<P>& L, unsigned c, const coalesced_group<P>& g, alloc_progress& pr) const TOGA_NOEXCEPT(P) {
    const std::uint32_t cap = capacity(c);
    // (the leader's: every lane must scan from the same slot, or a slot may be missed on every
    // attempt, and pin_slot() may change between the lanes' reads)
    const unsigned s0 = g.broadcast(pin_slot());
    for (unsigned attempt = 0;; ++attempt) {
      for (unsigned base = 0; base < num_pins; base += g.size) {
        const unsigned i = base + g.rank;
        std::uint64_t b = 0;
        std::int32_t f = 0;
        if (i < num_pins) {
          b = slot_bin(P::load(&L.pins[(s0 + i) % num_pins], acquire, device_scope));
          if (b != 0) f = static_cast<std::int32_t>(P::load(&bin_at(b)->free, relaxed, device_scope));
        }
        const std::uint32_t found = g.ballot(f > 0);
        // [HB] the lane that loaded a candidate's slot acquired the bin's header (and its superbin
        // tag); the leader reserves in it and may pin it again (adopt, a release that readers of
        // our slot acquire), so the leader must have seen those stores too: shuffles do not carry
        // memory order, only __syncwarp does (found under --memory weak by the rounds scenario)
        if constexpr (Bug != ualloc_bug::find_without_warp_barrier)
          if (found != 0 && g.size > 1) g.sync();
        for (std::uint32_t cand = found; cand != 0; cand &= cand - 1) {
          const std::uint64_t cb = g.size == 1 ? b : P::shfl(g.mask, b, static_cast<int>(bits::ctz(cand)));
          std::uint32_t ok = 0;
          if (g.is_leader()) {
            TOGA_PROFILE_COUNT(prof_ua_find_step);
            std::uint32_t old = 0;
            const std::uint32_t got = reserve(L, cb, pr.units, old, cap);
            if (got > 0) {
              take(pr, cb, got, old, cap);
              if (old > got) adopt(L, s0, cb);  // the bin has more: our empty slot serves from it too
              ok = 1;
            }
          }
          if (g.broadcast(ok)) return;
        }
      }
      std::uint32_t took = 0;
      if (g.is_leader() && P::load(&L.inbox, relaxed, device_scope) != 0) {
        const bool d = take_inbox(L);
        if (Bug != ualloc_bug::slow_take_not_flushed) pr.deferred |= d ? 1u : 0u;
        took = 1;
      }
      if (!g.broadcast(took)) P::backoff(attempt);
    }
  }
  TOGA_DEVICE static void take(alloc_progress& pr, std::uint64_t b, std::uint32_t got, std::uint32_t old, std::uint32_t cap) {
    pr.bin = b;
    pr.reserved = got;
    pr.units -= got;
    pr.hint = old < cap ? cap - old : 0;  // the reservation's ordinal
  }

  // Reserves up to `want` slots of the bin with one fetch_sub, keeps clamp(old, 0, want) and
  // undoes the rest; an undo that takes the count from <= 0 to > 0 (frees came in meanwhile) makes
  // the bin findable. Returns what it kept; `old` receives the count it found, clamped at 0.
  TOGA_DEVICE std::uint32_t reserve(class_list<P>& L, std::uint64_t bin, std::uint32_t want, std::uint32_t& old, std::uint32_t cap) const TOGA_NOEXCEPT(P) {
    header_t* h = bin_at(bin);
    P::inject(fault_site::stall_read_to_rmw);
    const std::int32_t o = static_cast<std::int32_t>(P::fetch_sub(&h->free, want, relaxed, device_scope));
    ghost_add<P>(ghost_kind::bin_transit, h, want);
    const std::uint32_t got = o <= 0 ? 0u : (o >= static_cast<std::int32_t>(want) ? want : static_cast<std::uint32_t>(o));
    settle_reservation(L, bin, h, want, got, o, cap);
    old = o > 0 ? static_cast<std::uint32_t>(o) : 0u;
    return got;
  }
  // After a fetch_sub of `want` that returned o and keeps `got`: undo the excess; at a crossing
  // up made by the undo (frees came in meanwhile) make the bin findable. (An exhausted bin simply
  // stays where it is: a pinned one until a taker or a new bin displaces it.)
  TOGA_DEVICE void settle_reservation(class_list<P>& L, std::uint64_t bin, header_t* h, std::uint32_t want,
                                      std::uint32_t got, std::int32_t o, std::uint32_t cap) const TOGA_NOEXCEPT(P) {
    (void)o;
    const std::uint32_t excess = Bug == ualloc_bug::undo_whole_reservation && got > 0 && got < want ? want : want - got;
    if (excess == 0) return;
    P::inject(fault_site::stall_speculative_undo);
    const std::int32_t before = static_cast<std::int32_t>(P::fetch_add(&h->free, excess, relaxed, device_scope));
    ghost_add<P>(ghost_kind::bin_transit, h, -static_cast<std::int64_t>(want - got));
    if ((Bug == ualloc_bug::undo_crossing_from_zero_missed ? before < 0 : before <= 0) && before + static_cast<std::int32_t>(excess) > 0 &&
        Bug != ualloc_bug::no_relink_on_refill)
      make_findable(L, bin);
    // Frees that came in while we held the count down each saw it short of the capacity, so none
    // of them counted the bin empty: if our undo leaves every slot free, the bin is reclaim()'s to
    // give back and we count the change (a pinned bin stays where it is, and make_findable counts
    // nothing for it; design.md §13.2, found by undo-race)
    if (before + static_cast<std::int32_t>(excess) == static_cast<std::int32_t>(cap) &&
        Bug != ualloc_bug::undo_to_empty_unnoted)
      note_reclaimable();
  }

  // Claims up to `n` zero bits of the bin's bitmap for the holder of n reserved slots, one
  // fetch_or of one word's zero bits, starting at bit `hint` (updated). Returns the bits claimed
  // in word hint / 64 (possibly none: then the hint moved on). A reservation guarantees n zero
  // bits exist (U1'): bits another lane set meanwhile are simply lost and we look further.
  TOGA_DEVICE static std::uint64_t claim_bits(header_t* h, std::uint32_t cap, std::uint32_t n, std::uint32_t& hint) TOGA_NOEXCEPT(P) {
    if (n == 0) return 0;
    for (unsigned attempt = 0;; ++attempt) {
      if (Bug == ualloc_bug::claim_hint_wraps_late ? hint > cap : hint >= cap) hint = 0;
      const unsigned w = hint / 64;
      const std::uint64_t cur = P::load(&h->bitmap[w], relaxed, device_scope);
      const std::uint64_t from = ~std::uint64_t{0} << (hint % 64);
      std::uint64_t zeros = ~cur & from;
      if (zeros == 0) zeros = ~cur;  // wrap within the word once
      if (zeros == 0) {
        hint = Bug == ualloc_bug::claim_stays_on_full_word ? w * 64 + 63 : (w + 1) * 64;
        if (attempt % G::bitmap_words == G::bitmap_words - 1) P::backoff(attempt / G::bitmap_words);
        continue;
      }
      const std::uint64_t want = bits::lowest(zeros, n);
      P::inject(fault_site::stall_read_to_rmw);
      const std::uint64_t was = P::fetch_or(&h->bitmap[w], want, claim_order, device_scope);  // [HB] with the freer's release
      const std::uint64_t got = want & ~was;
      hint = w * 64;
      if (got != 0) return got;
    }
  }

  // ---- findability: pin slots (CAS) and the inbox (a lock-free stack) --------------------------
  //
  // Inbox state of a bin (bin_header::queued): 0 not queued, 2 held by a pusher or a taker, 1 in
  // the inbox, 3 retired. Pushers go 0 -> 2 -> (push) -> 1; takers take the whole stack and move
  // each bin 1 -> 2 before they pin it (-> 0), drop it (-> 0) or push it back (-> 1); a retirer
  // waits out state 2 and moves 0 or 1 to 3 (a 3 in the inbox is deferred by whoever takes it).

  // A bin whose count we took from <= 0 to > 0 must be findable. Our acq_rel re-read comes after
  // or before every other side's re-read of the count (RMWs on one word are ordered): if after, it
  // synchronises with that side and we see its change of the slots and of the inbox state; if
  // before, that side sees our free slots and keeps the bin findable itself. A bin in state 1, 2
  // or 3 needs nothing from us: queued, held by a pusher or taker (who leaves it findable, or
  // drops it and re-reads the count afterwards), or retired.
  // `note`: count a reclaim change afterwards (the bin may be empty by now); reclaim's own walk
  // passes false (a free that empties the bin while the walk holds it counts the change itself,
  // after the walk read the count: the walk then records nothing).
  TOGA_DEVICE void make_findable(class_list<P>& L, std::uint64_t bin, bool note = true) const TOGA_NOEXCEPT(P) {
    if (free_sync(bin) <= 0) return;  // reserved again meanwhile: the next crossing decides
    if (P::load(&bin_at(bin)->queued, acquire, device_scope) != 0) return;
    // owned by a slot (a borrowed entry does not count: the next round would share the bin)
    std::uint32_t open = 0;
    if (owned(L, bin, open)) return;
    pin_insert_open(L, bin, open);
    if (note && Bug != ualloc_bug::findable_unnoted) note_reclaimable();
  }
  // Whether a pin slot owns the bin. When it answers no after looking at every slot, `open` gets
  // a bit for each slot it saw empty or borrowed (bit s: slot s), the only ones pin_insert_open
  // may take; a slot that answered no before it looked at every slot (it found the bin at home)
  // leaves `open` as it was.
  TOGA_DEVICE bool owned(class_list<P>& L, std::uint64_t bin, std::uint32_t& open) const TOGA_NOEXCEPT(P) {
    const std::uint32_t home = P::load(&bin_at(bin)->home, relaxed, device_scope);
    if (home - 1 < num_pins && P::load(&L.pins[home - 1], relaxed, device_scope) == bin) return true;
    // Not at home: every slot is looked at (it answers no unless the bin is pinned elsewhere), so
    // eight loads at a time, all issued before the first is compared: 4 round trips for 32 slots,
    // not 32 (a free that refills an exhausted bin comes here; devlog.md 2026-11-29).
    std::uint32_t seen = 0;
    for (unsigned s0 = 0; s0 < num_pins; s0 += owned_batch) {
      std::uint64_t e[owned_batch];
      for (unsigned i = 0; i < owned_batch; ++i) e[i] = s0 + i < num_pins ? P::load(&L.pins[s0 + i], relaxed, device_scope) : 0;
      for (unsigned i = 0; i < owned_batch; ++i) {
        if (s0 + i >= num_pins) continue;
        if (e[i] == bin) return true;
        if (e[i] == 0 || borrowed(e[i])) seen |= 1u << (s0 + i);
      }
    }
    open = seen;
    return Bug == ualloc_bug::owned_scan_ends_true;  // (planted: a bin pinned nowhere counts as owned)
  }
  TOGA_DEVICE bool owned(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    std::uint32_t open = 0;
    return owned(L, bin, open);
  }
  //! Pin slots owned() loads per round trip.
  static constexpr unsigned owned_batch = 8;
  // A pin slot holds 0, a bin it owns (the bin's offset), or a bin it borrowed (offset | 1): a
  // slow path whose own slot ran dry serves from a bin another slot owns. Borrowed entries give
  // way to owners.
  TOGA_DEVICE static std::uint64_t slot_bin(std::uint64_t e) { return e & ~std::uint64_t{1}; }
  TOGA_DEVICE static bool borrowed(std::uint64_t e) { return (e & 1u) != 0; }
  // Whether a slot entry may be replaced: empty, borrowed, or (if `exhausted_too`) a bin with no
  // free slots.
  TOGA_DEVICE bool replaceable(std::uint64_t e, bool exhausted_too) const TOGA_NOEXCEPT(P) {
    if (e == 0 || borrowed(e)) return true;
    return exhausted_too && static_cast<std::int32_t>(P::load(&bin_at(e)->free, relaxed, device_scope)) <= 0;
  }
  // Tries the pin slots whose bits `slots` has (bit s: slot s), in order from the warp's own slot:
  // each is read, and taken by CAS if it is empty or borrowed (with `exhausted_too`, also if it
  // holds an exhausted bin). True once the bin is in a slot (ours, or it was there already).
  TOGA_DEVICE std::uint32_t all_pins() const TOGA_NOEXCEPT(P) { return static_cast<std::uint32_t>((std::uint64_t{1} << num_pins) - 1); }
  // The scan starts at the warp's own slot, `rotate` slots on (a GROW's extra bins: one each).
  TOGA_DEVICE bool pin_into(class_list<P>& L, std::uint64_t bin, std::uint32_t slots, bool exhausted_too, unsigned rotate = 0) const TOGA_NOEXCEPT(P) {
    const unsigned s0 = (pin_slot() + rotate) % num_pins;
    const std::uint64_t both = static_cast<std::uint64_t>(slots) | (static_cast<std::uint64_t>(slots) << num_pins);
    for (std::uint64_t order = (both >> s0) & ((std::uint64_t{1} << num_pins) - 1); order != 0; order &= order - 1) {
      const unsigned s = (s0 + bits::ctz(order)) % num_pins;  // bit j of order: slot (s0 + j) % num_pins
      const std::uint64_t p = P::load(&L.pins[s], relaxed, device_scope);
      if (p == bin) return true;
      if (!replaceable(p, exhausted_too)) continue;
      if (set_slot(L, s, p, bin)) return true;
    }
    return false;
  }
  // Puts a bin with free slots into an empty pin slot (and, if `displace`, the slot of an
  // exhausted bin) by CAS; else into the inbox.
  TOGA_DEVICE void pin_insert(class_list<P>& L, std::uint64_t bin, bool displace) const TOGA_NOEXCEPT(P) {
    const std::uint32_t all = all_pins();
    if (pin_into(L, bin, all, false) || (displace && pin_into(L, bin, all, true))) return;
    enqueue(L, bin);
  }
  // pin_insert without displacement, over the slots owned() just saw empty or borrowed (`open`;
  // each re-read before its CAS); else the inbox. A bin refilled on an SM whose slots all hold
  // bins of their own (every slot exhausted after a warm allocation pass) goes to the inbox
  // without a second scan of the 32 slots, one dependent load each (design.md §8.8).
  TOGA_DEVICE void pin_insert_open(class_list<P>& L, std::uint64_t bin, std::uint32_t open) const TOGA_NOEXCEPT(P) {
    if (pin_into(L, bin, open, false)) return;
    if (Bug == ualloc_bug::open_slots_lost_no_enqueue && open != 0) return;  // (planted: every open slot was taken meanwhile, and the bin is dropped)
    enqueue(L, bin);
  }
  // The slow path found free slots in a bin; if our own slot is empty, borrowed or exhausted, it
  // borrows that bin (the bin then sits in two slots, one of them borrowed: harmless).
  TOGA_DEVICE void adopt(class_list<P>& L, unsigned s, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    const std::uint64_t p = P::load(&L.pins[s], relaxed, device_scope);
    if (slot_bin(p) == bin || !replaceable(p, true)) return;
    set_slot(L, s, p, bin | 1u);
  }
  // CAS of pin slot s from p to bin; then the bin it displaced keeps its findability if it has
  // free slots, and a bin retired meanwhile leaves the slot again (its retirer may have looked at
  // this slot before our CAS: see leave_findable).
  TOGA_DEVICE bool set_slot(class_list<P>& L, unsigned s, std::uint64_t p, std::uint64_t entry) const TOGA_NOEXCEPT(P) {
    P::inject(fault_site::stall_pin_swap);
    // [HB] release: a reader that loads the slot sees the bin's header
    if (!P::compare_exchange(&L.pins[s], p, entry, acq_rel, device_scope)) return false;
    const std::uint64_t bin = slot_bin(entry);
    if (!borrowed(entry)) P::store(&bin_at(bin)->home, s + 1, relaxed, device_scope);
    // a displaced bin keeps its findability if it has free slots: an owner looks for a slot (it
    // takes empty or borrowed ones only, so this goes one level deep), a borrower without an
    // owned slot goes to the inbox
    if (p != 0 && Bug != ualloc_bug::pin_swap_drops_bin) {
      if (!borrowed(p)) make_findable(L, p);
      else if (free_sync(slot_bin(p)) > 0 && !owned(L, slot_bin(p))) {
        enqueue(L, slot_bin(p));
        note_reclaimable();  // the displaced bin, now queued, may be empty
      }
    }
    if (is_dead(Bug == ualloc_bug::set_slot_dead_check_relaxed ? static_cast<std::int32_t>(P::load(&bin_at(bin)->free, relaxed, device_scope))
                                                                : free_sync(bin))) {
      std::uint64_t mine = entry;
      P::compare_exchange(&L.pins[s], mine, std::uint64_t{0}, acq_rel, device_scope);
    }
    return true;
  }
  // Pushes a bin onto the inbox unless it is there already (or held, or retired).
  TOGA_DEVICE void enqueue(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    std::uint32_t zero = 0;
    if (!P::compare_exchange(&bin_at(bin)->queued, zero, 2u, acq_rel, device_scope)) return;
    push_chain(L, bin, bin);
    P::store(&bin_at(bin)->queued, 1u, release, device_scope);
  }
  // Pushes the chain first .. last (linked by inbox_next) onto the inbox.
  TOGA_DEVICE void push_chain(class_list<P>& L, std::uint64_t first, std::uint64_t last) const TOGA_NOEXCEPT(P) {
    std::uint64_t head = P::load(&L.inbox, relaxed, device_scope);
    for (unsigned lost = 0;; ++lost) {
      P::store(&bin_at(last)->inbox_next, head, relaxed, device_scope);
      // [HB] release: the taker that takes the stack sees the links
      if (P::compare_exchange(&L.inbox, head, first, acq_rel, device_scope)) return;
      P::backoff(lost);
    }
  }
  TOGA_DEVICE bool pinned(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    for (unsigned s = 0; s < num_pins; ++s)
      if (slot_bin(P::load(&L.pins[s], relaxed, device_scope)) == bin) return true;
    return false;
  }
  // A taker's hold on an inbox bin it took: moves its state 1 (queued) to 2 (held), waiting out a
  // pusher that has linked it but not yet marked it (state 2 for a few steps). Returns 1 (now
  // held) or 3 (retired while queued: the taker defers it).
  TOGA_DEVICE std::uint32_t hold_queued(std::uint64_t b) const TOGA_NOEXCEPT(P) {
    std::uint32_t one = 1;
    for (unsigned attempt = 0; !P::compare_exchange(&bin_at(b)->queued, one, 2u, acq_rel, device_scope) && one == 2; ++attempt) {
      if constexpr (Bug == ualloc_bug::hold_queued_no_wait) return 1;  // (planted: as if it had held it)
      one = 1;
      P::backoff(attempt);
    }
    return one;
  }
  // Hands a retired bin to RCU without a barrier (the caller flushes after its read-side section).
  TOGA_DEVICE void defer_bin(class_list<P>& L, std::uint64_t b) const TOGA_NOEXCEPT(P) {
    L.rcu.defer(b, [this](std::uint64_t x) { return &bin_at(x)->rcu_next; });
  }
  // Takes the whole inbox: bins retired there are deferred to RCU (true: the caller flushes after
  // its read-side section); bins with free slots go into empty or exhausted pin slots while there
  // are some, the rest back onto the inbox in one push; bins without free slots are dropped (the
  // next free that refills one makes it findable again).
  TOGA_DEVICE TOGA_NOINLINE bool take_inbox(class_list<P>& L) const TOGA_NOEXCEPT(P) {
    TOGA_PROFILE_COUNT(prof_ua_reconcile);
    bool deferred = false;
    std::uint64_t b = P::exchange(&L.inbox, std::uint64_t{0}, acq_rel, device_scope);
    std::uint64_t first = 0, last = 0;  // the chain to push back
    unsigned s = pin_slot();
    unsigned tried = 0;  // slots looked at
    while (b != 0) {
      const std::uint64_t next = P::load(&bin_at(b)->inbox_next, relaxed, device_scope);
      const std::uint32_t one = hold_queued(b);
      if (one == 3) {  // retired while queued: its retirer left the deferral to whoever takes it
        defer_bin(L, b);
        deferred = true;
      } else if (free_sync(b) <= 0) {
        // exhausted: dropped; a free that refilled it while we held it saw state 2 and left it to
        // us, so we re-read the count after letting go
        P::inject(fault_site::stall_inbox_hold);
        P::store(&bin_at(b)->queued, 0u, release, device_scope);
        if (Bug != ualloc_bug::no_unlink_on_exhaustion) make_findable(L, b);
      } else {
        bool placed = false;
        for (; tried < num_pins && !placed; ++tried, s = (s + 1) % num_pins) {
          const std::uint64_t p = P::load(&L.pins[s], relaxed, device_scope);
          if (!replaceable(p, true)) continue;
          P::store(&bin_at(b)->queued, 0u, release, device_scope);  // (pinned from here on, or back to 2 below)
          if (set_slot(L, s, p, b)) {
            placed = true;
          } else {
            std::uint32_t zero = 0;
            if (!P::compare_exchange(&bin_at(b)->queued, zero, 2u, acq_rel, device_scope)) {
              placed = Bug != ualloc_bug::placement_race_pushed_back;  // somebody queued it meanwhile (or it was retired: its retirer defers it)
              break;
            }
          }
        }
        if (!placed) {  // keep it for the push back (state 2)
          if (first == 0) first = b;
          else P::store(&bin_at(last)->inbox_next, b, relaxed, device_scope);
          last = b;
        }
      }
      b = next;
    }
    if (first != 0) {
      push_chain(L, first, last);
      // mark them queued, reading each link before the mark (a taker may relink a marked bin)
      for (std::uint64_t x = first;;) {
        const bool end = x == last;
        std::uint64_t nx = 0;
        if constexpr (Bug != ualloc_bug::push_back_marks_before_link) nx = P::load(&bin_at(x)->inbox_next, relaxed, device_scope);
        P::store(&bin_at(x)->queued, 1u, release, device_scope);
        if constexpr (Bug == ualloc_bug::push_back_marks_before_link) nx = P::load(&bin_at(x)->inbox_next, relaxed, device_scope);
        if (end) break;
        x = nx;
      }
    }
    note_reclaimable();  // bins it pinned, pushed back or deferred may be empty
    return deferred;
  }

  // Stage 1 in another arena, for a superbin group whose own arena has neither the units nor
  // promised ones (its next step would be a GROW, one TBuddy climb): the lanes read the class's
  // semaphore in other arenas, g.size at a time, up to TOGA_SB_STEAL_ROUNDS rounds (one relaxed load per lane and
  // round); the leader takes t units with try_wait (a CAS: no speculative decrement on another
  // SM's word, whose bias covers its own lanes only) from the first arena whose free units, less
  // its reservations, cover t. Returns that arena, whose units the leader then holds, or a.
  // An arena that has never gone to GROW for the class does not steal: it GROWs its first
  // superbin (else an SM that a small first launch left without one steals in every later pass,
  // each steal about ten fast paths; design.md §11.8, devlog.md 2026-11-29).
  // Collective over g; no read-side section is held.
  TOGA_DEVICE unsigned steal_units(unsigned a, unsigned c, const coalesced_group<P>& g, std::uint32_t t) const TOGA_NOEXCEPT(P) {
    using sem = slot_semaphore<P>;
    std::uint32_t go = 0;
    if (g.is_leader()) {
      const typename sem::fields f = arenas[a].lists[c].slot_sem.peek();
      go = sem::grow_next(f, t);  // own arena: GROW is next
      if (P::load(&arenas[a].lists[c].grew, relaxed, device_scope) == 0) go = 0;
    }
    if constexpr (Bug == ualloc_bug::steal_grew_per_lane) {
      // (planted: each lane decides from its own load of the flag; lanes that disagree split the collective)
      go = g.broadcast(go);
      if (P::load(&arenas[a].lists[c].grew, relaxed, device_scope) == 0) return a;
      if (go == 0) return a;
    } else if (g.broadcast(go) == 0) {
      return a;
    }
    const unsigned n = num_arenas;
    unsigned got = a;
    for (unsigned first = 1, round = 0; first < n && round < TOGA_SB_STEAL_ROUNDS && got == a; first += g.size, ++round) {
      const unsigned i = first + g.rank;
      bool has = false;
      if (i < n) {
        const typename sem::fields f = arenas[(a + i) % n].lists[c].slot_sem.peek();
        has = f.c >= sem::bias + f.r + t;
      }
      std::uint32_t cand = g.ballot(has);
      if (g.is_leader()) {
        for (; cand != 0; cand &= cand - 1) {
          const unsigned r = bits::popc(g.mask & ((1u << bits::ctz(cand)) - 1u));  // the candidate lane's rank
          const unsigned b = (a + first + r) % n;
          if (arenas[b].lists[c].slot_sem.try_wait(t)) {
            got = b;
            TOGA_PROFILE_COUNT(prof_ua_steal);
            break;
          }
        }
      }
      got = g.broadcast(got);
    }
    return got;
  }

  // ---- GROW -----------------------------------------------------------------------------------

  // Stage 1's answer "refused" broadcast in place of GROW(m) (m never comes near it).
  static constexpr std::uint32_t refused_grow = ~std::uint32_t{0};

  // Whether a GROW of m bins in arena a is bound to fail, from three records (design.md §13.5):
  // TBuddy has no block of the order it would climb for (a recorded failure with no publication
  // since: known_exhausted), the arena's chunks have no bins free or promised for it (chunk
  // classes), and reclaim is recorded clean (a walk would give nothing back); and growth does not
  // come first (a growable heap waits for its service instead). Each is what the GROW itself
  // would find on its way to failing: the refusal only skips the promise, its withdrawal and the
  // waiters that queue behind it, one GROW after another per arena and class (T14 (b): a launch
  // whose requests all fail). Relaxed loads; stale records make the GROW proceed (or refuse a
  // request that a racing free could have served, as a GROW that read the same records would).
  // Out of line: it runs only where a GROW would start.
  TOGA_DEVICE TOGA_NOINLINE bool grow_known_to_fail(unsigned a, std::uint32_t m) const TOGA_NOEXCEPT(P) {
    if constexpr (G::superbins) {
      if (!buddy.known_exhausted(sb_shift - geom::page_shift)) return false;
    } else {
      if (!buddy.known_exhausted(geom::chunk_order)) return false;
      if constexpr (Bug != ualloc_bug::refuse_ignores_chunk_bins) {
        const auto f = arenas[a].chunk_sem.peek();  // C as stored, with the bias
        using sem = slot_semaphore<P>;
        if (!sem::grow_next(f, m)) return false;  // bins free or promised (or unknown)
      }
    }
    return known_clean() && !growth_comes_first();
  }

  // The bins a GROW for a group of t lanes makes in a class of cap slots (stage 1): what the group
  // needs, and for classes of >= 32 slots up to 4 at once (bulk production, E5: the groups arriving
  // behind this one reserve against them); superbins: no over-production (one holds 32 .. 1024
  // slots and a whole TBuddy block). One formula for the CAS loop and refused_at_once.
  TOGA_DEVICE static std::uint32_t stage1_batches(std::uint32_t t, std::uint32_t cap) TOGA_NOEXCEPT(P) {
    std::uint32_t batches = Bug == ualloc_bug::grow_batches_floor && t > cap ? t / cap : (t + cap - 1) / cap;
    if (!G::superbins && cap >= hysteresis_min_capacity && batches < 4) batches = t < 4 ? (batches > t ? batches : t) : 4;
    return batches;
  }

  // Whether stage 1's CAS loop would refuse a group of g.size lanes asking for class c in arena a
  // right away: the semaphore's word, read once, shows nothing available or promised that covers
  // the group (C - Bias + E < R + t: the CAS loop would promise a batch) and that batch is known to
  // fail (grow_known_to_fail, with the batches allocate_slow would ask for). It is the CAS loop's
  // own decision on its first snapshot, taken before the fast path's speculative take and undo and
  // before allocate_slow's frame: a caller that gets true runs the fallback scan at once
  // (fallback_if_failed), as allocate_slow does on a refusal. A failing launch walks a chain of
  // out-of-line slow paths, and their register saves and spills were its cost (benchmarks.md "T14":
  // 2.5 GB of local-memory traffic for 2^20 failing 256 B requests). A true answer is confirmed on
  // the unchanged word (a CAS of the snapshot onto itself), as the CAS loop confirms its refusal:
  // otherwise another group's promise made after the snapshot, with its take of the chunk's last
  // bin, would make the records say "bound to fail" while its units would serve this group
  // (planted bug 104; fallback-race, simulator.md §16.9). A word that moved answers false (the
  // usual path decides). Collective: the leader decides, the group agrees (design.md §13.6).
  TOGA_DEVICE TOGA_NOINLINE bool refused_at_once(unsigned a, unsigned c, const coalesced_group<P>& g) const TOGA_NOEXCEPT(P) {
    std::uint32_t yes = 0;
    if (g.is_leader()) {
      using sem = slot_semaphore<P>;
      auto& S = arenas[a].lists[c].slot_sem;
      const auto w = S.snapshot();
      P::inject(fault_site::stall_read_to_rmw);  // (as the CAS loop's: between the snapshot and the decision)
      const auto f = sem::unpack(w);
      const std::uint32_t cap = capacity(c), t = g.size;
      const bool short_of_units = Bug == ualloc_bug::at_once_ignores_promises ? (f.c >= sem::bias && f.c - sem::bias < t)
                                                                              : sem::grow_next(f, t);
      if (short_of_units) {
        const std::uint32_t batches = stage1_batches(t, cap);  // as allocate_slow's stage 1 asks
        // confirmed as the CAS loop confirms its refusal: the word is still the snapshot
        yes = grow_known_to_fail(a, batches) && (Bug == ualloc_bug::at_once_unconfirmed || S.unchanged(w)) ? 1u : 0u;
      }
    }
    return g.broadcast(yes) != 0;
  }

  // GROW's count of n new bins of class c in arena a (arena_stats::bins, which the walk's filter
  // reads, and grows): before the bins can be found (reclaim_arena).
  TOGA_DEVICE void count_bins(unsigned a, unsigned c, std::uint32_t n) const TOGA_NOEXCEPT(P) {
    P::fetch_add(&arenas[a].stats.bins[c], std::uint64_t{n}, relaxed, device_scope);
    P::fetch_add(&arenas[a].stats.grows, std::uint64_t{n}, relaxed, device_scope);
  }
  // A superbin GROW's extras (bins made ahead of demand), counted in the arena's statistics by the
  // leader before any is pinned: one RMW per GROW, then a warp barrier that orders it before the
  // extras' pins (a walk skips a class whose count reads 0; reclaim_arena). Collective over g.
  TOGA_DEVICE void count_extras(unsigned a, unsigned c, const coalesced_group<P>& g, std::uint32_t extra) const TOGA_NOEXCEPT(P) {
    if constexpr (Bug == ualloc_bug::walk_filter_counted_late) return;
    if (g.is_leader()) {
      count_bins(a, c, extra);
    }
    g.sync();
  }

  // The group got GROW(m): the leader takes m bins from the arena's chunks at once (E5); lanes of
  // rank < m each initialise one; lane r is served by bin r / cap, slot r % cap (the producer's
  // first slots are taken for its lanes). Returns this lane's offset or no_block (its producer
  // found no memory).
  TOGA_DEVICE std::uint64_t grow(unsigned a, unsigned c, const coalesced_group<P>& g, std::uint32_t m, std::uint32_t ahead = 0) const TOGA_NOEXCEPT(P) {
    class_list<P>& L = arenas[a].lists[c];
    const std::uint32_t cap = capacity(c);
    P::inject(fault_site::stall_grow);
    std::uint64_t bin = 0;
    std::uint32_t extra = 0;  // bins past the m promised ones (a fresh chunk's; chunk classes only)
    if constexpr (G::superbins) {
      // every producer lane (rank < m) takes its superbin from TBuddy itself; lanes m .. m + ahead
      // - 1 take one ahead of demand each, without a reclaim (an extra, as a fresh chunk's), while
      // TBuddy stays at most half handed out with it (room_ahead; a lane refused has bin 0, as
      // one whose take failed)
      if (g.rank < m) bin = new_superbin();
      else if (g.rank < m + ahead && room_ahead(std::uint64_t{1} << sb_shift)) bin = new_superbin(false);
      if (ahead > 0) extra = bits::popc(g.ballot(g.rank >= m && bin != 0));
      if (extra > 0) count_extras(a, c, g, extra);
      P::inject(fault_site::stall_grow);  // (again: the superbin is taken, its units still promised)
    } else {
      std::uint32_t made = 0;
      std::uint64_t fresh_chunk = no_block;
      bool locked = false;
      // a fresh chunk: up to one bin per lane (TOGA_FRESH_CHUNK_BINS), the extras unpromised
      const std::uint32_t per_lane = g.size < TOGA_FRESH_CHUNK_BINS ? g.size : TOGA_FRESH_CHUNK_BINS;
      const std::uint32_t fresh_bins = per_lane > m ? per_lane : m;
      if (g.is_leader()) made = acquire_bins(a, m, fresh_chunk, locked, fresh_bins);
      made = g.broadcast(made);
      extra = made > m ? made - m : 0u;
      // the leader's bins, one per producer lane (rank < made): the first bins of a fresh chunk,
      // or bins claimed from the arena's chunks in one hold of the chunk mutex (E5)
      for (std::uint32_t j = 0; j < made; ++j) {
        std::uint64_t b = 0;
        if (g.is_leader())
          b = fresh_chunk != no_block ? fresh_chunk + std::uint64_t{geom::header_bins + j} * geom::page_bytes : claim_bin_locked(a);
        b = g.broadcast(b);
        if (g.rank == j) bin = b;
      }
      if (g.is_leader() && locked) unlock(&arenas[a].chunk_mtx);
      if (extra > 0 && Bug != ualloc_bug::walk_filter_counted_late && g.is_leader()) {
        // the extras counted before the barrier below, which orders the count before their pins
        count_bins(a, c, extra);
      }
      // [HB] the members init and pin bins the leader acquired (a fresh chunk from TBuddy, or bins
      // under the chunk mutex): the broadcast is a shuffle, which orders no memory, so without
      // this __syncwarp their release (pin, signal) does not carry what the leader acquired (the
      // merges and frees that made the chunk, its previous owners' accesses), and a later relaxed
      // routing read (in_superbin, free_of_unmapped) of a lane that takes the bin can be stale
      // (found by random shapes under --memory weak; design.md §17.1)
      if (made > 1 && Bug != ualloc_bug::grow_bins_without_warp_barrier) g.sync();
      P::inject(fault_site::stall_grow);  // (again: the chunk's bins are taken, their units still promised)
    }
    if (g.rank < m) {
      const std::uint64_t left = slot_semaphore<P>::batch_leftover(g.rank, g.size, 1, cap);
      if (bin == 0) {
        L.slot_sem.signal(0, left);  // withdraw: out of memory reaches every waiter
      } else {
        TOGA_PROFILE_COUNT(prof_ua_grow);
        // counted before the pin that makes the bin findable: a walk skips a class whose count
        // reads 0 (reclaim_arena), and a change it must not miss happens after this RMW
        if constexpr (Bug != ualloc_bug::walk_filter_counted_late) {
          count_bins(a, c, 1);
        }
        // inside a read-side section: pin_insert touches the bin it displaces
        const std::uint32_t e = left > 0 ? L.rcu.read_lock() : 0u;
        if constexpr (Bug == ualloc_bug::pin_before_init)
          if (left > 0) pin_insert(L, bin, true);
        init_bin(bin, c, a, static_cast<unsigned>(cap - left));
        if (left > (Bug == ualloc_bug::grow_pins_from_two_left ? 1u : 0u) && Bug != ualloc_bug::pin_before_init) pin_insert(L, bin, true);  // a full bin stays unfindable (U2')
        if (left > 0) L.rcu.read_unlock(e);
        L.slot_sem.signal(left, left);  // [HB] release: units after the pin that makes them findable
        if (left == cap && Bug != ualloc_bug::overproduced_bin_unnoted) note_reclaimable();  // an over-produced bin, pinned empty (E5)
        if constexpr (Bug == ualloc_bug::walk_filter_counted_late) {
          count_bins(a, c, 1);
        }
      }
    }
    if constexpr (Bug == ualloc_bug::ahead_failed_take_signalled)
      if (G::superbins && g.rank >= m && g.rank < m + ahead && bin == 0) L.slot_sem.signal(cap, 0);  // (planted: units without a bin)
    if (g.rank >= m && g.rank < m + (G::superbins ? ahead : extra) && bin != 0) {
      // an extra bin of a fresh chunk: empty, pinned from a slot of its own (else queued); its
      // units were never promised, so they are signalled as new ones (C += cap, E unchanged).
      // (Placed after the promised bins; a barrier between the two that forces the order was
      // measured and changed nothing: the first kernel at low demand is slower either way.)
      TOGA_PROFILE_COUNT(prof_ua_grow);
      const std::uint32_t e = L.rcu.read_lock();
      init_bin(bin, c, a, 0);
      if (!(G::superbins && Bug == ualloc_bug::ahead_extra_unpinned))
        if (!pin_into(L, bin, all_pins(), false, g.rank) && Bug != ualloc_bug::fresh_extra_unqueued) enqueue(L, bin);
      L.rcu.read_unlock(e);
      L.slot_sem.signal(cap, Bug == ualloc_bug::fresh_extra_signalled_as_promised ? cap : 0);  // [HB] release, after the pin
    }
    // [HB] the producers' header stores happen before the members' later reads of them (a free
    // reads class and arena): only __syncwarp orders memory among lanes
    g.sync();
    if (extra > 0 && g.is_leader()) {
      // the extras, counted once per GROW: they are empty bins (E5's over-production), a reclaim
      // change after their pins (the barrier above orders the other lanes' pins before this
      // release); one RMW, not one per extra, since every SM's first GROW makes them at once and
      // the heap-wide counter is one word (measured: one per extra made 16,384-thread first
      // kernels 20 us slower)
      if (Bug != ualloc_bug::overproduced_bin_unnoted) note_reclaimable();
      if constexpr (Bug == ualloc_bug::walk_filter_counted_late) {
        count_bins(a, c, extra);
      }
    }
    const std::uint64_t mine = g.from_rank(bin, g.rank / cap);
    return mine == 0 ? no_block : slot_at(mine, c, g.rank % cap);
  }
  // Lanes that got no_block: try every arena's bins of the class (the own arena first) and, at
  // chunk classes, borrow other arenas' free chunk bins; then reclaim and retry once (E12).
  // Entered by the whole group.
  //
  // The group reads the class's semaphore in every arena, its own first, g.size arenas at a time
  // (one relaxed load per lane and round; two at chunk classes, the arena's chunk semaphore beside
  // it), and its failed lanes try, as one group, only the arenas
  // that showed free units (design.md §13.3: a lane that tried every arena in turn made ~130
  // dependent CAS loops per failing lane; §8.6: one CAS per arena for all the failed lanes).
  // Out of line, with take_elsewhere inline in it (the placement measured in two runs against
  // four others, design.md §8.6; take_elsewhere alone out of line grew allocate_slow's frame and
  // cost T1 8 KiB 1.10-1.21x).
  TOGA_DEVICE TOGA_NOINLINE std::uint64_t fallback_if_failed(unsigned a, unsigned c, const coalesced_group<P>& g, std::uint64_t mine) const TOGA_NOEXCEPT(P) {
    std::uint32_t failed = g.ballot(mine == no_block);
    if (failed == 0) return mine;
    if (mine == no_block) TOGA_PROFILE_COUNT(prof_ua_fallback);
    using sem = slot_semaphore<P>;
    const unsigned n = num_arenas;
    // (from the group's own arena: a group refused because its arena holds fewer units than it
    // has lanes takes those first; the other arenas' after)
    for (unsigned first = Bug == ualloc_bug::fallback_skips_own_arena ? 1 : 0; first < n && failed != 0; first += g.size) {
      const unsigned i = first + g.rank;
      bool has = false, has_bins = false;
      if (i < n) {
        has = arenas[(a + i) % n].lists[c].slot_sem.peek().c > sem::bias;  // try_wait_upto may take some
        // chunk classes: free bins of the arena's chunks (the same round's second load)
        if constexpr (borrows) has_bins = has_free_chunk_bins((a + i) % n);
      }
      for (std::uint32_t cand = g.ballot(has); cand != 0 && failed != 0; cand &= cand - 1) {
        const unsigned r = bits::popc(g.mask & ((1u << bits::ctz(cand)) - 1u));  // the candidate lane's rank
        if (mine == no_block) mine = take_elsewhere((a + first + r) % n, c, coalesced_group<P>::of(failed));
        failed = g.ballot(mine == no_block);
      }
      if constexpr (borrows)
        for (std::uint32_t cand = failed != 0 ? g.ballot(has_bins) : 0u; cand != 0 && failed != 0; cand &= cand - 1) {
          const unsigned r = bits::popc(g.mask & ((1u << bits::ctz(cand)) - 1u));
          if (mine == no_block) mine = borrow_bins(a, (a + first + r) % n, c, coalesced_group<P>::of(failed));
          failed = g.ballot(mine == no_block);
        }
    }
    if (mine != no_block) return mine;
    // the failed lanes continue alone (rare: the heap is nearly exhausted)
    if (reclaim()) {
      mine = retry_once(a, c);
      // chunk classes: the walk may have returned a bin to another arena's chunk (release_bin
      // goes by the chunk's arena): borrow it (one lane; found by a review, design.md §8.6)
      if constexpr (borrows)
        for (unsigned i = 0; i < n && mine == no_block; ++i)
          if (has_free_chunk_bins((a + i) % n)) mine = borrow_bins(a, (a + i) % n, c, coalesced_group<P>::self());
    }
    return mine;
  }
  // Whether the out-of-memory fallback borrows other arenas' free chunk bins (chunk classes;
  // design.md §8.6), and whether arena b's chunks hold a free bin now (a relaxed snapshot).
  static constexpr bool borrows = !G::superbins && Bug != ualloc_bug::fallback_never_borrows;
  TOGA_DEVICE TOGA_FORCEINLINE bool has_free_chunk_bins(unsigned b) const TOGA_NOEXCEPT(P) {
    return arenas[b].chunk_sem.peek().c > slot_semaphore<P>::bias;
  }
  // Slots of class c for the group f (lanes without one) from arena b's findable bins (the group's
  // own arena or another), without GROW: the leader takes up to f.size units with one CAS
  // (try_wait_upto: no speculative decrement, which another SM's bias would not cover), and the lanes
  // of rank below the units taken run stage 2 there as one group (serve_held), as a group that
  // stole units does. Returns this lane's offset, or no_block (a rank beyond the units taken).
  // Collective over f; no read-side section is held.
  TOGA_DEVICE TOGA_FORCEINLINE std::uint64_t take_elsewhere(unsigned b, unsigned c, const coalesced_group<P>& f) const TOGA_NOEXCEPT(P) {
    class_list<P>& L = arenas[b].lists[c];
    std::uint32_t got = 0;
    if (f.is_leader()) got = static_cast<std::uint32_t>(L.slot_sem.try_wait_upto(f.size));
    got = f.broadcast(got);
    if constexpr (Bug == ualloc_bug::fallback_group_overtakes)
      if (got > 0) got = f.size;  // (planted: every lane counts itself served by the leader's take)
    std::uint32_t served = got;   // the lanes that run stage 2 here
    if constexpr (Bug == ualloc_bug::fallback_group_rank_off_by_one)
      if (got > 0 && got < f.size) served = got + 1;  // (planted: one lane more than the units taken)
    if (f.rank >= served) return no_block;
    const auto h = coalesced_group<P>::of(static_cast<std::uint32_t>(bits::lowest(f.mask, served)));
    if (h.is_leader()) TOGA_PROFILE_COUNT(prof_ua_fallback_take);
    alloc_progress pr{0, 0, got, 0, 0, 0, 1, 0};
    if (h.is_leader()) pr.token = L.rcu.read_lock();
    if (h.size > 1 && Bug != ualloc_bug::find_before_section_barrier) h.sync();  // [HB] as after allocate_slow's CAS loop
    return serve_held(L, c, h, pr, no_block);
  }
  // Chunk classes: bins of class c for arena a made from arena b's free chunk bins, for the group
  // f (lanes without a slot) once TBuddy has no chunk for arena a (the fallback, design.md §8.6).
  // Without it the bins that the other arenas' last chunks never used stay unused while requests
  // fail (T8: 74,000 of the next 100,000 16 B requests were served after the first nullptr). The
  // leader takes up to ceil(f.size / cap) units of b's chunk semaphore with one CAS
  // (try_wait_upto) and claims that many bins under b's chunk mutex; lane j < bins initialises bin
  // j for arena a with the slots of ranks j * cap .. taken (a GROW's bin, but unpromised: its other
  // slots are signalled as new units, as a fresh chunk's extras are). The bin stays in b's chunk:
  // release_bin returns it to its chunk's arena. Returns this lane's offset, or no_block (a rank
  // beyond the bins' slots). Collective over f; no read-side section is held.
  TOGA_DEVICE TOGA_FORCEINLINE std::uint64_t borrow_bins(unsigned a, unsigned b, unsigned c, const coalesced_group<P>& f) const TOGA_NOEXCEPT(P) {
    const std::uint32_t cap = capacity(c);
    arena<P, G>& B = arenas[b];
    std::uint32_t got = 0;
    if (f.is_leader()) {
      got = static_cast<std::uint32_t>(B.chunk_sem.try_wait_upto((f.size + cap - 1) / cap));
      if (got > 0) lock(&B.chunk_mtx);
    }
    got = f.broadcast(got);
    if (got == 0) return no_block;
    std::uint64_t bin = 0;
    for (std::uint32_t j = 0; j < got; ++j) {
      std::uint64_t x = 0;
      if (f.is_leader()) x = claim_bin_locked(b);
      x = f.broadcast(x);
      if (f.rank == j) bin = x;
    }
    if (f.is_leader()) unlock(&B.chunk_mtx);
    if (got > 1) f.sync();  // [HB] as in grow: the members init and pin bins the leader acquired
    if (f.rank < got) {
      class_list<P>& L = arenas[a].lists[c];
      const std::uint32_t used = f.size - f.rank * cap < cap ? f.size - f.rank * cap : cap;  // the lanes this bin serves
      const std::uint32_t left = cap - used;
      TOGA_PROFILE_COUNT(prof_ua_grow);
      count_bins(a, c, 1);  // before the pin that makes it findable (reclaim_arena's filter)
      const std::uint32_t e = left > 0 ? L.rcu.read_lock() : 0u;
      init_bin(bin, c, a, used);
      if (left > 0) pin_insert(L, bin, true);  // a full bin stays unfindable (U2')
      if (left > 0) L.rcu.read_unlock(e);
      if (left > 0) L.slot_sem.signal(left, 0);  // [HB] release, after the pin; never promised
    }
    f.sync();  // [HB] the producers' header stores before the members' later reads (as in grow)
    const std::uint64_t mine = f.from_rank(bin, f.rank / cap);
    return mine == 0 ? no_block : slot_at(mine, c, f.rank % cap);
  }
  // Stage 2 for one lane holding one unit of L (outside any read-side section).
  TOGA_DEVICE std::uint64_t stage2_one(class_list<P>& L, unsigned c) const TOGA_NOEXCEPT(P) {
    alloc_progress pr{0, 0, 1, 0, 0, 0, 1, 0};
    pr.token = L.rcu.read_lock();
    find_reservation(L, c, coalesced_group<P>::self(), pr);
    std::uint64_t claimed = 0;
    while (claimed == 0) claimed = claim_bits(bin_at(pr.bin), capacity(c), 1, pr.hint);
    ghost_add<P>(ghost_kind::bin_transit, bin_at(pr.bin), -1);
    L.rcu.read_unlock(pr.token);
    if (pr.deferred) flush(L);
    return slot_at(pr.bin, c, (pr.hint / 64) * 64 + bits::ctz(claimed));
  }
  // After a reclaim: one more allocation by this lane alone in its own arena (no further fallback).
  TOGA_DEVICE std::uint64_t retry_once(unsigned a, unsigned c) const TOGA_NOEXCEPT(P) {
    class_list<P>& L = arenas[a].lists[c];
    if (L.slot_sem.wait_slow(1, capacity(c)) == sem_result::grow) return grow(a, c, coalesced_group<P>::self(), 1);
    return stage2_one(L, c);
  }

  // ---- free ---------------------------------------------------------------------------------------

  // Leader of a free group, after its k bits were cleared: count them, make the bin findable at a
  // zero crossing, signal, and retire an empty bin (design.md §9.2, §9.3, per group). The read-side
  // section covers every access to the header after our count makes the bin retirable.
  TOGA_DEVICE TOGA_FORCEINLINE void free_count(class_list<P>& L, std::uint64_t bin, unsigned c, std::uint32_t k) const TOGA_NOEXCEPT(P) {
    header_t* h = bin_at(bin);
    const std::uint32_t cap = capacity(c);
    std::uint32_t e = 0;
    if constexpr (Bug != ualloc_bug::free_outside_read_section) e = L.rcu.read_lock();
    const std::int32_t before = static_cast<std::int32_t>(P::fetch_add(&h->free, k, relaxed, device_scope));
    ghost_add<P>(ghost_kind::bin_transit, h, -static_cast<std::int64_t>(k));
    // an entirely free bin's ordinals are exact again: no hint (inside our read-side section, so
    // before any reuse of a bin retired meanwhile; init_bin resets it anyway)
    if constexpr (G::superbins)
      if (before + static_cast<std::int32_t>(k) == static_cast<std::int32_t>(cap)) P::store(&h->free_hint, no_free_hint, relaxed, device_scope);
    const bool refilled = before <= 0 && before + static_cast<std::int32_t>(k) > 0 && Bug != ualloc_bug::no_relink_on_refill;
    // Classes whose empty bins are retired (fewer than 32 slots; E11) take the cold path.
    if (refilled || cap < hysteresis_min_capacity) {
      out_of_line<true>([&](const ualloc& u) { u.free_cold(L, bin, cap, k, before, refilled, e); });
      return;
    }
    L.slot_sem.signal_relaxed(Bug == ualloc_bug::free_signals_short ? k - 1 : k, 0);  // slots are found by RMWs (E4)
    P::inject(fault_site::stall_read_section);
    if constexpr (Bug != ualloc_bug::free_outside_read_section) L.rcu.read_unlock(e);
    // an empty bin (pinned or queued: it had free slots) is reclaim()'s to give back (a held one:
    // its holder counts when it lets go)
    if (before + static_cast<std::int32_t>(k) == static_cast<std::int32_t>(cap) && Bug != ualloc_bug::empty_bin_unnoted) note_reclaimable();
  }
  // The rest of a group free when the bin was refilled from empty or belongs to a class whose
  // empty bins are retired; ends the read-side section.
  TOGA_DEVICE TOGA_NOINLINE void free_cold(class_list<P>& L, std::uint64_t bin, std::uint32_t cap, std::uint32_t k, std::int32_t before,
                                           bool refilled, std::uint32_t e) const TOGA_NOEXCEPT(P) {
    TOGA_PROFILE_COUNT(prof_ua_free_cold);
    header_t* h = bin_at(bin);
    bool retire = false;
    if (cap < hysteresis_min_capacity && before == 0 && k == cap) {
      // The group freed a full bin whole: nobody can hold units of it (a full bin is unfindable
      // or an exhausted pin). Retire it without publishing its slots: no signal, no list.
      std::uint32_t expected = cap;
      if (P::compare_exchange(&h->free, expected, dead, acq_rel, device_scope)) {
        ghost_add<P>(ghost_kind::bin_live, h, -1);
        TOGA_PROFILE_COUNT(prof_ua_retire);
        // a full bin may be an exhausted pin or be held in the inbox: it leaves both before it is
        // deferred
        const bool ours = leave_findable(L, bin);
        P::inject(fault_site::stall_read_section);
        if constexpr (Bug != ualloc_bug::free_outside_read_section) L.rcu.read_unlock(e);
        if (ours) retire_bin(L, bin);
        else flush(L);
        note_reclaimable();
        return;
      }
      // somebody reserved through the pin meanwhile: our slots are published as usual
    }
    if (refilled) make_findable(L, bin);
    L.slot_sem.signal_relaxed(Bug == ualloc_bug::free_signals_short ? k - 1 : k, 0);
    bool deferred = false;
    // (pinned: a hint, read without a lock; a pinned bin is kept)
    if (cap < hysteresis_min_capacity && !pinned(L, bin) &&
        (before + static_cast<std::int32_t>(k) == static_cast<std::int32_t>(cap) ||
         (Bug != ualloc_bug::free_cold_no_reread && retirable(static_cast<std::int32_t>(P::load(&h->free, relaxed, device_scope)), cap)))) {
      const int r = try_retire(L, bin, cap);
      retire = r == 1;
      deferred = r == 2;
    }
    P::inject(fault_site::stall_read_section);
    if constexpr (Bug != ualloc_bug::free_outside_read_section) L.rcu.read_unlock(e);
    if (retire) retire_bin(L, bin);
    if (deferred) flush(L);
    note_reclaimable();  // (cold: whatever it left, a pinned empty bin, a deferred one, a free chunk)
  }

  TOGA_DEVICE void retire_bin(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    L.rcu.retire(bin, [this](std::uint64_t b) { return &bin_at(b)->rcu_next; }, [this](std::uint64_t b) { release_bin(b); });
    note_reclaimable();  // delegated to a pending barrier, or run: a bin back in its chunk
  }
  TOGA_DEVICE static void lock(std::uint32_t* m) TOGA_NOEXCEPT(P) {
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t expected = 0;
      if (P::compare_exchange(m, expected, 1u, acquire, device_scope)) return;
      TOGA_PROFILE_COUNT(prof_ua_lock_spin);
      P::backoff(attempt);
    }
  }
  TOGA_DEVICE static void unlock(std::uint32_t* m) TOGA_NOEXCEPT(P) { P::store(m, 0u, release, device_scope); }

  // A fresh bin: bits >= capacity set, `taken` slots (0..taken-1) in use.
  TOGA_DEVICE void init_bin(std::uint64_t bin, unsigned c, unsigned a, unsigned taken) const TOGA_NOEXCEPT(P) {
    header_t* h = bin_at(bin);
    const unsigned cap = capacity(c);
    // (a superbin's entry holds the words of its class only: geom::sb_header_stride)
    const unsigned words = G::superbins ? (cap + 63) / 64 : G::bitmap_words;
    for (unsigned w = 0; w < words; ++w) {
      std::uint64_t bits = 0;
      const unsigned lo = w * 64;
      // bits [lo, lo+64) that are < taken or >= cap
      if (taken > lo) bits |= taken - lo >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (taken - lo)) - 1);
      if (cap < lo + 64) bits |= cap <= lo ? ~std::uint64_t{0} : ~((std::uint64_t{1} << (cap - lo)) - 1);
      P::store(&h->bitmap[w], bits, relaxed, device_scope);
    }
    P::store(&h->free, cap - taken, relaxed, device_scope);
    P::store(&h->capacity, cap, relaxed, device_scope);
    P::store(&h->class_id, c, relaxed, device_scope);
    P::store(&h->arena, a, relaxed, device_scope);
    if constexpr (Bug != ualloc_bug::init_bin_keeps_queued) P::store(&h->queued, 0u, relaxed, device_scope);
    P::store(&h->home, 0u, relaxed, device_scope);
    P::store(&h->free_hint, no_free_hint, relaxed, device_scope);
    ghost_add<P>(ghost_kind::bin_live, h, 1);
  }
  // Inside L's read-side section. 0: not retired; 1: retired, the caller defers it (retire_bin,
  // after the section); 2: retired and already deferred (the caller flushes RCU after the section).
  TOGA_DEVICE int try_retire(class_list<P>& L, std::uint64_t bin, std::uint32_t cap) const TOGA_NOEXCEPT(P) {
    if constexpr (Bug != ualloc_bug::retire_without_try_wait)
      if (!L.slot_sem.try_wait(Bug == ualloc_bug::retire_takes_one_unit_short ? cap - 1 : cap)) return 0;  // the units are promised to waiters: keep it
    std::uint32_t expected = cap;
    if constexpr (G::superbins && Bug == ualloc_bug::superbin_returned_live) {
      // (planted: retires what it finds, live slots or not)
      expected = P::load(&bin_at(bin)->free, relaxed, device_scope);
      if (static_cast<std::int32_t>(expected) <= 0) expected = cap;
    }
    if (!P::compare_exchange(&bin_at(bin)->free, expected, dead, acq_rel, device_scope)) {
      if constexpr (Bug != ualloc_bug::retire_without_try_wait) L.slot_sem.signal(Bug == ualloc_bug::retire_takes_one_unit_short ? cap - 1 : cap, 0);
      return 0;  // somebody reserved meanwhile
    }
    ghost_add<P>(ghost_kind::bin_live, bin_at(bin), -1);
    TOGA_PROFILE_COUNT(prof_ua_retire);
    return leave_findable(L, bin) ? 1 : 2;
  }
  // A retired (DEAD) bin leaves every pin slot (CAS to empty): a writer that puts it into a slot
  // after we looked re-reads its count afterwards, sees DEAD and takes it out again (set_slot).
  // Its inbox state becomes 3 (waiting out a holder's state 2): from state 0 the caller defers it
  // (true); from state 1 it is in the inbox, which we take now (the bin is deferred by whoever
  // holds it when it meets the 3: us, or a taker holding the stack), and the caller flushes RCU
  // after its read-side section (false). Inside a read-side section.
  TOGA_DEVICE bool leave_findable(class_list<P>& L, std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    if constexpr (Bug != ualloc_bug::retire_keeps_pin) {
      const unsigned slots = Bug == ualloc_bug::leave_findable_skips_last_slot && num_pins > 1 ? num_pins - 1 : num_pins;
      for (unsigned s = 0; s < slots; ++s) {
        std::uint64_t mine = P::load(&L.pins[s], relaxed, device_scope);
        if (slot_bin(mine) == bin) P::compare_exchange(&L.pins[s], mine, std::uint64_t{0}, acq_rel, device_scope);
      }
    }
    std::uint32_t st = P::load(&bin_at(bin)->queued, relaxed, device_scope);
    for (unsigned attempt = 0;; ++attempt) {
      if (st == 2) {  // held by a pusher or taker: a few steps
        P::backoff(attempt);
        st = P::load(&bin_at(bin)->queued, relaxed, device_scope);
        continue;
      }
      if (P::compare_exchange(&bin_at(bin)->queued, st, 3u, acq_rel, device_scope)) break;
    }
    if (st != 1) return true;
    take_inbox(L);
    return Bug == ualloc_bug::retire_queued_deferred_twice;  // (planted: the caller defers it too, as does the taker)
  }
  // reclaim's part for the inbox (inside a read-side section): takes it; empty bins are retired
  // and deferred to RCU, bins with free slots made findable again. True if anything was retired.
  TOGA_DEVICE bool reclaim_inbox(class_list<P>& L, std::uint32_t cap, bool& skipped) const TOGA_NOEXCEPT(P) {
    bool any = false;
    std::uint64_t b = P::exchange(&L.inbox, std::uint64_t{0}, acq_rel, device_scope);
    while (b != 0) {
      const std::uint64_t next = P::load(&bin_at(b)->inbox_next, relaxed, device_scope);
      if (hold_queued(b) == 3) {
        defer_bin(L, b);
        any = true;
      } else {
        P::store(&bin_at(b)->queued, 0u, release, device_scope);
        const bool empty = free_now(b) == static_cast<std::int32_t>(cap);
        const int r = empty ? try_retire(L, b, cap) : 0;
        if (r == 1) defer_bin(L, b);
        if (r == 0 && (Bug != ualloc_bug::reclaim_inbox_drops_partial || empty)) make_findable(L, b, false);
        any |= r != 0;
        if (Bug != ualloc_bug::inbox_skip_unrecorded) skipped |= empty && r == 0;
      }
      b = next;
    }
    return any;
  }
  // RCU callback: the bin goes back to its chunk, under the chunk's arena's mutex (a bin lent to
  // another arena's class list by borrow_bins goes back to its owner); an entirely free chunk goes
  // back to TBuddy unless it is its arena's one cached chunk (E11) and was not emptied by a lent bin.
  TOGA_DEVICE void release_bin(std::uint64_t bin) const TOGA_NOEXCEPT(P) {
    const unsigned a = P::load(&bin_at(bin)->arena, relaxed, device_scope);
    const unsigned c = P::load(&bin_at(bin)->class_id, relaxed, device_scope);
    P::fetch_sub(&arenas[a].stats.bins[c], std::uint64_t{1}, relaxed, device_scope);
    if constexpr (G::superbins) {  // the whole block goes back (its tag goes with its state)
      P::poison(base + superbin_offset(bin), std::uint64_t{1} << sb_shift);
      buddy.free(superbin_offset(bin));
      return;
    }
    P::poison(base + bin + sizeof(bin_header), geom::bin_data_bytes);
    const std::uint64_t chunk = bin & ~(geom::chunk_bytes - 1);
    chunk_header* ch = chunk_at(chunk);
    // the chunk's arena: a bin borrowed by another arena's class list (borrow_bins) goes back there
    const unsigned ca = Bug == ualloc_bug::borrowed_bin_to_bin_arena ? a : P::load(&ch->arena, relaxed, device_scope);
    arena<P, G>& A = arenas[ca];
    const unsigned b = static_cast<unsigned>((bin - chunk) / geom::page_bytes);
    lock(&A.chunk_mtx);
    P::fetch_and(&ch->bin_bitmap[b / 64], ~(std::uint64_t{1} << (b % 64)), relaxed, device_scope);
    const std::uint32_t fb = P::fetch_add(&ch->free_bins, 1u, relaxed, device_scope) + 1;
    const bool all_free = Bug == ualloc_bug::chunk_returned_with_live_bins ? true : fb == geom::usable_bins;
    // a chunk emptied by a borrowed bin's release goes back to TBuddy, not into its arena's cache:
    // that arena's walk item may have run already (a walk's items run side by side), and one walk
    // after every free must give the whole heap back (the exhaust scenario's recovery)
    const bool lent = Bug != ualloc_bug::borrowed_chunk_cached && ca != a;
    if (all_free && (Bug == ualloc_bug::chunk_returned_with_live_bins || lent || another_free_chunk(A, chunk)) &&
        A.chunk_sem.try_wait(fb - 1)) {  // the other free bins were signalled earlier
      if (P::load(&ch->listed, relaxed, device_scope)) unlink_chunk(A, chunk);
      unlock(&A.chunk_mtx);
      P::fetch_sub(&A.stats.chunks, std::uint64_t{1}, relaxed, device_scope);
      buddy.free(chunk);
      return;
    }
    if (!P::load(&ch->listed, relaxed, device_scope)) link_chunk(A, chunk);
    if constexpr (Bug != ualloc_bug::chunk_signal_after_unlock) A.chunk_sem.signal(1, 0);  // under the mutex: try_wait above never sees a half-signalled chunk
    unlock(&A.chunk_mtx);
    if constexpr (Bug == ualloc_bug::chunk_signal_after_unlock) A.chunk_sem.signal(1, 0);
    if (all_free) note_reclaimable();  // the arena's cached free chunk (E11)
  }
  // Under chunk_mtx: is another listed chunk of the arena entirely free (the cached one)?
  TOGA_DEVICE bool another_free_chunk(arena<P, G>& A, std::uint64_t chunk) const TOGA_NOEXCEPT(P) {
    for (std::uint64_t link = P::load(&A.chunk_head, relaxed, device_scope); link != 0;
         link = P::load(&chunk_at(dec(link))->next, relaxed, device_scope))
      if (dec(link) != chunk && P::load(&chunk_at(dec(link))->free_bins, relaxed, device_scope) == geom::usable_bins) return true;
    return false;
  }
  // Returns the arena's entirely free chunks to TBuddy (reclaim). True if any went back.
  TOGA_DEVICE bool return_cached_chunks(unsigned a, bool& skipped) const TOGA_NOEXCEPT(P) {
    arena<P, G>& A = arenas[a];
    if (P::load(&A.chunk_head, relaxed, device_scope) == 0) return false;
    bool any = false;
    for (;;) {
      std::uint64_t victim = 0;  // link (offset + 1) of an entirely free chunk, or 0
      lock(&A.chunk_mtx);
      for (std::uint64_t link = P::load(&A.chunk_head, relaxed, device_scope); link != 0;
           link = P::load(&chunk_at(dec(link))->next, relaxed, device_scope))
        if (P::load(&chunk_at(dec(link))->free_bins, relaxed, device_scope) == geom::usable_bins) {
          victim = link;
          break;
        }
      if (victim != 0 && A.chunk_sem.try_wait(geom::usable_bins)) {
        unlink_chunk(A, dec(victim));
        unlock(&A.chunk_mtx);
        P::fetch_sub(&A.stats.chunks, std::uint64_t{1}, relaxed, device_scope);
        buddy.free(dec(victim));
        any = true;
        continue;
      }
      unlock(&A.chunk_mtx);
      if (Bug != ualloc_bug::chunk_skip_unrecorded) skipped |= victim != 0;  // its units are held
      return any;
    }
  }
  // Chunk links hold offset + 1 (a chunk may start at offset 0; 0 means "none").
  TOGA_DEVICE static std::uint64_t enc(std::uint64_t chunk) { return chunk + 1; }
  TOGA_DEVICE static std::uint64_t dec(std::uint64_t link) { return link - 1; }
  TOGA_DEVICE void link_chunk(arena<P, G>& A, std::uint64_t chunk) const TOGA_NOEXCEPT(P) {
    chunk_header* ch = chunk_at(chunk);
    const std::uint64_t head = P::load(&A.chunk_head, relaxed, device_scope);
    P::store(&ch->next, head, relaxed, device_scope);
    P::store(&ch->prev, std::uint64_t{0}, relaxed, device_scope);
    if (head) P::store(&chunk_at(dec(head))->prev, enc(chunk), relaxed, device_scope);
    P::store(&ch->listed, 1u, relaxed, device_scope);
    P::store(&A.chunk_head, enc(chunk), relaxed, device_scope);
  }
  TOGA_DEVICE void unlink_chunk(arena<P, G>& A, std::uint64_t chunk) const TOGA_NOEXCEPT(P) {
    chunk_header* ch = chunk_at(chunk);
    const std::uint64_t next = P::load(&ch->next, relaxed, device_scope);
    const std::uint64_t prev = P::load(&ch->prev, relaxed, device_scope);
    if (prev) P::store(&chunk_at(dec(prev))->next, next, relaxed, device_scope);
    else P::store(&A.chunk_head, next, relaxed, device_scope);
    if (next) P::store(&chunk_at(dec(next))->prev, prev, relaxed, device_scope);
    P::store(&ch->listed, 0u, relaxed, device_scope);
  }
  // A producer lane of a superbin GROW: one TBuddy block of 2^sb_shift bytes, tagged as a superbin
  // (frees inside it are routed by the tag); reclaims and tries once more when TBuddy has none.
  // Returns the superbin's name, or 0.
  TOGA_DEVICE std::uint64_t new_superbin(bool may_reclaim = true) const TOGA_NOEXCEPT(P) {
    const unsigned order = sb_shift - geom::page_shift;
    std::uint64_t off = P::inject(fault_site::fail_chunk) ? no_block : buddy.alloc(order);
    if (off == no_block && may_reclaim && reclaim()) off = buddy.alloc(order);
    if (off == no_block) return 0;
    if constexpr (Bug != ualloc_bug::superbin_tag_not_set) buddy.tag_block(off, order, node_superbin_tag);
    return superbin_id(off);
  }
  // Leader of a GROW(m): takes m units of the arena's chunk semaphore (one speculative RMW, or the
  // CAS loop). GROW there: a new chunk from TBuddy whose first m bins are ours (fresh_chunk);
  // OK: the chunk mutex is taken (locked) and claim_bin_locked hands out the m bins. Returns m
  // (a fresh chunk: fresh_bins, its first bins), or 0 when no chunk can be had (design.md §8.5, E5: one mutex hold for the group, not one per bin).
  TOGA_DEVICE std::uint32_t acquire_bins(unsigned a, std::uint32_t m, std::uint64_t& fresh_chunk, bool& locked, std::uint32_t fresh_bins) const TOGA_NOEXCEPT(P) {
    arena<P, G>& A = arenas[a];
    const bool ok = A.chunk_sem.try_take(m) || A.chunk_sem.wait_slow(m, geom::usable_bins) == sem_result::ok;
    if (ok) {
      lock(&A.chunk_mtx);
      locked = true;
      return m;
    }
    std::uint64_t chunk = P::inject(fault_site::fail_chunk) ? no_block : buddy.alloc(geom::chunk_order);
    if (chunk == no_block && reclaim()) chunk = buddy.alloc(geom::chunk_order);
    if (chunk == no_block) {
      A.chunk_sem.signal(0, geom::usable_bins - m);
      return 0;
    }
    buddy.tag_chunk(chunk, geom::chunk_order);
    chunk_header* ch = chunk_at(chunk);
    // the bins we take: the m promised ones and a fresh chunk's extras (the caller's fresh_bins >= m)
    const std::uint32_t took = fresh_bins < geom::usable_bins ? fresh_bins : geom::usable_bins;
    for (unsigned w = 0; w < geom::bins_per_chunk / 64; ++w) {
      std::uint64_t bits = 0;
      for (unsigned b = 0; b < 64; ++b)
        if (w * 64 + b < geom::header_bins + took) bits |= std::uint64_t{1} << b;  // header bins + our bins
      P::store(&ch->bin_bitmap[w], bits, relaxed, device_scope);
    }
    P::store(&ch->free_bins, geom::usable_bins - took, relaxed, device_scope);
    P::store(&ch->arena, a, relaxed, device_scope);
    P::fetch_add(&A.stats.chunks, std::uint64_t{1}, relaxed, device_scope);
    lock(&A.chunk_mtx);
    link_chunk(A, chunk);
    unlock(&A.chunk_mtx);
    A.chunk_sem.signal(geom::usable_bins - took, geom::usable_bins - m);  // (the extras' units were never promised)
    fresh_chunk = chunk;
    return took;
  }
  // Under chunk_mtx, holding a chunk-semaphore unit: a free bin of arena a (heap offset).
  TOGA_DEVICE std::uint64_t claim_bin_locked(unsigned a) const TOGA_NOEXCEPT(P) {
    arena<P, G>& A = arenas[a];
    std::uint64_t link = P::load(&A.chunk_head, relaxed, device_scope);
    while (link != 0 && P::load(&chunk_at(dec(link))->free_bins, relaxed, device_scope) == 0)
      link = P::load(&chunk_at(dec(link))->next, relaxed, device_scope);
    if (link == 0) P::fail("ualloc: a chunk-semaphore unit without a listed chunk with free bins (U3)");
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
    return chunk + std::uint64_t{b} * geom::page_bytes;
  }
};

}  // namespace toga
