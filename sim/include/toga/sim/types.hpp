//! @file toga/sim/types.hpp
//! Vocabulary of the fiber simulator: operations, machine shape, limits, verdicts, results.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

namespace toga::sim {

//! The kind of scheduling point a lane reached. Every Platform operation that touches shared
//! state is one of these; the simulator may switch lanes before each of them.
enum class op : std::uint8_t {
  start,       //!< a lane's first step
  load,
  store,
  exchange,
  cas,
  fetch_add,
  fetch_sub,
  fetch_and,
  fetch_or,
  fetch_max,
  fence,
  backoff,     //!< a spin loop's yield: the scheduler's default here is to switch lanes
  activemask,
  ballot,
  shfl,
  match_any,
  syncwarp,
  reduce_or,
  choice,      //!< a data choice (fault site, grouping) drawn from the schedule
  exit,        //!< a lane returned from the kernel
};
const char* to_string(op k);

//! Machine shape of one simulated launch: `blocks` blocks of `threads_per_block` threads,
//! placed round-robin on `sms` SMs. As on CUDA, at most 2048 threads are resident per SM; the
//! simulator keeps every block resident, so a launch must fit (blocks/SM x threads <= 2048).
struct launch_config {
  unsigned sms = 1;
  unsigned blocks = 1;
  unsigned threads_per_block = 32;
  //! Devices the SMs belong to (SM s is SM s / devices of device s % devices, so that blocks,
  //! placed round-robin on the SMs, alternate between the devices; sms a multiple of devices).
  //! With more than one, each device numbers its SMs from 0 (Platform::sm_id), device scope
  //! covers one device's lanes and system scope all (issue 32's heaps used by several GPUs;
  //! docs/simulator.md §21), and block scope is checked as device scope.
  unsigned devices = 1;
  unsigned lanes() const { return blocks * threads_per_block; }
};
//! Resident-thread bound per SM (Hopper and every Volta+ part toga targets).
inline constexpr unsigned max_threads_per_sm = 2048;

//! The memory model a schedule runs under (docs/simulator.md §4).
//!  - sc: every atomic reads the latest value (sequential consistency at the granularity of
//!    Platform operations); orders and scopes do not weaken anything. Today's behaviour.
//!  - weak: an operational, view-based model with PTX scopes (toga/sim/memory.hpp): a relaxed
//!    load may read an older store, release/acquire and fences move views, a release/acquire
//!    pair synchronises only when both scopes include both lanes.
enum class memory_model : std::uint8_t { sc, weak };
const char* to_string(memory_model m);
//! Parses "sc" or "weak".
bool parse_memory_model(const std::string& s, memory_model& out);

//! How a schedule runs: when the strategy stops driving it, how long it may run, under which
//! memory model and with which fault sites enabled. Every field is part of what a replay must
//! repeat (replay commands and decision files carry it).
//!  - after `fair_after` scheduling points the *fair tail* takes over: a lane keeps running
//!    until it blocks, exits or backs off, then the next runnable lane (cyclically) runs. Spin
//!    loops then make progress, so they are not reported as livelocks by an unfair prefix.
//!  - a schedule that exceeds `max_steps` points is a livelock.
//!  - `faults`: bit i set = fault site i (toga::fault_site, plus the simulator's own sites in
//!    toga/sim/faults.hpp) may fire in this schedule; 0 = no fault injection (the default,
//!    which draws no decision and leaves schedules exactly as without the registry).
struct run_limits {
  std::uint64_t fair_after = 20'000;
  std::uint64_t max_steps = 200'000;
  memory_model memory = memory_model::sc;
  std::uint32_t faults = 0;
  //! After the lane that completes a warp rendezvous (the last to arrive at a ballot, shfl,
  //! match_any, syncwarp or reduce_or) the strategy chooses a lane again, as for the lanes the
  //! rendezvous released, instead of the completing lane running on. Set by `toga-sim dpor`
  //! (so that arrivals at a rendezvous commute, docs/simulator.md §20.1) and recorded in its
  //! decision files; off for every other strategy (their schedules and trace hashes are unchanged).
  bool rendezvous_yield = false;
  //! Under --memory weak, a load does not offer a store that an older candidate of the same
  //! location *subsumes*: same value, a carried view no larger (and acquired under no fewer
  //! scopes), and no newer an observation for seq_cst cumulativity (the initial value, or an older
  //! store of the same lane). Reading the older store leaves the lane every future the newer one
  //! does, with the same values, so no failure is lost (docs/simulator.md §20.1, *Subsumed reads*).
  //! Set by `toga-sim dpor` and recorded in its decision files; off for every other strategy.
  bool skip_subsumed_reads = false;
};
//! Largest `max_steps` the command line accepts (10^8 points, a few minutes of one schedule at
//! the slowest scenario's rate); the API accepts any value.
inline constexpr std::uint64_t max_steps_bound = 100'000'000;

//! Outcome of one schedule.
enum class verdict_kind : std::uint8_t {
  pass,
  invariant,  //!< a named invariant failed (message names it)
  deadlock,   //!< no runnable lane while lanes are alive
  livelock,   //!< max_steps exceeded under the fair tail
  cuda_rule,  //!< a CUDA rule was broken (warp-intrinsic mask or rendezvous, shuffle source,
              //!< launch shape, scoped race)
  crash,      //!< an assertion (Platform::fail) or an exception inside a lane
};
const char* to_string(verdict_kind k);
inline constexpr unsigned verdict_kind_count = 6;

//! Everything one schedule produced.
struct run_result {
  verdict_kind kind = verdict_kind::pass;
  std::string message;
  std::uint64_t trace_hash = 0;   //!< hash of (lane, op) per step and of data choices
  std::uint64_t steps = 0;        //!< scheduling points executed
  std::uint32_t preemptions = 0;  //!< switches away from a runnable lane at a non-yield point
  std::uint32_t switches = 0;     //!< all lane switches
  std::uint64_t stale_reads = 0;  //!< --memory weak: loads that read other than the newest store
  std::uint32_t faults_fired = 0; //!< fault sites that fired (stalls, failures, splits, poisonings)
  //! The strategy's decisions (lane ids at lane choices, values at data choices), in order;
  //! replaying them reproduces the schedule. Fair-tail decisions are not recorded (they follow
  //! from the state).
  std::vector<std::uint32_t> decisions;
  //! Per decision: bit 0 = it preempted a runnable lane, bit 1 = it was a lane switch at a
  //! yield or a block, bit 2 = it was a data choice. Used by shrinking.
  std::vector<std::uint8_t> decision_flags;
  //! Per decision: the lane that made it (the lane that reached the point, or drew the value).
  //! With decision_flags it lets a replay give each lane its own data choices (replay_strategy).
  std::vector<std::uint32_t> decision_lanes;
  //! Per decision: for a lane choice, its anchor (anchor_key in strategy.hpp: the deciding lane,
  //! its scheduling point and the choice's ordinal there); 0 for a data choice. The shrinker
  //! replays lane choices by anchor (anchored_strategy).
  std::vector<std::uint64_t> decision_anchors;
  //! Per decision: the scheduling points executed before it (the global step).
  std::vector<std::uint64_t> decision_steps;
  //! The scenario's figures for this schedule (instance::metrics).
  std::vector<std::pair<std::string, double>> metrics;
  bool failed() const { return kind != verdict_kind::pass; }
};

//! A fixed-capacity set of lane indices with O(words) rank/select; the runnable set.
class lane_set {
 public:
  void resize(unsigned n) {
    n_ = n;
    words_.assign((n + 63) / 64, 0);
    count_ = 0;
  }
  unsigned size() const { return n_; }
  unsigned count() const { return count_; }
  bool test(unsigned i) const { return (words_[i >> 6] >> (i & 63)) & 1u; }
  void set(unsigned i) {
    auto& w = words_[i >> 6];
    const std::uint64_t b = std::uint64_t{1} << (i & 63);
    count_ += (w & b) ? 0 : 1;
    w |= b;
  }
  void reset(unsigned i) {
    auto& w = words_[i >> 6];
    const std::uint64_t b = std::uint64_t{1} << (i & 63);
    count_ -= (w & b) ? 1 : 0;
    w &= ~b;
  }
  //! The k-th member in ascending order; k < count().
  unsigned nth(unsigned k) const {
    for (unsigned wi = 0;; ++wi) {
      const unsigned c = static_cast<unsigned>(std::popcount(words_[wi]));
      if (k < c) {
        std::uint64_t w = words_[wi];
        for (unsigned j = 0; j < k; ++j) w &= w - 1;
        return wi * 64 + static_cast<unsigned>(std::countr_zero(w));
      }
      k -= c;
    }
  }
  //! The first member strictly after `after` in cyclic order (may be `after` itself if it is
  //! the only member). Requires count() > 0. `after` may be >= size() (then: the first).
  unsigned next_cyclic(unsigned after) const {
    const unsigned start = after + 1 >= n_ ? 0 : after + 1;
    if (auto r = first_from(start); r < n_) return r;
    return first_from(0);
  }
  //! The lowest member >= from, or size() if none.
  unsigned first_from(unsigned from) const {
    if (from >= n_) return n_;
    unsigned wi = from >> 6;
    std::uint64_t w = words_[wi] & (~std::uint64_t{0} << (from & 63));
    while (true) {
      if (w) return wi * 64 + static_cast<unsigned>(std::countr_zero(w));
      if (++wi >= words_.size()) return n_;
      w = words_[wi];
    }
  }

 private:
  std::vector<std::uint64_t> words_;
  unsigned count_ = 0;
  unsigned n_ = 0;
};

}  // namespace toga::sim
