//! @file tests/sim/sim_test_support.hpp
//! Shared helpers of the simulator tests.
#pragma once

#include <string>

#include "toga/sim/runner.hpp"

namespace toga::test {
//! The first failure of an exploration with its replay command, or "none in N".
inline std::string failure_text(const toga::sim::explore_summary& s) {
  if (!s.first_failure) return "none in " + std::to_string(s.schedules);
  return std::string(toga::sim::to_string(s.first_failure->result.kind)) + ": " + s.first_failure->result.message +
         "\n  replay: " + s.first_failure->replay_command;
}
}  // namespace toga::test
