//! @file toga/sim/dpor.hpp
//! Exhaustive checking of small scenarios with dynamic partial-order reduction (`toga-sim dpor`,
//! docs/simulator.md §20).
//!
//! A schedule is a sequence of *steps*: what one lane does between two lane choices of the world
//! (its pending operation, the plain code after it, up to its next scheduling point). Two steps of
//! different lanes are *dependent* when they touch one word and at least one writes it (failed
//! compare-exchanges read), when both go through the seq_cst order (seq_cst fences, and the fence
//! inside a seq_cst operation, under --memory weak or while the scoped-race check runs), or when
//! either is a warp intrinsic of the same warp (activemask, ballot, shfl, match_any, syncwarp,
//! reduce_or: the warp's rendezvous, and a lane's exit, which the rendezvous waits on) or reads
//! the step count (`clock_ns`, dependent with everything). The exploration is a depth-first search over the lane choices with the backtrack
//! sets of Flanagan and Godefroid (POPL'05, every race of the executed trace rather than the last
//! one only) and sleep sets (Godefroid), and over every value of every data choice (under --memory
//! weak: which store each load reads, the reads-from as a branch of its own, as GenMC does).
//!
//! Spin loops. A lane that backs off (`P::backoff`) is not chosen again until another lane has
//! written something, exited or blocked, unless no other lane can run (then every waiting lane
//! may). That is the await reading of a spin loop (GenMC's spin-assume, Kokologiannakis et al.,
//! PLDI'19): a failed iteration that wrote nothing is not repeated against the same memory. The
//! unreduced enumeration (`reduce = false`) uses the same rule, so the two explore the same set of
//! executions up to equivalence, and the counts compare.
//!
//! Single-threaded; one exploration at a time per OS thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "toga/sim/scenario.hpp"
#include "toga/sim/types.hpp"

namespace toga::sim {

//! Most lanes a dpor exploration accepts (the brief: scenarios of up to about 4 lanes; the lane
//! sets are 64-bit masks, and more than 8 lanes would not finish anyway).
inline constexpr unsigned dpor_max_lanes = 8;

//! Plain (non-atomic) shared state: scenario ghost state and data that lanes write between their
//! scheduling points. The simulator does not see those accesses, so a step is taken to *write plain
//! state* when it writes an atomic or its operation is a fence, a warp intrinsic, a lane's start or
//! its exit; a step that only loads, fails a compare-exchange or backs off is taken not to.
enum class plain_mode : std::uint8_t {
  //! every step may read plain state: a step that writes it is dependent with every step (sound
  //! for any scenario; least reduction)
  all,
  //! the steps that write plain state are dependent with each other (so every invariant sees the
  //! same sequence of plain states), and a load-only step is assumed not to read plain state that
  //! another lane writes without an atomic ordering the two (the default)
  writers,
  //! plain state is assumed lane-private or ordered by the atomics: only atomics count (most
  //! reduction; misses admission's planted bugs, whose invariant counts lanes in a plain counter)
  none,
  //! the scenario declares its plain state (scenario::plain_declared, toga/sim/plain.hpp): a
  //! declared plain access counts as an access to its word, and two steps are dependent when they
  //! both write words that one invariant reads (its declared reads; an invariant without a
  //! declaration reads everything). Sound when the declaration is complete.
  declared,
  //! declared for a scenario that declares its plain state, writers otherwise (the default)
  automatic,
};
const char* to_string(plain_mode m);
bool parse_plain_mode(const std::string& s, plain_mode& out);

struct dpor_options {
  bool reduce = true;                  //!< false: every runnable lane at every choice (the unreduced count)
  std::uint64_t max_executions = 10'000'000;  //!< schedule limit: stop (incomplete) after this many runs
  double max_seconds = 0;              //!< time limit in seconds (0: none): stop (incomplete) past it
  //! Choices at or past this step are not enumerated (the default policy, value 0) and make the
  //! exploration incomplete; 0: the run's fair_after.
  std::uint64_t step_bound = 0;
  bool stop_on_failure = true;
  //! How plain (non-atomic) shared state counts: see plain_mode.
  plain_mode plain = plain_mode::automatic;
  //! Warp intrinsics dependent with every step (the rule before per-warp dependence; for
  //! comparison): by default an intrinsic is dependent with the steps of its own warp only.
  bool coarse_warps = false;
  //! The lane that completes a rendezvous resumes when picked, like the lanes it released
  //! (run_limits::rendezvous_yield, dpor_limits): what makes arrivals commute. false: it runs on, as
  //! under the other strategies (its arrival is then an ordinary write of the warp's state); for
  //! comparing with the unreduced enumeration of those schedules, which is smaller.
  bool rendezvous_yield = true;
  //! Under --memory weak a load does not offer a store that an older candidate subsumes
  //! (run_limits::skip_subsumed_reads). false: every store the load may read is a branch (the
  //! count before 2026-12-01; for comparison and for the test that the outcomes are the same).
  bool skip_subsumed_reads = true;
  //! Under --plain declared, invariants declared a sum equality or word bounds
  //! (world::invariant_form) need less order among the steps that write what they read. false:
  //! every invariant as `any` (the invariant rule for all; for comparison and tests).
  bool invariant_forms = true;
  //! For tests only: dependence rules for warp intrinsics that are known to be wrong, to show that
  //! the tests can tell (Dpor.ActivemaskGroupsDependOnArrivalOrder). 0: the sound rules; 1: an
  //! activemask park commutes with the resume of a parked lane, as if the order of the two did not
  //! decide whether the parking lane joins the group.
  unsigned unsound_warps = 0;
  //! Called after every run with its result and whether it was redundant (all its remaining
  //! lanes asleep: an equivalent execution is explored elsewhere).
  std::function<void(const run_result&, bool redundant)> on_run;
};

struct dpor_failure {
  std::uint64_t index = 0;   //!< run number (0-based)
  run_result result;
  bool deterministic = true; //!< a replay of its decisions gave the same verdict and trace hash
};

struct dpor_summary {
  std::string scenario;
  plain_mode plain = plain_mode::writers;  //!< the plain-state mode used (automatic resolved)
  std::uint64_t executions = 0;  //!< runs that are not redundant: one per equivalence class explored
  std::uint64_t redundant = 0;   //!< runs cut by sleep sets (counted apart)
  std::uint64_t truncated = 0;   //!< runs that reached the step bound (choices past it not enumerated)
  bool complete = false;         //!< every execution explored: no limit hit, no run truncated
  std::string stopped;           //!< why it stopped when not complete ("first failure", "schedule limit", ...)
  double seconds = 0;
  std::uint64_t counts[verdict_kind_count] = {};
  std::uint64_t total_steps = 0;
  std::uint64_t max_steps = 0;   //!< longest run, in scheduling points
  std::vector<dpor_failure> failures;  //!< the first few, in order found
  std::uint64_t failures_found = 0;
};

//! Checks that `sc` with `p` and `limits` fits a dpor exploration: at most dpor_max_lanes lanes,
//! no fault sites. Returns what is wrong and what to do, or nullopt.
std::optional<std::string> dpor_unsupported(const scenario& sc, const params& p, const run_limits& limits);

//! The limits a dpor exploration with options `opt` runs under, and its failures replay under:
//! `limits` with opt's rendezvous_yield (the lane that completes a warp rendezvous resumes when the
//! strategy picks it, like the lanes it released) and skip_subsumed_reads, both on by default. Its
//! decision files record both.
run_limits dpor_limits(const run_limits& limits, const dpor_options& opt = {});

//! Explores every execution of `sc` (with `p`, under `limits`) up to the equivalence above.
//! Throws std::invalid_argument when dpor_unsupported says so, and std::runtime_error when the
//! scenario is not deterministic (a replayed prefix reached a different choice).
dpor_summary explore_dpor(const scenario& sc, const params& p, const run_limits& limits, const dpor_options& opt);

}  // namespace toga::sim
