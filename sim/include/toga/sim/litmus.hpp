//! @file toga/sim/litmus.hpp
//! Litmus tests of the simulator's memory model (the `litmus` scenario and `toga-sim litmus`).
//!
//! Each test is run under a variant of memory orders and a placement of its threads; its weak
//! outcome is either allowed or forbidden by the PTX memory model (NVIDIA PTX ISA, "Memory
//! Consistency Model"; Lustig, Sahasrabuddhe and Giroux, ASPLOS'19) as toga reads it
//! (`litmus_ptx_allows`). The simulator must never produce a forbidden outcome; it produces the
//! allowed weak outcomes of MP, SB and IRIW, and cannot produce those of LB and 2+2W
//! (docs/simulator.md §4.4).
#pragma once

#include <cstdint>
#include <string>

#include "toga/sim/types.hpp"

namespace toga::sim {

enum class litmus_test : std::uint8_t { mp, sb, lb, iriw, ww22, corr, coww };
enum class litmus_variant : std::uint8_t { relaxed, rel_acq, fence, sc_fence, sc_ops };
//! device: every thread in its own block, device scope. block_same: all threads in one block,
//! block scope. block_cross: every thread in its own block, block scope (no pair is morally strong).
enum class litmus_placement : std::uint8_t { device, block_same, block_cross };
inline constexpr unsigned litmus_test_count = 7;
inline constexpr unsigned litmus_variant_count = 5;
inline constexpr unsigned litmus_placement_count = 3;

const char* litmus_test_name(litmus_test t);
const char* litmus_variant_name(litmus_variant v);
const char* litmus_placement_name(litmus_placement p);
//! The test's weak outcome, e.g. "r0=1 r1=0".
const char* litmus_weak_outcome(litmus_test t);
unsigned litmus_threads(litmus_test t);
//! Whether PTX allows the weak outcome for this variant and placement.
bool litmus_ptx_allows(litmus_test t, litmus_variant v, litmus_placement p);

//! One configuration run exhaustively (delay-bounded, `bound` deviations: scheduling and
//! read-from choices), at most `max_schedules` schedules.
struct litmus_row {
  litmus_test test{};
  litmus_variant variant{};
  litmus_placement placement{};
  bool ptx_allows = false;
  std::uint64_t schedules = 0;
  std::uint64_t weak = 0;  //!< schedules that ended in the weak outcome
  bool complete = false;   //!< every schedule within the bound was run
  std::string failure;     //!< the first failing schedule's verdict (a forbidden outcome), if any
};
litmus_row run_litmus(litmus_test t, litmus_variant v, litmus_placement p, memory_model m, unsigned bound,
                      std::uint64_t max_schedules);

}  // namespace toga::sim
