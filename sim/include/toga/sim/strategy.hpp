//! @file toga/sim/strategy.hpp
//! Scheduling strategies: who runs at each scheduling point, and the value of each data choice.
//!
//!  - random: uniform over the runnable lanes at every point (Shuttle's random walk).
//!  - pct: Probabilistic Concurrency Testing with depth d (Burckhardt, Kothari, Musuvathi,
//!    Nagarakatte, ASPLOS'10): random distinct lane priorities, d-1 random priority-change
//!    points among the first k steps; finds a depth-d bug with probability >= 1/(n k^(d-1)).
//!    One adaptation for spin loops: a lane that backs off drops below every other lane, so
//!    a high-priority spinner cannot starve the lane it waits for.
//!  - replay: follows a recorded decision list; past its end (or at an entry that no longer
//!    fits) it uses the default policy. Two marker entries steer shrinking.
//!  - stall: random, plus long stalls of single lanes (see stall_strategy).
//!  - guided: stall, with the stalls placed by coverage (docs/simulator.md §19): a lane about to
//!    run an operation at a site whose race pairs a coverage pre-pass saw in one order only is
//!    stalled there more often, so that the other lane's operation runs first (guided_strategy).
//!  - exhaustive: depth-first enumeration of all schedules that deviate from the default
//!    policy at most `bound` times (delay bounding, Emmi, Qadeer, Rakamaric, POPL'11).
//!
//! The default policy (also the fair tail): keep running the current lane; at a backoff, or
//! when the current lane blocks or exits, run the next runnable lane in cyclic order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "toga/sim/rng.hpp"
#include "toga/sim/types.hpp"

namespace toga::sim {

//! What a strategy sees at a lane choice.
struct pick_context {
  const lane_set& runnable;  //!< candidates (at least two)
  unsigned current;          //!< lane that reached the point (>= lanes: none yet)
  bool current_runnable;     //!< false when it blocked or exited
  bool yield;                //!< the point is a backoff
  std::uint64_t step;        //!< scheduling points so far
  //! Where the choice is, in the deciding lane's own terms (`anchor_key`): stable when choices
  //! of other lanes, earlier in the schedule, change.
  std::uint64_t anchor = 0;
  //! The source site (file, line) of the operation the current lane runs after this point
  //! (an atomic of the simulated Platform; file nullptr otherwise).
  const char* site_file = nullptr;
  std::uint32_t site_line = 0;
};

//! Names a lane choice by the lane that reached it: lane `lane` (the first choice of a schedule,
//! made before any lane ran, has a lane id past the last), its `point`-th scheduling point, the
//! `ord`-th choice made there (a point can hold two: the choice at the point and the one when
//! the lane blocks, stalls or closes a group).
inline std::uint64_t anchor_key(unsigned lane, std::uint64_t point, std::uint32_t ord) {
  return (static_cast<std::uint64_t>(lane & 0xffffffu) << 40) ^ (point << 4) ^ (ord < 15 ? ord : 15u);
}

//! The default policy's choice (see file comment).
inline unsigned default_pick(const pick_context& c) {
  if (c.current_runnable && !c.yield) return c.current;
  return c.runnable.next_cyclic(c.current);
}

//! Replay markers (decision-list entries that are not lane ids).
inline constexpr std::uint32_t decision_default = 0xffffffffu;  //!< use the default policy
inline constexpr std::uint32_t decision_stay = 0xfffffffeu;     //!< keep the current lane

class strategy {
 public:
  virtual ~strategy() = default;
  //! Called before each schedule with its seed and the number of lanes.
  virtual void begin(std::uint64_t seed, unsigned lanes) = 0;
  //! Returns a member of c.runnable.
  virtual unsigned pick_lane(const pick_context& c) = 0;
  //! Returns a value in [0, n), n >= 2, for a data choice of lane `lane`.
  virtual std::uint32_t pick_value(std::uint32_t n, std::uint64_t step, unsigned lane) = 0;
  //! Whether every value of a data choice is a branch to explore (dpor): a choice whose values
  //! have fewer distinct outcomes (world::choose(n, distinct)) is then asked for `distinct`
  //! values, one per outcome; a sampling strategy is asked for n, which keeps the draw's odds.
  virtual bool enumerates_values() const { return false; }
};

enum class strategy_kind : std::uint8_t { random, pct, replay, exhaustive, portfolio, stall, guided };
const char* to_string(strategy_kind k);
bool parse_strategy(const std::string& s, strategy_kind& out);

//! Parameters of a strategy (the parts a replay command must repeat).
struct strategy_config {
  strategy_kind kind = strategy_kind::random;
  unsigned pct_depth = 3;           //!< d
  std::uint64_t pct_steps = 0;      //!< k; 0: calibrated from a default-policy run
  unsigned bound = 2;               //!< exhaustive: deviations from the default policy
  std::vector<std::uint32_t> decisions;  //!< replay
  //! guided: the sites to stall at, "file:line" as site_name() writes it (filled by explore's
  //! coverage pre-pass: deterministic for the scenario, its shape and the seed).
  std::shared_ptr<const std::vector<std::string>> guided_sites;
};

class random_strategy final : public strategy {
 public:
  void begin(std::uint64_t seed, unsigned) override { rng_.reseed(seed); }
  unsigned pick_lane(const pick_context& c) override {
    return c.runnable.nth(static_cast<unsigned>(rng_.below(c.runnable.count())));
  }
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned) override {
    return static_cast<std::uint32_t>(rng_.below(n));
  }

 private:
  rng rng_;
};

//! A uniformly random runnable lane other than `stalled` (when that one is runnable): one draw.
inline unsigned pick_except(rng& r, const lane_set& runnable, unsigned stalled) {
  const bool skip = stalled < runnable.size() && runnable.test(stalled);
  const unsigned n = runnable.count() - (skip ? 1 : 0);
  unsigned k = static_cast<unsigned>(r.below(n));
  for (unsigned i = runnable.first_from(0);; i = runnable.first_from(i + 1)) {
    if (skip && i == stalled) continue;
    if (k-- == 0) return i;
  }
}

//! Random scheduling with long stalls (docs/simulator.md §6.7): now and then the running
//! lane is kept off for a random 1..256 decisions while others can run, so that a lane can sit
//! inside a critical window while the rest of the machine moves on.
class stall_strategy final : public strategy {
 public:
  void begin(std::uint64_t seed, unsigned) override {
    rng_.reseed(seed);
    stalled_ = ~0u;
    left_ = 0;
  }
  unsigned pick_lane(const pick_context& c) override {
    if (left_ > 0 && --left_ == 0) stalled_ = ~0u;
    if (stalled_ == ~0u && c.current < c.runnable.size() && rng_.below(32) == 0) {
      stalled_ = c.current;
      left_ = static_cast<unsigned>(1 + rng_.below(256));
    }
    return pick_except(rng_, c.runnable, stalled_);
  }
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned) override { return static_cast<std::uint32_t>(rng_.below(n)); }

 private:
  rng rng_;
  unsigned stalled_ = ~0u;
  unsigned left_ = 0;
};

//! Coverage-guided stalls (issue 34): as stall_strategy, but a lane whose next operation is at
//! one of the target sites (the first site of a race pair seen in one order only) is stalled
//! there with probability 1/4 (for 1..256 decisions), other lanes with 1/64 as before, so that
//! the pairs' other order gets its chance. Targets are matched by file name and line.
class guided_strategy final : public strategy {
 public:
  explicit guided_strategy(std::shared_ptr<const std::vector<std::string>> sites);
  void begin(std::uint64_t seed, unsigned) override {
    rng_.reseed(seed);
    stalled_ = ~0u;
    left_ = 0;
  }
  unsigned pick_lane(const pick_context& c) override;
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned) override { return static_cast<std::uint32_t>(rng_.below(n)); }
  //! Whether (file, line) is a target (cached by the file name's address).
  bool target(const char* file, std::uint32_t line);

 private:
  rng rng_;
  unsigned stalled_ = ~0u;
  unsigned left_ = 0;
  std::unordered_map<std::string, std::vector<std::uint32_t>> lines_;   // target lines per file suffix
  std::unordered_map<const char*, const std::vector<std::uint32_t>*> files_;  // file name address -> its lines (or null)
};

class pct_strategy final : public strategy {
 public:
  pct_strategy(unsigned depth, std::uint64_t steps) : depth_(depth ? depth : 1), k_(steps ? steps : 1) {}
  void begin(std::uint64_t seed, unsigned lanes) override;
  unsigned pick_lane(const pick_context& c) override;
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned) override {
    return static_cast<std::uint32_t>(rng_.below(n));
  }

 private:
  unsigned depth_;
  std::uint64_t k_;
  rng rng_;
  std::vector<std::int64_t> prio_;
  std::vector<std::uint64_t> change_points_;  // ascending
  std::size_t next_change_ = 0;
  std::int64_t low_ = 0;  // next priority to hand out below every other
};

//! Follows a recorded decision list. Two readings of the list:
//!  - positional (one list, as recorded): lane choices and data choices take entries in the order
//!    they occur;
//!  - per lane (given the list's kinds and lanes, `decision_flags` and `decision_lanes` of
//!    run_result): lane choices take the lane entries in order, and lane L's k-th data choice
//!    takes the k-th data entry recorded for L, wherever the schedule puts it.
//! Replaying an unmodified list gives the same schedule either way; the per-lane reading keeps a
//! lane's data (its sizes, the stores it read) when a change of lane choices moves it in time,
//! which is what shrinking needs.
class replay_strategy final : public strategy {
 public:
  explicit replay_strategy(std::vector<std::uint32_t> d) : d_(std::move(d)) {}
  replay_strategy(const std::vector<std::uint32_t>& d, const std::vector<std::uint8_t>& flags,
                  const std::vector<std::uint32_t>& lanes);
  void begin(std::uint64_t, unsigned) override {
    pos_ = 0;
    for (auto& q : data_pos_) q = 0;
  }
  unsigned pick_lane(const pick_context& c) override;
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned lane) override;

 private:
  std::vector<std::uint32_t> d_;  // positional: every entry; per lane: the lane entries only
  std::size_t pos_ = 0;
  bool per_lane_ = false;
  std::vector<std::vector<std::uint32_t>> data_;  // per lane: its data entries in order
  std::vector<std::size_t> data_pos_;
};

//! Follows lane choices anchored to the lanes that made them (`anchor_key`: "when lane L reaches
//! its k-th scheduling point, run lane T"); every other lane choice follows the default policy,
//! and lane L's k-th data choice takes the k-th value given for L (0 past the end), like
//! replay_strategy's per-lane reading. Removing one anchor leaves the others meaning what they
//! meant as long as their lanes take the same paths, which a positional list cannot do once the
//! interleaving before them changes: this is the shrinker's reading of a long schedule.
class anchored_strategy final : public strategy {
 public:
  //! `anchors`: (anchor key, lane to run); `data[L]`: lane L's data choices in order.
  anchored_strategy(const std::vector<std::pair<std::uint64_t, std::uint32_t>>& anchors,
                    std::vector<std::vector<std::uint32_t>> data);
  void begin(std::uint64_t, unsigned) override {
    for (auto& q : data_pos_) q = 0;
  }
  unsigned pick_lane(const pick_context& c) override;
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned lane) override;

 private:
  std::unordered_map<std::uint64_t, std::uint32_t> anchors_;
  std::vector<std::vector<std::uint32_t>> data_;
  std::vector<std::size_t> data_pos_;
};

//! Stateful across schedules: call begin() / run / advance() until advance() returns false.
class exhaustive_strategy final : public strategy {
 public:
  //! `horizon`: choices at or past this step take the default (lane) or 0 (data) and are not
  //! enumerated (the shrinker's search of a failure's prefix).
  explicit exhaustive_strategy(unsigned bound, std::uint64_t horizon = ~std::uint64_t{0})
      : bound_(bound), horizon_(horizon) {}
  //! Focused: lane choices deviate only where the current lane is runnable (a preemption, not a
  //! backoff, block or exit) and its next operation is at one of `sites` (file name pointer as
  //! pick_context gives it, line); data choices are enumerated as before. The shrinker's search
  //! around the sites where a failure preempts (runner.cpp, step 2b).
  void focus(std::vector<std::pair<const char*, std::uint32_t>> sites) {
    focused_ = true;
    sites_ = std::move(sites);
  }
  void begin(std::uint64_t, unsigned) override {
    pos_ = 0;
    used_ = 0;
  }
  unsigned pick_lane(const pick_context& c) override;
  std::uint32_t pick_value(std::uint32_t n, std::uint64_t, unsigned) override;
  //! Moves to the next schedule; false when every schedule within the bound was run.
  bool advance();

 private:
  struct frame {
    std::uint32_t choice;
    std::uint32_t count;
  };
  std::uint32_t next_choice(std::uint32_t count);
  unsigned bound_;
  std::uint64_t horizon_;
  std::vector<frame> stack_;
  std::size_t pos_ = 0;
  unsigned used_ = 0;
  std::vector<unsigned> alts_;
  bool focused_ = false;
  std::vector<std::pair<const char*, std::uint32_t>> sites_;
};

//! Builds the strategy for schedule `index` of a run with this config. For portfolio, the
//! index selects random, pct(d=2), pct(d=3) or stall in turn; `effective` receives the concrete config
//! (what a replay command must name).
std::unique_ptr<strategy> make_strategy(const strategy_config& cfg, std::uint64_t index,
                                        strategy_config* effective = nullptr);
//! The concrete config of schedule `index` (portfolio resolved, as make_strategy's `effective`),
//! without building the strategy.
strategy_config resolve_strategy(const strategy_config& cfg, std::uint64_t index);

}  // namespace toga::sim
