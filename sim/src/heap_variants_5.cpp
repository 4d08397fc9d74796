// heap_inst instantiations (sim/src/heap_instance.hpp): planted bugs of the pin slots' open slots,
// the superbin steal, an undo that empties a bin, the group free's barriers and hint, a fresh
// chunk's extra bins, the superbin scan's claim, the inline superbin path, superbins made ahead and
// the refusals of GROWs known to fail (split from heap_variants_4.cpp so that the -O1 files take
// about the same time: a 2-core CI build waits for the longest).
#include "heap_instance.hpp"

namespace toga::sim::heap_scenarios {

template std::unique_ptr<instance> make_one<ualloc_bug::open_slots_lost_no_enqueue, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::steal_grew_per_lane, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::undo_to_empty_unnoted, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_barrier_per_word, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_no_barrier_after_rmw, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_hint_trusted, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::fresh_extra_signalled_as_promised, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::fresh_extra_unqueued, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::scan_claim_trusted, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::inline_super_skips_fallbacks, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::ahead_extra_unpinned, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::ahead_failed_take_signalled, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::refuse_despite_promises, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::refuse_keeps_promise, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::refuse_ignores_chunk_bins, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::at_once_ignores_promises, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::at_once_unconfirmed, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::cas_refusal_unconfirmed, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::walk_batch_retries_twice, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::walk_pins_unacquired, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::walk_filter_counted_late, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::walk_filter_skips_chunks, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::fallback_group_overtakes, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::fallback_group_rank_off_by_one, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::fallback_skips_own_arena, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::fallback_never_borrows, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::borrowed_bin_to_bin_arena, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::borrowed_chunk_cached, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::failure_record_overwritten>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::climb_refusal_keeps_promises>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::climb_refusal_ignores_generation>(world&, const params&, mode);

}  // namespace toga::sim::heap_scenarios
