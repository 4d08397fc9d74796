// heap_inst instantiations (sim/src/heap_instance.hpp): planted UAlloc bugs, first part.
#include "heap_instance.hpp"

namespace toga::sim::heap_scenarios {

template std::unique_ptr<instance> make_one<ualloc_bug::free_outside_read_section, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::retire_without_try_wait, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::chunk_returned_with_live_bins, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::no_unlink_on_exhaustion, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::no_relink_on_refill, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::claim_without_reservation, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::two_lanes_one_bit, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::pin_swap_drops_bin, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::retire_keeps_pin, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::dead_near_wrap, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::pin_before_init, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::or_drops_lane, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_signals_short, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::undo_whole_reservation, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::relaxed_slot_free, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::push_back_marks_before_link, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_or_over_group, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::group_run_floor_log2>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::group_charges_whole_run>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::init_bin_keeps_queued, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::retire_queued_deferred_twice, tbuddy_bug::none>(world&, const params&, mode);

}  // namespace toga::sim::heap_scenarios
