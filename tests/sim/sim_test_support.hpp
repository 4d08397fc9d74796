//! @file tests/sim/sim_test_support.hpp
//! Shared helpers of the simulator tests.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "toga/sim/runner.hpp"

namespace toga::test {
//! True when the environment sets TOGA_SOAK to anything but "" or "0": the soak label's run
//! (`ctest --preset soak`; tests/CMakeLists.txt registers the soak tests with TOGA_SOAK=1).
inline bool soak_run() {
  const char* e = std::getenv("TOGA_SOAK");
  return e && *e && std::strcmp(e, "0") != 0;
}
//! The number of schedules a test explores: `ci` in the README's test command (label sim), `soak`
//! in the soak run. The CI counts are at least the schedule at which the planted bugs of the same
//! scenario die (sim/mutants-baseline.json; docs/simulator.md "What CI runs and what the soak runs").
inline std::uint64_t schedules(std::uint64_t ci, std::uint64_t soak) { return soak_run() ? soak : ci; }

//! The first failure of an exploration with its replay command, or "none in N".
inline std::string failure_text(const toga::sim::explore_summary& s) {
  if (!s.first_failure) return "none in " + std::to_string(s.schedules);
  return std::string(toga::sim::to_string(s.first_failure->result.kind)) + ": " + s.first_failure->result.message +
         "\n  replay: " + s.first_failure->replay_command;
}
}  // namespace toga::test
