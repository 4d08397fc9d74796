// What sim/src/scenarios_allocator.cpp needs of the simulated heap (sim/src/heap_instance.hpp):
// the scenario modes and the factories, without the heap_inst template, so that the file that
// registers the scenarios instantiates nothing. Private to the simulator library.
#pragma once

#include <memory>

#include "toga/allocator.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim::heap_scenarios {

enum class mode { storm, exhaust, mixed, retire_race, inbox_race, adopt_race, rounds, superbins, grow, grow_exhaust, trim, failfast_race, clean_race, promise_race, presplit_race, undo_race, refuse_race, word_race, fallback_race };
inline bool growable(mode m) { return m == mode::grow || m == mode::grow_exhaust || m == mode::trim; }

//! The heap instance of one planted-bug pair (heap_instance.hpp); instantiated in heap_variants_*.cpp.
template <ualloc_bug UB, tbuddy_bug TB>
std::unique_ptr<instance> make_one(world& w, const params& p, mode md);

//! The instance for the scenario parameter bug=N (0: the correct allocator).
std::unique_ptr<instance> make_heap(world& w, const params& p, mode md);

}  // namespace toga::sim::heap_scenarios
