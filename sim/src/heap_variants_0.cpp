// heap_inst instantiations (sim/src/heap_instance.hpp): the correct allocator (bug=0): every scenario's hot type.
#include "heap_instance.hpp"

namespace toga::sim::heap_scenarios {

template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::none>(world&, const params&, mode);

template std::unique_ptr<instance> make_one<ualloc_bug::claim_stays_on_full_word, tbuddy_bug::none>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::group_failure_keeps_charge>(world&, const params&, mode);
template std::unique_ptr<instance> make_one<ualloc_bug::free_cold_no_reread, tbuddy_bug::none>(world&, const params&, mode);

}  // namespace toga::sim::heap_scenarios
