// heap_inst instantiations (sim/src/heap_instance.hpp): planted TBuddy bugs.
#include "heap_instance.hpp"

namespace toga::sim::heap_scenarios {

template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::merge_without_unit>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::claim_without_lock>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::oom_keeps_promises>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::run_leftover_unsignalled>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::run_boundary_off_by_one>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::tile_free_keeps_leaves>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::adopt_without_merge>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::adopt_uncharges_limit>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::withdraw_used_granule>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::free_skips_generation>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::failure_read_late>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::failure_covers_smaller>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::presplit_no_drain>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::presplit_take_racy>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::presplit_drain_charged>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::presplit_drain_unseen>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::leave_findable_skips_last_slot, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::claim_hint_wraps_late, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::reclaim_inbox_drops_partial, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::super_fallback_bound_doubled, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::findable_unnoted, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::more_claims_from_zero, tbuddy_bug::none>(world&, const params&, mode);

}  // namespace toga::sim::heap_scenarios
