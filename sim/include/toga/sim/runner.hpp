//! @file toga/sim/runner.hpp
//! Running scenarios: one schedule, many schedules in parallel, replay, shrinking.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "toga/sim/coverage.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/strategy.hpp"
#include "toga/sim/types.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {

//! A usage error: an unknown scenario or parameter, a value out of range, options that do not
//! go together. toga-sim exits with 2 on it.
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
//! A bad input file (a decision file that is missing, malformed or inconsistent). toga-sim
//! exits with 1 on it.
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

//! Checks limits given on a command line or in a file: both non-zero, fair_after below
//! max_steps, max_steps at most max_steps_bound. Returns a message when they are not.
std::optional<std::string> check_limits(const run_limits& l);

//! What the worker thread is exploring now, for the crash report (install_crash_reporter).
struct crash_context {
  bool active = false;
  const char* scenario = "";
  std::uint64_t index = 0, seed = 0, pct_steps = 0;
  unsigned pct_depth = 0;
  strategy_kind strategy = strategy_kind::random;
  //! The default-policy schedule that calibrates PCT's k (run before schedule 0): it has no seed;
  //! explore of one portfolio schedule on one thread runs it again.
  bool calibration = false;
  //! The whole replay command of the schedule (scenario, strategy, seed and every --set of its
  //! drawn shape), for random shapes, whose --set values the command line does not hold; nullptr:
  //! the report names the schedule and asks for the command line's own options.
  const char* replay = nullptr;
  //! The one schedule `toga-sim replay` runs (by seed or decision file): the command that crashed
  //! is its own replay.
  bool replaying = false;
};
crash_context& this_thread_crash_context();
//! Installs handlers for SIGSEGV, SIGBUS, SIGFPE and SIGILL that name the schedule being
//! explored on the crashing thread and the command that replays it (code under test with a wild
//! access can take the simulator down: a GPU would report an illegal address), also write
//! "CRASH <index>" to `fd` when it is >= 0, and exit with status 3. For tools, not libraries.
void install_crash_reporter(int fd = -1);

//! Runs one schedule of `sc` with strategy `strat` seeded by `seed`.
run_result run_one(const scenario& sc, const params& p, strategy& strat, std::uint64_t seed,
                   const run_limits& limits, world::tracer_fn tracer = {},
                   memory_state::tracer_fn memory_tracer = {});

//! Options of an exploration (a `toga-sim explore` call).
struct explore_options {
  strategy_config strategy;
  std::uint64_t schedules = 1000;
  std::uint64_t seed = 1;        //!< schedule i uses seed + i
  unsigned threads = 0;          //!< 0: all cores (oneTBB); exhaustive always uses one
  params scenario_params;
  std::optional<run_limits> limits;  //!< default: the scenario's
  bool stop_on_failure = true;
  bool progress = false;         //!< a one-line progress display on stderr
  //! Random shapes: schedule i runs draw_shape(sc, scenario_params, seed + i) (the parameters it
  //! does not name are drawn; PCT's k is calibrated per shape unless strategy.pct_steps is set).
  //! Not with the exhaustive strategy.
  bool random_shapes = false;
  //! Schedules first_index .. first_index + schedules - 1 (a shard of a larger run, see
  //! shard_range): schedule i uses seed + i and the portfolio's strategy for i, whichever shard
  //! runs it. Not with the exhaustive strategy (its schedules are enumerated in order).
  std::uint64_t first_index = 0;
  //! Failures recorded (lowest indices first, each with its replay command and determinism
  //! check) besides the first; with stop_on_failure only the first is found.
  unsigned max_failures = 10;
  //! Record the coverage of the core's races (toga/sim/coverage.hpp) over the schedules run
  //! (explore_summary::coverage).
  bool coverage = false;
  //! Stop starting schedules after this many seconds (0: no limit). What is counted and
  //! reported is then the longest run of schedules first_index, first_index + 1, ... that all
  //! ended (explore_summary::time_limited), so every count and failure stays a pure function of
  //! its schedules; only how many ran depends on the clock.
  double seconds = 0;
};

//! Shard `shard` of `shards` of a run of `schedules` schedules: {first index, count}; the shards
//! of one run are contiguous, disjoint and cover it (counts differ by at most one). Throws
//! std::invalid_argument for shards == 0, shard >= shards or more shards than schedules.
std::pair<std::uint64_t, std::uint64_t> shard_range(std::uint64_t schedules, std::uint64_t shard, std::uint64_t shards);

//! The first failure of an exploration, with what it takes to reproduce it.
struct failure_report {
  std::uint64_t index = 0;        //!< schedule number (0-based)
  std::uint64_t seed = 0;         //!< that schedule's seed
  strategy_config strategy;       //!< concrete strategy (portfolio resolved)
  params scenario_params;         //!< the parameters it ran with (a random shape's drawn values)
  run_result result;
  bool deterministic = true;      //!< a re-run gave the same verdict and trace hash
  std::string replay_command;     //!< one line that reproduces it
};

struct explore_summary {
  std::string scenario;
  std::uint64_t schedules = 0;    //!< schedules counted (all up to the first failure)
  double seconds = 0;
  std::uint64_t counts[verdict_kind_count] = {};
  std::uint64_t total_steps = 0;
  bool exhausted = false;         //!< exhaustive: every schedule within the bound was run
  bool time_limited = false;      //!< explore_options::seconds ran out before every schedule was run
  std::optional<failure_report> first_failure;
  //! Every failure found, lowest index first, at most explore_options::max_failures (the first
  //! failure is failures[0]); more than one only without stop_on_failure.
  std::vector<failure_report> failures;
  std::uint64_t failures_found = 0;  //!< failing schedules in all (may exceed failures.size())
  std::uint64_t first_index = 0;  //!< explore_options::first_index
  std::uint64_t pct_steps = 0;    //!< k used by PCT (calibrated or given; 0 with random shapes: per shape)
  //! With explore_options::coverage: the site pairs of every schedule run (the same whatever
  //! the thread count; with stop_on_failure, schedules past the first failure may be included).
  std::shared_ptr<coverage_recorder> coverage;
  double schedules_per_second() const { return seconds > 0 ? schedules / seconds : 0; }
};

//! Explores `sc`. Throws std::invalid_argument when `opt.scenario_params` do not fit the
//! scenario's declared keys (validate_params) or `opt.schedules` is 0. Results (counts, first failure, its hash) depend only on the options, never
//! on the number of threads: schedule i is a pure function of (scenario, params, strategy,
//! seed + i), and the reported failure is the one with the lowest index.
explore_summary explore(const scenario& sc, const explore_options& opt);

//! The guided strategy's targets for `sc` (docs/simulator.md §19): a coverage pre-pass of 256
//! stall-strategy schedules (seeds 1..256) of the scenario's default shape, and the first site of
//! every core race pair it saw in one order only ("file:line"). Deterministic for the scenario
//! alone, so a replay by seed recomputes the same targets.
std::shared_ptr<const std::vector<std::string>> guided_targets(const scenario& sc, const run_limits& limits);

//! The program that replay commands and crash reports name: "toga-sim" unless set (toga-sim's
//! main sets the path it was started by, so that the printed command runs as it stands). Not
//! thread-safe: set it before exploring; at most 255 characters are kept.
void set_program_name(const std::string& name);
const std::string& program_name();

//! The command line that replays one schedule.
std::string replay_command(const scenario& sc, const params& p, const strategy_config& s,
                           std::uint64_t seed, const run_limits& limits);

//! Shrinks a failing schedule to one with the same verdict kind that is smaller in the order
//! (preemptions, deviations from the default policy, switches); data choices other than 0 (stale
//! reads, fault decisions, scenario draws) count as deviations.
//!  1. Search: a delay-bounded exploration with bounds 1..4 (original run at most
//!     `search_steps_max` steps; a step budget of its own, max_steps_total); then, while more
//!     than 3 preemptions are left, two samplers of schedules that preempt little, within at most
//!     2,000 replays and an eighth of the steps: PCT with depth 1..4 and sparse random schedules
//!     (the default policy with about p = 1, 2, 3, 4, 6, 8, 12, 16 random preemptions).
//!  2. Reduction in rounds that alternate two readings of a candidate: anchored (each lane choice
//!     tied to the lane that made it and that lane's scheduling point, anchored_strategy) and
//!     positional (the list's order, data per lane). A round: delta debugging (Zeller's ddmin)
//!     over all deviations, then over the lane choices only, then over the data choices only;
//!     then single deviations and pairs of consecutive lane deviations. Rounds go on while one
//!     improves the schedule.
//!  2b. While more than 1 and at most `focus_preemptions_max` preemptions are left: the
//!     delay-bounded search with bounds 1, 2 whose lane deviations are preemptions at the sites
//!     where the current schedule preempts (data choices anywhere), within a quarter of
//!     max_steps_total.
//!  3. While more than 1 preemption is left and the failure's prefix (up to its last deviation)
//!     is at most `search_steps_max` steps: the delay-bounded search over that prefix only
//!     (bounds 1..3, the default policy past it), within a quarter of max_steps_total.
//! Every candidate replay is capped: at most 2x the original's steps (a candidate that runs
//! longer cannot give the same verdict); a livelock's candidates hand over to the fair tail at
//! twice their last deviation's step (+2,000) and get `livelock_window` steps there. The result
//! is replayed once more with the real limits; the latest accepted schedule that gives the same
//! verdict kind there is returned (the original if none). Budget: `max_replays` replays and
//! `max_steps_total` steps, plus `max_steps_total` steps for step 1's search and a quarter of it for
//! step 3's (deterministic; about 2 minutes of the slowest scenario on the 2-core machine). TOGA_SHRINK_DEBUG=1 in the
//! environment prints every accepted schedule's size to stderr.
struct shrink_report {
  run_result original;
  run_result shrunk;
  unsigned replays = 0;         //!< replays of candidates (at most max_replays)
  std::uint64_t search_replays = 0;  //!< schedules of the delay-bounded searches (steps 1 and 3)
  std::uint64_t search_steps = 0;    //!< their scheduling points (at most max_steps_total each)
  std::uint64_t steps = 0;      //!< scheduling points of the other replays (at most max_steps_total)
};
inline constexpr std::uint64_t search_steps_max = 5'000;
inline constexpr unsigned focus_preemptions_max = 64;  //!< step 2b: a failure with more preemptions has too many sites to focus on
inline constexpr std::uint64_t livelock_window = 20'000;
shrink_report shrink(const scenario& sc, const params& p, const run_limits& limits,
                     const run_result& failing, unsigned max_replays = 20000,
                     std::uint64_t max_steps_total = 100'000'000);

//! Decision files: JSON with the scenario, its parameters, limits and the decision list.
void save_decisions(const std::string& path, const scenario& sc, const params& p,
                    const run_limits& limits, const run_result& r);
struct decision_file {
  std::string scenario;
  params scenario_params;
  run_limits limits;  //!< with the memory model and fault sites the schedule ran under
  std::vector<std::uint32_t> decisions;
  std::string verdict;
  std::uint64_t trace_hash = 0;
};
//! Throws input_error (a std::runtime_error) with the file name and what is wrong: missing,
//! not JSON, a required key absent, limits that check_limits rejects, an unknown memory model
//! or fault site.
decision_file load_decisions(const std::string& path);

}  // namespace toga::sim
