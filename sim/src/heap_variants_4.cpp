// heap_inst instantiations (sim/src/heap_instance.hpp): planted bugs of the shared reclaim walk, the
// GROW's hand-over, the climb that stops at a recorded failure and the trim of runs of granules.
#include "heap_instance.hpp"

namespace toga::sim::heap_scenarios {

template std::unique_ptr<instance> make_one<ualloc_bug::walk_claim_any_tag, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::walk_ends_early, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::walk_flags_after_count, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::grow_bins_without_warp_barrier, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::climb_stop_keeps_promises>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::climb_stop_ignores_generation>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::withdraw_splits_run>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::adopt_run_keeps_tags>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::find_before_section_barrier, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::hold_queued_no_wait, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::chunk_signal_after_unlock, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::grow_pins_from_two_left, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::undo_crossing_from_zero_missed, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::retire_takes_one_unit_short, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::placement_race_pushed_back, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::slow_take_not_flushed, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::inbox_skip_unrecorded, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::chunk_skip_unrecorded, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::owned_scan_ends_true, tbuddy_bug::none>(world&, const params&, mode);

}  // namespace toga::sim::heap_scenarios
