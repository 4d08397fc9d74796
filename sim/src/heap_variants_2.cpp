// heap_inst instantiations (sim/src/heap_instance.hpp): planted UAlloc bugs, second part.
#include "heap_instance.hpp"

namespace toga::sim::heap_scenarios {

template std::unique_ptr<instance> make_one<ualloc_bug::relaxed_slot_claim, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_without_warp_barrier, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::superbin_tag_not_set, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::superbin_slot_past_end, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::superbin_returned_live, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::superbin_free_to_tbuddy, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::reclaim_gate_left_closed, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::fallback_ignores_alignment, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::superbin_arena_ignores_sharing, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::steal_searches_own_arena, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::resident_views_unpublished, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::find_without_warp_barrier, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_into_unmapped, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::trim_without_reclaim, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::empty_bin_unnoted, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::clean_read_late, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::superbin_route_coarse, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::grow_batches_floor, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::set_slot_dead_check_relaxed, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::alignment_limit_doubled, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::steal_locks_old_arena, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::overproduced_bin_unnoted, tbuddy_bug::none>(world&, const params&, mode);

}  // namespace toga::sim::heap_scenarios
