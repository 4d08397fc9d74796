// heap_inst instantiations (sim/src/heap_instance.hpp): the correct allocator (bug=0): every scenario's hot type.
#include "heap_instance.hpp"

namespace toga::sim::heap_scenarios {

template std::unique_ptr<instance> make_one<ualloc_bug::none, tbuddy_bug::none>(world&, const params&, mode);

}  // namespace toga::sim::heap_scenarios
