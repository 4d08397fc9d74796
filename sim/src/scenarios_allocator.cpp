// Simulator scenarios for toga's allocator (design.md §6-§17; scenarios: §20.2): alloc-storm, exhaust-recover,
// mixed-sizes. Every block gets a per-allocation pattern that is verified when it is freed; a
// ghost map of live blocks checks overlap (G1), alignment (G4) and routing/size (G3, G5) at
// every allocation; per-step invariants check that no semaphore counts more units than can be
// found (S5, upper bound); the quiescent checker (toga/heap_walk.hpp) runs after every schedule.
// `bug=N` selects a planted bug (see the table in register_allocator_scenarios).
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "heap_scenarios.hpp"
#include "toga/sim/scenario.hpp"

namespace toga::sim {
namespace heap_scenarios {

std::unique_ptr<instance> make_heap(world& w, const params& p, mode md) {
  switch (p.get("bug", 0)) {
    case 1: return make_one<ualloc_bug::free_outside_read_section, tbuddy_bug::none>(w, p, md);
    case 2: return make_one<ualloc_bug::retire_without_try_wait, tbuddy_bug::none>(w, p, md);
    case 3: return make_one<ualloc_bug::chunk_returned_with_live_bins, tbuddy_bug::none>(w, p, md);
    case 4: return make_one<ualloc_bug::no_unlink_on_exhaustion, tbuddy_bug::none>(w, p, md);
    case 5: return make_one<ualloc_bug::no_relink_on_refill, tbuddy_bug::none>(w, p, md);
    case 6: return make_one<ualloc_bug::none, tbuddy_bug::merge_without_unit>(w, p, md);
    case 7: return make_one<ualloc_bug::none, tbuddy_bug::claim_without_lock>(w, p, md);
    case 8: return make_one<ualloc_bug::none, tbuddy_bug::oom_keeps_promises>(w, p, md);
    case 9: return make_one<ualloc_bug::claim_without_reservation, tbuddy_bug::none>(w, p, md);
    case 10: return make_one<ualloc_bug::two_lanes_one_bit, tbuddy_bug::none>(w, p, md);
    case 11: return make_one<ualloc_bug::pin_swap_drops_bin, tbuddy_bug::none>(w, p, md);
    case 12: return make_one<ualloc_bug::retire_keeps_pin, tbuddy_bug::none>(w, p, md);
    case 13: return make_one<ualloc_bug::dead_near_wrap, tbuddy_bug::none>(w, p, md);
    case 14: return make_one<ualloc_bug::pin_before_init, tbuddy_bug::none>(w, p, md);
    case 15: return make_one<ualloc_bug::or_drops_lane, tbuddy_bug::none>(w, p, md);
    case 16: return make_one<ualloc_bug::free_signals_short, tbuddy_bug::none>(w, p, md);
    case 17: return make_one<ualloc_bug::undo_whole_reservation, tbuddy_bug::none>(w, p, md);
    case 18: return make_one<ualloc_bug::relaxed_slot_free, tbuddy_bug::none>(w, p, md);
    case 19: return make_one<ualloc_bug::relaxed_slot_claim, tbuddy_bug::none>(w, p, md);
    case 20: return make_one<ualloc_bug::free_without_warp_barrier, tbuddy_bug::none>(w, p, md);
    case 21: return make_one<ualloc_bug::superbin_tag_not_set, tbuddy_bug::none>(w, p, md);
    case 22: return make_one<ualloc_bug::superbin_slot_past_end, tbuddy_bug::none>(w, p, md);
    case 23: return make_one<ualloc_bug::superbin_returned_live, tbuddy_bug::none>(w, p, md);
    case 24: return make_one<ualloc_bug::superbin_free_to_tbuddy, tbuddy_bug::none>(w, p, md);
    case 25: return make_one<ualloc_bug::none, tbuddy_bug::run_leftover_unsignalled>(w, p, md);
    case 26: return make_one<ualloc_bug::none, tbuddy_bug::run_boundary_off_by_one>(w, p, md);
    case 27: return make_one<ualloc_bug::none, tbuddy_bug::tile_free_keeps_leaves>(w, p, md);
    case 28: return make_one<ualloc_bug::reclaim_gate_left_closed, tbuddy_bug::none>(w, p, md);
    case 29: return make_one<ualloc_bug::fallback_ignores_alignment, tbuddy_bug::none>(w, p, md);
    case 30: return make_one<ualloc_bug::superbin_arena_ignores_sharing, tbuddy_bug::none>(w, p, md);
    case 31: return make_one<ualloc_bug::steal_searches_own_arena, tbuddy_bug::none>(w, p, md);
    case 32: return make_one<ualloc_bug::resident_views_unpublished, tbuddy_bug::none>(w, p, md);
    case 33: return make_one<ualloc_bug::find_without_warp_barrier, tbuddy_bug::none>(w, p, md);
    case 34: return make_one<ualloc_bug::free_into_unmapped, tbuddy_bug::none>(w, p, md);
    case 35: return make_one<ualloc_bug::trim_without_reclaim, tbuddy_bug::none>(w, p, md);
    case 36: return make_one<ualloc_bug::none, tbuddy_bug::adopt_without_merge>(w, p, md);
    case 37: return make_one<ualloc_bug::none, tbuddy_bug::adopt_uncharges_limit>(w, p, md);
    case 38: return make_one<ualloc_bug::none, tbuddy_bug::withdraw_used_granule>(w, p, md);
    case 39: return make_one<ualloc_bug::none, tbuddy_bug::free_skips_generation>(w, p, md);
    case 40: return make_one<ualloc_bug::none, tbuddy_bug::failure_read_late>(w, p, md);
    case 41: return make_one<ualloc_bug::none, tbuddy_bug::failure_covers_smaller>(w, p, md);
    case 42: return make_one<ualloc_bug::empty_bin_unnoted, tbuddy_bug::none>(w, p, md);
    case 43: return make_one<ualloc_bug::clean_read_late, tbuddy_bug::none>(w, p, md);
    case 44: return make_one<ualloc_bug::superbin_route_coarse, tbuddy_bug::none>(w, p, md);
    case 45: return make_one<ualloc_bug::none, tbuddy_bug::presplit_no_drain>(w, p, md);
    case 46: return make_one<ualloc_bug::none, tbuddy_bug::presplit_take_racy>(w, p, md);
    case 47: return make_one<ualloc_bug::none, tbuddy_bug::presplit_drain_charged>(w, p, md);
    case 48: return make_one<ualloc_bug::none, tbuddy_bug::presplit_drain_unseen>(w, p, md);
    case 49: return make_one<ualloc_bug::walk_claim_any_tag, tbuddy_bug::none>(w, p, md);
    case 50: return make_one<ualloc_bug::walk_ends_early, tbuddy_bug::none>(w, p, md);
    case 51: return make_one<ualloc_bug::walk_flags_after_count, tbuddy_bug::none>(w, p, md);
    case 52: return make_one<ualloc_bug::grow_bins_without_warp_barrier, tbuddy_bug::none>(w, p, md);
    case 53: return make_one<ualloc_bug::none, tbuddy_bug::climb_stop_keeps_promises>(w, p, md);
    case 54: return make_one<ualloc_bug::none, tbuddy_bug::climb_stop_ignores_generation>(w, p, md);
    case 55: return make_one<ualloc_bug::none, tbuddy_bug::withdraw_splits_run>(w, p, md);
    case 56: return make_one<ualloc_bug::none, tbuddy_bug::adopt_run_keeps_tags>(w, p, md);
    case 57: return make_one<ualloc_bug::find_before_section_barrier, tbuddy_bug::none>(w, p, md);
    case 58: return make_one<ualloc_bug::leave_findable_skips_last_slot, tbuddy_bug::none>(w, p, md);
    case 59: return make_one<ualloc_bug::claim_hint_wraps_late, tbuddy_bug::none>(w, p, md);
    case 60: return make_one<ualloc_bug::reclaim_inbox_drops_partial, tbuddy_bug::none>(w, p, md);
    case 61: return make_one<ualloc_bug::grow_batches_floor, tbuddy_bug::none>(w, p, md);
    case 62: return make_one<ualloc_bug::set_slot_dead_check_relaxed, tbuddy_bug::none>(w, p, md);
    case 63: return make_one<ualloc_bug::alignment_limit_doubled, tbuddy_bug::none>(w, p, md);
    case 64: return make_one<ualloc_bug::push_back_marks_before_link, tbuddy_bug::none>(w, p, md);
    case 65: return make_one<ualloc_bug::free_or_over_group, tbuddy_bug::none>(w, p, md);
    case 66: return make_one<ualloc_bug::hold_queued_no_wait, tbuddy_bug::none>(w, p, md);
    case 67: return make_one<ualloc_bug::chunk_signal_after_unlock, tbuddy_bug::none>(w, p, md);
    case 68: return make_one<ualloc_bug::none, tbuddy_bug::group_run_floor_log2>(w, p, md);
    case 69: return make_one<ualloc_bug::none, tbuddy_bug::group_charges_whole_run>(w, p, md);
    case 70: return make_one<ualloc_bug::super_fallback_bound_doubled, tbuddy_bug::none>(w, p, md);
    case 71: return make_one<ualloc_bug::findable_unnoted, tbuddy_bug::none>(w, p, md);
    case 72: return make_one<ualloc_bug::grow_pins_from_two_left, tbuddy_bug::none>(w, p, md);
    case 73: return make_one<ualloc_bug::undo_crossing_from_zero_missed, tbuddy_bug::none>(w, p, md);
    case 74: return make_one<ualloc_bug::retire_takes_one_unit_short, tbuddy_bug::none>(w, p, md);
    case 75: return make_one<ualloc_bug::claim_stays_on_full_word, tbuddy_bug::none>(w, p, md);
    case 76: return make_one<ualloc_bug::none, tbuddy_bug::group_failure_keeps_charge>(w, p, md);
    case 77: return make_one<ualloc_bug::free_cold_no_reread, tbuddy_bug::none>(w, p, md);
    case 78: return make_one<ualloc_bug::init_bin_keeps_queued, tbuddy_bug::none>(w, p, md);
    case 79: return make_one<ualloc_bug::retire_queued_deferred_twice, tbuddy_bug::none>(w, p, md);
    case 80: return make_one<ualloc_bug::steal_locks_old_arena, tbuddy_bug::none>(w, p, md);
    case 81: return make_one<ualloc_bug::overproduced_bin_unnoted, tbuddy_bug::none>(w, p, md);
    case 82: return make_one<ualloc_bug::more_claims_from_zero, tbuddy_bug::none>(w, p, md);
    case 83: return make_one<ualloc_bug::placement_race_pushed_back, tbuddy_bug::none>(w, p, md);
    case 84: return make_one<ualloc_bug::slow_take_not_flushed, tbuddy_bug::none>(w, p, md);
    case 85: return make_one<ualloc_bug::inbox_skip_unrecorded, tbuddy_bug::none>(w, p, md);
    case 86: return make_one<ualloc_bug::chunk_skip_unrecorded, tbuddy_bug::none>(w, p, md);
    case 87: return make_one<ualloc_bug::owned_scan_ends_true, tbuddy_bug::none>(w, p, md);
    case 88: return make_one<ualloc_bug::open_slots_lost_no_enqueue, tbuddy_bug::none>(w, p, md);
    case 89: return make_one<ualloc_bug::steal_grew_per_lane, tbuddy_bug::none>(w, p, md);
    case 90: return make_one<ualloc_bug::undo_to_empty_unnoted, tbuddy_bug::none>(w, p, md);
    case 91: return make_one<ualloc_bug::free_barrier_per_word, tbuddy_bug::none>(w, p, md);
    case 92: return make_one<ualloc_bug::free_no_barrier_after_rmw, tbuddy_bug::none>(w, p, md);
    case 93: return make_one<ualloc_bug::free_hint_trusted, tbuddy_bug::none>(w, p, md);
    case 94: return make_one<ualloc_bug::fresh_extra_signalled_as_promised, tbuddy_bug::none>(w, p, md);
    case 95: return make_one<ualloc_bug::fresh_extra_unqueued, tbuddy_bug::none>(w, p, md);
    case 96: return make_one<ualloc_bug::scan_claim_trusted, tbuddy_bug::none>(w, p, md);
    case 97: return make_one<ualloc_bug::inline_super_skips_fallbacks, tbuddy_bug::none>(w, p, md);
    case 98: return make_one<ualloc_bug::ahead_extra_unpinned, tbuddy_bug::none>(w, p, md);
    case 99: return make_one<ualloc_bug::ahead_failed_take_signalled, tbuddy_bug::none>(w, p, md);
    case 100: return make_one<ualloc_bug::refuse_despite_promises, tbuddy_bug::none>(w, p, md);
    case 101: return make_one<ualloc_bug::refuse_keeps_promise, tbuddy_bug::none>(w, p, md);
    case 102: return make_one<ualloc_bug::refuse_ignores_chunk_bins, tbuddy_bug::none>(w, p, md);
    case 103: return make_one<ualloc_bug::at_once_ignores_promises, tbuddy_bug::none>(w, p, md);
    case 104: return make_one<ualloc_bug::at_once_unconfirmed, tbuddy_bug::none>(w, p, md);
    case 105: return make_one<ualloc_bug::cas_refusal_unconfirmed, tbuddy_bug::none>(w, p, md);
    case 106: return make_one<ualloc_bug::walk_batch_retries_twice, tbuddy_bug::none>(w, p, md);
    case 107: return make_one<ualloc_bug::walk_pins_unacquired, tbuddy_bug::none>(w, p, md);
    case 108: return make_one<ualloc_bug::walk_filter_counted_late, tbuddy_bug::none>(w, p, md);
    case 109: return make_one<ualloc_bug::walk_filter_skips_chunks, tbuddy_bug::none>(w, p, md);
    case 110: return make_one<ualloc_bug::fallback_group_overtakes, tbuddy_bug::none>(w, p, md);
    case 111: return make_one<ualloc_bug::fallback_group_rank_off_by_one, tbuddy_bug::none>(w, p, md);
    case 112: return make_one<ualloc_bug::fallback_skips_own_arena, tbuddy_bug::none>(w, p, md);
    case 113: return make_one<ualloc_bug::fallback_never_borrows, tbuddy_bug::none>(w, p, md);
    case 114: return make_one<ualloc_bug::borrowed_bin_to_bin_arena, tbuddy_bug::none>(w, p, md);
    case 115: return make_one<ualloc_bug::borrowed_chunk_cached, tbuddy_bug::none>(w, p, md);
    case 116: return make_one<ualloc_bug::none, tbuddy_bug::failure_record_overwritten>(w, p, md);
    case 117: return make_one<ualloc_bug::none, tbuddy_bug::climb_refusal_keeps_promises>(w, p, md);
    case 118: return make_one<ualloc_bug::none, tbuddy_bug::climb_refusal_ignores_generation>(w, p, md);
    default: return make_one<ualloc_bug::none, tbuddy_bug::none>(w, p, md);
  }
}

}  // namespace heap_scenarios

namespace {

using heap_scenarios::make_heap;
using heap_scenarios::mode;

launch_config shape(const params& p, std::int64_t warps, std::int64_t threads, std::int64_t sms) {
  return {static_cast<unsigned>(std::max<std::int64_t>(1, p.get("sms", sms))),
          static_cast<unsigned>(std::max<std::int64_t>(1, p.get("warps", warps))),
          static_cast<unsigned>(std::clamp<std::int64_t>(p.get("threads", threads), 1, 32))};
}

constexpr const char* bug_help = " bug=0 (a planted bug: toga-sim list --bugs names them)";
// The planted-bug key of every heap scenario: 0 (none) .. the last case of make_heap.
param_spec bug_key() { return {"bug", 0, 118, 0, "planted bug (keep in step with make_heap)"}; }

}  // namespace

const std::vector<planted_bug>& allocator_planted_bugs() {
  static const std::vector<planted_bug> bugs = {
      {1, "UAlloc", "free outside the read-side section"},
      {2, "UAlloc", "bin retired without try_wait"},
      {3, "UAlloc", "chunk returned with live bins"},
      {4, "UAlloc", "no unlink on exhaustion"},
      {5, "UAlloc", "a refilled bin is not re-linked"},
      {6, "TBuddy", "buddy merge without the unit"},
      {7, "TBuddy", "buddy claim without the lock"},
      {8, "TBuddy", "out of memory keeps the climb's promises"},
      {9, "fast path", "claim without a reservation"},
      {10, "fast path", "two lanes mapped to one bit"},
      {11, "fast path", "a GROW drops a displaced pin that has free slots"},
      {12, "fast path", "retiring a pinned bin keeps it pinned"},
      {13, "fast path", "DEAD near wrap-around"},
      {14, "fast path", "pin published before the bin header"},
      {15, "fast path", "free OR-reduction drops a lane"},
      {16, "fast path", "group free signals k-1"},
      {17, "fast path", "a short reservation undoes all it asked for"},
      {18, "slot hand-over, --memory weak", "relaxed free fetch_and"},
      {19, "slot hand-over, --memory weak", "relaxed claim fetch_or"},
      {20, "slot hand-over, --memory weak", "group free without its __syncwarp"},
      {21, "superbins", "superbin tag not set"},
      {22, "superbins", "a slot past the superbin's end"},
      {23, "superbins", "a superbin with live slots returned to TBuddy"},
      {24, "superbins", "a 4 KiB-aligned superbin slot freed to TBuddy"},
      {25, "TBuddy groups (E7)", "a carved run's leftover units never delivered"},
      {26, "TBuddy groups (E7)", "a run's leftover starts one block early"},
      {27, "TBuddy groups (E7)", "a tile free leaves the lanes' nodes ALLOCATED"},
      {28, "reclaim gate", "a reclaim leaves the gate closed"},
      {29, "fallback", "a request aligned to more than 128 B gets a UAlloc slot when no superbin can be had"},
      {30, "sharing", "superbin arena chosen among all arenas, not the sb_arenas in use"},
      {31, "stealing", "a group that took another arena's units searches its own arena's superbins"},
      {32, "resident views", "the views' copies in the metadata are never written"},
      {33, "slow path, --memory weak", "the slow path's leader uses a bin another lane acquired, without the __syncwarp"},
      {34, "growable heaps", "a free into an unmapped granule touches it"},
      {35, "growable heaps", "a trim without reclaiming UAlloc's caches first"},
      {36, "growable heaps", "adopt without merging"},
      {37, "growable heaps", "adopt uncharges the byte count"},
      {38, "growable heaps", "a trim withdraws a granule of a chunk or superbin"},
      {39, "failing fast", "a free that merges does not count a publication"},
      {40, "failing fast", "a failed climb reads the publication count after climbing"},
      {41, "failing fast", "a failed climb records smaller orders too"},
      {42, "failing fast", "a free that empties a bin does not count a reclaim change"},
      {43, "failing fast", "a walk reads the change count after walking"},
      {44, "superbins", "a free looks at the superbin tag only on 256 B boundaries"},
      {45, "pre-split reserve", "a climb that finds the tree empty fails without draining the reserve"},
      {46, "pre-split reserve", "a reserve block taken by a load and a store, not one RMW"},
      {47, "pre-split reserve", "a drain uncharges the byte count for the reserve's blocks"},
      {48, "pre-split reserve", "a climb that failed after a drain behind it does not climb again"},
      {49, "shared reclaim walk", "a lane walks an item it claimed with an older walk's tag (before the opener's reset)"},
      {50, "shared reclaim walk", "the lane that counts the second-to-last item ends the walk"},
      {51, "shared reclaim walk", "a lane ORs its item's flags after counting the item"},
      {52, "GROW, --memory weak", "a chunk-class GROW's members init and pin the leader's bins without the __syncwarp"},
      {53, "failing fast", "a climb that stops at a recorded failure keeps its promises"},
      {54, "failing fast", "a climb stops at a stale recorded failure"},
      {55, "growable heaps", "a trim withdraws the free granules of a run with a live block"},
      {56, "growable heaps", "a run adopted as one block keeps its granules' unmapped tags"},
      {57, "slow path, --memory weak", "members search the pin slots without the __syncwarp after the leader's read_lock"},
      {58, "UAlloc (yardstick)", "a retired bin leaves every pin slot but the last"},
      {59, "UAlloc (yardstick)", "the claim's hint wraps to 0 only past the capacity"},
      {60, "UAlloc (yardstick)", "reclaim's inbox pass drops bins with free slots"},
      {61, "UAlloc (yardstick)", "a GROW for a group larger than a bin makes floor(t / cap) bins"},
      {62, "UAlloc (yardstick), --memory weak", "set_slot's check for a racing retirement is a relaxed load"},
      {63, "routing (yardstick)", "allocate(bytes, alignment) lets 128 B-aligned UAlloc slots serve 256 B alignment"},
      {64, "inbox (yardstick)", "a pushed-back bin is marked queued before its link is read"},
      {65, "free (yardstick)", "a group free ORs the lanes' bits over the group, not per word"},
      {66, "inbox (yardstick)", "a taker holds a bin that another holder still holds"},
      {67, "chunks (yardstick)", "release_bin signals the freed bin after unlocking the chunk mutex"},
      {68, "TBuddy (yardstick)", "a group's carved run has 2^floor(log2 g) blocks"},
      {69, "TBuddy (yardstick)", "a group that carves a run charges the byte limit for the whole run"},
      {70, "routing (yardstick)", "a superbin request without a superbin falls back to UAlloc classes up to 2 KiB"},
      {71, "failing fast (yardstick)", "make_findable does not count a reclaim change"},
      {72, "GROW (yardstick)", "a GROW pins its new bin only when two or more slots are left"},
      {73, "reservation (yardstick)", "an undo makes the bin findable only from a negative count, not from 0"},
      {74, "retirement (yardstick)", "a retirement takes cap - 1 of the bin's units"},
      {75, "UAlloc (yardstick)", "claim_bits moves its hint to the last bit of a full word"},
      {76, "TBuddy (yardstick)", "a group request that gets no block keeps its byte-limit charge"},
      {77, "free (yardstick)", "a retiring free does not re-read the count"},
      {78, "GROW (yardstick)", "init_bin keeps the previous life's inbox state"},
      {79, "retirement (yardstick)", "a retirer that finds the bin queued defers it as well as the taker"},
      {80, "superbin steal (yardstick)", "a group that stole units enters its own arena's read-side section"},
      {81, "failing fast (yardstick)", "a GROW's over-produced empty bin counts no reclaim change"},
      {82, "fast path (yardstick)", "the second claim asks for t more bits, not t minus those claimed"},
      {83, "inbox (yardstick)", "a taker whose pin CAS lost to an enqueue keeps the bin for its push-back too"},
      {84, "RCU (yardstick)", "the slow path drops take_inbox's deferral: bins retired while queued wait for another flush"},
      {85, "failing fast (yardstick)", "reclaim's inbox pass does not count an empty bin it could not retire as skipped"},
      {86, "failing fast (yardstick)", "reclaim's chunk pass does not count a free chunk whose units are held as skipped"},
      {87, "pin slots", "owned()'s batched scan answers yes when no slot holds the bin: a refilled bin is never made findable"},
      {88, "pin slots", "a refilled bin whose open slots (as owned() saw them) were all taken meanwhile is dropped, not queued"},
      {89, "superbin steal", "each lane of a stealing group reads the arena's first-GROW flag itself: lanes that disagree leave the collective steal apart"},
      {90, "failing fast", "an undone reservation that leaves its bin with every slot free counts no reclaim change"},
      {91, "memory order", "a group free's warp barrier covers one bitmap word's lanes only (none in a checked build): the other members' accesses are not ordered before the leader's read-side section, so the slot's owner after the bin is retired and reused races with them (weak memory)"},
      {92, "memory order", "a group free has no __syncwarp after its bitmap RMWs: the other words' fetch_and are ordered before the leader's count by value only (equivalent in the simulator: its RMWs read the newest value)"},
      {93, "claim", "the fast path takes the bits at the free hint as its own without looking at what its fetch_or found: two groups that read one hint get one run"},
      {94, "GROW", "a GROW's extra bin of a fresh chunk settles a promise that was never made for it (E -= cap): waiters that reserved against another producer's promise lose it"},
      {95, "GROW", "a GROW's extra bin of a fresh chunk that finds no empty pin slot is not queued: its units are signalled for a bin nobody can find"},
      {96, "claim", "the fast path takes the zero bits a lane saw in its scan of the superbin's bitmap as its own without looking at what its fetch_or found: two groups that saw one word free get the same slots"},
      {97, "route", "allocate(bytes)'s inline superbin path returns nullptr when its group found no superbin, without the fallbacks (UAlloc's class, a TBuddy block) that the out-of-line path tries"},
      {98, "GROW", "a superbin made ahead of demand (TOGA_SB_GROW_AHEAD) is initialised and signalled but neither pinned nor queued: its units are for a bin nobody can find"},
      {99, "GROW", "a lane whose superbin ahead of demand could not be had (TBuddy empty) signals its units anyway: units without a bin"},
      {100, "fail-fast", "the refusal of a GROW known to fail is asked before the class semaphore's CAS loop, not where it would promise: a request that promised units cover gets nullptr"},
      {101, "fail-fast", "a GROW refused after its promise was made keeps the promise: waiters wait for units nobody makes"},
      {102, "fail-fast", "a chunk-class GROW is refused from TBuddy's recorded failure and a clean reclaim record alone, while the arena's chunks still have free bins"},
      {103, "fail-fast", "a superbin class's UAlloc fallback is sent straight to the scan (refused_at_once) when C alone is short, while promised units (E) would serve it"},
      {104, "fail-fast", "refused_at_once's refusal is not confirmed on the unchanged semaphore word: a promise and a take made after the snapshot make the records say fail while promised units would serve the group"},
      {105, "fail-fast", "the CAS loop's refusal of a GROW known to fail is not confirmed on the unchanged semaphore word (as 104, in stage 1's CAS loop)"},
      {106, "reclaim", "the walk's batched pin scan tries a bin found in two slots of one batch twice: the second try takes the class's units of a bin already retired before its CAS fails"},
      {107, "reclaim", "the walk's batched pin loads are relaxed with no acquire fence before it reads the bins' counts and retires them"},
      {108, "reclaim", "GROW counts its bins in the arena's statistics after pinning them: a walk that skips a class whose count it read as 0 misses a bin emptied meanwhile and records the heap clean"},
      {109, "reclaim", "the walk skips an arena whose every class count reads 0 whole, its cached free chunks too"},
      {110, "fallback", "the out-of-memory fallback's take in another arena: every failed lane counts itself served when the leader took any units (fewer units than lanes)"},
      {111, "fallback", "the out-of-memory fallback's take in another arena: one lane more than the units the leader took runs stage 2 there"},
      {112, "fallback", "the out-of-memory fallback scans only the other arenas: a group larger than its own arena's units fails every lane while those units stay"},
      {113, "fallback", "chunk classes: the out-of-memory fallback takes no other arena's free chunk bins: lanes fail while bins of other arenas' chunks are free"},
      {114, "fallback", "release_bin returns a borrowed bin to its class list's arena's chunk list, not to its chunk's arena"},
      {115, "fallback", "a chunk emptied by a borrowed bin's release stays cached in its arena: the walk that retired the bin may leave the chunk to a later walk"},
      {116, "fail-fast", "a failed climb stores its failure record instead of fetch_max: a climb that began long ago replaces a current record with its stale one (TBuddy climbs to the root again at exhaustion)"},
      {117, "liveness", "a climb whose wait is refused at a recorded failure (at a level above its order) does not withdraw the units it promised below: waiters wait for blocks that never come"},
      {118, "fail-fast", "a climb's wait is refused at any failure ever recorded for its order, also one a free has since made stale: a request fails on a heap with free memory"},
  };
  return bugs;
}

namespace {

// Declared keys (toga-sim rejects others and out-of-range values). heap_kib: the simulator backs
// the heap with host memory, so at most 1 GiB here (toga's own limit, heap_layout::max_heap_bytes,
// is 128 GiB: levels_for returns 0 above it).
// Random shapes (`toga-sim explore --shapes random`, docs/simulator.md §18) draw from the
// draw_* ranges: small machines (up to 4 SMs x 4 warps x 32 lanes, at most 64 lanes), every size
// class and routing boundary (near powers of two up to 64 KiB), heaps of 64 KiB .. 4 MiB, and
// each optional feature (byte limit, pre-split reserve, alignment, an anchor block, leaks,
// warp-cooperative allocate, fewer pin slots, superbin geometry and sharing) on half the time.
// heap_shape_limit keeps a drawn schedule to a few thousand blocks.
std::vector<param_spec> heap_keys(std::int64_t warps, std::int64_t threads, std::int64_t sms, std::int64_t ops,
                                  std::int64_t size, std::int64_t heap_kib) {
  const std::vector<std::int64_t> pow2_to_4k = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  return {drawn({"warps", 1, 64, warps, "warps (one block each)"}, 1, 4),
          drawn({"threads", 1, 32, threads, "threads per warp"}, 1, 32, draw_kind::near_pow2),
          drawn({"sms", 1, 64, sms, "SMs (one arena each)"}, 1, 4),
          drawn({"ops", 1, 100'000, ops, "allocations per lane"}, 1, 12),
          drawn({"keep", 1, 1'000, 3, "blocks a lane holds before freeing"}, 1, 6),
          drawn({"size", 0, std::int64_t{1} << 30, size, "bytes per allocation (0: drawn)"}, 1, 65536, draw_kind::near_pow2, true),
          drawn({"heap_kib", 4, std::int64_t{1} << 20, heap_kib, "heap size in KiB; the simulator allocates it on the host"}, 64, 4096,
                draw_kind::pow2),
          drawn({"limit_kib", 0, std::int64_t{1} << 20, 0, "byte limit in KiB (0: none)"}, 16, 4096, draw_kind::pow2, true),
          drawn({"presplit_kib", 0, std::int64_t{1} << 20, 0, "pre-split reserve in KiB (design.md §10.5; 0: none; at most half the heap)"},
                16, 1024, draw_kind::pow2, true),
          {"presplit_chunks", -1, 1 << 14, -1, "chunks in the pre-split reserve, before its superbins (-1: two per arena; at most half the reserve)"},
          drawn({"leak", 0, 1, 0, "1: lanes keep their last blocks"}, 1, 1, draw_kind::uniform, true),
          drawn({"coalesced", 0, 1, 0, "1: warp-cooperative allocate"}, 1, 1, draw_kind::uniform, true),
          drawn({"pins", 1, max_pin_slots, 4, "pin slots per (arena, class) (the GPU heap uses 32)"}, 1, 4, draw_kind::uniform, true),
          drawn_from({"sb_shift", -1, geom::sb_max_shift, -1, "log2 of the superbin bytes, 13..21 (0: no superbins; -1: toga's choice for the heap)"},
                     {0, 13, 14, 15, 16, 17}, true),
          drawn({"sb_arenas", 0, 64, 0, "superbin arenas in use (SM s takes arena s % sb_arenas; 0: toga's choice; above sms: sms)"}, 1, 4,
                draw_kind::uniform, true),
          drawn_from({"align", 0, std::int64_t{1} << 20, 0, "alignment asked for with every allocation (0: none; a power of two)"}, pow2_to_4k, true),
          drawn({"anchor", 0, std::int64_t{1} << 20, 0, "alloc-storm, mixed-sizes, superbins: lane 0 first allocates a block of this many bytes (no alignment) and frees it last (0: none)"},
                16, 65536, draw_kind::near_pow2, true),
          drawn({"walker", 0, 1, 0, "alloc-storm, exhaust-recover, mixed-sizes, superbins: 1: lane 0 runs a reclaim walk before each allocation "
                                    "(as a failed request does), and the lanes meet before their final frees, where the last checks that a "
                                    "reclaim recorded clean gives nothing back (design.md §13.2)"},
                1, 1, draw_kind::uniform, true),
          bug_key()};
}

// What a drawn heap shape may cost (scenario::shape_limit): at most 64 lanes; storms at most 256
// allocations in all; exhaustion at most 512 blocks; superbins at most a quarter of the heap; at
// most 32 granules. Parameters a shape does not name take their keys' fallbacks. `exhausts`: the
// lanes allocate until nullptr (a fixed size is needed).
std::function<std::optional<std::string>(const params&)> heap_shape_limit(const std::vector<param_spec>& keys, bool exhausts) {
  std::map<std::string, std::int64_t> fallback;
  for (const auto& k : keys) fallback[k.name] = k.fallback;
  return [fallback, exhausts](const params& p) -> std::optional<std::string> {
    const auto get = [&](const char* name) {
      const auto it = fallback.find(name);
      return p.get(name, it == fallback.end() ? 0 : it->second);
    };
    const launch_config lc = shape(p, get("warps"), get("threads"), get("sms"));
    const std::int64_t lanes = static_cast<std::int64_t>(lc.lanes());
    if (lanes > 64) return "more than 64 lanes";
    const std::int64_t heap = get("heap_kib") * 1024;
    const std::int64_t sb = get("sb_shift");
    if (sb > 0 && (std::int64_t{1} << sb) > heap / 4) return "superbins larger than a quarter of the heap";
    if (const std::int64_t g = get("granule_kib"); g > 0 && heap / (g * 1024) > 32) return "more than 32 granules";
    if (!exhausts) {
      if (lanes * get("ops") > 256) return "more than 256 allocations";
      return std::nullopt;
    }
    const std::int64_t sz = get("size");
    if (sz <= 0) return "exhaustion needs a size";
    std::int64_t room = heap;
    if (const std::int64_t lim = get("limit_kib")) room = std::min(room, lim * 1024);
    if (room / std::max<std::int64_t>(sz, 16) > 512) return "more than 512 blocks to exhaust the heap";
    return std::nullopt;
  };
}

// The growable-heap scenarios' keys: heap_keys and the granule size.
std::vector<param_spec> grow_keys(std::int64_t warps, std::int64_t threads, std::int64_t sms, std::int64_t ops, std::int64_t size,
                                  std::int64_t heap_kib) {
  auto k = heap_keys(warps, threads, sms, ops, size, heap_kib);
  std::erase_if(k, [](const param_spec& s) { return s.name == "walker"; });  // (the growable lanes have a driver of their own)
  k.push_back(drawn({"granule_kib", 4, std::int64_t{1} << 19, 64, "granule size in KiB (a power of two, at most half the heap)"}, 16, 512,
                    draw_kind::pow2));
  k.push_back(drawn({"run_granules", 1, 64, 1, "grow-while-alloc, trim-after-churn: granules per run, one handle mapped and given back "
                                                "whole (max_run_bytes / granule_bytes; a power of two)"},
                    1, 8, draw_kind::pow2, true));
  return k;
}

// Combinations the ranges cannot express: align is 0 or a power of two.
scenario heap_checks(scenario s) {
  s.check = [](const params& p) -> std::optional<std::string> {
    const std::int64_t al = p.get("align", 0);
    if (al != 0 && (al & (al - 1)) != 0)
      return "align=" + std::to_string(al) + " is not a power of two (use 0 for none, or 1, 2, 4, ... 1048576)";
    return std::nullopt;
  };
  return s;
}

}  // namespace

// `sc` with heap_shape_limit over its declared keys, and the heap scenarios' contention focus
// (scenario::focus, docs/simulator.md §18.1): one SM (one arena), one size of a class with few
// slots per bin (chunk bins of 256 B .. 1 KiB: 15 to 3 slots; with superbins of 8 or 16 KiB, 1 to
// 3 KiB slots), one or two pin slots, 1-4 warps of 8-32 lanes with few blocks each, and none of
// the byte limit, the reserve, alignment or anchor: every lane meets the others in one class
// list, where bins fill, empty, are displaced from their pin slots and pass through the inbox all
// the time. The shape limit still applies (at most 64 lanes and 256 allocations).
scenario limited(scenario sc, bool exhausts) {
  sc.shape_limit = heap_shape_limit(*sc.keys, exhausts);
  std::int64_t sb = 0;
  for (const auto& k : *sc.keys)
    if (k.name == "sb_shift") sb = k.fallback;
  const bool super = sb > 0;  // the superbins scenario: its classes are superbins'
  sc.focus = {{"sms", {1}},
              {"warps", {1, 2, 3, 4}},
              {"threads", {8, 12, 16, 24, 32}},
              {"ops", {1, 2, 3, 4}},
              {"keep", {1, 2}},
              {"size", super ? std::vector<std::int64_t>{1024, 2048, 3000} : std::vector<std::int64_t>{256, 512, 600, 1000, 1024}},
              {"pins", {1, 2}},
              {"sb_shift", super ? std::vector<std::int64_t>{13, 14} : std::vector<std::int64_t>{0}},
              {"limit_kib", {0}},
              {"presplit_kib", {0}},
              {"align", {0}},
              {"anchor", {0}}};
  return sc;
}

void register_allocator_scenarios() {
  add_scenario(limited(heap_checks(with_keys({"alloc-storm",
                std::string("allocate/free storm over every size class, blocks handed to other warps/SMs; params warps=2 "
                            "threads=2 sms=2 ops=8 keep=3 size=0 (0: drawn) heap_kib=2048 leak=0 (1: lanes keep their last blocks) coalesced=0 (1: warp-cooperative allocate)") + bug_help,
                expectation::pass, [](const params& p) { return shape(p, 2, 2, 2); },
                [](world& w, const params& p) { return make_heap(w, p, mode::storm); }, run_limits{50'000, 2'000'000}, {}, {}},
                         heap_keys(2, 2, 2, 8, 0, 2048))), false));
  add_scenario(limited(heap_checks(with_keys({"exhaust-recover",
                std::string("allocate size until nullptr, then free all: the heap must be as new; params warps=1 "
                            "threads=2 sms=1 size=4096 heap_kib=128 (utilisation: size=16 or 256 with heap_kib=512)") + bug_help,
                expectation::pass, [](const params& p) { return shape(p, 1, 2, 1); },
                [](world& w, const params& p) { return make_heap(w, p, mode::exhaust); }, run_limits{50'000, 4'000'000}, {}, {}},
                         [] {
                           auto k = heap_keys(1, 2, 1, 8, 4096, 128);
                           k.insert(k.end() - 1, drawn({"sm0_ops", 0, 100'000, 0, "the lanes of SM 0 first allocate at most this many blocks each and stop; then "
                                                                                 "the other SMs' lanes allocate until nullptr, and must take what SM 0's arena "
                                                                                 "left (0: every lane until nullptr; needs lanes on two SMs)"},
                                                       1, 4, draw_kind::uniform, true));
                           return k;
                         }())), true));
  add_scenario(heap_checks(with_keys({"retire-race",
                std::string("targeted: a free of a full bin races with its retirement and the bin's reuse by another "
                            "class (what the free path's read-side section prevents); 3 lanes, 1 SM") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 1, 3}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::retire_race); }, run_limits{50'000, 2'000'000}, {}, {}},
                         {drawn({"heap_kib", 4, std::int64_t{1} << 20, 2048, "heap size in KiB"}, 256, 4096, draw_kind::pow2), drawn({"limit_kib", 0, std::int64_t{1} << 20, 0, "byte limit in KiB (0: none)"}, 256, 4096, draw_kind::pow2, true), drawn({"pins", 1, max_pin_slots, 1, "pin slots per (arena, class); 1 so that Y's GROW displaces the exhausted X and X can be retired"}, 1, 3, draw_kind::uniform, true), bug_key()})));
  add_scenario(heap_checks(with_keys({"word-race",
                std::string("targeted: a group free whose lanes' slots lie in two bitmap words empties its bin, which is "
                            "retired and reused by another class: every member's accesses must happen before the reuse "
                            "(the group free's warp barrier, docs/design.md section 9.2; run with --memory weak); 1 warp "
                            "of 2 lanes, 1 SM, 32 B, 1 pin slot") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 1, 2}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::word_race); }, run_limits{50'000, 4'000'000}, {}, {}},
                         {{"heap_kib", 2048, 2048, 2048, "heap size in KiB"}, {"pins", 1, 1, 1, "pin slots per (arena, class): 1, so that the second bin's GROW displaces the first"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"fallback-race",
                std::string("targeted: a superbin class's fallback to UAlloc's class must wait for the units another "
                            "group's GROW of the chunk's last bin has promised, not be sent to the scan (docs/design.md "
                            "section 13.5); 5 warps of 32 lanes, 1 SM, 32 KiB superbins, a 1 MiB heap") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 5, 32}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::fallback_race); }, run_limits{50'000, 20'000'000}, {}, {}},
                         {{"heap_kib", 1024, 1024, 1024, "heap size in KiB"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"failfast-race",
                std::string("targeted: a free races with a failing 4 KiB request (its recorded failure must not outlive "
                            "the free), then a failing 8 KiB request must not answer for 4 KiB (docs/design.md "
                            "section 13); 4 warps of 1 lane, 1 SM, an 8 KiB heap") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 4, 1}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::failfast_race); }, run_limits{50'000, 2'000'000}, {}, {}},
                         {{"heap_kib", 8, 8, 8, "heap size in KiB (two 4 KiB blocks)"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"clean-race",
                std::string("targeted: a free that empties a bin races with a reclaim walk (the walk must not record the "
                            "heap clean over it), then a 512 KiB request must get the chunk back (docs/design.md "
                            "section 13); 4 warps of 1 lane, 1 SM, a 1 MiB heap") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 4, 1}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::clean_race); }, run_limits{50'000, 4'000'000}, {}, {}},
                         {{"heap_kib", 1024, 1024, 1024, "heap size in KiB (two 512 KiB halves)"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"refuse-race",
                std::string("targeted: a GROW known to fail is refused (TBuddy empty, reclaim recorded clean), but not "
                            "while the arena's chunk has a free bin: after a bin of a full chunk is freed, a request of "
                            "another class must be served (docs/design.md section 13.5); 2 warps of 1 lane, 1 SM, a 512 KiB "
                            "heap (one chunk)") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 2, 1}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::refuse_race); }, run_limits{50'000, 8'000'000}, {}, {}},
                         {{"heap_kib", 512, 512, 512, "heap size in KiB (one chunk)"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"undo-race",
                std::string("targeted: a reservation undone after every slot of its bin was freed and a reclaim walk "
                            "recorded the heap clean leaves the bin empty: the undo must count a reclaim change "
                            "(docs/design.md section 13.2); 5 warps of 32 lanes, 1 SM, 128 B, 3 pin slots") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 5, 32}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::undo_race); }, run_limits{50'000, 4'000'000}, {}, {}},
                         {{"heap_kib", 1024, 1024, 1024, "heap size in KiB"}, {"pins", 3, 3, 3, "pin slots per (arena, class): 3, the roles' own slots are 8k mod 3"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"promise-race",
                std::string("targeted: a 1 KiB request arrives while another group's GROW publishes the last superbin "
                            "and after a failed request recorded the superbin order exhausted: it must wait for the promised "
                            "slots (docs/design.md section 13); 4 warps of 1 lane, 1 SM, a "
                            "64 KiB heap of 32 KiB superbins") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 4, 1}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::promise_race); }, run_limits{50'000, 4'000'000}, {}, {}},
                         {{"heap_kib", 64, 64, 64, "heap size in KiB (two 32 KiB superbins)"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"presplit-race",
                std::string("targeted: four lanes each ask for a quarter of a 256 KiB heap whose lower half is the "
                            "pre-split reserve (four 32 KiB blocks): two find the tree empty and drain the reserve, "
                            "often at once, and must be served; then the whole heap must be served (docs/design.md "
                            "section 10.5); 4 warps of 1 lane, 1 SM") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 4, 1}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::presplit_race); }, run_limits{50'000, 4'000'000}, {}, {}},
                         {{"heap_kib", 256, 256, 256, "heap size in KiB (a 128 KiB reserve of 32 KiB blocks, a free 128 KiB half)"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"adopt-race",
                std::string("targeted: a group leader adopts a superbin that a member found in a pin slot, and another warp "
                            "serves from the slot it adopted into (the __syncwarp after the scan; run with --memory weak); "
                            "5 warps of 2 lanes, 1 SM, 4 KiB slots in 32 KiB superbins, 3 pin slots") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 5, 2}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::adopt_race); }, run_limits{50'000, 2'000'000}, {}, {}},
                         {drawn({"heap_kib", 512, std::int64_t{1} << 20, 2048, "heap size in KiB"}, 512, 4096, draw_kind::pow2), {"pins", 3, 3, 3, "pin slots per (arena, class): 3, the roles' own slots are 8k mod 3"}, bug_key()})));
  add_scenario(heap_checks(with_keys({"inbox-race",
                std::string("targeted: a taker holds an exhausted inbox bin while a free refills it (the re-read of the "
                            "count when the taker lets go); 3 warps of one lane, 1 SM, 1024 B, 1 pin slot; lane 1 keeps its block") + bug_help,
                expectation::pass, [](const params&) { return launch_config{1, 3, 1}; },
                [](world& w, const params& p) { return make_heap(w, p, mode::inbox_race); }, run_limits{50'000, 2'000'000}, {}, {}},
                         {drawn({"heap_kib", 4, std::int64_t{1} << 20, 2048, "heap size in KiB"}, 256, 4096, draw_kind::pow2), drawn({"pins", 1, max_pin_slots, 1, "pin slots per (arena, class); 1 so that a GROW queues its bin while the pinned one has slots"}, 1, 3, draw_kind::uniform, true), bug_key()})));
  {
    auto keys = heap_keys(1, 32, 1, 1, 0, 2048);  // size 0: drawn per allocation (8 B .. 1 KiB), as the instance does
    std::erase_if(keys, [](const param_spec& s) { return s.name == "walker"; });  // (no walker in the rounds)
    // every nullptr fails this scenario: random shapes leave out what makes blocks scarce
    for (auto& k : keys)
      if (k.name == "limit_kib" || k.name == "align" || k.name == "anchor" || k.name == "leak") k.draw_choices.clear(), k.draw_max = -1;
      else if (k.name == "heap_kib") k.draw_min = 1024;  // (small heaps strand what per-SM superbins hold)
      else if (k.name == "presplit_kib") k.draw_max = -1;
    keys.push_back(drawn({"rounds", 1, 100, 2, "alloc-all / free-all rounds"}, 1, 3));
    scenario rs = heap_checks(with_keys({"rounds",
                  std::string("toga-bench's T1 shape: every lane allocates `ops` blocks of `size`, all meet, all free, all "
                              "meet; `rounds` times (fresh heap, then warm). params warps=1 threads=32 sms=1 ops=1 size=0 (drawn) "
                              "rounds=2 heap_kib=2048") + bug_help,
                  expectation::pass, [](const params& p) { return shape(p, 1, 32, 1); },
                  [](world& w, const params& p) { return make_heap(w, p, mode::rounds); }, run_limits{50'000, 4'000'000}, {}, {}},
                           keys));
    // Every nullptr is a verdict here, so the demand must leave the heap room: at most half of it
    // in blocks of the served size (a TBuddy block or superbin slot of the next power of two),
    // whatever the geometry strands (per-SM superbins, UAlloc's header pages).
    rs.check = [base = rs.check](const params& p) -> std::optional<std::string> {
      if (auto m = base(p)) return m;
      const launch_config lc = shape(p, 1, 32, 1);
      const std::uint64_t lanes = lc.lanes();
      const std::uint64_t ops = static_cast<std::uint64_t>(std::max<std::int64_t>(1, p.get("ops", 1)));
      std::uint64_t size = static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.get("size", 0)));
      if (size == 0) size = 1024;  // the largest drawn size
      std::uint64_t served = 16;
      while (served < size) served <<= 1;
      const std::uint64_t heap = static_cast<std::uint64_t>(p.get("heap_kib", 2048)) * 1024;
      if (lanes * ops * served > heap / 2)
        return "lanes x ops x size = " + std::to_string(lanes) + " x " + std::to_string(ops) + " x " + std::to_string(served) +
               " B is more than half the heap (heap_kib=" + std::to_string(heap / 1024) +
               "); every nullptr is a failure in this scenario, so raise heap_kib or lower ops, size or the lanes";
      return std::nullopt;
    };
    // (rounds' room check above counts blocks, not what per-SM superbins and a pre-split
    // reserve set aside: random shapes keep superbins to a sixteenth of the heap, no reserve)
    rs.shape_limit = [base = heap_shape_limit(*rs.keys, false)](const params& p) -> std::optional<std::string> {
      if (auto m = base(p)) return m;
      const std::int64_t sb = p.get("sb_shift", -1);
      if (sb > 0 && (std::int64_t{1} << sb) > p.get("heap_kib", 2048) * 1024 / 16) return "superbins above a sixteenth of the heap";
      // (an SM without a 512 KiB chunk fails while others have room: design.md §21 item 5)
      if (p.get("heap_kib", 2048) < 1024 * p.get("sms", 1)) return "less than 1 MiB of heap per SM";
      return std::nullopt;
    };
    add_scenario(std::move(rs));
  }
  add_scenario(limited(heap_checks(with_keys({"superbins",
                std::string("sizes on both sides of every routing boundary (UAlloc / superbin classes / TBuddy) in a scaled "
                            "geometry: 32 KiB superbins (64 B .. 8 KiB slots) in a 1 MiB heap; blocks handed to other "
                            "warps/SMs; params warps=2 threads=2 sms=2 ops=6 keep=3 heap_kib=1024 sb_shift=15") + bug_help,
                expectation::pass, [](const params& p) { return shape(p, 2, 2, 2); },
                [](world& w, const params& p) { return make_heap(w, p, mode::superbins); }, run_limits{50'000, 2'000'000}, {}, {}},
                         [] {
                           auto k = heap_keys(2, 2, 2, 6, 0, 1024);
                           for (auto& spec : k)
                             if (spec.name == "sb_shift") spec.fallback = 15;
                           return k;
                         }())), false));
  // Growable heaps (issue 14): granules of granule_kib start unmapped (mmap PROT_NONE); lane 0
  // maps and adopts them.
  auto grow_checks = [](scenario sc) {
    sc = heap_checks(std::move(sc));
    sc.check = [base = sc.check](const params& p) -> std::optional<std::string> {
      if (auto m = base(p)) return m;
      const std::int64_t g = p.get("granule_kib", 64), h = p.get("heap_kib", 1024);
      std::int64_t hp = 4;
      while (hp < h) hp *= 2;  // the heap is rounded up to 4 KiB x 2^k
      if ((g & (g - 1)) != 0 || 2 * g > hp)
        return "granule_kib=" + std::to_string(g) + " must be a power of two and at most half the heap (" + std::to_string(hp) +
               " KiB): lower it or raise heap_kib";
      if (const std::int64_t r = p.get("run_granules", 1); r < 1 || (r & (r - 1)) != 0)
        return "run_granules=" + std::to_string(r) + " must be a power of two (granules per run)";
      return std::nullopt;
    };
    return sc;
  };
  add_scenario(limited(grow_checks(with_keys({"grow-while-alloc",
                std::string("growable heap: lane 0 maps and adopts every granule (and frees into one still unmapped) while "
                            "the other lanes allocate mixed sizes (nullptr allowed) and free; then one block of half the "
                            "heap; at the end trim_to(0) must unmap every granule; params warps=2 threads=2 sms=2 ops=6 "
                            "keep=3 heap_kib=1024 granule_kib=64") + bug_help,
                expectation::pass, [](const params& p) { return shape(p, 2, 2, 2); },
                [](world& w, const params& p) { return make_heap(w, p, mode::grow); }, run_limits{50'000, 4'000'000}, {}, {}},
                         grow_keys(2, 2, 2, 6, 0, 1024))), false));
  add_scenario(limited(grow_checks(with_keys({"exhaust-grow-recover",
                std::string("growable heap: lanes allocate until nullptr; a nullptr while a granule is unmapped is demand "
                            "(every nullptr is demand or counted exhaustion), and the lane adopts the next granule; then free all, trim_to(0); "
                            "params warps=1 threads=2 sms=1 size=4096 heap_kib=512 granule_kib=64") + bug_help,
                expectation::pass, [](const params& p) { return shape(p, 1, 2, 1); },
                // 12 M steps: a 64-lane random shape under a weak stall schedule took 4.4 M (2026-11-28)
                [](world& w, const params& p) { return make_heap(w, p, mode::grow_exhaust); }, run_limits{50'000, 12'000'000}, {}, {}},
                         grow_keys(1, 2, 1, 8, 4096, 512))), true));
  add_scenario(limited(grow_checks(with_keys({"trim-after-churn",
                std::string("growable heap: every granule adopted, lanes churn and keep blocks, lane 0 trims to 0 (only "
                            "wholly free granules may go), lanes check and free their blocks, a second trim_to(0) must "
                            "unmap everything, and a run of run_granules granules goes back whole or not at all (G8); params warps=2 threads=2 sms=2 "
                            "ops=6 keep=3 heap_kib=1024 granule_kib=64 run_granules=1") + bug_help,
                expectation::pass, [](const params& p) { return shape(p, 2, 2, 2); },
                [](world& w, const params& p) { return make_heap(w, p, mode::trim); }, run_limits{50'000, 4'000'000}, {}, {}},
                         grow_keys(2, 2, 2, 6, 0, 1024))), false));
  add_scenario(limited(heap_checks(with_keys({"mixed-sizes",
                std::string("small (UAlloc) and large (TBuddy) sizes mixed, 1 B .. 64 KiB; params warps=2 threads=2 "
                            "sms=2 ops=6 keep=3 heap_kib=2048") + bug_help,
                expectation::pass, [](const params& p) { return shape(p, 2, 2, 2); },
                [](world& w, const params& p) { return make_heap(w, p, mode::mixed); }, run_limits{50'000, 2'000'000}, {}, {}},
                         heap_keys(2, 2, 2, 6, 0, 2048))), false));
}

}  // namespace toga::sim
