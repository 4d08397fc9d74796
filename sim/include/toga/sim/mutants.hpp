//! @file toga/sim/mutants.hpp
//! The mutant suite (docs/simulator.md §16): every planted bug of every component in one catalogue,
//! run by `toga-sim mutants`, which measures how many the simulator kills and how fast.
//!
//! A mutant is a scenario with parameters that select a planted bug (`bug=N`), the memory model
//! and fault sites it runs under, the strategy that explores it, its class and its depth (the
//! preemptions a failing schedule needs). Running it explores up to N schedules from seed 1 and
//! stops at the first failure: "killed" at that schedule, with the verdict and the command that
//! replays it. Everything is deterministic, so a committed baseline (sim/mutants-baseline.json)
//! says which mutants were killed, and a later run that lets one of them survive is a regression.
//!
//! Adding a mutant: plant the bug behind a `bug=N` case of a scenario (core planted bugs are enum
//! values of the component, see toga/group.hpp), then add one line to the table in
//! sim/src/mutants.cpp, run `toga-sim mutants --filter ID`, and refresh the baseline with
//! `toga-sim mutants --write-baseline sim/mutants-baseline.json`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "toga/sim/strategy.hpp"
#include "toga/sim/types.hpp"

namespace toga::sim {

struct mutant {
  std::string id;        //!< unique, e.g. "mutex.relaxed-lock"
  std::string cls;       //!< class: memory-order, scope, warp-mask, its, atomicity, ...
  bool gpu_specific = false;  //!< memory order, scope, warp mask or independent thread scheduling
  std::string what;      //!< the mutation in a few words
  std::string scenario;
  std::vector<std::pair<std::string, std::int64_t>> params;
  memory_model memory = memory_model::sc;
  std::uint32_t faults = 0;
  strategy_config strategy;
  unsigned depth = 1;    //!< preemptions a failing schedule needs (measured: the shrunk failure's)
  bool ci = false;       //!< in the CI subset (tests/sim/mutants_test.cpp)
  //! Not counted in the kill rate: the mutation cannot change any execution the model allows
  //! (the reason is in `note`).
  bool equivalent = false;
  std::string note;      //!< why it is expected to survive, or other remarks
};

//! The catalogue, in a fixed order.
const std::vector<mutant>& mutant_catalogue();

struct mutant_result {
  const mutant* m = nullptr;
  bool killed = false;
  std::uint64_t schedules = 0;  //!< to the first failure (1-based), or all that ran
  verdict_kind verdict = verdict_kind::pass;
  std::string message;
  std::string replay;           //!< the command that replays the failure
  bool deterministic = true;    //!< a re-run gave the same verdict and trace hash
  std::uint32_t preemptions = 0;
  std::optional<std::uint32_t> shrunk_preemptions;  //!< with shrinking
  bool shrunk_replays = true;   //!< the shrunk decision list replays the same verdict
  double seconds = 0;
  double shrink_seconds = 0;
};

//! Explores `m` for at most `schedules` schedules on `threads` worker threads (0: all cores);
//! shrinks the failure when asked.
mutant_result run_mutant(const mutant& m, std::uint64_t schedules, unsigned threads, bool shrink);

//! The baseline: per mutant id, the schedules to its first failure when it was recorded (0:
//! survived), and the budget the run had.
struct mutant_baseline {
  std::uint64_t schedules = 0;
  std::vector<std::pair<std::string, std::uint64_t>> killed_at;
  std::optional<std::uint64_t> find(const std::string& id) const;
};
//! Throws input_error on a missing or malformed file.
mutant_baseline load_mutant_baseline(const std::string& path);
void save_mutant_baseline(const std::string& path, std::uint64_t schedules, const std::vector<mutant_result>& results);
//! sim/mutants-baseline.json in the source tree this simulator was built from.
std::string default_mutant_baseline_path();

}  // namespace toga::sim
